#!/bin/sh
# Installs what the sandbox runtime's real-engine tests need: Docker (dockerd,
# containerd, runc), Podman with conmon and catatonit (its init), debootstrap
# for the offline sandbox image build, the docker CLI for the benchmark
# baselines, and Chromium for the web chat's browser tests (chromedp).
# Idempotent: apt runs only when something is missing.
set -eu

pkgs="docker.io podman conmon catatonit runc containerd debootstrap ca-certificates tmux make git chromium"
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
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
