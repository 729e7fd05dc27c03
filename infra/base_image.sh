#!/usr/bin/env bash
# Build the local sandbox base image `skillgate/base:bookworm` with no container registry.
#
#   sudo bash infra/base_image.sh            # build if missing (instant when cached)
#   sudo bash infra/base_image.sh --force    # re-import from the cached rootfs tarball
#   sudo bash infra/base_image.sh --rebuild  # debootstrap again (refreshes the cache)
#
# Steps: debootstrap --variant=minbase bookworm (+ python3, procps, python3-pytest) into a
# temporary rootfs -> apt caches removed -> tarball cached at $SKILLGATE_BASE_CACHE
# (default /var/cache/skillgate as root, else $SKILLGATE_HOME/cache) -> `docker import`.
# Only deb.debian.org (or $DEBIAN_MIRROR) is contacted, and only when the tarball is not cached.
# Task Dockerfiles' FROM lines are mapped onto this image (skillgate_core/envs/docker_sandbox.py).
set -euo pipefail

TAG="${SKILLGATE_BASE_IMAGE:-skillgate/base:bookworm}"
SUITE="${SKILLGATE_BASE_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="${SKILLGATE_BASE_PACKAGES:-python3,procps,python3-pytest}"
if [[ -z "${SKILLGATE_BASE_CACHE:-}" ]]; then
  if [[ "$(id -u)" == 0 ]]; then SKILLGATE_BASE_CACHE=/var/cache/skillgate
  else SKILLGATE_BASE_CACHE="${SKILLGATE_HOME:-.skillgate}/cache"; fi
fi
TARBALL="$SKILLGATE_BASE_CACHE/base-$SUITE.tar"
mode="${1:-}"

log() { echo "[base_image] $*" >&2; }

if [[ "$mode" == "" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG already present"; exit 0
fi

mkdir -p "$SKILLGATE_BASE_CACHE"
# One builder at a time: concurrent test sessions may call this together.
exec 9>"$SKILLGATE_BASE_CACHE/.lock"
flock 9
if [[ "$mode" == "" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG already present (built by another process)"; exit 0
fi

if [[ "$mode" == "--rebuild" || ! -s "$TARBALL" ]]; then
  [[ "$(id -u)" == 0 ]] || { log "debootstrap needs root (no cached $TARBALL)"; exit 1; }
  command -v debootstrap >/dev/null || { log "apt-get install debootstrap"; exit 1; }
  work="$(mktemp -d "$SKILLGATE_BASE_CACHE/rootfs.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  start=$(date +%s)
  log "debootstrap --variant=minbase --include=$PACKAGES $SUITE from $MIRROR"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
  # Smaller image, and nothing in it that points back at the build host.
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
         "$work"/rootfs/var/log/* "$work"/rootfs/tmp/* "$work"/rootfs/root/.cache
  tar --numeric-owner -C "$work/rootfs" -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  log "rootfs cached at $TARBALL ($(du -h "$TARBALL" | cut -f1), $(( $(date +%s) - start )) s)"
fi

start=$(date +%s)
digest="$(sha256sum "$TARBALL" | cut -c1-16)"
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'WORKDIR /' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL org.skillgate.base=1 org.skillgate.rootfs-sha256-16=$digest" \
  "$TARBALL" "$TAG" >/dev/null
log "imported $TAG from $TARBALL in $(( $(date +%s) - start )) s"
