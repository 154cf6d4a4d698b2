#!/bin/sh
# Turns a Debian bookworm root file system into the conch sandbox image.
# Runs as root inside that file system: as a RUN step of the Containerfile and,
# for the offline build, through chroot after debootstrap. Keep it POSIX sh.
set -eu

# The sandbox user: uid/gid 1000, home at /workspace (the persistent volume;
# the root file system is read-only at run time).
if ! getent group 1000 >/dev/null; then
	groupadd --gid 1000 conch
fi
if ! getent passwd 1000 >/dev/null; then
	useradd --uid 1000 --gid 1000 --home-dir /workspace --no-create-home --shell /bin/bash conch
fi

# Mount points: the workspace volume and the read-only bind of the conch binary.
mkdir -p /workspace /opt/conch
chown 1000:1000 /workspace
chmod 0755 /workspace /opt/conch

# Keep the image small: package caches and documentation are not needed.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
	/usr/share/doc/* /usr/share/man/* /usr/share/info/* /var/log/*.log /var/log/apt/*
