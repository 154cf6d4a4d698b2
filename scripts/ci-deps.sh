#!/bin/sh
# Installs what the sandbox runtime's real-engine tests need: Docker (dockerd,
# containerd, runc), Podman with conmon and catatonit (its init), debootstrap
# for the offline sandbox image build, xfsprogs for the xfs (project quota) data
# root of the Docker workspace-quota test, and the docker CLI for the benchmark
# baselines, and the mail servers the email channel's tests start from a private
# config (dovecot for IMAP and LMTP, postfix for SMTP). Idempotent: apt runs
# only when something is missing. The system's own mail services are never left
# running: the tests start private instances on random loopback ports. Chromium
# runs the web chat's browser tests (chromedp, headless). python3 is the socket
# transport test's probe that connects from the host as another user.
set -eu

pkgs="docker.io podman conmon catatonit runc containerd debootstrap xfsprogs ca-certificates tmux make git dovecot-imapd dovecot-lmtpd postfix chromium python3"
missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "ci-deps: all installed ($pkgs)"
	exit 0
fi
echo "ci-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# postfix asks how to configure itself; "No configuration" leaves the system
# instance unconfigured (and so not running).
echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
# Keep package scripts from starting the system's dovecot and postfix
# (policy-rc.d 101 = "action forbidden"), unless a policy is already in place.
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	policy=/usr/sbin/policy-rc.d
fi
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
if [ -n "$policy" ]; then
	rm -f "$policy"
fi
# If a service manager started them anyway, stop them: the tests use their own.
for svc in dovecot postfix; do
	if command -v service >/dev/null 2>&1; then
		service "$svc" stop >/dev/null 2>&1 || true
	fi
done
