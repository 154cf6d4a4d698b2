# conch — see README.md. Everything builds without cgo; the Matrix channel
# needs the goolm tag (pure-Go olm).
GO        ?= go
TAGS      ?= goolm
export CGO_ENABLED ?= 0
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Packages with concurrency, run under the race detector (which needs cgo).
RACE_PKGS = ./gateway/... ./agent/... ./sqlite/... ./sandbox/sandboxd/... ./egress/... ./channel/... ./terminal/... ./tool/... ./internal/testenv/fakellm/... ./obs/metrics/...

.PHONY: build test race vet tidy-check staticcheck check fmt bench chaos clean

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
# dendrite) with random SIGKILLs; then the in-sandbox probes on both engines
# (the short versions run with the tests). CONCH_CHAOS_SEED=<n> replays one.
chaos:
	CONCH_CHAOS=long CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS) -timeout 60m -count=1 -v -run 'TestChaos' ./cmd/conch/
	CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS) -timeout 20m -count=1 -v -run 'TestHardeningFromInside|TestWorkspaceQuota' ./sandbox/docker/

bench:
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchtime 2s ./gateway/ ./sandbox/... ./terminal/...
	$(GO) test -tags $(TAGS) -run '^$$' -bench BenchmarkWeb -benchtime 200x ./cmd/conch/

clean:
	rm -rf bin
