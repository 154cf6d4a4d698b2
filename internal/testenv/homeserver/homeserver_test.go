package homeserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/homeserver"
)

func TestStartRegisterLogin(t *testing.T) {
	s := homeserver.Start(t)
	userID, token, deviceID := s.Register(t, "alice")
	if got, want := userID, homeserver.UserID("alice"); got != want {
		t.Fatalf("user id: got %q, want %q", got, want)
	}
	if token == "" || deviceID == "" {
		t.Fatalf("got token %q device %q, want both set", token, deviceID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/_matrix/client/v3/account/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var who struct {
		UserID   string `json:"user_id"`
		DeviceID string `json:"device_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
		t.Fatal(err)
	}
	if who.UserID != userID || who.DeviceID != deviceID {
		t.Fatalf("whoami: got %s/%s, want %s/%s", who.UserID, who.DeviceID, userID, deviceID)
	}

	// A second login with the same device id keeps the device.
	again, err := s.Login(ctx, "alice", deviceID)
	if err != nil {
		t.Fatal(err)
	}
	if again.DeviceID != deviceID {
		t.Fatalf("relogin device: got %q, want %q", again.DeviceID, deviceID)
	}

	// Open registration is disabled: only the shared secret creates users.
	r2, err := http.Post(s.URL+"/_matrix/client/v3/register", "application/json", strings.NewReader(`{"username":"mallory","password":"x","auth":{"type":"m.login.dummy"}}`))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode == http.StatusOK {
		t.Fatalf("open registration: got HTTP 200, want a refusal")
	}

	s.Stop()
	if err := s.Err(); err == nil {
		t.Fatal("Err after Stop: got nil, want stopped")
	}
}

func TestKill(t *testing.T) {
	s := homeserver.Start(t)
	s.Kill()
	if s.Err() == nil {
		t.Fatal("Err after Kill: got nil, want stopped")
	}
	if _, err := http.Get(s.URL + "/_matrix/client/versions"); err == nil {
		t.Fatal("request after Kill: got an answer, want a connection error")
	}
	s.Stop() // no-op after Kill
}
