package terminal

import (
	"fmt"
	"path"
	"strings"
)

// tmuxConf is read when conch starts the sandbox's tmux server.
const tmuxConf = `# conch: terminals of this sandbox
set -g remain-on-exit on
# No "Pane is dead (status …)" line on a dead pane's last row: conch reports
# the exit itself, and the line kept every blank row above it in the final
# observation.
set -g remain-on-exit-format ""
set -g history-limit 50000
set -g status off
set -g automatic-rename on
set -g exit-empty off
set -g escape-time 0
`

// bashRC is the rcfile of shell TTYs. It loads the user's own setup, then
// makes bash report, invisibly, when a command starts (PS0) and when the
// prompt is back with the exit status and working directory (end of PS1),
// and its own exit (EXIT trap). The markers are OSC sequences tmux does not
// render, so the screen the model reads never shows them.
const bashRC = `# conch: shell TTY setup (generated; edits are overwritten)
[ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
[ -r "$HOME/.bashrc" ] && . "$HOME/.bashrc"
__conch_nonce=${CONCH_NONCE-}
unset CONCH_NONCE
# The pane's terminal, for the turn-end hook of a CLI started here: it
# writes its marker there without asking tmux (a fork and a round trip).
CONCH_PANE_TTY=$(tty 2>/dev/null) && export CONCH_PANE_TTY || unset CONCH_PANE_TTY
__conch_status=0
__conch_pc() { __conch_status=$?; return $__conch_status; }
PROMPT_COMMAND="__conch_pc${PROMPT_COMMAND:+; $PROMPT_COMMAND}"
PS1="${PS1:-\\$ }"'\[\e]7770;conch;${__conch_nonce};done;${__conch_status};${PWD}\a\]'
PS0=$'\e]7770;conch;'"${__conch_nonce}"$';start\a'"${PS0-}"
__conch_exit() { printf '\033]7770;conch;%s;exit;%d\007' "$__conch_nonce" "$?"; }
trap __conch_exit EXIT
`

// programScript runs a TTY's command ($CONCH_TTY_CMD) with job control, so
// the program is the pane's foreground process, and reports its exit.
const programScript = `set -m
__conch_nonce=$CONCH_NONCE
__conch_cmd=$CONCH_TTY_CMD
unset CONCH_NONCE CONCH_TTY_CMD
eval "$__conch_cmd"
__conch_s=$?
printf '\033]7770;conch;%s;exit;%d\007' "$__conch_nonce" "$__conch_s"
exit $__conch_s`

// turnEndScript is the turn-end hook the coding-agent CLIs run: it keeps
// the hook's payload (the CLI's final message is in it: see AnswerFile),
// appends to a marker file and tells conch at once by printing a marker on
// the agent's pane: its terminal as conch's shell found it when it started
// ($CONCH_PANE_TTY, which the CLI inherits), else as tmux names the pane
// ($TMUX_PANE; a fork and a round trip to the tmux server, ~10-50 ms on a
// loaded machine, which is why it is only the fallback).
func turnEndScript(runDir string) string {
	return fmt.Sprintf(`#!/bin/sh
# conch: turn-end hook of a coding-agent CLI (generated)
# Arguments: the CLI's name, the terminal's nonce, and the event: "turn"
# (a turn ended; the default) or "ready" (the CLI's session started). A
# turn's payload (JSON) is a third argument other than these (Codex's
# notify) or standard input (Claude Code's Stop, Gemini CLI's AfterAgent).
run=%s
name="${1:-agent}"
nonce="${2:-}"
event="${3:-turn}"
payload=
case "$event" in
ready | turn) ;;
*) payload=$event; event=turn ;;
esac
if [ "$event" = turn ]; then
	out="$run/answer-$name.json"
	if [ -n "$payload" ]; then
		printf '%%s' "$payload" > "$out.tmp"
	elif [ ! -t 0 ]; then
		timeout 5 cat > "$out.tmp"
	fi
	if [ -s "$out.tmp" ]; then mv -f "$out.tmp" "$out"; else rm -f "$out.tmp"; fi
fi 2>/dev/null
date +%%s.%%N >> "$run/$event-$name" 2>/dev/null
tty=${CONCH_PANE_TTY:-}
if { [ -z "$tty" ] || [ ! -w "$tty" ]; } && [ -n "$TMUX_PANE" ]; then
	tty=$(tmux display-message -p -t "$TMUX_PANE" '#{pane_tty}' 2>/dev/null)
fi
[ -n "$tty" ] && printf '\033]7770;conch;%%s;%%s;%%s\007' "$nonce" "$event" "$name" 2>/dev/null >"$tty"
# Hook protocols that read stdout want JSON: an empty object changes nothing.
printf '{}\n'
exit 0
`, shellQuote(runDir))
}

// AnswerFile is where the turn-end hook of the CLI called name keeps the
// payload of the last turn's hook, written before the turn's marker: a
// JSON object that holds the CLI's final message (coder.Profile.AnswerKey
// names its field).
func AnswerFile(runDir, name string) string {
	return path.Join(runDir, "answer-"+name+".json")
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
