package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"conch/channel/matrix"
)

// Stamped by the linker for releases (make build, make release):
//
//	-ldflags "-X main.version=v0.3.0 -X main.commit=<sha> -X main.date=<RFC 3339>"
//
// CI builds with -buildvcs=false, so the stamps are the only source there; a
// plain `go build` from a git checkout falls back on the VCS stamps Go embeds.
var (
	version = ""
	commit  = ""
	date    = ""
)

// buildVersion is what this binary says it is.
type buildVersion struct {
	Version, Commit, Date string
	Go, Platform          string
	E2EE                  bool
}

func currentVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, Date: date,
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, E2EE: matrix.E2EEAvailable()}
	if info, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				if v.Date == "" {
					v.Date = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		if dirty && commit == "" && v.Commit != "" {
			v.Commit += "-dirty"
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	if v.Date == "" {
		v.Date = "unknown"
	}
	return v
}

// String is the one line `conch version` prints and logs carry.
func (v buildVersion) String() string {
	e2ee := "matrix e2ee"
	if !v.E2EE {
		e2ee = "no matrix e2ee (-tags noe2ee)"
	}
	return fmt.Sprintf("conch %s (commit %s, built %s, %s, %s, %s)", v.Version, v.Commit, v.Date, v.Go, v.Platform, e2ee)
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print conch's version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(a.stdout, currentVersion())
			return nil
		},
	}
}
