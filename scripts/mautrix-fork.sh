#!/usr/bin/env bash
# Lays out third_party/mautrix: the packages of maunium.net/go/mautrix that
# conch builds with, copied from the Go module cache at the version go.mod
# requires, with one change: the pure-Go olm (goolm) is registered without a
# build tag and the cgo libolm registration is gone, so a plain
# `go build ./cmd/conch` (CGO_ENABLED=0 or not) has Matrix end-to-end
# encryption. Upstream selects goolm only under -tags goolm
# (crypto/registergoolm.go, crypto/registerlibolm.go); see
# docs/decisions/2026-11-26-pure-go-crypto-by-default.md.
#
# Run it after changing mautrix's version in go.mod's require line:
#   scripts/mautrix-fork.sh && go mod tidy -e
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(awk '$1 == "maunium.net/go/mautrix" && $2 ~ /^v/ { print $2; exit }' go.mod)
[ -n "$version" ] || { echo "mautrix-fork: no maunium.net/go/mautrix requirement in go.mod" >&2; exit 1; }
src=$(GOFLAGS=-mod=mod go mod download -json "maunium.net/go/mautrix@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "mautrix-fork: could not download maunium.net/go/mautrix@$version" >&2; exit 1; }
dst=third_party/mautrix
# The packages conch and its tests import (the list is kept in the fork, so a
# new import is one line added there and a re-run).
pkgs=$(grep -v '^#' "$dst/PACKAGES" 2>/dev/null || true)
[ -n "$pkgs" ] || { echo "mautrix-fork: $dst/PACKAGES lists no package" >&2; exit 1; }
keep=$(mktemp); cp "$dst/PACKAGES" "$keep"
rm -rf "$dst"; mkdir -p "$dst"
cp "$keep" "$dst/PACKAGES"; rm -f "$keep"
cp "$src/go.mod" "$src/LICENSE" "$dst/"
for p in $pkgs; do
	rel=${p#maunium.net/go/mautrix}; rel=${rel#/}
	mkdir -p "$dst/$rel"
	for f in "$src/${rel:-.}"/*; do
		[ -f "$f" ] || continue
		case "$f" in *_test.go|*.md|*/go.sum) continue;; esac
		cp "$f" "$dst/$rel/"
	done
	# embedded files (SQL upgrades) travel with their package
	for d in "$src/${rel:-.}"/*/; do
		[ -d "$d" ] || continue
		if ! ls "$d"*.go >/dev/null 2>&1; then cp -r "$d" "$dst/$rel/"; fi
	done
done
chmod -R u+w "$dst"
# The one change: goolm always, libolm (cgo) never.
rm -f "$dst/crypto/registerlibolm.go"
sed -i '/^\/\/go:build goolm$/{N;d}' "$dst/crypto/registergoolm.go"
cat > "$dst/README.md" <<MD
# third_party/mautrix

maunium.net/go/mautrix $version (MPL-2.0, LICENSE), only the packages listed in
PACKAGES, made by \`scripts/mautrix-fork.sh\`; go.mod replaces the module with it.

Changed from upstream: \`crypto/registergoolm.go\` has no build constraint and
\`crypto/registerlibolm.go\` is removed, so the pure-Go olm is always the one
registered (upstream needs \`-tags goolm\`, and without it imports the cgo
libolm). Nothing else differs; do not edit these files by hand — change
go.mod's version and re-run the script.
MD
echo "third_party/mautrix: maunium.net/go/mautrix $version, $(echo "$pkgs" | wc -w) packages"
