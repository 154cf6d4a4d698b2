#!/usr/bin/env bash
# Lays out third_party/go-cmp: github.com/google/go-cmp at the version go.mod
# requires, copied from the Go module cache (no tests), with one change:
# cmp/internal/value.appendTypeName no longer enumerates an unnamed interface
# type's methods with reflect.Type.Method(i) but prints reflect's own
# t.String(). A reachable call of Method with a non-constant index turns off
# the linker's dead-method elimination for the whole program (every exported
# method of every reachable type is kept), and go-cmp is reachable in conch's
# binary only through google.golang.org/genai's replay test client, which
# genai ships as a non-test file. The change alone (with grpcnotrace) is worth
# ~24 MB of the stripped release binary; docs/decisions/2026-11-26-binary-size.md.
# The only difference it makes is how go-cmp spells an anonymous interface
# type in a diff report.
#
# Run it after changing go-cmp's version in go.mod's require line:
#   scripts/go-cmp-fork.sh && go mod tidy -e
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(awk '$1 == "github.com/google/go-cmp" && $2 ~ /^v/ { print $2; exit }' go.mod)
[ -n "$version" ] || { echo "go-cmp-fork: no github.com/google/go-cmp requirement in go.mod" >&2; exit 1; }
src=$(GOFLAGS=-mod=mod go mod download -json "github.com/google/go-cmp@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "go-cmp-fork: could not download github.com/google/go-cmp@$version" >&2; exit 1; }
dst=third_party/go-cmp
rm -rf "$dst"; mkdir -p "$dst"
cp "$src/go.mod" "$src/LICENSE" "$dst/"
(cd "$src" && find . -name '*.go' ! -name '*_test.go' ! -path './cmp/internal/teststructs/*' ! -path './cmp/internal/testprotos/*') |
	while read -r f; do mkdir -p "$dst/$(dirname "$f")"; cp "$src/$f" "$dst/$f"; done
chmod -R u+w "$dst"
# The one change: the reflect.Interface case of appendTypeName.
name="$dst/cmp/internal/value/name.go"
start=$(grep -n '^	case reflect.Interface:$' "$name" | cut -d: -f1)
end=$(awk -v s="$start" 'NR > s && /^	default:$/ { print NR; exit }' "$name")
[ -n "$start" ] && [ -n "$end" ] || { echo "go-cmp-fork: appendTypeName's interface case not found in $name" >&2; exit 1; }
{
	head -n "$start" "$name"
	cat <<'GO'
		// conch: reflect.Type.Method(i) here would turn off the linker's
		// dead-method elimination in every binary linking go-cmp
		// (scripts/go-cmp-fork.sh); reflect spells the type instead.
		b = append(b, t.String()...)
GO
	tail -n "+$end" "$name"
} > "$name.new"
mv "$name.new" "$name"
gofmt -l "$dst" | grep . && { echo "go-cmp-fork: gofmt" >&2; exit 1; }
cat > "$dst/README.md" <<MD
# third_party/go-cmp

github.com/google/go-cmp $version (BSD-3-Clause, LICENSE), without its tests,
made by \`scripts/go-cmp-fork.sh\`; go.mod replaces the module with it.

Changed from upstream: \`cmp/internal/value/name.go\` spells an unnamed
interface type with reflect's \`Type.String\` instead of listing its methods
with \`Type.Method(i)\`. A reachable \`Method\` call with a variable index makes
the linker keep every exported method of every reachable type; go-cmp reaches
conch's binary through google.golang.org/genai's replay client, so upstream
go-cmp costs conch's release binary ~24 MB. Nothing else differs; do not edit
these files by hand — change go.mod's version and re-run the script.
MD
echo "third_party/go-cmp: github.com/google/go-cmp $version"
