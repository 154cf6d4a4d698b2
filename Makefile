# conch — see README.md. Everything builds without cgo. Matrix end-to-end
# encryption (pure-Go olm) is in every build: third_party/mautrix registers
# goolm without a tag, so the goolm tag below changes nothing and stays for old
# commands; -tags noe2ee is the opt-in build without encryption.
GO        ?= go
TAGS      ?= goolm
# Tags of every build a user runs (build, release, the container image;
# internal/binsize.ReleaseTags and its test keep them equal): grpcnotrace keeps
# gRPC from linking golang.org/x/net/trace, whose html/template would turn off
# the linker's dead-method elimination (docs/decisions/2026-11-26-binary-size.md).
RELEASE_TAGS = grpcnotrace
# Stamped into the binary (conch version); a release sets VERSION.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE      ?= $(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
LDFLAGS   = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
export CGO_ENABLED ?= 0
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Packages with concurrency, run under the race detector (which needs cgo).
RACE_PKGS = ./gateway/... ./agent/... ./sqlite/... ./sandbox/sandboxd/... ./egress/... ./channel/... ./terminal/... ./tool/... ./internal/testenv/fakellm/... ./obs/metrics/... ./schedule/...

.PHONY: build test race vet tidy-check staticcheck check fmt bench chaos fuzz clean build-kubernetes kube-e2e kube-kubelet

build:
	$(GO) build -tags $(TAGS),$(RELEASE_TAGS) -ldflags '$(LDFLAGS)' -o bin/conch ./cmd/conch

# conch with the Kubernetes sandbox backend (client-go; sandbox.backend = "kubernetes").
build-kubernetes:
	$(GO) build -tags $(TAGS),$(RELEASE_TAGS),kubernetes -o bin/conch ./cmd/conch

# The Kubernetes backend against a real kube-apiserver + etcd (built once into
# the test cache, minutes cold) and the test node running pods in dockerd
# (root). Not part of `check`: the cold control-plane build does not fit CI's
# budget. docs/kubernetes.md.
kube-e2e:
	$(GO) run ./internal/testenv/kube/cmd/prebuild
	$(GO) vet -tags $(TAGS),kubernetes ./sandbox/kubernetes/ ./internal/testenv/kube/... ./cmd/conch/
	$(STATICCHECK) -tags $(TAGS),kubernetes ./sandbox/kubernetes/ ./internal/testenv/kube/... ./cmd/conch/
	CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS),kubernetes -timeout 20m -count=1 -run 'TestKubernetes|TestMetricsReader' ./sandbox/kubernetes/
	CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS),kubernetes -timeout 40m -count=1 -run 'TestChatKubernetes' ./cmd/conch/

# The Kubernetes backend's pods under a REAL kubelet (built once into the
# test cache, ~2 min of CPU) with containerd, runc and the CNI plugins from
# apt (containerd, containernetworking-plugins); root. docs/kubernetes.md.
kube-kubelet:
	$(GO) run ./internal/testenv/kube/cmd/prebuild -kubelet
	CONCH_REQUIRE_REAL=1 $(GO) test -tags $(TAGS),kubernetes -timeout 20m -count=1 -run 'TestKubeletNode' ./sandbox/kubernetes/

test:
	$(GO) test -tags $(TAGS) -timeout 25m ./...
	# A build with -tags noe2ee keeps encrypted Matrix messages and says so.
	$(GO) test -tags noe2ee -timeout 5m -run 'TestEncryptedRoomFailsClosed' ./channel/matrix/

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

# Benchmarks, one package at a time (scripts/bench.sh), raw output kept in
# $(BENCH_OUT)/, then the goals' table (internal/benchtable/goals.tsv) written
# into docs/performance.md's "make bench" / "make soak" section.
# BENCH_PROFILE=1 keeps each benchmark's CPU and allocation profiles there;
# BENCH_PKGS="./gateway/" runs only the packages named.
BENCH_OUT ?= bench-out
bench:
	GO='$(GO)' TAGS='$(TAGS)' BENCH_OUT='$(BENCH_OUT)' BENCH_PROFILE='$(BENCH_PROFILE)' BENCH_PKGS='$(BENCH_PKGS)' scripts/bench.sh bench

# The soak (BenchmarkSoak): 10,000 messages over 100 Telegram conversations
# through the real conch up, at least 10 minutes; conch's heap profiles and
# the time series in $(BENCH_OUT)/soak-<date>/.
.PHONY: soak
soak:
	GO='$(GO)' TAGS='$(TAGS)' BENCH_OUT='$(BENCH_OUT)' scripts/bench.sh soak

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
	@GO='$(GO)' TAGS='$(TAGS)' FUZZTIME='$(FUZZTIME)' scripts/fuzz.sh $(FUZZ_TARGETS)

clean:
	rm -rf bin

# Releases (README "Install"): static linux/amd64 and linux/arm64 archives,
# SHA256SUMS, a CycloneDX SBOM per binary (internal/release/sbom, offline,
# from the module list linked in) and the container image of conch itself
# (images/conch, built offline by an image import, with the kubernetes tag).
# Tag first (git tag v0.3.0), then `make release`; `make release-image` alone
# needs a container engine (ENGINE=podman for Podman).
DIST      ?= dist
ENGINE    ?= docker
PLATFORMS  = linux/amd64 linux/arm64
IMAGE     ?= conch:$(VERSION)

.PHONY: release release-bins release-image
release: release-bins release-image

release-bins:
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=conch-$(VERSION)-$$os-$$arch; \
		echo "== $$name"; mkdir -p $(DIST)/$$name; \
		GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags $(RELEASE_TAGS) -ldflags '$(LDFLAGS)' -o $(DIST)/$$name/conch ./cmd/conch; \
		cp README.md $(DIST)/$$name/; \
		$(GO) run ./internal/release/sbom -version $(VERSION) -date $(DATE) $(DIST)/$$name/conch > $(DIST)/$$name.cdx.json; \
		tar -C $(DIST) --owner=0 --group=0 --numeric-owner --mtime='$(DATE)' --sort=name -czf $(DIST)/$$name.tar.gz $$name; \
		rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum *.tar.gz *.cdx.json > SHA256SUMS && cat SHA256SUMS

release-image:
	RELEASE_TAGS=$(RELEASE_TAGS) VERSION=$(VERSION) COMMIT=$(COMMIT) DATE=$(DATE) ENGINE=$(ENGINE) IMAGE=$(IMAGE) DIST=$(DIST) GO=$(GO) images/conch/build.sh
