package tool

import (
	"slices"
	"testing"

	"conch"
)

// TestProgressDeduplicates: the coding tools pass every report on at once
// (the gateway throttles) and drop only one identical to the last.
func TestProgressDeduplicates(t *testing.T) {
	var got []string
	report := progress(conch.ToolEnv{Progress: func(s string) { got = append(got, s) }})
	for _, s := range []string{"a", "a", "b", "a", "a"} {
		report(s)
	}
	want := []string{"coding agent:\na", "coding agent:\nb", "coding agent:\na"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
