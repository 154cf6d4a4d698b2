package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/schedule"
	"conch/sqlite"
)

// TestSchedulesCommands drives `conch schedules list | cancel` as a process
// over a store holding a wake and a watch.
func TestSchedulesCommands(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	key := conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!room:example.org"}
	seedConversation(t, data, key)
	db, err := sqlite.Open(context.Background(), filepath.Join(data, "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, e := range []schedule.Entry{
		{ID: "s-hourly", Key: key, Kind: schedule.KindCron, Spec: "@hourly", Message: "check the build", Next: now.Add(time.Hour), CreatedAt: now},
		{ID: "w-tests", Key: key, Kind: schedule.KindWatch, Spec: schedule.WatchSpec{On: schedule.WatchExit, Terminal: 1}.Encode(), Message: "report", CreatedAt: now},
	} {
		if err := db.AddSchedule(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	env := append(os.Environ(), "CONCH_TEST_AS_MAIN=1", "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "CONCH_DATA_DIR="+data)

	out, errOut, code := conchRun(t, env, "schedules list")
	if code != 0 || !strings.Contains(out, "s-hourly") || !strings.Contains(out, `cron "@hourly"`) ||
		!strings.Contains(out, "w-tests") || !strings.Contains(out, "terminal 1 exits") || !strings.Contains(out, key.String()) {
		t.Fatalf("list: code %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := conchRun(t, env, "schedules cancel s-hourly"); code != 0 || !strings.Contains(out, "cancelled s-hourly") {
		t.Fatalf("cancel: code %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := conchRun(t, env, "schedules cancel s-hourly"); code == 0 || !strings.Contains(errOut, "no scheduled wake or watch") {
		t.Fatalf("second cancel: code %d, stderr %s", code, errOut)
	}
	if out, _, _ := conchRun(t, env, "schedules list --conversation cli:nobody"); !strings.Contains(out, "no scheduled wakes or watches") {
		t.Errorf("list of another conversation: %s", out)
	}
	if out, _, _ := conchRun(t, env, "schedules list"); strings.Contains(out, "s-hourly") || !strings.Contains(out, "w-tests") {
		t.Errorf("after cancel: %s", out)
	}
}
