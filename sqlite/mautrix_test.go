package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/crypto/sql_store_upgrade"

	"conch/sqlite"
	"conch/sqlite/storetest"
)

// The Matrix channel keeps mautrix's crypto store in the same file, through
// SQL() and dbutil: its schema upgrades, $n parameters and transactions work
// on the modernc driver, next to the Store's tables, across a restart.
func TestMautrixCryptoStoreSharesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conch.db")
	for round, token := range []string{"s1", "s2"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		mdb, err := dbutil.NewWithDB(db.SQL(), "sqlite")
		if err != nil {
			t.Fatal(err)
		}
		crypto := mdb.Child(sql_store_upgrade.VersionTableName, sql_store_upgrade.Table, dbutil.NoopLogger)
		if err := crypto.Upgrade(ctx); err != nil {
			t.Fatalf("round %d: crypto store upgrade: %v", round, err)
		}
		err = crypto.DoTxn(ctx, nil, func(ctx context.Context) error {
			_, err := crypto.Exec(ctx, `INSERT INTO crypto_account (account_id, device_id, shared, sync_token, account)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (account_id) DO UPDATE SET sync_token = excluded.sync_token`, "acc", "DEVICE", true, token, []byte("pickled"))
			return err
		})
		if err != nil {
			t.Fatalf("round %d: write through dbutil: %v", round, err)
		}
		addTurn(t, db, storetest.Inbound(roomA, "$"+token, "hi"))
		var got string
		if err := crypto.QueryRow(ctx, `SELECT sync_token FROM crypto_account WHERE account_id = $1`, "acc").Scan(&got); err != nil || got != token {
			t.Errorf("round %d: sync token: got %q, %v; want %q", round, got, err, token)
		}
		if un := must(db.UnfinishedTurns(ctx)).ok(t); len(un) != round+1 {
			t.Errorf("round %d: got %d turns, want %d", round, len(un), round+1)
		}
		mustClose(t, db)
	}
}
