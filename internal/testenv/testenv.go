// Package testenv starts the real components tests need: the container
// engine, the sandbox image, the Matrix homeserver, the mail server and a
// wire-exact fake LLM server. Subpackages hold each component.
//
// When a component is missing a test skips with the reason, unless
// CONCH_REQUIRE_REAL=1 (set by .ci/run), in which case it fails instead, so CI
// can never go green by skipping.
package testenv

import (
	"os"
	"testing"
)

// RequireReal reports whether missing real components must fail tests.
func RequireReal() bool { return os.Getenv("CONCH_REQUIRE_REAL") == "1" }

// Missing ends the test because a real component is unavailable: a skip
// normally, a failure under CONCH_REQUIRE_REAL=1.
func Missing(tb testing.TB, component, reason string) {
	tb.Helper()
	if RequireReal() {
		tb.Fatalf("%s is required (CONCH_REQUIRE_REAL=1) but unavailable: %s", component, reason)
	}
	tb.Skipf("%s unavailable: %s (set CONCH_REQUIRE_REAL=1 to make this a failure)", component, reason)
}

// Short skips a slow real-component test under -short. It never skips when
// CONCH_REQUIRE_REAL=1.
func Short(tb testing.TB) {
	tb.Helper()
	if testing.Short() && !RequireReal() {
		tb.Skip("slow real-component test skipped in -short mode")
	}
}
