//go:build !unix

package homeserver

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
