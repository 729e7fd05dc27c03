#!/usr/bin/env bash
# A real Prefect server + process work pool + worker, with the deployments of prefect.yaml.
#
#   bash infra/prefect_server.sh [start]   # idempotent: never a second server or worker; prints the API address
#   bash infra/prefect_server.sh status    # exit 0 when server and worker run, 3 otherwise
#   bash infra/prefect_server.sh stop      # flow runs, worker, then the server; fine when none runs
# Then: prefect deployment run skillgate/rl-train   (with PREFECT_API_URL exported as printed)
#
# Environment:
#   SKILLGATE_HOME   state dir (default: .skillgate in this checkout, the rule of skillgate_core/base/paths.py);
#                    logs and pid files in SKILLGATE_HOME/logs, PREFECT_HOME = SKILLGATE_HOME/prefect
#   PREFECT_PORT     port of the local server (4200)
#   PREFECT_HOST     address it listens on (127.0.0.1; 0.0.0.0 for a server others reach: it has no auth)
#   PREFECT_DB       sqlite (default: PREFECT_HOME/prefect.db) or postgres (a shared server: set
#                    PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DB)
#   PREFECT_API_URL  when set to anything but the local server's address: a server that already runs
#                    elsewhere (shared); this script then starts no server, only deploys and runs a worker
#   SKILLGATE_DEPLOY 0 skips `prefect deploy --all` (default 1)
#   SKILLGATE_NIGHTLY 1 switches the eval70-nightly schedule on (02:00 UTC, the full protocol on every
#                    experiment: hours on a CPU-only machine); anything else leaves it off, as prefect.yaml
#                    declares it. Each start prints the schedule's state (and, when on, a night's cost).
#   SKILLGATE_STOP_TIMEOUT_S  seconds from SIGTERM to SIGKILL, per process (30)
#   VENV             the virtualenv with prefect (default .venv of this checkout)
set -euo pipefail

# The state dir and PREFECT_HOME are resolved against the caller's cwd, before the cd.
# shellcheck source=infra/state_home.sh
source "$(dirname "$0")/state_home.sh"
HOME_DIR=$(skillgate_home "$(cd "$(dirname "$0")/.." && pwd -P)")
[[ -z "${PREFECT_HOME:-}" ]] || PREFECT_HOME=$(realpath -m -- "${PREFECT_HOME/#\~/$HOME}")
cd "$(dirname "$0")/.."
REPO=$(pwd -P)
# shellcheck source=infra/proc_lib.sh
source "$REPO/infra/proc_lib.sh"
VENV=${VENV:-$REPO/.venv}
PREFECT="$VENV/bin/prefect"
export SKILLGATE_HOME=$HOME_DIR          # the worker's flow runs write where this script points
export PREFECT_HOME=${PREFECT_HOME:-$HOME_DIR/prefect}
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export SKILLGATE_REPO=$REPO              # prefect.yaml's pull step: flow runs start in this checkout
PORT=${PREFECT_PORT:-4200}
HOST=${PREFECT_HOST:-127.0.0.1}
LOCAL_URL=http://127.0.0.1:$PORT/api
export PREFECT_API_URL=${PREFECT_API_URL:-$LOCAL_URL}
EXTERNAL=0; [[ "$PREFECT_API_URL" == "$LOCAL_URL" ]] || EXTERNAL=1
POOL=skillgate-process
STOP_TIMEOUT=${SKILLGATE_STOP_TIMEOUT_S:-30}
LOGS=$HOME_DIR/logs
SERVER_PID=$LOGS/server.pid
WORKER_PID=$LOGS/worker.pid
# What identifies our processes: the command line, and the PREFECT_HOME they were started with.
SERVER_CMD=("prefect server start" "--port $PORT")
WORKER_CMD=("prefect worker start" "--pool $POOL")

log() { echo "[prefect_server] $*" >&2; }
healthy() { curl -fsS -o /dev/null --max-time 5 "$PREFECT_API_URL/health" 2>/dev/null; }

# Our server/worker pids: the pid file's (checked) and any stray of this PREFECT_HOME (e.g. left by an
# older version of this script that lost its pid file).
server_pids() {
  { proc_pidfile "$SERVER_PID" "${SERVER_CMD[@]}" || true
    proc_find "PREFECT_HOME=$PREFECT_HOME" "${SERVER_CMD[@]}"; } | sort -u
}
worker_pids() {
  { proc_pidfile "$WORKER_PID" "${WORKER_CMD[@]}" || true
    proc_find "PREFECT_HOME=$PREFECT_HOME" "${WORKER_CMD[@]}"; } | sort -u
}

# The database the server uses: sets DB_DESC (no password in it) and the server's environment.
configure_db() {
  local db=${PREFECT_DB:-} url rest user
  if [[ -z "$db" ]]; then
    [[ "${PREFECT_API_DATABASE_CONNECTION_URL:-}" == postgresql* ]] && db=postgres || db=sqlite
  fi
  case "$db" in
    sqlite)
      unset PREFECT_API_DATABASE_CONNECTION_URL
      DB_DESC="sqlite $PREFECT_HOME/prefect.db" ;;
    postgres|postgresql)
      url=${PREFECT_API_DATABASE_CONNECTION_URL:-}
      [[ "$url" == postgresql+asyncpg://* ]] || {
        log "PREFECT_DB=postgres needs PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DB"
        exit 2; }
      "$VENV/bin/python" -c "import asyncpg" 2>/dev/null || {
        log "asyncpg is missing in $VENV: $VENV/bin/pip install asyncpg"; exit 2; }
      export PREFECT_API_DATABASE_CONNECTION_URL=$url
      rest=${url#*://}
      if [[ "$rest" == *@* ]]; then user=${rest%%@*}; user=${user%%:*}@; rest=${rest#*@}; else user=; fi
      DB_DESC="postgresql $user$rest" ;;
    *) log "PREFECT_DB must be sqlite or postgres, not '$db'"; exit 2 ;;
  esac
}

# already_running NAME PIDS_FUNCTION PID_FILE: print the pid of our running NAME (server, worker) and
# record it in PID_FILE; fail when none runs.
already_running() {
  local pid
  pid=$("$2" | head -n1)
  [[ -n "$pid" ]] || return 1
  echo "$pid" >"$3"
  log "$1 already running (pid $pid)"
  echo "$pid"
}

# wait_ready NAME PID PID_FILE WAIT_S LATE_MESSAGE READY...: until the command READY... succeeds, check
# that PID (NAME, logging to $LOGS/NAME.log) lives: if it exits, show its log's last lines, drop PID_FILE
# and exit 1; after WAIT_S seconds, exit 1 saying LATE_MESSAGE.
wait_ready() {
  local name=$1 pid=$2 pid_file=$3 deadline=$((SECONDS + $4)) late=$5
  shift 5
  until "$@"; do
    if ! proc_alive "$pid"; then
      log "the $name exited; last lines of $LOGS/$name.log:"; tail -n 30 "$LOGS/$name.log" >&2; rm -f "$pid_file"; exit 1
    fi
    ((SECONDS < deadline)) || { log "$late"; exit 1; }
    sleep 0.5
  done
}

start_server() {
  local pid
  if ! pid=$(already_running server server_pids "$SERVER_PID"); then
    if healthy; then
      log "another Prefect server already answers at $PREFECT_API_URL (not one of $PREFECT_HOME):"
      log "choose another PREFECT_PORT, or set PREFECT_API_URL to use that server"
      exit 1
    fi
    configure_db
    log "starting the server on $HOST:$PORT, database $DB_DESC"
    echo "$DB_DESC" >"$LOGS/server.db"
    proc_spawn "$LOGS/server.log" "$PREFECT" server start --host "$HOST" --port "$PORT"
    pid=$SPAWNED_PID
    echo "$pid" >"$SERVER_PID"
  fi
  # A cold start (database migrations) takes tens of seconds on a small machine.
  wait_ready server "$pid" "$SERVER_PID" "${SKILLGATE_SERVER_WAIT_S:-180}" \
    "no answer from $PREFECT_API_URL/health; see $LOGS/server.log" healthy
}

start_worker() {
  already_running worker worker_pids "$WORKER_PID" >/dev/null && return
  local offset
  offset=$(stat -c %s "$LOGS/worker.log" 2>/dev/null || echo 0)
  proc_spawn "$LOGS/worker.log" "$PREFECT" worker start --pool "$POOL" --type process
  echo "$SPAWNED_PID" >"$WORKER_PID"
  # Ready once this worker (the log's new part) says "Worker '...' started!".
  worker_started() { tail -c "+$((offset + 1))" "$LOGS/worker.log" | grep -q "' started"; }
  wait_ready worker "$SPAWNED_PID" "$WORKER_PID" 120 "the worker did not report started; see $LOGS/worker.log" \
    worker_started
}

cmd_start() {
  if ((EXTERNAL)); then
    healthy || { log "PREFECT_API_URL=$PREFECT_API_URL does not answer"; exit 1; }
    log "using the server at $PREFECT_API_URL (started elsewhere)"
  else
    start_server
  fi
  # Only the server reads the database; the worker and its flow runs never see its password.
  unset PREFECT_API_DATABASE_CONNECTION_URL
  "$PREFECT" work-pool inspect "$POOL" >/dev/null 2>&1 || "$PREFECT" work-pool create "$POOL" --type process >/dev/null
  if [[ "${SKILLGATE_DEPLOY:-1}" != 0 ]]; then
    "$PREFECT" --no-prompt deploy --all >"$LOGS/deploy.log" 2>&1 || { cat "$LOGS/deploy.log" >&2; exit 1; }
    # The deploy wrote the nightly's schedule as prefect.yaml declares it (off); switch it on only when
    # asked, and say which it is either way (a schedule nobody sees is how a 02:00 run surprises).
    local nightly=off
    [[ "${SKILLGATE_NIGHTLY:-}" == 1 ]] && nightly=on
    "$VENV/bin/python" -m flows.nightly_schedule "$nightly" || log "could not set the nightly schedule $nightly"
  fi
  start_worker
  echo "Prefect UI/API: ${PREFECT_API_URL%/api}  (export PREFECT_API_URL=$PREFECT_API_URL)"
  echo "server pid: $(cat "$SERVER_PID" 2>/dev/null || echo external)  worker pid: $(cat "$WORKER_PID")  logs: $LOGS"
}

cmd_stop() {
  local -a pids runs
  # Order: the worker's flow runs, the worker, the server. A flow run ended by SIGTERM reports itself
  # Crashed, to the server and through the worker's pipe for its output: with the worker (or the
  # server) gone first that report is lost and the run stays Running in the UI for ever.
  mapfile -t pids < <(worker_pids)
  if ((${#pids[@]})); then
    # Flow runs live in sessions of their own (Prefect starts them so): found as the worker's descendants.
    mapfile -t runs < <(proc_tree "${pids[@]}" | grep -vxF -f <(printf '%s\n' "${pids[@]}") || true)
    if ((${#runs[@]})); then
      proc_stop "flow runs" "$STOP_TIMEOUT" "${runs[@]}"; log "flow-run processes stopped (pid ${runs[*]})"
    fi
    proc_stop worker "$STOP_TIMEOUT" "${pids[@]}"; log "worker stopped (pid ${pids[*]})"
  fi
  rm -f "$WORKER_PID"
  mapfile -t pids < <(server_pids)
  if ((${#pids[@]})); then
    proc_stop server "$STOP_TIMEOUT" "${pids[@]}"; log "server stopped (pid ${pids[*]})"
  fi
  rm -f "$SERVER_PID"
  echo "stopped"
}

cmd_status() {
  local spid wpid rc=0
  echo "state: $HOME_DIR"
  spid=$(server_pids | head -n1)
  wpid=$(worker_pids | head -n1)
  if [[ -n "$spid" ]]; then
    echo "server: running (pid $spid, $LOCAL_URL, $(healthy && echo healthy || echo 'not answering'), database $(cat "$LOGS/server.db" 2>/dev/null || echo '?'))"
  elif ((EXTERNAL)); then
    echo "server: external ($PREFECT_API_URL, $(healthy && echo healthy || echo 'not answering'))"
  else
    echo "server: not running"; rc=3
  fi
  if [[ -n "$wpid" ]]; then echo "worker: running (pid $wpid, pool $POOL)"; else echo "worker: not running"; rc=3; fi
  return $rc
}

case "${1:-start}" in
  start|stop)
    mkdir -p "$LOGS" "$PREFECT_HOME"
    # One start/stop at a time per state dir (two shells, or a test and a developer).
    exec 9>"$LOGS/prefect_server.lock"
    flock 9
    if [[ "${1:-start}" == start ]]; then cmd_start; else cmd_stop; fi ;;
  status) cmd_status ;;
  *) echo "usage: bash infra/prefect_server.sh [start|stop|status]" >&2; exit 2 ;;
esac
