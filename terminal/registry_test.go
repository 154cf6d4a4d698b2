package terminal_test

import (
	"testing"

	"conch/terminal"
	"conch/terminal/registrytest"
)

func TestMemRegistry(t *testing.T) { registrytest.Run(t, terminal.NewMemRegistry()) }
