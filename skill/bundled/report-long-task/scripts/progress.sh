#!/usr/bin/env bash
# progress.sh — run steps of a long task with a progress log, and report it.
#   progress.sh run <task> <step> -- <command> [args...]   run one step, logging it
#   progress.sh note <task> <text...>                       add a note to the log
#   progress.sh status <task>                               one line per step, then the log's tail
set -u
dir="${PROGRESS_DIR:-/workspace/.progress}"
usage() { echo "usage: progress.sh run <task> <step> -- <command> [args...] | note <task> <text> | status <task>" >&2; exit 2; }
valid() { [[ "$1" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "progress.sh: invalid name '$1' (letters, digits, . _ -)" >&2; exit 2; }; }
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
[ $# -ge 2 ] || usage
cmd="$1" task="$2"; shift 2
valid "$task"
mkdir -p "$dir"
log="$dir/$task.log" state="$dir/$task.steps"
case "$cmd" in
run)
	[ $# -ge 3 ] && [ "$2" = "--" ] || usage
	step="$1"; shift 2
	valid "$step"
	start=$(date +%s)
	echo "$(now) step $step started: $*" >>"$log"
	echo "$step running $start" >>"$state"
	"$@" 2>&1 | tee -a "$log"
	rc=${PIPESTATUS[0]}
	secs=$(( $(date +%s) - start ))
	echo "$(now) step $step finished exit=$rc after ${secs}s" >>"$log"
	echo "$step done $rc $secs" >>"$state"
	exit "$rc"
	;;
note)
	[ $# -ge 1 ] || usage
	echo "$(now) note: $*" >>"$log"
	;;
status)
	[ -f "$state" ] || { echo "task $task: no steps yet"; exit 0; }
	declare -A st
	order=()
	while read -r step what a b; do
		[ -n "${st[$step]+x}" ] || order+=("$step")
		if [ "$what" = running ]; then st[$step]="running since $(date -u -d "@$a" +%H:%M:%SZ 2>/dev/null || echo "$a")"
		else st[$step]="done exit=$a after ${b}s"; fi
	done <"$state"
	for s in "${order[@]}"; do echo "$s: ${st[$s]}"; done
	echo "--- last lines of $log"
	tail -n 5 "$log"
	;;
*) usage ;;
esac
