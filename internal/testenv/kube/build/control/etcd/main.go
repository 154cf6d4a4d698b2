// Command etcd is the etcd server the Kubernetes test control plane stores
// into, built from its Go module (Debian's etcd is too old for the API server).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
