// Command prebuild builds the dendrite homeserver used by the Matrix tests
// into its cache directory, so CI can start the (slow, cgo) build early and
// in the background:
//
//	go run ./internal/testenv/homeserver/cmd/prebuild
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"conch/internal/testenv/homeserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	start := time.Now()
	bins, err := homeserver.Prebuild(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("dendrite %s ready in %s (%s)\n", homeserver.Version, bins.Dir, time.Since(start).Round(time.Second))
}
