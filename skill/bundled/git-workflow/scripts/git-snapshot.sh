#!/usr/bin/env bash
# git-snapshot.sh — small, safe git steps for the git-workflow skill.
#   git-snapshot.sh init <dir>              repository with main, local identity, baseline commit
#   git-snapshot.sh commit <dir> <message>  stage everything and commit (refuses an empty commit)
#   git-snapshot.sh summary <dir>           commits of this branch against main, and the diff stat
set -euo pipefail
usage() { echo "usage: git-snapshot.sh init <dir> | commit <dir> <message> | summary <dir>" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd="$1" dir="$2"
identity() {
	git -C "$dir" config user.name >/dev/null || git -C "$dir" config user.name "conch"
	git -C "$dir" config user.email >/dev/null || git -C "$dir" config user.email "conch@localhost"
}
case "$cmd" in
init)
	mkdir -p "$dir"
	if git -C "$dir" rev-parse --git-dir >/dev/null 2>&1; then
		echo "already a repository: $(git -C "$dir" rev-parse --show-toplevel)"
		exit 0
	fi
	git -C "$dir" init -q -b main
	identity
	git -C "$dir" add -A
	git -C "$dir" commit -q --allow-empty -m "Baseline"
	echo "initialised $dir on main: $(git -C "$dir" log --oneline -1)"
	;;
commit)
	[ $# -ge 3 ] && [ -n "$3" ] || usage
	identity
	git -C "$dir" add -A
	if git -C "$dir" diff --cached --quiet; then
		echo "nothing to commit in $dir" >&2
		exit 1
	fi
	git -C "$dir" commit -q -m "$3"
	git -C "$dir" log --oneline -1
	git -C "$dir" show --stat --format= HEAD
	;;
summary)
	branch=$(git -C "$dir" rev-parse --abbrev-ref HEAD)
	base=main
	git -C "$dir" rev-parse --verify -q "$base" >/dev/null || base=$(git -C "$dir" rev-list --max-parents=0 HEAD | tail -n 1)
	echo "branch $branch against $base:"
	git -C "$dir" log --oneline "$base..HEAD"
	git -C "$dir" diff --stat "$base...HEAD"
	git -C "$dir" status --short
	;;
*) usage ;;
esac
