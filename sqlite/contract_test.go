package sqlite_test

import (
	"testing"

	"conch"
	"conch/sqlite/sqlitetest"
	"conch/sqlite/storetest"
)

func TestContractMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) conch.Store { return sqlitetest.MustOpenMemory(t) })
}

func TestContractFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) conch.Store { return sqlitetest.MustOpenFile(t) })
}

func TestReadModelContractMemory(t *testing.T) {
	storetest.RunReadModel(t, func(t *testing.T) storetest.ReadModelStore { return sqlitetest.MustOpenMemory(t) })
}

func TestReadModelContractFile(t *testing.T) {
	storetest.RunReadModel(t, func(t *testing.T) storetest.ReadModelStore { return sqlitetest.MustOpenFile(t) })
}
