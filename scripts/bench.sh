#!/bin/sh
# make bench / make soak: run the benchmarks one package at a time (never two
# at once: they would measure each other), keep the raw output in
# $BENCH_OUT/<section>-<date>.txt (git ignores bench-out/), then write the
# goals' table (internal/benchtable/goals.tsv) into its section of
# docs/performance.md with internal/benchtable.
#
#   scripts/bench.sh bench    every package with a benchmark (BenchmarkSoak apart)
#   scripts/bench.sh soak     BenchmarkSoak (10,000 messages, >= 10 minutes)
#
# BENCH_PROFILE=1 runs each benchmark on its own with -cpuprofile and
# -memprofile into $BENCH_OUT/profiles-<date>/ (with the test binary, for
# go tool pprof). BENCH_PKGS="./gateway/ ./sqlite/" runs only those packages;
# BENCH_DOC names another document to write the table into. GO, TAGS and
# BENCH_OUT come from the Makefile.
set -u
section=${1:?usage: scripts/bench.sh bench|soak}
GO=${GO:-go}
TAGS=${TAGS:-goolm}
out=${BENCH_OUT:-bench-out}
stamp=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
abs=$(cd "$out" && pwd) # go test runs a benchmark in its package's directory
raw="$out/$section-$stamp.txt"
profdir="$abs/profiles-$stamp"
status=0

"$GO" run ./internal/benchtable/cmd/benchtable -stamp > "$raw" || exit 1

# run PKG BENCHTIME ARGS...: one go test run of a package's benchmarks.
run() {
	pkg=$1 benchtime=$2
	shift 2
	echo "== $pkg ($*, -benchtime $benchtime)" >&2
	if [ "${BENCH_PROFILE:-}" = 1 ]; then
		run_profiled "$pkg" "$benchtime" "$@"
		return
	fi
	# pipefail is not POSIX: the exit status goes through a file.
	{ "$GO" test -tags "$TAGS" -run '^$' -benchtime "$benchtime" -timeout 60m "$pkg" "$@" 2>&1; echo $? > "$out/.rc"; } | tee -a "$raw"
	[ "$(cat "$out/.rc")" = 0 ] || status=1
}

# run_profiled: each top-level benchmark the run would select, alone, with
# its CPU and allocation profiles.
run_profiled() {
	pkg=$1 benchtime=$2
	shift 2
	mkdir -p "$profdir"
	name=$(echo "$pkg" | sed 's|^\./||; s|/$||; s|/|-|g')
	for b in $("$GO" test -tags "$TAGS" -run '^$' -list '^Benchmark' "$pkg" "$@" 2>/dev/null | grep '^Benchmark'); do
		{ "$GO" test -tags "$TAGS" -run '^$' -benchtime "$benchtime" -timeout 60m "$pkg" "$@" -bench "^$b\$" \
			-o "$profdir/$name.test" -cpuprofile "$profdir/$name.$b.cpu.pprof" -memprofile "$profdir/$name.$b.mem.pprof" 2>&1
			echo $? > "$out/.rc"; } | tee -a "$raw"
		[ "$(cat "$out/.rc")" = 0 ] || status=1
	done
}

case $section in
bench)
	# Every package with a benchmark, except the Kubernetes backend's (build
	# tag kubernetes: make kube-e2e) and the ones run below with their own
	# counts. -benchtime 1s suits both kinds of benchmark here: b.N loops run
	# for about a second, those taking their own samples (sandboxdtest.Measure,
	# >= 200 each) run once or a few times. cmd/conch's, each a conch up,
	# run once (1x).
	pkgs=${BENCH_PKGS:-$(git grep -l '^func Benchmark' -- '*_test.go' | xargs -n1 dirname | sort -u | grep -v '^sandbox/kubernetes$' | sed 's|^|./|; s|$|/|')}
	for p in $pkgs; do
		case $p in
		./cmd/conch/) # conch up's benchmarks take their own samples (1x); the web chat's loop b.N
			run "$p" 1x -bench . -skip '^(BenchmarkSoak|BenchmarkWeb.*)$'
			run "$p" 1s -bench '^BenchmarkWeb' ;;
		./terminal/) run "$p" 10x -bench . ;;
		./terminal/coder/) run "$p" 10x -bench . ;;
		./sandbox/docker/) run "$p" 1s -bench . -skip '^BenchmarkAgentImage$' ;; # the image build: its own command (AGENTS.md)
		*) run "$p" 1s -bench . ;;
		esac
	done
	;;
soak)
	BENCH_PROFILE= # the soak keeps conch's heap profiles itself (-soak.out)
	run ./cmd/conch/ 1x -v -bench '^BenchmarkSoak$' -args -soak.out "$abs/soak-$stamp"
	;;
*)
	echo "scripts/bench.sh: unknown section $section (bench or soak)" >&2
	exit 2
	;;
esac
rm -f "$out/.rc"

echo "conch-bench: end $(date -u '+%Y-%m-%d %H:%M UTC')" >> "$raw"
"$GO" run ./internal/benchtable/cmd/benchtable -section "$section" -doc "${BENCH_DOC:-docs/performance.md}" "$raw" || status=1
echo "raw output: $raw" >&2
exit $status
