package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
	testmail "conch/internal/testenv/mail"
	tgfake "conch/internal/testenv/telegram"
	"conch/sqlite"
)

// TestChaosAllChannels is chaos on every channel at once: one real `conch
// up` serves Matrix (dendrite), email (dovecot and postfix), Telegram (the
// fake Bot API) and the web chat (a WebSocket client that behaves as the
// page does: an outbox re-sent with the same ids until acked, resuming its
// events by Seq) at the same time, while
//   - conch is SIGKILLed at random moments, some just after an answer went
//     out (and restarted, as a service manager would, also when it exits by
//     itself),
//   - the model fails at random: 429, 500, a hang and a late answer (both
//     past the model timeout), a stream cut mid-answer; the Bot API answers
//     a send or a poll with a 429 or a 502 now and then,
//   - the disk holding the data dir (a small tmpfs the test mounts: the
//     store, the spool of received files, the logs) fills up for a while
//     and is freed again.
//
// Some Telegram messages carry a file, so the spool is written too. No
// sandbox takes part (the model answers without tools): the container
// engine restart of the chaos runs is TestChaos's. The CLI channel cannot
// join: `conch chat` is a gateway of its own and holds the data dir's lock
// while `conch up` runs; TestChaos covers it.
//
// Afterwards every message must have been answered exactly once, by its own
// turn, on its channel (the scripted model answers "re: " and the question,
// so an answer carries its question's words), nothing may be stored twice,
// and the store must pass PRAGMA integrity_check. It prints figures per
// channel.
//
// The short version runs with the tests (CONCH_CHAOS unset: 8 messages a
// channel; 35-40 s on a 2-core machine, 3 minutes at most by its deadlines);
// `make chaos` (CONCH_CHAOS=long) sends 40 a channel (about 2.5 minutes).
// CONCH_CHAOS_SEED replays a run's schedule (the timing of a run on a busy
// machine is its own); CONCH_CHAOS_KEEP=1 keeps conch's stderr and data dir
// even when the run passes.
func TestChaosAllChannels(t *testing.T) {
	testenv.Short(t)
	perChannel, gap, killGap := 8, 2500*time.Millisecond, [2]int{1500, 5000}
	if os.Getenv("CONCH_CHAOS") == "long" {
		perChannel, gap, killGap = 40, 3000*time.Millisecond, [2]int{3000, 9000}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CONCH_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("chaos on every channel: %d messages a channel, seed %d (CONCH_CHAOS_SEED replays)", perChannel, seed)
	rng := mrand.New(mrand.NewPCG(seed, 3))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	between := func(lo, hi int) time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()
		return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond
	}

	dir := t.TempDir()
	disk := mountSmallDisk(t, filepath.Join(dir, "data"), 64<<20)

	// The real components (one after the other: a missing one skips the
	// test, which only the test's own goroutine may do).
	hs := homeserver.Start(t)
	ms := testmail.Start(t)
	tg := tgfake.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	conchMail, aliceMail := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	tgPeople := []tgfake.User{tgfake.Person(1001, "ann", "Ann"), tgfake.Person(1002, "ben", "Ben")}

	// The model: "re: " and the question, unless it fails this time (never
	// twice in a row for one question, so the agent's retries suffice).
	st := newChaosStats()
	srv := fakellm.New(t, fakellm.WithoutRecording())
	lastFailed := map[string]bool{}
	srv.Handle(func(req fakellm.Request) fakellm.Reply {
		q := req.LastUserText()
		// A model takes its time (within model.timeout): turns are in
		// flight long enough for kills to land in them.
		answer := fakellm.Text("re: " + q).Delay(between(50, 700))
		st.mu.Lock()
		fail := !lastFailed[q] && chance(0.3)
		lastFailed[q] = fail
		kind := ""
		if fail {
			rngMu.Lock()
			kind = []string{"429", "500", "hang", "late", "cut"}[rng.IntN(5)]
			rngMu.Unlock()
			st.faults[kind]++
			if ch := channelOfToken(q); ch != "" {
				st.ch[ch].faults++
			}
		}
		st.mu.Unlock()
		switch kind {
		case "429":
			return fakellm.Error(429, "slow down").RetryAfter(20 * time.Millisecond)
		case "500":
			return fakellm.Error(500, "internal error")
		case "hang":
			return fakellm.Hang()
		case "late":
			return answer.Delay(3 * time.Second)
		case "cut":
			if req.Stream {
				return answer.CutAfter(1)
			}
			return fakellm.Drop()
		}
		return answer
	})

	addr := freeAddr(t)
	base := "http://" + addr
	env := append(testEnv(srv, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN="+addr,
		"CONCH_MODEL_TIMEOUT=1s",
		"CONCH_AGENT_MAX_RETRIES=6",
		"CONCH_GATEWAY_MAX_ATTEMPTS=30",
		"CONCH_TELEGRAM_BOT_TOKEN="+tg.Token,
		"CONCH_TELEGRAM_API_URL="+tg.URL,
		"CONCH_TELEGRAM_ALLOW_FROM=1001,1002",
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
	)
	env = append(env, emailEnv(ms, conchMail, aliceMail)...)
	env = append(env, "CONCH_EMAIL_ALLOW_FROM="+aliceMail.Address)

	up := newSupervisor(t, env)
	up.start()
	for _, ready := range []string{"telegram polling", "matrix first sync", "email: watching mailbox", "Web chat: open " + base} {
		up.waitStderr(t, ready)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	// Matrix: alice's room with the bot.
	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	alice.waitMessage(t, ctx, room.RoomID, botID) // the greeting
	go func() {
		for {
			b, ok := alice.nextBody(ctx, room.RoomID, botID)
			if !ok {
				return
			}
			if strings.HasPrefix(b, "re: ") {
				st.seen("mx", b)
			}
		}
	}()
	// The web chat: two conversations, each followed by a page.
	wc := webLogin(t, env, base)
	var pages []*chaosPage
	for range 2 {
		pg := &chaosPage{c: wc, conv: wc.newConversation(t), st: st, send: make(chan [2]string, 100), acked: map[string]bool{}}
		pages = append(pages, pg)
		go pg.run(ctx)
	}

	// The senders: each channel's messages at random moments, all at once.
	send := map[string]func(i int, token string){
		"tg": func(i int, token string) {
			u := tgPeople[i%len(tgPeople)]
			if i%3 == 2 {
				tg.SendDocument(u, tgfake.PrivateChat(u), "note-"+token+".txt", "text/plain", []byte("file of "+token), token+" with a file")
				return
			}
			tg.SendText(u, tgfake.PrivateChat(u), token+" from Telegram")
		},
		"mx": func(i int, token string) {
			for {
				if _, err := alice.cli.SendText(ctx, room.RoomID, token+" from Matrix"); err == nil || ctx.Err() != nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		},
		"em": func(i int, token string) {
			raw := personMail("Alice <"+aliceMail.Address+">", conchMail.Address, "Question "+token, token+"@example.test", token+" from email")
			for {
				if err := ms.Send(ctx, aliceMail.Address, []string{conchMail.Address}, raw); err == nil || ctx.Err() != nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		},
		"web": func(i int, token string) { pages[i%len(pages)].send <- [2]string{token, token + " from the web"} },
	}
	// What each channel shows: Telegram's and the mailbox's answers are read
	// from the servers; Matrix's and the web's arrive on their own.
	observe := func() {
		for _, u := range tgPeople {
			for _, m := range tg.Messages(u.ID) {
				if strings.HasPrefix(m.Text, "re: ") {
					st.seenOnce("tg", m.Text, fmt.Sprint(u.ID, ":", m.MessageID)) // ids count per chat
				}
			}
		}
		msgs, _ := ms.Messages(aliceMail)
		copies := map[string]int{}
		for _, m := range msgs {
			if strings.Contains(string(m.Raw), "re: ") {
				// A reply is one message by its Message-ID (conch derives
				// it from the mail answered). SMTP has no idempotency: a
				// kill between the server's acceptance and conch's record
				// of it sends the same message again, which a mail client
				// shows as one; it is counted apart. Two replies with
				// different Message-IDs count as a duplicate.
				id := m.Header.Get("Message-ID")
				copies[id]++
				st.seenOnce("em", m.Header.Get("In-Reply-To"), id)
			}
		}
		n := 0
		for _, c := range copies {
			n += c - 1
		}
		st.mu.Lock()
		st.mailCopies = n
		st.mu.Unlock()
	}
	observing := make(chan struct{})
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for {
			observe()
			select {
			case <-observing:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	began := time.Now()
	var senders sync.WaitGroup
	// A nudge sends a channel's next message at once: the chaos nudges
	// every channel when it fills the disk, so messages arrive on a full
	// disk (a received file must be spooled, the message stored).
	nudges := map[string]chan struct{}{}
	for _, ch := range chaosChannels {
		nudges[ch] = make(chan struct{}, 1)
		senders.Go(func() {
			for i := range perChannel {
				select {
				case <-time.After(between(0, int(2*gap/time.Millisecond))): // gap on average
				case <-nudges[ch]:
				}
				token := fmt.Sprintf("%s%03d", ch, i)
				st.sent(ch, token)
				send[ch](i, token)
			}
		})
	}

	// The chaos: kills and a full disk at random moments, until every
	// message is answered (or the time is up).
	quiet := make(chan struct{})
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		for n := 0; ; n++ {
			select {
			case <-quiet:
				return
			case <-time.After(between(killGap[0], killGap[1])):
			}
			if chance(0.3) {
				// A kill just after an answer went out (seen live on Matrix
				// or the web): between delivering it and marking its turn
				// done, where a resumed turn delivers it again.
				select {
				case <-st.answered:
				default:
				}
				select {
				case <-quiet:
					return
				case <-st.answered:
					st.mu.Lock()
					st.killsAfterAnswer++
					st.mu.Unlock()
					st.kill(up)
					continue
				case <-time.After(between(killGap[0], killGap[1])):
				}
			}
			if chance(0.2) {
				// The Bot API fails too: a 429 or a 502 on a send or a poll.
				method := "sendMessage"
				if chance(0.5) {
					method = "getUpdates"
				}
				f := tgfake.ServerError(502)
				if chance(0.5) {
					f = tgfake.TooManyRequests(1)
				}
				tg.Fail(method, f)
				st.mu.Lock()
				st.tgFaults++
				st.mu.Unlock()
			}
			if n == 1 || chance(0.25) { // the disk fills at least once
				hold := between(1000, 4000)
				if err := disk.fill(); err != nil {
					t.Errorf("fill the disk: %v", err)
					return
				}
				st.mu.Lock()
				st.diskFull++
				st.mu.Unlock()
				for _, n := range nudges {
					select {
					case n <- struct{}{}:
					default:
					}
				}
				// A kill while the disk is full: conch must come back up
				// on a full disk, or wait until it is freed.
				if chance(0.5) {
					time.Sleep(hold / 2)
					st.kill(up)
				}
				time.Sleep(hold / 2)
				disk.free()
				continue
			}
			st.kill(up)
		}
	}()
	senders.Wait()
	// The short version's budget is 3 minutes in all: ~10 s to start the
	// components, at most 40 s of sending, 90 s for the last answers.
	deadline := time.Now().Add(90 * time.Second)
	if os.Getenv("CONCH_CHAOS") == "long" {
		deadline = time.Now().Add(15 * time.Minute)
	}
	for !st.allAnswered(perChannel) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	close(quiet)
	<-chaosDone
	disk.free()
	// Let a restarted conch send what it would send again, then stop it.
	time.Sleep(3 * time.Second)
	close(observing)
	<-observed
	observe()
	elapsed := time.Since(began)
	// A message still unanswered: conch's goroutines say where it is stuck.
	up.stop(t, !st.allAnswered(perChannel))
	cancel()

	// The count on each channel as its person sees it.
	counts := map[string]map[string]int{}
	for _, ch := range chaosChannels {
		counts[ch] = map[string]int{}
	}
	st.mu.Lock()
	for ch, c := range st.ch {
		for tok, n := range c.answers {
			counts[ch][tok] = n
		}
	}
	st.mu.Unlock()
	// Matrix: the room's timeline as the bot's own sync shows it (a second
	// event made of one transaction id counts too).
	bot, err := mautrix.NewClient(hs.URL, id.UserID(botID), botToken)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	counts["mx"] = map[string]int{}
	for body, txns := range roomReplies(t, rctx, bot, room.RoomID, botID) {
		if tok := tokenRe.FindString(body); tok != "" && strings.HasPrefix(body, "re: ") {
			counts["mx"][tok] += len(txns)
		}
	}

	// The store.
	db, err := sqlite.Open(rctx, filepath.Join(dir, "data", "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.SQL().QueryRowContext(rctx, "PRAGMA integrity_check").Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	storedTwice, wrongTurn := checkStoreAnswers(t, db)

	kills, diskFull, faults := st.kills, st.diskFull, st.faults
	// What the full disk refused (each a line of conch's log): a store
	// write ("database or disk is full", or the store's own "disk full at")
	// or a file to spool.
	refusals := 0
	exitsBy := map[string]int{} // why conch up ended by itself
	for _, l := range strings.Split(up.stderr.String(), "\n") {
		if strings.Contains(l, "disk full") || strings.Contains(l, "disk is full") {
			refusals++
		}
		if why, ok := strings.CutPrefix(l, "conch: "); ok {
			exitsBy[why]++
		}
	}
	fmt.Printf("chaos on every channel: %d messages a channel in %s (seed %d): %d SIGKILLs of conch up (%d just after an answer went out; %d restarts that did not come up), "+
		"%d disk-full windows (%d disk-full errors logged, %d web sends refused), model faults 429=%d 500=%d hang=%d late=%d cut=%d, %d Bot API faults; "+
		"%d replies mailed again with one Message-ID; stored twice %d, answered by another turn %d; integrity_check %s\n",
		perChannel, elapsed.Round(time.Second), seed, kills, st.killsAfterAnswer, up.exits(), diskFull, refusals, st.webRefused,
		faults["429"], faults["500"], faults["hang"], faults["late"], faults["cut"], st.tgFaults, st.mailCopies, len(storedTwice), len(wrongTurn), integrity)
	for why, n := range exitsBy {
		fmt.Printf("  conch up ended by itself %d× with: %s\n", n, why)
	}
	for _, ch := range chaosChannels {
		c := st.ch[ch]
		var lost, dup []string
		var lats []time.Duration
		slowest := ""
		answered := 0
		for _, tok := range c.tokens {
			switch n := counts[ch][tok]; {
			case n == 0:
				lost = append(lost, tok)
			case n > 1:
				dup = append(dup, tok)
			}
			if counts[ch][tok] > 0 {
				answered++
			}
			if at, ok := c.firstAt[tok]; ok {
				lat := at.Sub(c.sentAt[tok])
				if len(lats) == 0 || lat > slices.Max(lats) {
					slowest = tok
				}
				lats = append(lats, lat)
			}
		}
		slices.Sort(lats)
		p50, maxLat := time.Duration(0), time.Duration(0)
		if len(lats) > 0 {
			p50, maxLat = lats[len(lats)/2], lats[len(lats)-1]
		}
		fmt.Printf("  %-8s messages %d, kills while in flight %d, model faults %d, answered %d, lost %d, duplicates %d, latency p50 %s max %s (%s)\n",
			chaosChannelNames[ch], len(c.tokens), c.kills, c.faults, answered, len(lost), len(dup),
			p50.Round(10*time.Millisecond), maxLat.Round(10*time.Millisecond), slowest)
		if len(lost) > 0 {
			t.Errorf("%s: never answered: %v", chaosChannelNames[ch], lost)
		}
		if len(dup) > 0 {
			t.Errorf("%s: answered more than once: %v", chaosChannelNames[ch], dup)
		}
	}
	if st.mailCopies > kills {
		t.Errorf("%d replies mailed again with one Message-ID, more than the %d kills explain", st.mailCopies, kills)
	}
	if len(storedTwice) > 0 {
		t.Errorf("stored twice: %v", storedTwice)
	}
	if len(wrongTurn) > 0 {
		t.Errorf("turns without exactly one answer of their own: %v", wrongTurn)
	}
	if integrity != "ok" {
		t.Errorf("PRAGMA integrity_check: %s", integrity)
	}
}

var (
	chaosChannels     = []string{"tg", "mx", "em", "web"}
	chaosChannelNames = map[string]string{"tg": "telegram", "mx": "matrix", "em": "email", "web": "web"}
	// tokenRe finds a message's token ("tg004") in a question or answer.
	tokenRe = regexp.MustCompile(`\b(tg|mx|em|web)\d{3}\b`)
)

func channelOfToken(s string) string {
	if m := tokenRe.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// chaosStats is what the run saw, per channel and in all.
type chaosStats struct {
	mu         sync.Mutex
	ch         map[string]*chaosChannelStats
	faults     map[string]int
	kills      int
	diskFull   int
	webRefused int
	tgFaults   int // Bot API errors injected
	mailCopies int // replies mailed again with the same Message-ID
	// answered hears of each answer seen live (Matrix, web);
	// killsAfterAnswer counts the kills it timed.
	answered         chan struct{}
	killsAfterAnswer int
}

type chaosChannelStats struct {
	tokens  []string
	sentAt  map[string]time.Time
	firstAt map[string]time.Time
	answers map[string]int      // token → answers seen
	ids     map[string]struct{} // answers already counted (by their id)
	faults  int
	kills   int
}

func newChaosStats() *chaosStats {
	s := &chaosStats{ch: map[string]*chaosChannelStats{}, faults: map[string]int{}, answered: make(chan struct{}, 1)}
	for _, ch := range chaosChannels {
		s.ch[ch] = &chaosChannelStats{sentAt: map[string]time.Time{}, firstAt: map[string]time.Time{},
			answers: map[string]int{}, ids: map[string]struct{}{}}
	}
	return s
}

func (s *chaosStats) sent(ch, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ch[ch]
	c.tokens = append(c.tokens, token)
	c.sentAt[token] = time.Now()
}

// seen counts an answer that arrives once (a Matrix or web event).
func (s *chaosStats) seen(ch, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seenLocked(ch, text)
}

// seenOnce counts an answer read again at every look, once by its id.
func (s *chaosStats) seenOnce(ch, text, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ch[ch]
	if _, ok := c.ids[id]; ok {
		return
	}
	c.ids[id] = struct{}{}
	s.seenLocked(ch, text)
}

func (s *chaosStats) seenLocked(ch, text string) {
	tok := tokenRe.FindString(text)
	if tok == "" {
		return
	}
	c := s.ch[ch]
	c.answers[tok]++
	if ch == "mx" || ch == "web" {
		select {
		case s.answered <- struct{}{}:
		default:
		}
	}
	if _, ok := c.firstAt[tok]; !ok {
		c.firstAt[tok] = time.Now()
	}
}

func (s *chaosStats) allAnswered(perChannel int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.ch {
		if len(c.tokens) < perChannel || len(c.firstAt) < perChannel {
			return false
		}
	}
	return true
}

// kill SIGKILLs conch up, counting it for every channel with a message
// not answered yet.
func (s *chaosStats) kill(up *supervisor) {
	s.mu.Lock()
	s.kills++
	for _, c := range s.ch {
		if len(c.firstAt) < len(c.tokens) {
			c.kills++
		}
	}
	s.mu.Unlock()
	up.kill()
}

// checkStoreAnswers reads every conversation of a stopped conch's store:
// each message token stored once as a user message, and each turn answered
// by exactly one assistant message of its own ("re: " and its words).
func checkStoreAnswers(t *testing.T, db *sqlite.DB) (storedTwice, wrongTurn []string) {
	t.Helper()
	ctx := context.Background()
	users := countTexts(t, db, "user", "")
	for text, n := range users {
		if tok := tokenRe.FindString(text); tok != "" && n > 1 {
			storedTwice = append(storedTwice, tok)
		}
	}
	keys, err := db.Conversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		turns, err := db.Turns(ctx, k, 10000)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := db.EventsSince(ctx, k, 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		answers := map[conch.TurnID][]string{}
		for _, ev := range evs {
			if m, ok := ev.Data.(conch.MessageEvent); ok && m.Role == conch.RoleAssistant {
				answers[ev.Turn] = append(answers[ev.Turn], m.Text)
			}
		}
		for _, tr := range turns {
			tok := tokenRe.FindString(tr.Inbound.Text)
			if tok == "" {
				continue
			}
			if a := answers[tr.ID]; len(a) != 1 || !strings.HasPrefix(a[0], "re: ") || tokenRe.FindString(a[0]) != tok {
				wrongTurn = append(wrongTurn, fmt.Sprintf("%s turn %d (%s) answered %q", k, tr.ID, tok, a))
			}
		}
	}
	slices.Sort(storedTwice)
	return storedTwice, wrongTurn
}

// chaosPage is a web chat page as the real one behaves: messages wait in
// an outbox until acked and are sent again, with the same id, after a
// refusal or a dropped socket; it follows the conversation's events and
// resumes after the last Seq it saw.
type chaosPage struct {
	c     *webClient
	conv  string
	st    *chaosStats
	send  chan [2]string // id, text
	mu    sync.Mutex
	out   [][2]string // not acked yet, in order
	acked map[string]bool
	last  int64
}

func (pg *chaosPage) run(ctx context.Context) {
	for ctx.Err() == nil {
		pg.session(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// session is one socket's life: until it breaks.
func (pg *chaosPage) session(ctx context.Context) {
	pg.mu.Lock()
	after := pg.last
	pg.mu.Unlock()
	u := "ws" + strings.TrimPrefix(pg.c.base, "http") + "/api/chat?c=" + pg.conv + "&after=" + strconv.FormatInt(after, 10)
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	conn, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPClient: pg.c.client, HTTPHeader: map[string][]string{"Origin": {pg.c.base}}})
	dcancel()
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 22)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	write := func(m [2]string) bool {
		f, _ := json.Marshal(map[string]string{"type": "send", "id": m[0], "text": m[1]})
		wctx, wcancel := context.WithTimeout(sctx, 5*time.Second)
		defer wcancel()
		return conn.Write(wctx, websocket.MessageText, f) == nil
	}
	frames := make(chan []byte)
	go func() {
		defer scancel()
		for {
			_, b, err := conn.Read(sctx)
			if err != nil {
				return
			}
			select {
			case frames <- b:
			case <-sctx.Done():
				return
			}
		}
	}()
	resendAll := func() bool {
		pg.mu.Lock()
		out := slices.Clone(pg.out)
		pg.mu.Unlock()
		for _, m := range out {
			if !write(m) {
				return false
			}
		}
		return true
	}
	if !resendAll() {
		return
	}
	retry := time.NewTicker(2 * time.Second)
	defer retry.Stop()
	for {
		select {
		case <-sctx.Done():
			return
		case m := <-pg.send:
			pg.mu.Lock()
			pg.out = append(pg.out, m)
			pg.mu.Unlock()
			if !write(m) {
				return
			}
		case <-retry.C:
			// What was refused (a full disk) or never acked goes again.
			if !resendAll() {
				return
			}
		case b := <-frames:
			pg.frame(b)
		}
	}
}

func (pg *chaosPage) frame(b []byte) {
	var f struct {
		Type, ID, Error string
		Seq             int64
		Messages        []struct{ Role, Text string }
		Event           *struct {
			Seq  int64
			Type string
			Data struct{ Role, Text string }
		}
	}
	if json.Unmarshal(b, &f) != nil {
		return
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	switch f.Type {
	case "ack":
		pg.acked[f.ID] = true
		pg.out = slices.DeleteFunc(pg.out, func(m [2]string) bool { return m[0] == f.ID })
	case "error":
		if strings.Contains(f.Error, "disk full") {
			pg.st.mu.Lock()
			pg.st.webRefused++
			pg.st.mu.Unlock()
		}
	case "history":
		// The page shows the stored conversation instead: count its
		// answers that were not seen live.
		pg.last = f.Seq
		for _, m := range f.Messages {
			if m.Role == "assistant" {
				if tok := tokenRe.FindString(m.Text); tok != "" {
					pg.st.mu.Lock()
					if pg.st.ch["web"].answers[tok] == 0 {
						pg.st.seenLocked("web", m.Text)
					}
					pg.st.mu.Unlock()
				}
			}
		}
	case "event":
		if f.Event == nil || f.Event.Seq <= pg.last {
			return
		}
		pg.last = f.Event.Seq
		if f.Event.Type == "message" && f.Event.Data.Role == "assistant" && strings.HasPrefix(f.Event.Data.Text, "re: ") {
			pg.st.seen("web", f.Event.Data.Text)
		}
	}
}

// supervisor runs `conch up` as a service manager would: restarted after a
// kill, and again (after a pause) when it exits by itself.
type supervisor struct {
	t      *testing.T
	env    []string
	stderr *testenv.SyncBuffer // every run's, in order
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	died   int // runs that ended by themselves
	closed bool
}

func newSupervisor(t *testing.T, env []string) *supervisor {
	s := &supervisor{t: t, env: env, stderr: &testenv.SyncBuffer{}}
	dumpLogsOnFailure(t, dataDirOf(env))
	t.Cleanup(func() {
		s.mu.Lock()
		s.closed = true
		cmd, done := s.cmd, s.done
		s.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() || os.Getenv("CONCH_CHAOS_KEEP") != "" {
			// Every run's stderr, whole, where it outlives the test.
			f, err := os.CreateTemp("", "conch-chaos-all-*.log")
			if err == nil {
				_, _ = f.WriteString(s.stderr.String())
				f.Close()
				t.Logf("conch up's stderr (every run): %s", f.Name())
			}
		}
	})
	return s
}

// start runs conch up; the caller holds no lock.
func (s *supervisor) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
}

func (s *supervisor) startLocked() {
	if s.closed {
		return
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(s.env, "CONCH_TEST_ARGS=up")
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		s.t.Errorf("start conch up: %v", err)
		return
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		_ = cmd.Wait()
		close(done)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cmd != cmd || s.closed {
			return // killed and replaced, or stopped at the end
		}
		// It ended by itself (a start on a full disk, say): start it
		// again after a pause.
		s.died++
		s.cmd = nil
		go func() {
			time.Sleep(500 * time.Millisecond)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.cmd == nil {
				s.startLocked()
			}
		}()
	}()
}

// kill SIGKILLs the running conch and starts another.
func (s *supervisor) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
		s.cmd = nil
	}
	s.startLocked()
}

func (s *supervisor) exits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.died
}

// stop ends conch with SIGTERM and waits for a clean exit; nothing is
// restarted after it.
func (s *supervisor) stop(t *testing.T, dump bool) {
	t.Helper()
	var cmd *exec.Cmd
	var done chan struct{}
	for deadline := time.Now().Add(30 * time.Second); ; {
		s.mu.Lock()
		cmd, done = s.cmd, s.done
		if cmd != nil {
			s.closed = true
		}
		s.mu.Unlock()
		if cmd != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("conch up is not running to be stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	sig := syscall.SIGTERM
	if dump {
		sig = syscall.SIGQUIT
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		if !dump && !cmd.ProcessState.Success() {
			t.Errorf("conch up exited with %v after SIGTERM", cmd.ProcessState)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("conch up did not stop within 30 s of SIGTERM")
	}
}

func (s *supervisor) waitStderr(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(s.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never showed %q", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// smallDisk is a tmpfs of a fixed size the test mounted, which it can
// fill up and free again.
type smallDisk struct{ dir string }

// mountSmallDisk mounts a tmpfs of size bytes on dir (made if missing)
// for the test; it needs root.
func mountSmallDisk(t *testing.T, dir string, size int64) *smallDisk {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		testenv.Missing(t, "tmpfs mount", fmt.Sprintf("mount a small tmpfs for the data dir: %v (needs root)", err))
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CONCH_CHAOS_KEEP") != "" {
			// The store and logs outlive the mount, to be looked at.
			keep, err := os.MkdirTemp("", "conch-chaos-data-*")
			if err == nil && exec.Command("cp", "-a", dir+"/.", keep).Run() == nil {
				t.Logf("the data dir is kept in %s", keep)
			}
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &smallDisk{dir: dir}
}

// fill takes every free block of the disk, with a file beside the data
// (inside the mount, under a name conch does not know).
func (d *smallDisk) fill() error {
	f, err := os.OpenFile(filepath.Join(d.dir, ".filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return nil
		}
		return err
	}
	defer f.Close()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &fs); err != nil {
		return err
	}
	if free := int64(fs.Bavail) * fs.Bsize; free > 0 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, free); err != nil && !errors.Is(err, syscall.ENOSPC) {
			return err
		}
	}
	// What fallocate left: a block at a time until nothing fits.
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// free gives the space back.
func (d *smallDisk) free() {
	_ = os.Remove(filepath.Join(d.dir, ".filler"))
}
