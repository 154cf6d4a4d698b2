package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/sandbox/docker"
	"conch/sqlite"
)

// TestChaos sends N messages through the real `conch chat` with a real
// sandbox engine while conch is SIGKILLed at random moments, the model
// answers 429, 500 and too slowly at random, and the conversation's
// container is killed in the middle of a turn. Every message runs a bash
// tool call in the sandbox. It asserts that no message is lost (each one's
// answer is printed), none is stored or answered twice, and the database
// passes PRAGMA integrity_check; it prints the figures.
//
// The model acks a message only once the tool's output came back from the
// sandbox, and asks again otherwise, so an answer proves the sandbox worked.
//
// The short version runs in CI; `make chaos` (CONCH_CHAOS=long) sends 120
// messages on a private dockerd that it also restarts twice mid-run (the
// containers stop with it; conch must restart them and carry on).
// CONCH_CHAOS_SEED replays a run.
func TestChaos(t *testing.T) {
	testenv.Short(t)
	n, killEvery := 12, 3
	var priv *engine.Private
	eng := engine.Docker(t)
	if os.Getenv("CONCH_CHAOS") == "long" {
		n, killEvery = 120, 5
		priv = engine.PrivateDocker(t)
		eng = priv.Engine
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CONCH_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("chaos: %d messages, seed %d (CONCH_CHAOS_SEED replays)", n, seed)
	rng := mrand.New(mrand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	intn := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "chaos" + hex.EncodeToString(buf)
	api := eng.Client(t)
	t.Cleanup(func() { purgeInstance(api, instance) })

	// The model: "msg-<i>" asks for `echo tool-<i>` in the sandbox; the
	// tool's result gets "ack msg-<i>". Some answers are a 429, a 500 or
	// too slow (the client times out), never twice in a row.
	var (
		mu          sync.Mutex
		lastFailed  = map[string]bool{}
		injected    = map[string]int{}
		killAt      = n / 2
		killedBoxes int
		toolRetries int
	)
	srv := fakellm.New(t, fakellm.WithoutRecording())
	srv.Handle(func(req fakellm.Request) fakellm.Reply {
		i, tries, result := chaosState(req.Messages)
		if i < 0 {
			return fakellm.Text("no message")
		}
		afterTool := tries > 0
		state := fmt.Sprintf("%d/%d", i, tries)
		mu.Lock()
		fail := !lastFailed[state] && chance(0.25)
		lastFailed[state] = fail
		kind := ""
		if fail {
			kind = []string{"429", "500", "timeout"}[intn(3)]
			injected[kind]++
		}
		killBox := !afterTool && i == killAt && killedBoxes == 0 && !fail
		if killBox {
			killedBoxes++
		}
		mu.Unlock()
		switch kind {
		case "429":
			return fakellm.Error(429, "slow down").RetryAfter(20 * time.Millisecond)
		case "500":
			return fakellm.Error(500, "internal error")
		case "timeout":
			return fakellm.Text("too late").Delay(3 * time.Second)
		}
		if afterTool && strings.Contains(result, fmt.Sprintf("tool-%d ", i)) {
			return fakellm.Text(fmt.Sprintf("ack msg-%d", i))
		}
		if afterTool {
			mu.Lock()
			toolRetries++
			mu.Unlock()
		}
		if killBox {
			// The container dies as the tool call is handed out: the turn
			// must still finish in a restarted container.
			killContainers(api, instance)
		}
		return chaosToolCall(i, tries)
	})

	dir := t.TempDir()
	env := append(testEnv(srv, fakellm.OpenAI, dir),
		"CONCH_MODEL_TIMEOUT=1s",
		"CONCH_AGENT_MAX_RETRIES=6",
		"CONCH_GATEWAY_MAX_ATTEMPTS=20",
	)
	env = append(env, engineEnv(t, eng, instance)...)

	// One reader per conch process; all lines land here.
	lines := make(chan string, 1024)
	start := func() *conchProc {
		p := startConch(t, env, "chat")
		go func(r *bufio.Reader) {
			for {
				s, err := r.ReadString('\n')
				if err != nil {
					return
				}
				lines <- strings.TrimSuffix(s, "\n")
			}
		}(p.stdout)
		return p
	}
	p := start()
	acks := map[int]int{}
	var kills, resent, engineRestarts int
	var latencies []time.Duration
	var engineDown time.Duration
	began := time.Now()
	dbPath := filepath.Join(dir, "data", "conch.db")
	for i := 0; i < n; i++ {
		msg := fmt.Sprintf("msg-%d", i)
		sentAt := time.Now()
		if _, err := fmt.Fprintln(p.stdin, msg); err != nil {
			t.Fatal(err)
		}
		var killTimer <-chan time.Time
		killsHere := 0
		if i%killEvery == killEvery-1 {
			killTimer = time.After(time.Duration(50+intn(1500)) * time.Millisecond)
		}
		deadline := time.After(3 * time.Minute)
	wait:
		for {
			select {
			case l := <-lines:
				var k int
				if _, err := fmt.Sscanf(l, "ack msg-%d", &k); err == nil {
					acks[k]++
					if k == i {
						break wait
					}
				}
			case <-killTimer:
				killTimer = nil
				p.kill9(t)
				kills++
				killsHere++
				p = start()
				// A line conch had not read yet is the sender's to send
				// again, as a channel redelivers what it was not told was
				// stored.
				if !storedUserMessage(t, dbPath, msg) {
					resent++
					if _, err := fmt.Fprintln(p.stdin, msg); err != nil {
						t.Fatal(err)
					}
				}
				if killsHere < 2 && chance(0.3) {
					killTimer = time.After(time.Duration(50+intn(800)) * time.Millisecond)
				}
			case <-deadline:
				t.Fatalf("no answer to %s within 3 minutes; stderr:\n%s", msg, p.stderr)
			}
		}
		latencies = append(latencies, time.Since(sentAt))
		if killTimer != nil {
			// The answer beat the kill: kill now, just after an answer
			// was printed (the window between sending it and marking
			// the turn done).
			p.kill9(t)
			kills++
			p = start()
		}
		if priv != nil && (i == n/3 || i == 2*n/3) {
			// The engine restarts under a running conch: the sandbox's
			// container stops with it, its agent connection breaks.
			began := time.Now()
			if err := priv.Restart(); err != nil {
				t.Fatalf("restart the private engine: %v", err)
			}
			engineDown += time.Since(began)
			engineRestarts++
		}
	}
	p.finish(t)
	elapsed := time.Since(began)

	// Figures and checks from the store.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.SQL().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	users, answers := countTexts(t, db, "user", "msg-"), countTexts(t, db, "assistant", "ack msg-")
	var lost, dupStored, dupAnswered, reprinted []int
	for i := 0; i < n; i++ {
		if acks[i] == 0 {
			lost = append(lost, i)
		}
		if acks[i] > 1 {
			reprinted = append(reprinted, i)
		}
		if users[fmt.Sprintf("msg-%d", i)] > 1 {
			dupStored = append(dupStored, i)
		}
		if answers[fmt.Sprintf("ack msg-%d", i)] > 1 {
			dupAnswered = append(dupAnswered, i)
		}
	}
	slices.Sort(latencies)
	mu.Lock()
	fmt.Printf("chaos figures: %d messages in %s (seed %d): %d SIGKILLs of conch, %d lines re-sent after a kill, "+
		"%d container kills mid-turn, %d engine restarts (%s down), model faults injected 429=%d 500=%d timeout=%d, "+
		"%d tool calls asked again; lost %d, stored twice %d, "+
		"answered twice %d, answer printed again after a kill %d; reply latency p50 %s max %s; integrity_check %s\n",
		n, elapsed.Round(time.Millisecond), seed, kills, resent, killedBoxes, engineRestarts, engineDown.Round(time.Millisecond),
		injected["429"], injected["500"], injected["timeout"], toolRetries,
		len(lost), len(dupStored), len(dupAnswered), len(reprinted),
		latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), integrity)
	mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("lost (never answered): %v", lost)
	}
	if len(dupStored) > 0 {
		t.Errorf("stored twice: %v", dupStored)
	}
	if len(dupAnswered) > 0 {
		t.Errorf("answered twice in the store: %v", dupAnswered)
	}
	if integrity != "ok" {
		t.Errorf("PRAGMA integrity_check: %s", integrity)
	}
}

// chaosState finds the message a request is about: the last user message
// "msg-<i>", how many tool results followed it, and the newest one's text.
func chaosState(msgs []fakellm.Message) (i, tries int, result string) {
	for j := len(msgs) - 1; j >= 0; j-- {
		m := msgs[j]
		if len(m.ToolResults) > 0 || m.Role == "tool" {
			if tries == 0 {
				for _, r := range m.ToolResults {
					result += r.Content
				}
				result += m.Text
			}
			tries++
			continue
		}
		if m.Role == "user" {
			if _, err := fmt.Sscanf(m.Text, "msg-%d", &i); err == nil {
				return i, tries, result
			}
		}
	}
	return -1, 0, ""
}

// chaosToolCall asks for `echo tool-<i> <try>`: its output proves the call
// ran in the sandbox, and a repeated call differs from the one before (the
// agent stops a turn that repeats a call).
func chaosToolCall(i, try int) fakellm.Reply {
	return fakellm.ToolCall("bash", fmt.Sprintf(`{"command":"echo tool-%d %d"}`, i, try))
}

// storedUserMessage reports whether conch stored the user message text.
func storedUserMessage(t *testing.T, path, text string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM messages WHERE role = 'user' AND text = ?", text).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// countTexts counts the stored messages of role by text, for texts with prefix.
func countTexts(t *testing.T, db *sqlite.DB, role, prefix string) map[string]int {
	t.Helper()
	rows, err := db.SQL().Query("SELECT text FROM messages WHERE role = ? AND text LIKE ?", role, prefix+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		m[s]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func instanceFilter(instance string) client.Filters {
	return make(client.Filters).Add("label", docker.LabelInstance+"="+instance)
}

// killContainers SIGKILLs the running containers of the instance.
func killContainers(api *client.Client, instance string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := api.ContainerList(ctx, client.ContainerListOptions{Filters: instanceFilter(instance)})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		_, _ = api.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"})
	}
}

// purgeInstance removes the instance's containers and volumes.
func purgeInstance(api *client.Client, instance string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if list, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: instanceFilter(instance)}); err == nil {
		for _, c := range list.Items {
			_, _ = api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}
	if vols, err := api.VolumeList(ctx, client.VolumeListOptions{Filters: instanceFilter(instance)}); err == nil {
		for _, v := range vols.Items {
			_, _ = api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
}
