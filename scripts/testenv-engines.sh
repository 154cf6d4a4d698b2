#!/bin/sh
# Shows or stops the container engines that internal/testenv/engine starts
# for tests (a private dockerd and a Podman service under /tmp/conch-testenv).
# Tests start them on demand and leave them running so that every package of
# one `go test ./...` shares them; stop them here when done.
#
#   scripts/testenv-engines.sh status
#   scripts/testenv-engines.sh stop
#   scripts/testenv-engines.sh purge   # stop, then delete their data
set -eu

base=/tmp/conch-testenv

pid_of() { # engine -> pid or empty
	case $1 in
	docker) f=$base/docker/dockerd.pid ;;
	podman) f=$base/podman/podman.pid ;;
	esac
	[ -f "$f" ] || return 0
	p=$(cat "$f")
	[ -d "/proc/$p" ] && echo "$p"
}

cmd=${1:-status}
case $cmd in
status)
	for e in docker podman; do
		p=$(pid_of $e)
		if [ -n "$p" ]; then
			echo "$e: running (pid $p, socket $base/$e/$e.sock)"
		else
			echo "$e: not running"
		fi
	done
	;;
stop | purge)
	for e in docker podman; do
		p=$(pid_of $e)
		if [ -n "$p" ]; then
			echo "stopping $e (pid $p)"
			kill "$p"
			i=0
			while [ -d "/proc/$p" ] && [ $i -lt 100 ]; do
				sleep 0.1
				i=$((i + 1))
			done
		fi
	done
	if [ "$cmd" = purge ]; then
		# Podman's overlay mounts must go before the tree can.
		grep " $base/" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" || true; done
		rm -rf "$base"
		echo "removed $base"
	fi
	;;
*)
	echo "usage: $0 status|stop|purge" >&2
	exit 2
	;;
esac
