# conch — see README.md. Everything builds without cgo; the Matrix channel
# needs the goolm tag (pure-Go olm).
GO        ?= go
TAGS      ?= goolm
export CGO_ENABLED ?= 0
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Packages with concurrency, run under the race detector (which needs cgo).
RACE_PKGS = ./gateway/... ./agent/... ./sqlite/... ./sandbox/sandboxd/... ./egress/... ./channel/... ./terminal/... ./tool/... ./internal/testenv/fakellm/... ./obs/metrics/... ./schedule/...

.PHONY: build test race vet tidy-check staticcheck check fmt bench chaos fuzz clean

build:
	$(GO) build -tags $(TAGS) -o bin/conch ./cmd/conch

test:
	$(GO) test -tags $(TAGS) -timeout 25m ./...
	# A build without the goolm tag keeps encrypted Matrix messages and says so.
	$(GO) test -timeout 5m -run 'TestEncryptedRoomFailsClosed' ./channel/matrix/

race:
	CGO_ENABLED=1 $(GO) test -race -short -tags $(TAGS) -timeout 15m $(RACE_PKGS)

# tidy-check fails when go.mod/go.sum differ from what `go mod tidy -e`
# makes of them (a missing or stale requirement, a direct one marked
# indirect). It checks tidiness only, never a fixed list of modules. -e:
# plain tidy fails on test-only dependencies of modernc.org/sqlite.
tidy-check:
	@out=$$($(GO) mod tidy -e -diff 2>&1) || { echo "go.mod/go.sum are not tidy; run: go mod tidy -e"; echo "$$out"; exit 1; }

vet: tidy-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...

staticcheck:
	$(STATICCHECK) -tags $(TAGS) ./...

# check is the full gate: formatting, vet, staticcheck, the import-rule test
# (part of ./...), every test with real components, and the race detector.
check: vet staticcheck test race

# The long chaos run: 120 messages through the real `conch chat` on a private
# dockerd with random SIGKILLs, model faults, a container killed mid-turn and
# the engine restarted twice; 120 messages over Matrix (real `conch up` and
# dendrite) with random SIGKILLs; 40 messages on each of Telegram, Matrix,
# email and the web chat at once (TestChaosAllChannels: one `conch up`, random
# SIGKILLs, model faults, the data dir's disk filled and freed; figures per
# channel, recorded in docs/reliability.md); then the in-sandbox probes on
# both engines (the short versions run with the tests). CONCH_CHAOS_SEED=<n>
# replays one.
chaos:
	CONCH_CHAOS=long CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS) -timeout 60m -count=1 -v -run 'TestChaos' ./cmd/conch/
	CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS) -timeout 20m -count=1 -v -run 'TestHardeningFromInside|TestWorkspaceQuota' ./sandbox/docker/

bench:
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchtime 2s ./gateway/ ./sandbox/... ./terminal/...
	$(GO) test -tags $(TAGS) -run '^$$' -bench BenchmarkWeb -benchtime 200x ./cmd/conch/

# Fuzzing every parser of outside input: one `go test -fuzz` run per target
# (Go fuzzes one target per run), FUZZTIME each. The seed corpora (f.Add and
# testdata/fuzz/) already run with every `go test`; this explores past them,
# and a crash it finds is written to the package's testdata/fuzz/ as the
# regression seed. A Fuzz function missing from the list fails the target.
FUZZTIME ?= 10s
FUZZ_TARGETS = \
	./channel/email:FuzzParseMail ./channel/email:FuzzTrimReply ./channel/email:FuzzReplyHTML \
	./channel/telegram:FuzzUpdate ./channel/telegram:FuzzUTF16Slice ./channel/telegram:FuzzFormat \
	./channel/matrix:FuzzEvent ./channel/matrix:FuzzMention ./channel/matrix:FuzzSplitMarkdown ./channel/matrix:FuzzHTML \
	./channel/web:FuzzChatFrame ./channel/web:FuzzRender ./channel/internal/markdown:FuzzTargets \
	./tool:FuzzSplitCommand ./skill:FuzzParse ./config:FuzzLoad ./mcp:FuzzCleanSchema ./media:FuzzPrepareImage

fuzz:
	@for f in $$(git grep -h -o '^func Fuzz[A-Za-z0-9_]*' -- '*_test.go' | sed 's/^func //'); do \
		case " $(FUZZ_TARGETS) " in *":$$f "*) ;; *) echo "make fuzz: $$f is not in FUZZ_TARGETS"; exit 1;; esac; \
	done
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*}, $(FUZZTIME))"; \
		$(GO) test -tags $(TAGS) -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

clean:
	rm -rf bin
