#!/usr/bin/env bash
# Build the vical image with Docker or Podman, then run an evaluation inside it.
#
#   docker/build.sh                 # engine: docker if its daemon answers, else podman
#   ENGINE=podman docker/build.sh
#   BASE_IMAGE=python:3.11-slim-bookworm@sha256:... docker/build.sh
#
# With Podman and no BASE_IMAGE, the base is made locally (no registry needed):
# debootstrap a minimal Debian bookworm with Python 3.11 and import it. That base
# image is the only difference from a Docker build of the same Dockerfile.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${ENGINE:-}" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ENGINE=docker
  elif command -v podman >/dev/null 2>&1; then ENGINE=podman
  else echo "error: neither a running docker engine nor podman was found" >&2; exit 2; fi
fi
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' vical/__init__.py)
TAG=${TAG:-localhost/vical:$VERSION}
BUILD_ARGS=(--build-arg "VICAL_IMAGE_VERSION=$VERSION")

if [ "$ENGINE" = podman ]; then
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}
  if [ -z "${BASE_IMAGE:-}" ]; then
    BASE_IMAGE=localhost/vical-base:bookworm
    if ! podman image exists "$BASE_IMAGE"; then
      command -v debootstrap >/dev/null || { echo "error: apt-get install debootstrap" >&2; exit 2; }
      ROOT=$(mktemp -d /tmp/vical-rootfs.XXXXXX)
      echo "making $BASE_IMAGE with debootstrap in $ROOT"
      debootstrap --variant=minbase \
        --include=python3.11,python3.11-venv,python3-pip,ca-certificates \
        bookworm "$ROOT" http://deb.debian.org/debian >/dev/null
      ln -sf /usr/bin/python3.11 "$ROOT/usr/local/bin/python3.11" 2>/dev/null || true
      rm -rf "$ROOT/var/cache/apt/archives"/*.deb "$ROOT/var/lib/apt/lists"/*
      tar -C "$ROOT" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE"
      rm -rf "$ROOT"
    fi
  fi
fi
if [ -n "${BASE_IMAGE:-}" ]; then BUILD_ARGS+=(--build-arg "BASE_IMAGE=$BASE_IMAGE"); fi

# Behind a TLS-intercepting proxy pip needs the host's CA bundle (used for pip only):
# VICAL_BUILD_CA, else pip's own setting, else the host's system bundle.
CA=${VICAL_BUILD_CA:-${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}}
if [ -z "$CA" ] && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  CA=/etc/ssl/certs/ca-certificates.crt
fi
rm -f docker/ca/extra-ca.crt
if [ -n "$CA" ] && [ -s "$CA" ]; then cp "$CA" docker/ca/extra-ca.crt; fi
trap 'rm -f docker/ca/extra-ca.crt' EXIT

echo "building $TAG with $ENGINE"
$ENGINE build --network host "${BUILD_ARGS[@]}" -t "$TAG" -f docker/Dockerfile .

if [ "${SKIP_SMOKE:-0}" != 1 ]; then
  OUT=$(mktemp -d /tmp/vical-image-out.XXXXXX)
  chmod 777 "$OUT"
  echo "smoke evaluation inside the image -> $OUT"
  $ENGINE run --rm -v "$OUT:/out" "$TAG" eval --tasks "${SMOKE_TASKS:-taxi/state1,cartpole/seed41}" \
    --out /out/smoke --workers 1 --no-frames
  test -f "$OUT/smoke/manifest.json"
  ls "$OUT/smoke/episodes"
fi
echo "image: $TAG"
