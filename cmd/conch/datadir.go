package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"conch/config"
	"conch/internal/flock"
	"conch/sqlite"
)

// The data dir holds the user's conversations: it is theirs alone (0700,
// files 0600), one gateway runs on it at a time, and its store is never
// silently replaced by an empty one.

const (
	storeFile = "conch.db"
	lockFile  = "conch.lock"
)

// prepareDataDir creates the data dir (or narrows an existing one to 0700)
// and refuses a missing or empty store where the dir shows earlier use,
// unless newStore says to start afresh.
func prepareDataDir(dir string, newStore bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data_dir %s: %w (set CONCH_DATA_DIR to a writable directory)", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data_dir %s: %w", dir, err)
	}
	db := filepath.Join(dir, storeFile)
	fi, err := os.Stat(db)
	switch {
	case err == nil && fi.Size() > 0:
		// SQLite creates the -wal and -shm files with the store's mode.
		return os.Chmod(db, 0o600)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("store %s: %w", db, err)
	}
	if used := priorUse(dir); used != "" && !newStore {
		state := "missing"
		if err == nil {
			state = "empty (0 bytes)"
		}
		return fmt.Errorf("the store %s is %s, but %s shows that this data dir was used before: "+
			"starting would silently forget every conversation. Restore the store from a backup (conch backup), "+
			"or start afresh on purpose with --new-store", db, state, used)
	}
	// Create it 0600 before SQLite opens it, so no file of the store is
	// ever readable by others.
	f, err := os.OpenFile(db, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store %s: %w", db, err)
	}
	return f.Close()
}

// priorUse names a file that shows the data dir was used before, or "".
func priorUse(dir string) string {
	for _, name := range []string{"instance-id", "sandboxes.json", "spool", "agent"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name)
		}
	}
	if es, err := os.ReadDir(filepath.Join(dir, "logs")); err == nil && len(es) > 0 {
		return filepath.Join(dir, "logs")
	}
	return ""
}

// lockDataDir makes this process the only gateway on the data dir.
func lockDataDir(dir string) (unlock func(), err error) {
	unlock, err = flock.TryLock(filepath.Join(dir, lockFile))
	var held *flock.HeldError
	if errors.As(err, &held) {
		who := "another conch process"
		if held.PID > 0 {
			who = fmt.Sprintf("another conch process (pid %d)", held.PID)
		}
		return nil, fmt.Errorf("data_dir %s is in use by %s: only one `conch up` or `conch chat` may run on a data dir at a time. "+
			"Stop it first, or give this one its own CONCH_DATA_DIR", dir, who)
	}
	return unlock, err
}

// openStore opens the store of the configured data dir for an operator
// command (backup, pairing, schedules, transcript, memory): no model
// configuration is needed, and a missing store in a used data dir is refused
// as for a gateway.
func (a *app) openStore(ctx context.Context) (*sqlite.DB, *config.Config, error) {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return nil, nil, err
	}
	if err := prepareDataDir(cfg.DataDir, false); err != nil {
		return nil, nil, err
	}
	db, err := openDataStore(ctx, cfg.DataDir, a.stderr)
	if err != nil {
		return nil, nil, err
	}
	return db, cfg, nil
}
