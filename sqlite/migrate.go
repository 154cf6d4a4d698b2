package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// migrationFS holds the schema, one numbered file per version. To change the
// schema, add the next file (NNNN_what.sql); never edit an applied one.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew reports a database written by a newer conch: its
// PRAGMA user_version is above the highest migration this binary embeds.
var ErrSchemaTooNew = errors.New("database schema is newer than this conch")

// noForeignKeysDirective on the first line of a migration runs it with
// foreign keys off (needed to rebuild a table, see
// https://www.sqlite.org/lang_altertable.html#otheralter); the runner checks
// PRAGMA foreign_key_check before it commits.
const noForeignKeysDirective = "-- conch:foreign-keys=off"

const (
	sqlUserVersion     = `PRAGMA user_version`
	sqlSetUserVersion  = `PRAGMA user_version = %d` // PRAGMA takes no bound parameters
	sqlForeignKeysOff  = `PRAGMA foreign_keys = OFF`
	sqlForeignKeysOn   = `PRAGMA foreign_keys = ON`
	sqlForeignKeyCheck = `PRAGMA foreign_key_check`
)

var migrationName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

type migration struct {
	version       int
	name          string
	sql           string
	noForeignKeys bool
}

// loadMigrations reads the migrations from fsys (files migrations/NNNN_*.sql)
// and checks that they are numbered 1, 2, … without gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		mm := migrationName.FindStringSubmatch(e.Name())
		if mm == nil {
			return nil, fmt.Errorf("migration %q: name must look like 0001_what.sql", e.Name())
		}
		v, _ := strconv.Atoi(mm[1]) // four digits by the pattern
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		text := string(b)
		first, _, _ := strings.Cut(text, "\n")
		ms = append(ms, migration{
			version:       v,
			name:          e.Name(),
			sql:           text,
			noForeignKeys: strings.TrimSpace(first) == noForeignKeysDirective,
		})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d (versions start at 1 with no gaps or duplicates)", m.name, i+1)
		}
		if strings.TrimSpace(stripComments(m.sql)) == "" {
			return nil, fmt.Errorf("migration %s: no SQL", m.name)
		}
	}
	return ms, nil
}

// stripComments drops "--" line comments; it is only used to spot empty files.
func stripComments(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "--")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// migrate brings the database on conn up to the newest migration in ms.
// Each migration runs in its own transaction together with the
// PRAGMA user_version bump, so a crash leaves the database at a version
// boundary. The version is re-read inside the (immediate) transaction, so two
// processes opening the same file at once apply each migration once.
func migrate(ctx context.Context, conn *sql.Conn, ms []migration) error {
	for {
		v, err := userVersion(ctx, conn)
		if err != nil {
			return err
		}
		if v > len(ms) {
			return fmt.Errorf("%w: the database is at schema version %d, this binary knows versions up to %d; run a newer conch or restore a backup", ErrSchemaTooNew, v, len(ms))
		}
		if v == len(ms) {
			return nil
		}
		if err := applyMigration(ctx, conn, v, ms[v]); err != nil {
			return err
		}
	}
}

func userVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, sqlUserVersion).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// applyMigration applies m if the database is still at version from; if
// another process got there first it does nothing (migrate then re-reads).
func applyMigration(ctx context.Context, conn *sql.Conn, from int, m migration) (err error) {
	if m.noForeignKeys {
		// foreign_keys cannot change inside a transaction.
		if _, err := conn.ExecContext(ctx, sqlForeignKeysOff); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		defer func() {
			if _, onErr := conn.ExecContext(context.WithoutCancel(ctx), sqlForeignKeysOn); onErr != nil && err == nil {
				err = fmt.Errorf("migration %s: turn foreign keys back on: %w", m.name, onErr)
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer tx.Rollback()
	v, err := userVersion(ctx, tx)
	if err != nil {
		return err
	}
	if v != from {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if m.noForeignKeys {
		if err := checkForeignKeys(ctx, tx); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(sqlSetUserVersion, m.version)); err != nil {
		return fmt.Errorf("migration %s: set schema version: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.name, err)
	}
	return nil
}

func checkForeignKeys(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, sqlForeignKeyCheck)
	if err != nil {
		return fmt.Errorf("foreign key check: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var table string
		var rowid sql.NullInt64
		var parent string
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return fmt.Errorf("foreign key check: %w", err)
		}
		return fmt.Errorf("foreign key check: row %d of table %s has no parent in %s", rowid.Int64, table, parent)
	}
	return rows.Err()
}
