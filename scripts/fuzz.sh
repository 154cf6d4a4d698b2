#!/usr/bin/env bash
# Runs `go test -fuzz` for each "pkg:FuzzName" argument for $FUZZTIME each.
#
# A run that fails with a bare "context deadline exceeded" and writes no
# failing input is Go's own race at the end of a -fuzztime window (its
# coordinator sees the deadline before its workers' context is cancelled:
# golang/go#75804), not a finding: it is run once more. Any other failure,
# and a failing input written, fails at once.
set -u
GO=${GO:-go}
TAGS=${TAGS:-goolm}
FUZZTIME=${FUZZTIME:-10s}
for t in "$@"; do
	pkg=${t%%:*} name=${t#*:}
	for attempt in 1 2; do
		echo "== $name ($pkg, $FUZZTIME)"
		out=$(mktemp)
		"$GO" test -tags "$TAGS" -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"
		status=${PIPESTATUS[0]}
		if [ "$status" -eq 0 ]; then
			rm -f "$out"
			break
		fi
		if [ "$attempt" -eq 1 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out" && ! grep -q 'panic:' "$out"; then
			echo "make fuzz: $name ended with Go's fuzztime deadline race (no failing input); running it again"
			rm -f "$out"
			continue
		fi
		rm -f "$out"
		exit "$status"
	done
done
