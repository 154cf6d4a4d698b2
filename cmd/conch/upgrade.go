package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"conch/sqlite"
)

// Upgrades. The store's schema version is SQLite's user_version (one per
// migration); which conch wrote it is kept beside the store in
// storeVersionFile, so that messages can name versions people know. Before
// a newer conch migrates an older store it copies the store, as it is, to
// <data dir>/backups/; an older conch on a newer store refuses, naming both.
// See docs/decisions/2026-11-26-releases-init-upgrades.md.

const (
	storeVersionFile = "store-version.json"
	backupsDir       = "backups"
)

// storeVersion is what storeVersionFile holds.
type storeVersion struct {
	Schema int       `json:"schema"`
	Conch  string    `json:"conch"`
	Commit string    `json:"commit"`
	At     time.Time `json:"at"`
}

func readStoreVersion(dataDir string) (storeVersion, bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, storeVersionFile))
	if err != nil {
		return storeVersion{}, false
	}
	var v storeVersion
	if json.Unmarshal(b, &v) != nil {
		return storeVersion{}, false
	}
	return v, true
}

func writeStoreVersion(dataDir string, schema int) error {
	cur := currentVersion()
	b, _ := json.MarshalIndent(storeVersion{Schema: schema, Conch: cur.Version, Commit: cur.Commit, At: time.Now().UTC()}, "", "  ")
	path := filepath.Join(dataDir, storeVersionFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("record the store's version: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record the store's version: %w", err)
	}
	return nil
}

// writerName names the conch that last wrote the store, as well as is known.
func writerName(dataDir string, schema int) string {
	if v, ok := readStoreVersion(dataDir); ok && v.Schema == schema && v.Conch != "" {
		return "conch " + v.Conch
	}
	return "a conch of another version"
}

// openDataStore opens the data dir's store for any command: it refuses a
// store newer than this conch, backs up an older one before migrating it
// (telling say), and records this conch as the store's writer.
func openDataStore(ctx context.Context, dataDir string, say io.Writer) (*sqlite.DB, error) {
	path := filepath.Join(dataDir, storeFile)
	want, err := sqlite.SchemaVersion()
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		have, err := sqlite.FileSchemaVersion(ctx, path)
		if err != nil {
			return nil, err
		}
		me := currentVersion().Version
		switch {
		case have > want:
			return nil, fmt.Errorf("%w: the store in %s was written by %s (schema %d); this is conch %s, which knows schemas up to %d. "+
				"Run that version or a newer one; to go back to this version, restore a backup it made (conch restore FILE; older stores are kept in %s)",
				sqlite.ErrSchemaTooNew, dataDir, writerName(dataDir, have), have, me, want, filepath.Join(dataDir, backupsDir))
		case have > 0 && have < want:
			from := writerName(dataDir, have)
			backup, err := backupBeforeUpgrade(ctx, dataDir, have)
			if err != nil {
				return nil, fmt.Errorf("upgrade: back up the store first: %w (nothing was changed)", err)
			}
			fmt.Fprintf(say, "Upgrading the store from schema %d (%s) to %d (conch %s); the old store is kept in %s\n", have, from, want, me, backup)
		}
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := writeStoreVersion(dataDir, want); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// backupBeforeUpgrade copies the store as it is into <data dir>/backups.
func backupBeforeUpgrade(ctx context.Context, dataDir string, schema int) (string, error) {
	dir := filepath.Join(dataDir, backupsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	ver := "unknown"
	if v, ok := readStoreVersion(dataDir); ok && v.Schema == schema && v.Conch != "" {
		ver = strings.NewReplacer("/", "_", " ", "_").Replace(v.Conch)
	}
	dst := filepath.Join(dir, fmt.Sprintf("conch-schema%d-%s-%s.db", schema, ver, time.Now().UTC().Format("20060102T150405Z")))
	if err := sqlite.BackupFile(ctx, filepath.Join(dataDir, storeFile), dst); err != nil {
		return "", err
	}
	return dst, nil
}

// restore puts a backup in place of the data dir's store: the inverse of
// conch backup. It is refused while a conch holds the data dir; the store
// it replaces is kept in <data dir>/backups; an older backup is upgraded
// (and backed up as it is) like any older store.
func (a *app) restore(ctx context.Context, file string) error {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return err
	}
	want, err := sqlite.SchemaVersion()
	if err != nil {
		return err
	}
	have, err := sqlite.FileSchemaVersion(ctx, file)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if have == 0 {
		return fmt.Errorf("restore: %s is an empty store (schema 0), not a conch backup", file)
	}
	if have > want {
		return fmt.Errorf("restore: %s is at schema %d, newer than this conch %s knows (%d): restore it with the conch that made it", file, have, currentVersion().Version, want)
	}
	dir := cfg.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data_dir %s: %w", dir, err)
	}
	unlock, err := lockDataDir(dir)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer unlock()
	store := filepath.Join(dir, storeFile)
	kept := ""
	if fi, err := os.Stat(store); err == nil && fi.Size() > 0 {
		if err := os.MkdirAll(filepath.Join(dir, backupsDir), 0o700); err != nil {
			return err
		}
		kept = filepath.Join(dir, backupsDir, "conch-before-restore-"+time.Now().UTC().Format("20060102T150405Z")+".db")
		if err := sqlite.BackupFile(ctx, store, kept); err != nil {
			return fmt.Errorf("restore: keep the current store first: %w (nothing was changed)", err)
		}
	}
	tmp := store + ".restore"
	os.Remove(tmp)
	if err := sqlite.BackupFile(ctx, file, tmp); err != nil {
		return fmt.Errorf("restore: %w (nothing was changed)", err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if err := os.Remove(store + side); err != nil && !errors.Is(err, os.ErrNotExist) {
			os.Remove(tmp)
			return fmt.Errorf("restore: %w (nothing was changed)", err)
		}
	}
	if err := os.Rename(tmp, store); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	os.Remove(filepath.Join(dir, storeVersionFile)) // its writer is not known
	db, err := openDataStore(ctx, dir, a.stderr)
	if err != nil {
		return fmt.Errorf("restore: the restored store does not open: %w", err)
	}
	db.Close()
	fmt.Fprintf(a.stdout, "Restored %s (schema %d) into %s.\n", file, have, store)
	if kept != "" {
		fmt.Fprintf(a.stdout, "The store it replaced is kept in %s.\n", kept)
	}
	return nil
}
