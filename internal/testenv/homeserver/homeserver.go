// Package homeserver starts a real Matrix homeserver (dendrite) on 127.0.0.1
// for tests. The dendrite binaries are built once into a cache directory
// outside the repository (see Prebuild); `go run ./internal/testenv/homeserver/cmd/prebuild`
// builds them ahead of time.
package homeserver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"conch/internal/testenv"
)

// ServerName is the homeserver's name: user ids are @localpart:localhost.
const ServerName = "localhost"

// Server is a running dendrite.
type Server struct {
	// URL is the client-server API base, e.g. http://127.0.0.1:34567.
	URL string
	// Dir holds the config, databases and the log file.
	Dir string

	secret   string
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
	stopOnce sync.Once
	logPath  string
}

// Start builds (once) and starts a dendrite for the test, and stops it when
// the test ends. It calls testenv.Missing when dendrite cannot be built.
func Start(tb testing.TB) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	bins, err := Prebuild(ctx)
	if err != nil {
		testenv.Missing(tb, "Matrix homeserver (dendrite "+Version+")", err.Error())
	}
	s, err := start(ctx, bins, tb.TempDir())
	if err != nil {
		tb.Fatalf("start homeserver: %v", err)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("homeserver log tail (%s):\n%s", s.logPath, s.LogTail(3000))
		}
	})
	return s
}

func start(ctx context.Context, bins Binaries, dir string) (*Server, error) {
	run := func(name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bins.Path(name), args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %s", name, err, stderr.String())
		}
		return out, nil
	}
	if _, err := run("generate-keys", "--private-key", filepath.Join(dir, "matrix_key.pem")); err != nil {
		return nil, err
	}
	cfg, err := run("generate-config", "-ci", "-server", ServerName, "-dir", dir)
	if err != nil {
		return nil, err
	}
	secretBytes := make([]byte, 16)
	if _, err := rand.Read(secretBytes); err != nil {
		return nil, err
	}
	secret := hex.EncodeToString(secretBytes)
	text, err := patchConfig(string(cfg), map[string]string{
		"registration_disabled: false":           "registration_disabled: true",
		"disable_federation: false":              "disable_federation: true",
		"registration_shared_secret: complement": "registration_shared_secret: " + secret,
		"private_key: matrix_key.pem":            "private_key: " + filepath.Join(dir, "matrix_key.pem"),
		"  level: trace":                         "  level: info",
	})
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "dendrite.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		return nil, err
	}

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launch(ctx, bins, dir, cfgPath, secret)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// patchConfig applies exact, required replacements to dendrite's generated
// YAML, failing if one does not match (a new dendrite changed its output).
func patchConfig(text string, repl map[string]string) (string, error) {
	for from, to := range repl {
		if strings.Count(text, from) != 1 {
			return "", fmt.Errorf("patch dendrite config: want exactly one %q, found %d", from, strings.Count(text, from))
		}
		text = strings.Replace(text, from, to, 1)
	}
	return text, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(ctx context.Context, bins Binaries, dir, cfgPath, secret string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("pick port: %w", err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("dendrite-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Not CommandContext: the server outlives this function's ctx.
	cmd := exec.Command(bins.Path("dendrite"), "--config", cfgPath, "--http-bind-address", addr)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start dendrite: %w", err)
	}
	s := &Server{URL: "http://" + addr, Dir: dir, secret: secret, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		s.exitErr = cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w\n%s", err, s.LogTail(2000))
	}
	return s, nil
}

// waitReady polls the versions endpoint: dendrite has no readiness signal.
func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/_matrix/client/versions", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("dendrite exited before it was ready: %v", s.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("dendrite not ready after %s: %w", limit, ctx.Err())
		case <-t.C:
		}
	}
}

// Stop terminates the homeserver and waits for it to exit. It is safe to
// call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

// Kill ends the homeserver abruptly (SIGKILL), as a crash or a cut network
// would: open requests fail at once instead of draining.
func (s *Server) Kill() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// LogTail returns the last n bytes of the homeserver's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// UserID returns the full Matrix id of a local user.
func UserID(localpart string) string { return "@" + localpart + ":" + ServerName }

// Password returns the password Register gives a user.
func (s *Server) Password(localpart string) string { return "pw-" + localpart + "-" + s.secret[:8] }

// Register creates a user through the shared-secret registration API and
// logs it in with a fresh device. It returns the user id, an access token and
// the device id.
func (s *Server) Register(tb testing.TB, localpart string) (userID, accessToken, deviceID string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.register(ctx, localpart); err != nil {
		tb.Fatalf("register %s: %v", localpart, err)
	}
	login, err := s.Login(ctx, localpart, "")
	if err != nil {
		tb.Fatalf("login %s: %v", localpart, err)
	}
	return login.UserID, login.AccessToken, login.DeviceID
}

func (s *Server) register(ctx context.Context, localpart string) error {
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	if err := s.call(ctx, http.MethodGet, "/_synapse/admin/v1/register", nil, &nonce); err != nil {
		return err
	}
	password := s.Password(localpart)
	mac := hmac.New(sha1.New, []byte(s.secret))
	mac.Write([]byte(strings.Join([]string{nonce.Nonce, localpart, password, "notadmin"}, "\x00")))
	body := map[string]any{
		"nonce":    nonce.Nonce,
		"username": localpart,
		"password": password,
		"admin":    false,
		"mac":      hex.EncodeToString(mac.Sum(nil)),
	}
	return s.call(ctx, http.MethodPost, "/_synapse/admin/v1/register", body, nil)
}

// LoginResult is the answer to a password login.
type LoginResult struct {
	UserID      string `json:"user_id"`
	AccessToken string `json:"access_token"`
	DeviceID    string `json:"device_id"`
}

// Login logs a registered user in with its password; deviceID "" makes a new device.
func (s *Server) Login(ctx context.Context, localpart, deviceID string) (LoginResult, error) {
	body := map[string]any{
		"type":       "m.login.password",
		"identifier": map[string]string{"type": "m.id.user", "user": localpart},
		"password":   s.Password(localpart),
	}
	if deviceID != "" {
		body["device_id"] = deviceID
	}
	var res LoginResult
	err := s.call(ctx, http.MethodPost, "/_matrix/client/v3/login", body, &res)
	return res, err
}

func (s *Server) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return nil
}

var errStopped = errors.New("homeserver stopped")

// Err reports whether the homeserver has exited (nil while it runs).
func (s *Server) Err() error {
	select {
	case <-s.exited:
		if s.exitErr != nil {
			return fmt.Errorf("%w: %v", errStopped, s.exitErr)
		}
		return errStopped
	default:
		return nil
	}
}
