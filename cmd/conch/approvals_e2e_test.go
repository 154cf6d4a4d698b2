package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch/internal/testenv"
	"conch/internal/testenv/browser"
	dcfake "conch/internal/testenv/discord"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
	testmail "conch/internal/testenv/mail"
	slackfake "conch/internal/testenv/slack"
	tgfake "conch/internal/testenv/telegram"
)

// approvalCommand is a command the test policy (rm -rf *) names, hidden
// in a shell script: the policy must see it, and its output proves it ran.
const approvalCommand = `{"command":"sh -c 'echo ran-after-approval && rm -rf /workspace/junk'"}`

// approvalsEnv is conch up on Telegram with a real engine (the bash tool
// needs a sandbox) and the policy tools.approve = ["rm -rf *"].
func approvalsEnv(t *testing.T, llm *fakellm.Server, tg *tgfake.Server, allow string) (env []string, dataDir string) {
	t.Helper()
	e := engine.Docker(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "ap" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env = append(telegramEnv(t, llm, tg, dir, allow), engineEnv(t, e, instance)...)
	env = append(env, "CONCH_TOOLS_APPROVE=rm -rf *", "CONCH_TELEGRAM_GROUP_POLICY=all")
	return env, filepath.Join(dir, "data")
}

// question waits for the bot's message with the approval buttons in chat
// and returns it with the callback data of each choice.
func question(t *testing.T, tg *tgfake.Server, chat int64, p *conchProc) (tgfake.Sent, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var q tgfake.Sent
	err := tg.Wait(ctx, func() bool {
		for _, s := range tg.Sent(chat) {
			if s.Method == "sendMessage" && len(s.Keyboard) > 0 {
				q = s
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no question with buttons; stderr:\n%s", p.stderr)
	}
	data := map[string]string{}
	for _, row := range q.Keyboard {
		for _, b := range row {
			data[b.Text] = b.CallbackData
		}
	}
	return q, data
}

// queryAnswer waits for the answer to a button press.
func queryAnswer(t *testing.T, tg *tgfake.Server, id string) tgfake.Sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got tgfake.Sent
	if err := tg.Wait(ctx, func() bool {
		for _, s := range tg.Sent(0) {
			if s.Method == "answerCallbackQuery" && s.QueryID == id {
				got = s
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("press %s never answered", id)
	}
	return got
}

func auditLines(t *testing.T, dataDir, kind string) []string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dataDir, "logs", "audit.jsonl"))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"kind":"`+kind+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestUpApprovalTelegram: a command the policy names (inside `sh -c`)
// waits for a person; the question comes as an inline keyboard in the
// group; a member the allowlist does not admit presses "Allow once" and is
// refused (the question stays open, nothing runs); an admitted person's
// press decides it: the command runs, the turn answers, the question's
// message loses its buttons, and the decision is audited.
func TestUpApprovalTelegram(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	mallory := tgfake.Person(6666, "mallory", "Mallory")
	group := tgfake.Group(-100777, "ops")
	env, dataDir := approvalsEnv(t, llm, tg, "4242")

	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Cleaned up."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")
	tg.SendText(alice, group, "clean up the junk")

	q, data := question(t, tg, group.ID, p)
	if !strings.Contains(q.Text, "rm -rf /workspace/junk") || !strings.Contains(q.Text, "rm -rf *") {
		t.Fatalf("question %q does not show the command and its rule", q.Text)
	}
	if len(data) != 3 || data["Allow once"] == "" || data["Allow for this conversation"] == "" || data["Deny"] == "" {
		t.Fatalf("buttons %v", data)
	}

	// Someone the conversation does not admit cannot answer.
	qid, err := tg.Click(mallory, group.ID, q.MessageID, data["Allow once"])
	if err != nil {
		t.Fatal(err)
	}
	if a := queryAnswer(t, tg, qid); !a.Alert || !strings.Contains(a.Text, "may not answer") {
		t.Fatalf("mallory's press answered %+v", a)
	}
	time.Sleep(500 * time.Millisecond)
	if llm.Count() != 1 {
		t.Fatalf("the turn went on after mallory's press (%d model calls)", llm.Count())
	}
	if m, _ := tg.Message(group.ID, q.MessageID); m.ReplyMarkup == nil {
		t.Fatal("mallory's press removed the buttons")
	}

	qid, err = tg.Click(alice, group.ID, q.MessageID, data["Allow once"])
	if err != nil {
		t.Fatal(err)
	}
	if a := queryAnswer(t, tg, qid); a.Alert || a.Text != "Allow once" {
		t.Fatalf("alice's press answered %+v", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool {
		for _, s := range tg.Messages(group.ID) {
			if s.Text == "Cleaned up." {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no answer after the approval; stderr:\n%s", p.stderr)
	}
	if res := lastToolResult(t, llm); !strings.Contains(res, "ran-after-approval") {
		t.Fatalf("the command's result %q; it should have run", res)
	}
	if m, _ := tg.Message(group.ID, q.MessageID); m.ReplyMarkup != nil || !strings.Contains(m.Text, "Allowed once by 4242") {
		t.Fatalf("question after the decision: %q (keyboard %v)", m.Text, m.ReplyMarkup)
	}
	audits := auditLines(t, dataDir, "approval")
	if len(audits) != 2 || !strings.Contains(audits[0], `"refused":"not admitted to the conversation"`) ||
		!strings.Contains(audits[1], `"choice":"once"`) || !strings.Contains(audits[1], `"by":"4242"`) {
		t.Fatalf("audit: %q", audits)
	}
}

// TestUpApprovalTelegramKill9: conch is killed (SIGKILL) while a question
// is open. After the restart the question is still answerable: the press
// on the old message decides it, the turn resumes at the waiting call
// (without asking the model again), the command runs once and the turn
// answers once.
func TestUpApprovalTelegramKill9(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	chat := tgfake.PrivateChat(alice)
	env, _ := approvalsEnv(t, llm, tg, "4242")

	llm.Push(fakellm.ToolCall("bash", approvalCommand))
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")
	tg.SendText(alice, chat, "clean up the junk")
	q, data := question(t, tg, chat.ID, p)
	p.kill9(t)

	llm.Push(fakellm.Text("Cleaned up after the restart."))
	p = startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")
	qid, err := tg.Click(alice, chat.ID, q.MessageID, data["Allow once"])
	if err != nil {
		t.Fatal(err)
	}
	if a := queryAnswer(t, tg, qid); a.Alert {
		t.Fatalf("the press after the restart was refused: %+v; stderr:\n%s", a, p.stderr)
	}
	var answers []string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool {
		answers = answers[:0]
		for _, s := range tg.Messages(chat.ID) {
			if strings.HasPrefix(s.Text, "Cleaned up") {
				answers = append(answers, s.Text)
			}
		}
		return len(answers) > 0
	}); err != nil {
		t.Fatalf("no answer after the restart; stderr:\n%s", p.stderr)
	}
	time.Sleep(1500 * time.Millisecond)
	n := 0
	for _, s := range tg.Messages(chat.ID) {
		if strings.HasPrefix(s.Text, "Cleaned up") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d answers, want exactly 1", n)
	}
	if llm.Count() != 2 {
		t.Fatalf("the model was asked %d times, want 2 (the tool call, then the answer after the resumed call)", llm.Count())
	}
	res := lastToolResult(t, llm)
	if !strings.Contains(res, "ran-after-approval") || strings.Contains(res, "interrupted") {
		t.Fatalf("the resumed call's result %q; it should have run after the press", res)
	}
}

// TestWebApprovalInBrowser: in headless Chromium, a command the policy
// names shows as a question with three buttons in the web chat; "Allow for
// this conversation" runs it, and a second command of the same rule in a
// later turn runs without asking (the grant); the question shows its
// outcome after a reload, from the event log.
func TestWebApprovalInBrowser(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	e := engine.Docker(t)
	llm := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "aw" + hex.EncodeToString(buf)
	addr := freeAddr(t)
	env := append(testEnv(llm, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr, "CONCH_TOOLS_APPROVE=rm -rf *")
	env = append(env, engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)

	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Cleaned up."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open")
	ctx := b.Context()
	browser.Run(t, ctx, "ask",
		chromedp.Navigate(webURL(t, env)),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.SendKeys("#input", "clean up the junk", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`.approval button.approval-conversation`, chromedp.ByQuery),
	)
	var shown string
	browser.Run(t, ctx, "question", chromedp.Text(`.approval .approval-command`, &shown, chromedp.ByQuery))
	if !strings.Contains(shown, "rm -rf /workspace/junk") {
		t.Fatalf("question shows %q", shown)
	}
	browser.Screenshot(t, ctx, "web-approval-question")
	if llm.Count() != 1 {
		t.Fatalf("the turn went on before the click (%d model calls)", llm.Count())
	}
	browser.Run(t, ctx, "allow",
		chromedp.Click(`.approval button.approval-conversation`, chromedp.ByQuery),
		chromedp.WaitVisible(`//div[contains(@class,"approval") and contains(@class,"allowed")]//div[contains(., "Allowed for this conversation by owner")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "Cleaned up.")]`, chromedp.BySearch),
	)
	browser.Screenshot(t, ctx, "web-approval-decided")
	if res := lastToolResult(t, llm); !strings.Contains(res, "ran-after-approval") {
		t.Fatalf("the command's result %q; it should have run", res)
	}

	// The same rule again: allowed for this conversation, no question.
	llm.Push(fakellm.ToolCall("bash", `{"command":"sh -c 'echo second-run && rm -rf /workspace/junk2'"}`), fakellm.Text("Cleaned again."))
	browser.Run(t, ctx, "again",
		chromedp.SendKeys("#input", "and the other junk", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "Cleaned again.")]`, chromedp.BySearch),
	)
	if res := lastToolResult(t, llm); !strings.Contains(res, "second-run") {
		t.Fatalf("the second command's result %q", res)
	}
	var questions int
	browser.Run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "Cleaned again.")]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll(".approval.allowed").length + 10*document.querySelectorAll(".approval button").length`, &questions),
	)
	if questions != 1 {
		t.Fatalf("after the reload: %d (allowed questions + 10×buttons), want one decided question", questions)
	}
}

// TestUpApprovalEmail: email has no buttons, so the question comes as a
// mail in the thread, answered by a reply ("yes", above the quoted
// question), with real dovecot and postfix. A stranger's "yes" in the same
// thread decides nothing; the person's reply runs the command and the
// thread gets the answer, the reply itself never reaching the model.
func TestUpApprovalEmail(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	conchUser, alice := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	mallory := ms.AddUser(t, "mallory")
	e := engine.Docker(t)
	llm := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "am" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(testEnv(llm, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN=", "CONCH_TOOLS_APPROVE=rm -rf *")
	env = append(env, emailEnv(ms, conchUser, alice)...)
	env = append(env, "CONCH_EMAIL_ALLOW_FROM="+alice.Address)
	env = append(env, engineEnv(t, e, instance)...)

	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Cleaned up."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "email: watching mailbox")
	ms.MustSend(t, alice.Address, []string{conchUser.Address}, personMail("Alice <"+alice.Address+">", conchUser.Address, "Junk", "j1@example.test", "Clean up the junk, please."))
	msgs := ms.MustWait(t, alice, 1, 90*time.Second)
	q := msgs[0]
	if !strings.Contains(string(q.Raw), "rm -rf /workspace/junk") || !strings.Contains(string(q.Raw), "Reply") {
		t.Fatalf("question mail:\n%s", q.Raw)
	}
	qid := q.Header.Get("Message-Id")
	reply := func(from, id, body string) {
		ms.MustSend(t, from, []string{conchUser.Address}, personMail(from, conchUser.Address, "Re: Junk", id, body,
			"In-Reply-To: "+qid, "References: <j1@example.test> "+qid))
	}
	reply(mallory.Address, "m1@example.test", "yes\n\nOn Monday conch wrote:\n> Approval needed")
	time.Sleep(2 * time.Second)
	if llm.Count() != 1 {
		t.Fatalf("a stranger's reply let the turn go on (%d model calls)", llm.Count())
	}
	reply(alice.Address, "j2@example.test", "yes\n\nOn Monday conch wrote:\n> Approval needed")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		all, _ := ms.Messages(alice)
		found := false
		for _, m := range all {
			found = found || strings.Contains(string(m.Raw), "Cleaned up.")
		}
		if found {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("no answer after the reply; stderr:\n%s", p.stderr)
	}
	if res := lastToolResult(t, llm); !strings.Contains(res, "ran-after-approval") {
		t.Fatalf("the command's result %q", res)
	}
	last, _ := llm.Last()
	for _, m := range last.Messages {
		if strings.TrimSpace(m.Text) == "yes" {
			t.Fatalf("the reply that answered the question reached the model: %+v", last.Messages)
		}
	}
}

// TestUpApprovalSlack: in a Slack channel thread, the question comes with
// buttons (an actions block); a member the allowlist does not admit
// presses one and is told so privately (nothing runs); the admitted
// person's "Deny" decides: the command does not run, the model reads the
// denial, and the question's buttons are replaced by the outcome.
func TestUpApprovalSlack(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	alice := sl.Person("U0ALICE", "alice")
	mallory := sl.Person("U0MALLORY", "mallory")
	gen := sl.Channel("C0OPS", "ops")
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "as" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(slackEnv(t, llm, sl, dir, "U0ALICE"), engineEnv(t, e, instance)...)
	env = append(env, "CONCH_TOOLS_APPROVE=rm -rf *")

	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Left the junk alone."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "slack socket mode connected")
	root := sl.Post(alice, gen, "<@"+sl.Bot.ID+"> clean up the junk")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var q slackfake.Sent
	if err := sl.Wait(ctx, func() bool {
		for _, s := range sl.Sent(gen) {
			if s.Method == "chat.postMessage" && len(s.Blocks) > 0 {
				q = s
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no question with buttons; stderr:\n%s", p.stderr)
	}
	if q.ThreadTS != root || !strings.Contains(string(q.Blocks), "rm -rf /workspace/junk") {
		t.Fatalf("question %+v", q)
	}
	if err := sl.Click(mallory, gen, q.TS, "conch_approval_once"); err != nil {
		t.Fatal(err)
	}
	if err := sl.Wait(ctx, func() bool {
		for _, s := range sl.Sent(gen) {
			if s.Method == "chat.postEphemeral" && s.User == mallory.ID && strings.Contains(s.Text, "may not answer") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("mallory was not told; sent %+v", sl.Sent(gen))
	}
	if llm.Count() != 1 {
		t.Fatalf("the turn went on after mallory's press (%d model calls)", llm.Count())
	}
	if err := sl.Click(alice, gen, q.TS, "conch_approval_deny"); err != nil {
		t.Fatal(err)
	}
	if err := sl.Wait(ctx, func() bool {
		for _, m := range sl.Messages(gen, root) {
			if m.Text == "Left the junk alone." {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no answer after the denial; stderr:\n%s", p.stderr)
	}
	if res := lastToolResult(t, llm); strings.Contains(res, "ran-after-approval") || !strings.Contains(res, "denied") {
		t.Fatalf("the command's result %q; it must not have run", res)
	}
	m, _ := sl.Message(gen, q.TS)
	if len(m.Blocks) != 0 || !strings.Contains(m.Text, "Denied by U0ALICE") {
		t.Fatalf("question after the decision: %q blocks %s", m.Text, m.Blocks)
	}
}

// TestUpApprovalDiscord: in a server channel, the question comes with
// buttons (an action row); a member the allowlist does not admit presses
// one and gets an ephemeral refusal (nothing runs); the admitted person's
// "Allow once" runs the command, the turn answers, and the question's
// buttons are replaced by the outcome.
func TestUpApprovalDiscord(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	llm := fakellm.New(t)
	dc := dcfake.Start(t)
	alice := dc.Person("2000000000000000001", "alice")
	mallory := dc.Person("2000000000000000666", "mallory")
	general := dc.TextChannel(e2eGuild, "general")
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "ad" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(discordEnv(t, llm, dc, dir, alice.ID), engineEnv(t, e, instance)...)
	env = append(env, "CONCH_TOOLS_APPROVE=rm -rf *")

	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Cleaned up."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "discord gateway session")
	dc.Post(alice, general, "clean up the junk", dcfake.Mention())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var q dcfake.Sent
	if err := dc.Wait(ctx, func() bool {
		for _, s := range dc.Sent(general) {
			if s.Method == "create" && len(s.Components) > 0 {
				q = s
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no question with buttons; stderr:\n%s", p.stderr)
	}
	if !strings.Contains(q.Content, "rm -rf /workspace/junk") || len(q.Components[0].Components) != 3 {
		t.Fatalf("question %+v", q)
	}
	once := q.Components[0].Components[0].CustomID
	if _, err := dc.Click(mallory, general, q.MessageID, once); err != nil {
		t.Fatal(err)
	}
	if err := dc.Wait(ctx, func() bool {
		for _, s := range dc.Sent(general) {
			if s.Method == "interaction" && s.Ephemeral && strings.Contains(s.Content, "may not answer") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("mallory was not told; sent %+v; stderr:\n%s", dc.Sent(general), p.stderr)
	}
	if llm.Count() != 1 {
		t.Fatalf("the turn went on after mallory's press (%d model calls)", llm.Count())
	}
	if _, err := dc.Click(alice, general, q.MessageID, once); err != nil {
		t.Fatal(err)
	}
	if err := dc.Wait(ctx, func() bool {
		for _, m := range dc.Messages(general) {
			if m.Content == "Cleaned up." {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no answer after the press; stderr:\n%s", p.stderr)
	}
	if res := lastToolResult(t, llm); !strings.Contains(res, "ran-after-approval") {
		t.Fatalf("the command's result %q", res)
	}
	for _, m := range dc.Messages(general) {
		if m.ID == q.MessageID && (len(m.Components) != 0 || !strings.Contains(m.Content, "Allowed once by "+alice.ID)) {
			t.Fatalf("question after the decision: %q components %+v", m.Content, m.Components)
		}
	}
}

// TestUpApprovalMatrix: Matrix has no buttons, so the question comes as a
// message in the room (real dendrite), answered by a reaction (👍 once,
// ✅ this conversation, 👎 deny) or a reply. A member the allowlist does not
// admit reacts 👍 and replies "yes": neither decides; the admitted
// person's 👍 runs the command, and no answer reaches the model.
func TestUpApprovalMatrix(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	e := engine.Docker(t)
	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	malloryID, malloryToken, _ := hs.Register(t, "mallory")
	llm := fakellm.New(t)
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "ax" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(testEnv(llm, fakellm.OpenAI, t.TempDir()),
		"CONCH_GATEWAY_LISTEN="+freeAddr(t),
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
		"CONCH_MATRIX_GREETING=Hello, I am conch.",
		"CONCH_TOOLS_APPROVE=rm -rf *",
	)
	env = append(env, engineEnv(t, e, instance)...)
	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Cleaned up."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "matrix first sync")

	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	mallory := newMatrixUser(t, hs.URL, malloryID, malloryToken)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID), id.UserID(malloryID)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.cli.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatal(err)
	}
	if g := alice.waitMessage(t, ctx, room.RoomID, botID); g.Body != "Hello, I am conch." {
		t.Fatalf("greeting %q", g.Body)
	}
	if _, err := alice.cli.SendText(ctx, room.RoomID, "clean up the junk"); err != nil {
		t.Fatal(err)
	}
	q := alice.waitMessageEvent(t, ctx, room.RoomID, botID)
	for i := 0; i < 5 && !strings.Contains(q.Content.AsMessage().Body, "Approval needed"); i++ {
		q = alice.waitMessageEvent(t, ctx, room.RoomID, botID) // progress comes first
	}
	if body := q.Content.AsMessage().Body; !strings.Contains(body, "rm -rf /workspace/junk") || !strings.Contains(body, "React 👍") {
		t.Fatalf("question %q; stderr:\n%s", body, p.stderr)
	}
	if _, err := mallory.cli.SendReaction(ctx, room.RoomID, q.ID, "👍"); err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.cli.SendText(ctx, room.RoomID, "yes"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if llm.Count() != 1 {
		t.Fatalf("mallory's reaction or reply let the turn go on (%d model calls)", llm.Count())
	}
	if _, err := alice.cli.SendReaction(ctx, room.RoomID, q.ID, "👍"); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for {
		m := alice.waitMessage(t, ctx, room.RoomID, botID)
		bodies = append(bodies, m.Body)
		if m.Body == "Cleaned up." {
			break
		}
		if len(bodies) > 4 {
			t.Fatalf("bot messages %q; stderr:\n%s", bodies, p.stderr)
		}
	}
	if !strings.Contains(strings.Join(bodies, "\n"), "Allowed once by "+aliceID) {
		t.Fatalf("no outcome among %q", bodies)
	}
	if res := lastToolResult(t, llm); !strings.Contains(res, "ran-after-approval") {
		t.Fatalf("the command's result %q", res)
	}
	last, _ := llm.Last()
	for _, m := range last.Messages {
		if strings.TrimSpace(m.Text) == "yes" {
			t.Fatalf("a reply reached the model: %+v", last.Messages)
		}
	}
}

// waitMessageEvent is waitMessage returning the whole event (its id).
func (u *matrixUser) waitMessageEvent(t *testing.T, ctx context.Context, room id.RoomID, sender string) *event.Event {
	t.Helper()
	for {
		u.mu.Lock()
		for i, evt := range u.msgs {
			if evt.RoomID == room && string(evt.Sender) == sender {
				u.msgs = append(u.msgs[:i:i], u.msgs[i+1:]...)
				u.mu.Unlock()
				_ = evt.Content.ParseRaw(evt.Type)
				return evt
			}
		}
		u.mu.Unlock()
		select {
		case <-u.note:
		case <-ctx.Done():
			t.Fatalf("no message from %s in %s", sender, room)
		}
	}
}

// TestUpApprovalSlackEventsAPI: with the Events API instead of Socket
// Mode, presses come to the Interactivity Request URL as signed forms; a
// forged one is refused, the person's press decides.
func TestUpApprovalSlackEventsAPI(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	alice := sl.Person("U0ALICE", "alice")
	const secret = "e2e-signing-secret-0123456789"
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "ae" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(slackEnv(t, llm, sl, t.TempDir(), "U0ALICE"), "CONCH_SLACK_MODE=events", "CONCH_SLACK_SIGNING_SECRET="+secret,
		"CONCH_SLACK_APP_TOKEN=", "CONCH_TOOLS_APPROVE=rm -rf *")
	env = append(env, engineEnv(t, e, instance)...)
	var addr string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CONCH_GATEWAY_LISTEN="); ok {
			addr = v
		}
	}
	llm.Push(fakellm.ToolCall("bash", approvalCommand), fakellm.Text("Cleaned up."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "slack events api")
	events, interactions := "http://"+addr+"/slack/events", "http://"+addr+"/slack/interactions"
	deadline := time.Now().Add(30 * time.Second)
	for err := sl.VerifyURL(events, secret); err != nil; err = sl.VerifyURL(events, secret) {
		if time.Now().After(deadline) {
			t.Fatalf("url verification: %v; stderr:\n%s", err, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sl.DeliverEvents(events, secret)
	sl.DeliverInteractions(interactions)
	dm := sl.DM(alice)
	sl.Post(alice, dm, "clean up the junk")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var q slackfake.Sent
	if err := sl.Wait(ctx, func() bool {
		for _, s := range sl.Sent(dm) {
			if s.Method == "chat.postMessage" && len(s.Blocks) > 0 {
				q = s
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no question with buttons; stderr:\n%s", p.stderr)
	}
	forged := slackfake.SignedRequest(interactions, "wrong-secret", time.Now(), []byte("payload=%7B%7D"))
	forged.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged press: HTTP %d", resp.StatusCode)
	}
	if err := sl.Click(alice, dm, q.TS, "conch_approval_once"); err != nil {
		t.Fatal(err)
	}
	if err := sl.Wait(ctx, func() bool {
		for _, m := range sl.Messages(dm, "") {
			if m.Text == "Cleaned up." {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no answer after the press (posts %v); stderr:\n%s", sl.InteractionPosts(), p.stderr)
	}
	if posts := sl.InteractionPosts(); len(posts) != 1 || posts[0] != http.StatusOK {
		t.Fatalf("interaction posts %v", posts)
	}
	if res := lastToolResult(t, llm); !strings.Contains(res, "ran-after-approval") {
		t.Fatalf("the command's result %q", res)
	}
}
