// Package browser starts a real headless Chromium for tests and drives it
// with chromedp. Tests skip (or fail under CONCH_REQUIRE_REAL=1) when no
// Chromium is installed (Debian: apt-get install chromium).
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"conch/internal/testenv"
)

// Browser is one headless Chromium process.
type Browser struct {
	ctx context.Context
	tb  testing.TB
}

// Path finds Chromium, "" when none is installed.
func Path() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Start starts headless Chromium with a fresh profile; it is stopped when
// the test ends.
func Start(tb testing.TB) *Browser {
	tb.Helper()
	path := Path()
	if path == "" {
		testenv.Missing(tb, "chromium", "no chromium, chromium-browser or google-chrome in PATH (Debian: apt-get install chromium)")
	}
	// Not tb.TempDir: Chromium may still write its profile while the test's
	// cleanup removes it; this one is removed after the browser is gone.
	profile, err := os.MkdirTemp("", "conch-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		// A fake microphone (a beeping tone) that pages get without asking:
		// the web chat's record button is tested with it.
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(tb.Logf))
	// Start the browser now, so a broken install fails here and clearly.
	// (The first Run must get the tab's own context: the browser lives as
	// long as the context of that call.)
	timer := time.AfterFunc(60*time.Second, cancel)
	err = chromedp.Run(ctx)
	timer.Stop()
	if err != nil {
		cancel()
		acancel()
		testenv.Missing(tb, "chromium", "it does not start: "+err.Error())
	}
	tb.Cleanup(func() {
		cancel()
		acancel() // waits for the browser process to end
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return &Browser{ctx: ctx, tb: tb}
}

// Tab opens a new tab (its own page, sharing the browser's cookies); it
// closes when the test ends.
func (b *Browser) Tab() context.Context {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.tb.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil { // the tab lives as long as ctx
		b.tb.Fatalf("browser: new tab: %v", err)
	}
	return ctx
}

// Context is the first tab's context.
func (b *Browser) Context() context.Context { return b.ctx }

// Run runs actions in ctx with a deadline, failing the test with what was
// being done.
func Run(tb testing.TB, ctx context.Context, what string, actions ...chromedp.Action) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		Screenshot(tb, ctx, "failed-"+what)
		var text string
		tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = chromedp.Run(tctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &text))
		tcancel()
		tb.Logf("page text when %s failed:\n%s", what, text)
		tb.Fatalf("browser: %s: %v", what, err)
	}
}

// Screenshot saves a PNG of the page as a test artifact (go test
// -artifacts keeps them under the output directory) and returns its path.
func Screenshot(tb testing.TB, ctx context.Context, name string) string {
	tb.Helper()
	var png []byte
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if err := chromedp.Run(sctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		tb.Logf("screenshot %s: %v", name, err)
		return ""
	}
	dir := ArtifactDir(tb)
	p := filepath.Join(dir, safe(name)+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		tb.Logf("screenshot %s: %v", name, err)
		return ""
	}
	tb.Logf("screenshot: %s", p)
	return p
}

// ArtifactDir is the test's artifact directory (testing.T.ArtifactDir).
func ArtifactDir(tb testing.TB) string {
	if a, ok := tb.(interface{ ArtifactDir() string }); ok {
		return a.ArtifactDir()
	}
	return tb.TempDir()
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}
