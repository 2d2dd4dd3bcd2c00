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
# No package mirror or registry is named here: debootstrap takes the host's own apt
# configuration (its Debian mirror for bookworm), else its built-in default; image
# names are resolved by the engine's own registry settings.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${ENGINE:-}" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ENGINE=docker
  elif command -v podman >/dev/null 2>&1; then ENGINE=podman
  else echo "error: neither a running docker engine nor podman was found" >&2; exit 2; fi
fi
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' vical/__init__.py)
TAG=${TAG:-localhost/vical:$VERSION}

# What the labels say: the source revision (with -dirty for uncommitted changes), where
# it comes from, and the task-data digest (sha256 over every task file's name and bytes,
# as vical.spec.tasks_digest computes it; the build checks the two agree).
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$REVISION" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  REVISION="$REVISION-dirty"
fi
SOURCE_URL=${SOURCE_URL:-$(git config --get remote.origin.url 2>/dev/null || true)}
# the task-data digest of vical.spec.tasks_digest: the simulator version, then every task file
TASKS_DIGEST=$(cd vical/tasks && {
  printf 'simulator %s\0' "$(sed -n 's/^SIMULATOR_VERSION = \([0-9][0-9]*\)$/\1/p' ../spec.py)"
  for f in $(LC_ALL=C ls -- *.yaml); do printf '%s\0' "$f"; cat -- "$f"; printf '\0'; done
  } | sha256sum | cut -d' ' -f1)
BUILD_ARGS=(--build-arg "VICAL_IMAGE_VERSION=$VERSION" --build-arg "VCS_REF=$REVISION"
  --build-arg "SOURCE_URL=$SOURCE_URL" --build-arg "TASKS_DIGEST=$TASKS_DIGEST")

# The host's Debian mirror for bookworm main, from its apt configuration (deb822
# .sources files or one-line sources.list); empty when it has none.
host_debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      /(^|\n)Types:[^\n]*deb([ \t]|\n|$)/ && /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t]|\n|$)/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); print u[2]; exit }
      }' "$f"
  done | head -n 1
  if [ -r /etc/apt/sources.list ]; then
    awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      if ($(i + 1) == "bookworm") { print $i; exit } }' /etc/apt/sources.list
  fi
}

if [ "$ENGINE" = podman ]; then
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}
  if [ -z "${BASE_IMAGE:-}" ]; then
    BASE_IMAGE=localhost/vical-base:bookworm
    if ! podman image exists "$BASE_IMAGE"; then
      command -v debootstrap >/dev/null || { echo "error: apt-get install debootstrap" >&2; exit 2; }
      ROOT=$(mktemp -d /tmp/vical-rootfs.XXXXXX)
      MIRROR=$(host_debian_mirror | head -n 1)
      echo "making $BASE_IMAGE with debootstrap in $ROOT (mirror: ${MIRROR:-debootstrap default})"
      # shellcheck disable=SC2086  # MIRROR is one word or nothing
      debootstrap --variant=minbase \
        --include=python3.11,python3.11-venv,python3-pip,ca-certificates \
        bookworm "$ROOT" $MIRROR >/dev/null
      ln -sf /usr/bin/python3.11 "$ROOT/usr/local/bin/python3.11" 2>/dev/null || true
      rm -rf "$ROOT/var/cache/apt/archives"/*.deb "$ROOT/var/lib/apt/lists"/*
      tar -C "$ROOT" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE"
      rm -rf "$ROOT"
    fi
  fi
fi
if [ -n "${BASE_IMAGE:-}" ]; then BUILD_ARGS+=(--build-arg "BASE_IMAGE=$BASE_IMAGE"); fi

# Behind a TLS-intercepting proxy pip needs the host's CA bundle: VICAL_BUILD_CA, else
# pip's own setting, else the host's system bundle. It goes in as a build secret, which
# is mounted for the pip commands only and never stored in a layer.
CA=${VICAL_BUILD_CA:-${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}}
if [ -z "$CA" ] && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  CA=/etc/ssl/certs/ca-certificates.crt
fi
if [ -n "$CA" ] && [ -s "$CA" ]; then BUILD_ARGS+=(--secret "id=pip_ca,src=$CA"); fi

echo "building $TAG with $ENGINE"
if [ "$ENGINE" = docker ]; then export DOCKER_BUILDKIT=1; fi
$ENGINE build --network host "${BUILD_ARGS[@]}" -t "$TAG" -f docker/Dockerfile .

if [ "${SKIP_SMOKE:-0}" != 1 ]; then
  OUT=$(mktemp -d /tmp/vical-image-out.XXXXXX)
  chmod 777 "$OUT"
  echo "smoke evaluation inside the image -> $OUT"
  $ENGINE run --rm -v "$OUT:/out" "$TAG" eval --tasks "${SMOKE_TASKS:-taxi/state1,cartpole/seed41}" \
    --out /out/smoke --workers 1
  test -f "$OUT/smoke/manifest.json"
  ls "$OUT/smoke/episodes"
fi
echo "image: $TAG"
