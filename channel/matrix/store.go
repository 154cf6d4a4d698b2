package matrix

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"conch"
)

// cursorSyncStore is mautrix's SyncStore over conch's cursor store, so the
// sync token and filter id live in conch's database.
type cursorSyncStore struct {
	cursors conch.CursorStore
}

var _ mautrix.SyncStore = cursorSyncStore{}

func cursorName(userID id.UserID, what string) string {
	return "matrix:" + string(userID) + ":" + what
}

func (s cursorSyncStore) SaveFilterID(ctx context.Context, userID id.UserID, filterID string) error {
	if err := s.cursors.SetCursor(ctx, cursorName(userID, "filter_id"), filterID); err != nil {
		return fmt.Errorf("save matrix filter id: %w", err)
	}
	return nil
}

func (s cursorSyncStore) LoadFilterID(ctx context.Context, userID id.UserID) (string, error) {
	v, err := s.cursors.Cursor(ctx, cursorName(userID, "filter_id"))
	if err != nil {
		return "", fmt.Errorf("load matrix filter id: %w", err)
	}
	return v, nil
}

func (s cursorSyncStore) SaveNextBatch(ctx context.Context, userID id.UserID, token string) error {
	if err := s.cursors.SetCursor(ctx, cursorName(userID, "next_batch"), token); err != nil {
		return fmt.Errorf("save matrix sync token: %w", err)
	}
	return nil
}

func (s cursorSyncStore) LoadNextBatch(ctx context.Context, userID id.UserID) (string, error) {
	v, err := s.cursors.Cursor(ctx, cursorName(userID, "next_batch"))
	if err != nil {
		return "", fmt.Errorf("load matrix sync token: %w", err)
	}
	return v, nil
}

func (s cursorSyncStore) deviceID(ctx context.Context, userID id.UserID) (id.DeviceID, error) {
	v, err := s.cursors.Cursor(ctx, cursorName(userID, "device_id"))
	if err != nil {
		return "", fmt.Errorf("load matrix device id: %w", err)
	}
	return id.DeviceID(v), nil
}

func (s cursorSyncStore) saveDeviceID(ctx context.Context, userID id.UserID, deviceID id.DeviceID) error {
	if err := s.cursors.SetCursor(ctx, cursorName(userID, "device_id"), string(deviceID)); err != nil {
		return fmt.Errorf("save matrix device id: %w", err)
	}
	return nil
}

// PickleKeyFile is the name LoadOrCreatePickleKey uses inside the data dir.
const PickleKeyFile = "matrix-pickle.key"

// LoadOrCreatePickleKey returns the key that encrypts the Matrix crypto store
// at rest: key when set, else the contents of file when set, else the key
// kept in dataDir/matrix-pickle.key, generated (32 random bytes, mode 0600)
// on first use. Losing the key makes the stored Olm/Megolm keys unreadable.
func LoadOrCreatePickleKey(key, file, dataDir string) ([]byte, error) {
	if key != "" {
		return []byte(key), nil
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("matrix pickle key file: %w", err)
		}
		k := strings.TrimSpace(string(b))
		if k == "" {
			return nil, fmt.Errorf("matrix pickle key file %s is empty", file)
		}
		return []byte(k), nil
	}
	if dataDir == "" {
		return nil, errors.New("matrix pickle key: no key, key file or data dir given")
	}
	path := filepath.Join(dataDir, PickleKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		k := strings.TrimSpace(string(b))
		if k == "" {
			return nil, fmt.Errorf("matrix pickle key %s is empty: restore it from a backup or delete it together with the crypto tables", path)
		}
		return []byte(k), nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("matrix pickle key: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("matrix pickle key: %w", err)
	}
	k := base64.RawStdEncoding.EncodeToString(raw)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("matrix pickle key: %w", err)
	}
	// O_EXCL: if two processes race, one fails instead of both writing.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("matrix pickle key: %w", err)
	}
	if _, err := f.WriteString(k + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("matrix pickle key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("matrix pickle key: %w", err)
	}
	return []byte(k), nil
}
