#!/usr/bin/env bash
# Start the Docker daemon when none answers; idempotent; returns once `docker info` answers.
#
#   sudo bash infra/dockerd.sh          # start (or confirm) dockerd
#   sudo bash infra/dockerd.sh --stop   # stop a dockerd this script started
#
# For machines without systemd (CI containers, VMs): dockerd runs detached (setsid) with its log at
# $SKILLGATE_DOCKERD_LOG. Storage: overlay2 first; if the daemon does not come up, once more with
# the vfs driver (slow but works on any filesystem). Extra daemon flags: $SKILLGATE_DOCKERD_ARGS.
# Nothing here contacts a registry; sandbox images come from infra/base_image.sh.
set -euo pipefail

LOG="${SKILLGATE_DOCKERD_LOG:-/var/log/skillgate-dockerd.log}"
PIDFILE="${SKILLGATE_DOCKERD_PIDFILE:-/var/run/skillgate-dockerd.pid}"
WAIT_S="${SKILLGATE_DOCKERD_WAIT_S:-60}"
log() { echo "[dockerd] $*" >&2; }
answers() { timeout 10 docker info >/dev/null 2>&1; }

if [[ "${1:-}" == "--stop" ]]; then
  if [[ -s "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"; log "stopped dockerd $(cat "$PIDFILE")"; rm -f "$PIDFILE"
  else log "no dockerd started by this script is running"; fi
  exit 0
fi

if answers; then log "dockerd already answers"; exit 0; fi
[[ "$(id -u)" == 0 ]] || { log "dockerd is not running and starting it needs root (sudo bash $0)"; exit 1; }
command -v dockerd >/dev/null || { log "dockerd not found: apt-get install docker.io"; exit 1; }

# Serialise concurrent callers (parallel test sessions): one starts, the others wait for it.
exec 9>"${PIDFILE}.lock"
flock 9
if answers; then log "dockerd already answers (started by another caller)"; exit 0; fi

wait_until_up() {  # $1 = pid
  local deadline=$((SECONDS + WAIT_S))
  while (( SECONDS < deadline )); do
    answers && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

start() {  # $@ = extra dockerd flags
  log "starting: dockerd $* ${SKILLGATE_DOCKERD_ARGS:-}"
  # shellcheck disable=SC2086
  setsid dockerd "$@" ${SKILLGATE_DOCKERD_ARGS:-} >>"$LOG" 2>&1 < /dev/null &
  echo $! >"$PIDFILE"
  wait_until_up "$!"
}

begin=$SECONDS
if [[ "${SKILLGATE_DOCKERD_ARGS:-}" == *storage-driver* ]]; then
  start || { log "dockerd did not come up; see $LOG"; tail -20 "$LOG" >&2; exit 1; }
elif ! start; then
  log "overlay2 start failed; retrying with --storage-driver=vfs"
  kill "$(cat "$PIDFILE")" 2>/dev/null || true
  sleep 1
  start --storage-driver=vfs || { log "dockerd did not come up; see $LOG"; tail -20 "$LOG" >&2; exit 1; }
fi
log "dockerd answers after $((SECONDS - begin)) s ($(docker info --format '{{.Driver}}' 2>/dev/null) storage; log $LOG)"
