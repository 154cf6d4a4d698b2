package sqlite

import (
	"context"
	"strings"
	"testing"
)

// Every statement the Store runs finds its rows through an index: no full
// scan and no sort, whatever the tables grow to. (Conversations lists all
// keys, so it scans, in index order.)
func TestQueryPlansUseIndexes(t *testing.T) {
	d, err := Open(context.Background(), MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var w writeStmts
	var r readStmts
	for _, s := range append(w.specs(), r.specs()...) {
		args := make([]any, strings.Count(s.query, "?"))
		for i := range args {
			args[i] = "x"
		}
		rows, err := d.w.Query("EXPLAIN QUERY PLAN "+s.query, args...)
		if err != nil {
			t.Fatalf("explain %q: %v", s.query, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notUsed int
			var detail string
			if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, step := range plan {
			fullScan := strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, " USING ")
			if (fullScan && s.query != sqlConversations) || strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("query %q\nhas plan %q", s.query, plan)
			}
		}
	}
}
