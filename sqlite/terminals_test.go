package sqlite_test

import (
	"testing"

	"conch/sqlite/sqlitetest"
	"conch/terminal/registrytest"
)

func TestTerminalRegistry(t *testing.T) { registrytest.Run(t, sqlitetest.MustOpenMemory(t)) }

func TestTerminalRegistryFile(t *testing.T) { registrytest.Run(t, sqlitetest.MustOpenFile(t)) }
