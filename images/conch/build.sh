#!/usr/bin/env bash
# Builds the container image of conch itself, offline: no registry and no
# base image. The root file system is the static conch binary (built with the
# kubernetes tag), the host's CA bundle, a passwd/group naming uid 10001 and
# an empty /tmp; it is imported into the engine with `import --change`, as
# `conch sandbox image build` imports the sandbox's root file system. The
# image is also saved to $DIST/conch-image-$VERSION-linux-$ARCH.tar for
# `docker load`. Run through `make release-image`.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${VERSION:?}" "${COMMIT:?}" "${DATE:?}" "${ENGINE:=docker}" "${IMAGE:=conch:$VERSION}" "${DIST:=dist}" "${GO:=go}"
arch=$("$GO" env GOARCH)
ca=/etc/ssl/certs/ca-certificates.crt
[ -r "$ca" ] || { echo "images/conch: no CA bundle at $ca (apt-get install ca-certificates)" >&2; exit 1; }
command -v "$ENGINE" >/dev/null || { echo "images/conch: no $ENGINE on PATH (ENGINE=podman for Podman)" >&2; exit 1; }

root=$(mktemp -d); trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/data"
chmod 1777 "$root/tmp"
CGO_ENABLED=0 "$GO" build -trimpath -tags "kubernetes,${RELEASE_TAGS:-grpcnotrace}" \
	-ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.date=$DATE" \
	-o "$root/usr/local/bin/conch" ./cmd/conch
cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nconch:x:10001:10001:conch:/data:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nconch:x:10001:\n' > "$root/etc/group"
chown -R 10001:10001 "$root/data" 2>/dev/null || true

mkdir -p "$DIST"
tar -C "$root" --numeric-owner --mtime="$DATE" --sort=name -cf "$DIST/conch-rootfs-$arch.tar" .
# The engine socket's group differs between hosts: compose.yaml sets the
# user (group_add) rather than the image.
"$ENGINE" import \
	--change 'ENV CONCH_DATA_DIR=/data SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/data' \
	--change 'WORKDIR /data' \
	--change 'ENTRYPOINT ["/usr/local/bin/conch"]' \
	--change 'CMD ["up"]' \
	--change 'EXPOSE 8080' \
	--change "LABEL org.opencontainers.image.title=conch org.opencontainers.image.version=$VERSION org.opencontainers.image.revision=$COMMIT org.opencontainers.image.created=$DATE" \
	"$DIST/conch-rootfs-$arch.tar" "$IMAGE"
rm -f "$DIST/conch-rootfs-$arch.tar"
"$ENGINE" save -o "$DIST/conch-image-$VERSION-linux-$arch.tar" "$IMAGE"
(cd "$DIST" && sha256sum "conch-image-$VERSION-linux-$arch.tar" >> SHA256SUMS)
"$ENGINE" run --rm "$IMAGE" version
echo "image $IMAGE (saved as $DIST/conch-image-$VERSION-linux-$arch.tar)"
