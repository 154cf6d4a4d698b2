package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// SchemaVersion is the schema version this binary migrates a store to.
func SchemaVersion() (int, error) {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		return 0, err
	}
	return len(ms), nil
}

// openRaw opens a store file as it is: no migration, no WAL switch; for
// reading its version and copying it before an upgrade.
func openRaw(path string) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open(driverName, fileURI(abs)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// FileSchemaVersion reads a store file's schema version without migrating
// or otherwise changing it. A file that is not a SQLite database is an error.
func FileSchemaVersion(ctx context.Context, path string) (int, error) {
	db, err := openRaw(path)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	defer db.Close()
	// Reading the schema first makes SQLite check the file's header.
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store %s is not a conch store: %w", path, err)
	}
	v, err := userVersion(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	return v, nil
}

// BackupFile writes a consistent copy of the store file src to dst (which
// must not exist), as it is: nothing is migrated. It is how conch keeps the
// store of an older version before upgrading it.
func BackupFile(ctx context.Context, src, dst string) error {
	db, err := openRaw(src)
	if err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	defer db.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("backup %s: %w", dst, err)
	}
	f.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		os.Remove(dst)
		return fmt.Errorf("backup %s: %w", dst, err)
	}
	return nil
}
