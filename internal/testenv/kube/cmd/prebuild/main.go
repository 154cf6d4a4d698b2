// Command prebuild builds the test control plane (kube-apiserver, etcd) into
// its cache directory, so `make kube-e2e` (and CI) can start the slow build
// early and in the background:
//
//	go run ./internal/testenv/kube/cmd/prebuild
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"conch/internal/testenv/kube"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 40*time.Minute)
	defer cancel()
	start := time.Now()
	bins, err := kube.Prebuild(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("kubernetes %s control plane ready in %s (%s)\n", kube.Version, bins.Dir, time.Since(start).Round(time.Second))
}
