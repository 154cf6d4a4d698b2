// Command agentmain is the in-sandbox agent alone, for tests that need a
// static binary to bind-mount into sandboxes before cmd/conch exists or
// without building all of it. It accepts the same `sandbox-agent` arguments (stdio, or --listen and
// --key-file in that order), `sandbox-init [--install DIR | --unpack DIR --hash H]` as the Kubernetes
// backend's pods run it, and `sandbox-probe listen PORT | dial HOST:PORT` as conch doctor's probe pods do.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"conch/sandbox/sandboxd"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 2 && os.Args[1] == "sandbox-agent":
		err = sandboxd.ServeStdio(context.Background())
	case len(os.Args) == 6 && os.Args[1] == "sandbox-agent" && os.Args[2] == "--listen" && os.Args[4] == "--key-file":
		err = sandboxd.ServeSocket(context.Background(), sandboxd.ListenOptions{Path: os.Args[3], KeyFile: os.Args[5]})
	case len(os.Args) == 2 && os.Args[1] == "sandbox-init":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		err = sandboxd.Init(ctx)
	case len(os.Args) == 4 && os.Args[1] == "sandbox-init" && os.Args[2] == "--install":
		_, err = sandboxd.InstallSelf(os.Args[3], "conch")
	case len(os.Args) == 6 && os.Args[1] == "sandbox-init" && os.Args[2] == "--unpack" && os.Args[4] == "--hash":
		var changed bool
		if changed, err = sandboxd.UnpackTree(os.Args[3], os.Args[5], os.Stdin); err == nil {
			fmt.Println(map[bool]string{true: "unpacked", false: "unchanged"}[changed], os.Args[5])
		}
	case len(os.Args) == 4 && os.Args[1] == "sandbox-probe" && os.Args[2] == "listen":
		var port int
		if _, err = fmt.Sscan(os.Args[3], &port); err == nil {
			err = sandboxd.ProbeListen(context.Background(), port, os.Stdin, os.Stdout)
		}
	case len(os.Args) == 4 && os.Args[1] == "sandbox-probe" && os.Args[2] == "dial":
		if err := sandboxd.ProbeDial(context.Background(), os.Args[3], 3*time.Second); err != nil {
			fmt.Println("unreached:", err)
			os.Exit(3)
		}
		fmt.Println("reached")
	default:
		fmt.Fprintln(os.Stderr, "usage: agentmain sandbox-agent [--listen SOCKET --key-file FILE] | sandbox-init [--install DIR | --unpack DIR --hash H] | sandbox-probe listen PORT | dial HOST:PORT")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
		os.Exit(1)
	}
}
