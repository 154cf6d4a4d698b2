// Command prebuild builds the test control plane (kube-apiserver, etcd) into
// its cache directory, so `make kube-e2e` (and CI) can start the slow build
// early and in the background; with -kubelet it builds the kubelet of the
// real-kubelet tier (`make kube-kubelet`) too:
//
//	go run ./internal/testenv/kube/cmd/prebuild [-kubelet]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"conch/internal/testenv/kube"
)

func main() {
	kubelet := flag.Bool("kubelet", false, "also build the kubelet")
	flag.Parse()
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
	if *kubelet {
		bin, err := kube.PrebuildKubelet(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("kubelet %s ready at %s (%s)\n", kube.Version, bin, time.Since(start).Round(time.Second))
	}
}
