//go:build unix

package homeserver

import "syscall"

// sysProcAttr puts dendrite in its own process group so a terminal's Ctrl-C
// reaches the test binary first and the cleanup stops dendrite cleanly.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
