#!/usr/bin/env bash
# Build the vical image with Docker or Podman, then run an evaluation inside it.
#
#   docker/build.sh                 # engine: docker if its daemon answers, else podman
#   ENGINE=podman docker/build.sh
#   OCI_RUNTIME=runc docker/build.sh   # Podman's OCI runtime (default: crun, else runc)
#   BASE_IMAGE=python:3.11-slim-bookworm@sha256:... docker/build.sh
#
# With Podman and no BASE_IMAGE, the base is made locally (no registry needed):
# debootstrap a minimal Debian bookworm with Python 3.11 and import it. That base
# image is the only difference from a Docker build of the same Dockerfile.
# No package mirror or registry is named here: debootstrap takes the host's own apt
# configuration (its Debian mirror for bookworm), else its built-in default; image
# names are resolved by the engine's own registry settings. The image built here is
# never pulled: every `run` of it says --pull=never.
#
# Its temporary folders (the base's root file system, the smoke run's output) go under
# TMPDIR (default /tmp) and are removed when it ends.
#
# The first step that fails stops the script, and its last line says which step
# (`error: ...`); nothing after it runs.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

# debootstrap, runc and crun live in sbin, which a user's PATH may leave out
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
STEP="starting"
# said once, by the script itself (not again by a $(...) subshell that failed inside it)
trap 'rc=$?; [ "$BASHPID" != "$$" ] || echo "error: docker/build.sh stopped at: $STEP (exit $rc)" >&2; exit "$rc"' ERR
die() { echo "error: $*" >&2; exit 2; }
# Ctrl-C or SIGTERM end the script through its EXIT trap (which removes a half-made base)
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${ENGINE:-}" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ENGINE=docker
  elif command -v podman >/dev/null 2>&1; then ENGINE=podman
  else die "neither a running docker engine nor podman was found (apt-get install podman)"; fi
fi
command -v "$ENGINE" >/dev/null 2>&1 || die "ENGINE=$ENGINE is not installed"
ENGINE_NAME=$(basename "$ENGINE")
ENGINE_CMD=("$ENGINE")

# crun refuses every container when the host mixes cgroup v1 and v2 ("hybrid": a tmpfs
# /sys/fs/cgroup with a cgroup2 /sys/fs/cgroup/unified) and the v2 part has controllers;
# runc does not mind. True on such a host.
crun_unusable_here() {
  [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] \
    && [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] \
    && [ -n "$(tr -d '[:space:]' < /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]
}

if [ "$ENGINE_NAME" = podman ]; then
  # Podman runs containers with the OCI runtime the host has: OCI_RUNTIME if set, else
  # crun, else runc (Podman's own order; crun is what `apt-get install podman` brings),
  # skipping crun where it cannot run containers. Named on every podman command
  # (--runtime), so that no configuration file has to agree.
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}
  RUNTIME=${OCI_RUNTIME:-}
  if [ -z "$RUNTIME" ]; then
    CRUN=$(command -v crun || true)
    RUNC=$(command -v runc || true)
    if [ -n "$CRUN" ] && ! crun_unusable_here; then RUNTIME=$CRUN
    elif [ -n "$RUNC" ]; then RUNTIME=$RUNC
    elif [ -n "$CRUN" ]; then
      die "crun cannot run containers on this host (its cgroups mix v1 and v2, which crun does not support) and runc is not installed: apt-get install runc"
    else die "podman has no OCI runtime: neither crun nor runc is installed (apt-get install crun)"; fi
  fi
  ENGINE_CMD+=(--runtime "$RUNTIME")
  STEP="podman info (OCI runtime $RUNTIME)"
  # one line of the engine's own complaint, not its usage text
  if ! msg=$("${ENGINE_CMD[@]}" info --format '{{.Host.OCIRuntime.Name}}' 2>&1 >/dev/null); then
    die "podman cannot start with the OCI runtime $RUNTIME: $(printf '%s\n' "$msg" | grep -m1 . || true)"
  fi
fi
engine() { "${ENGINE_CMD[@]}" "$@"; }

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
  printf 'simulator %s\0' "$(sed -n 's/^SIMULATOR_VERSION = \([0-9][0-9]*\)$/\1/p' ../spec/__init__.py)"
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

PULL=()
if [ "$ENGINE_NAME" = podman ] && [ -z "${BASE_IMAGE:-}" ]; then
  BASE_IMAGE=localhost/vical-base:bookworm
  PULL=(--pull=never)  # the base is local: nothing to pull
  STEP="podman image exists $BASE_IMAGE"
  rc=0
  engine image exists "$BASE_IMAGE" || rc=$?
  # 0: it exists, 1: it does not; anything else is podman failing
  [ "$rc" -le 1 ] || die "podman image exists $BASE_IMAGE failed (exit $rc)"
  if [ "$rc" = 1 ]; then
    command -v debootstrap >/dev/null || die "the base image is made with debootstrap: apt-get install debootstrap"
    ROOT=$(mktemp -d -p "${TMPDIR:-/tmp}" vical-rootfs.XXXXXX)
    trap 'rm -rf "$ROOT"' EXIT  # a failed or interrupted debootstrap leaves nothing behind
    MIRROR=$(host_debian_mirror | head -n 1)
    echo "making $BASE_IMAGE with debootstrap in $ROOT (mirror: ${MIRROR:-debootstrap default})"
    STEP="debootstrap of Debian bookworm into $ROOT"
    # shellcheck disable=SC2086  # MIRROR is one word or nothing
    debootstrap --variant=minbase \
      --include=python3.11,python3.11-venv,python3-pip,ca-certificates \
      bookworm "$ROOT" $MIRROR >/dev/null
    ln -sf /usr/bin/python3.11 "$ROOT/usr/local/bin/python3.11" 2>/dev/null || true
    rm -rf "$ROOT/var/cache/apt/archives"/*.deb "$ROOT/var/lib/apt/lists"/*
    STEP="podman import of $ROOT as $BASE_IMAGE"
    tar -C "$ROOT" -c . | engine import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE"
    rm -rf "$ROOT"
    trap - EXIT
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

echo "building $TAG with ${ENGINE_CMD[*]}"
if [ "$ENGINE_NAME" = docker ]; then export DOCKER_BUILDKIT=1; fi
STEP="$ENGINE_NAME build of $TAG"
# also tagged `vical`, the name README's `docker run ... vical ...` lines use
engine build --network host "${PULL[@]}" "${BUILD_ARGS[@]}" -t "$TAG" -t vical -f docker/Dockerfile .

if [ "${SKIP_SMOKE:-0}" != 1 ]; then
  # under TMPDIR like every other temporary folder of the build, and removed after
  OUT=$(mktemp -d -p "${TMPDIR:-/tmp}" vical-image-out.XXXXXX)
  # files the container wrote may belong to its user: if the host user cannot remove
  # them, the image's own rm does
  remove_out() {
    rm -rf "$OUT" 2>/dev/null || {
      engine run --rm --pull=never --entrypoint rm -v "$OUT:/out" "$TAG" -rf /out/smoke \
        >/dev/null 2>&1 || true
      rm -rf "$OUT" 2>/dev/null || echo "note: could not remove $OUT" >&2
    }
  }
  trap remove_out EXIT
  chmod 777 "$OUT"
  echo "smoke evaluation inside the image -> $OUT"
  STEP="smoke evaluation inside $TAG"
  engine run --rm --pull=never -v "$OUT:/out" "$TAG" eval \
    --tasks "${SMOKE_TASKS:-taxi/state1,cartpole/seed41}" --out /out/smoke --workers 1
  test -f "$OUT/smoke/manifest.json"
  echo "smoke evaluation passed: $(ls "$OUT/smoke/episodes" | tr '\n' ' ')"
  remove_out
  trap - EXIT
fi
echo "image: $TAG"
