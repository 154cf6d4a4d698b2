// A small program whose binary TestAttribute measures.
package main

import (
	"fmt"
	"os"
	"strings"
)

var table = strings.Repeat("conch", 20000)

func main() {
	fmt.Println(len(table), os.Args[0])
}
