#!/usr/bin/env bash
# A Ray head on this machine for the grpo stage to join (it joins whatever $RAY_ADDRESS names).
#
#   eval "$(bash infra/ray_cluster.sh up)"   # start (idempotent); stdout is one line: export RAY_ADDRESS=...
#   bash infra/ray_cluster.sh status         # exit 0 when the head runs and answers, 3 otherwise
#   bash infra/ray_cluster.sh down           # stop this cluster's processes; fails if any is left
#
# Environment: RAY_PORT (GCS port, 6379), RAY_NUM_CPUS (all cores), RAY_NUM_GPUS (Ray's detection),
#   RAY_NODE_IP (Ray's choice; the printed address uses 127.0.0.1 unless set), SKILLGATE_HOME (state
#   dir, as skillgate_core/base/paths.py decides), VENV, SKILLGATE_STOP_TIMEOUT_S (30), RAY_AUTH_MODE (disabled).
#
# The head runs `ray start --head --block` in a session of its own, with its temp dir (sessions, logs,
# sockets) at SKILLGATE_HOME/ray/tmp: a path too long for Ray's unix sockets (107 bytes) moves to a
# short folder in /tmp, linked from there. No dashboard, no usage stats; every port other than the GCS
# one is picked free, so clusters of several developers on one machine do not collide.
# `down` does what `ray stop` does (SIGTERM, wait, SIGKILL) but only to this cluster: `ray stop` itself
# ends EVERY Ray process of the user on the machine (other checkouts' clusters, tests' private ones).
set -euo pipefail

# shellcheck source=infra/state_home.sh
source "$(dirname "$0")/state_home.sh"
HOME_DIR=$(skillgate_home "$(cd "$(dirname "$0")/.." && pwd -P)")
cd "$(dirname "$0")/.."
REPO=$(pwd -P)
# shellcheck source=infra/proc_lib.sh
source "$REPO/infra/proc_lib.sh"
VENV=${VENV:-$REPO/.venv}
RAY="$VENV/bin/ray"
export SKILLGATE_HOME=$HOME_DIR
STATE=$HOME_DIR/ray
PIDFILE=$STATE/head.pid
ENVFILE=$STATE/cluster.env
LOG=$HOME_DIR/logs/ray-head.log
STOP_TIMEOUT=${SKILLGATE_STOP_TIMEOUT_S:-30}

log() { echo "[ray_cluster] $*" >&2; }

temp_dir() {  # where Ray's temp dir goes: SKILLGATE_HOME/ray/tmp, or a short stand-in linked from there
  local dir=$STATE/tmp
  if ((${#dir} > 40)); then
    dir=/tmp/sgray-$(id -u)-$(printf '%s' "$HOME_DIR" | sha256sum | cut -c1-10)
  fi
  echo "$dir"
}
TEMP=$(temp_dir)
# Every process of this cluster carries this in its environment (Ray's workers rename their command
# line to ray::..., so the environment is what still tells them apart from other clusters').
MARK="SKILLGATE_RAY_CLUSTER=$TEMP"

head_pid() { proc_pidfile "$PIDFILE" "ray start --head" "--temp-dir=$TEMP"; }
cluster_pids() { proc_find "$MARK" ray; }
address() { echo "${RAY_NODE_IP:-127.0.0.1}:$(sed -n 's/^RAY_PORT=//p' "$ENVFILE")"; }
answers() { RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled} "$RAY" status --address="$1" >/dev/null 2>&1; }

cmd_up() {
  local pid port ports
  if pid=$(head_pid); then
    log "already running (pid $pid)"
    echo "export RAY_ADDRESS=$(address)"
    return
  fi
  if [[ -n "$(cluster_pids)" ]]; then
    log "processes of a previous cluster of this state dir are still running: bash infra/ray_cluster.sh down"
    exit 1
  fi
  port=${RAY_PORT:-6379}
  mkdir -p "$STATE" "$TEMP" "$(dirname "$LOG")"
  [[ "$TEMP" == "$STATE/tmp" ]] || ln -sfn "$TEMP" "$STATE/tmp"
  # Node manager, object manager, dashboard agent (http, grpc), runtime-env agent, metrics: free now.
  read -r -a ports < <("$VENV/bin/python" -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
  local -a args=(start --head --block "--port=$port" "--num-cpus=${RAY_NUM_CPUS:-$(nproc)}"
    --include-dashboard=false --disable-usage-stats "--temp-dir=$TEMP"
    "--node-manager-port=${ports[0]}" "--object-manager-port=${ports[1]}"
    "--dashboard-agent-listen-port=${ports[2]}" "--dashboard-agent-grpc-port=${ports[3]}"
    "--runtime-env-agent-port=${ports[4]}" "--metrics-export-port=${ports[5]}")
  [[ -z "${RAY_NUM_GPUS:-}" ]] || args+=("--num-gpus=$RAY_NUM_GPUS")
  [[ -z "${RAY_NODE_IP:-}" ]] || args+=("--node-ip-address=$RAY_NODE_IP")
  printf 'RAY_PORT=%s\nTEMP_DIR=%s\n' "$port" "$TEMP" >"$ENVFILE"
  # No token files in ~ for a private cluster; SIGTERM tears the node down at once (no 30 s drain).
  export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled} RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 RAY_USAGE_STATS_ENABLED=0
  export "${MARK?}"
  proc_spawn "$LOG" "$RAY" "${args[@]}"
  pid=$SPAWNED_PID
  echo "$pid" >"$PIDFILE"
  local deadline=$((SECONDS + ${RAY_WAIT_S:-120}))
  until answers "$(address)"; do
    if ! proc_alive "$pid"; then
      log "ray start exited; last lines of $LOG:"; tail -n 30 "$LOG" >&2; rm -f "$PIDFILE"; exit 1
    fi
    ((SECONDS < deadline)) || { log "the head did not answer within ${RAY_WAIT_S:-120} s; see $LOG"; exit 1; }
    sleep 1
  done
  log "head up (pid $pid, temp dir $TEMP, log $LOG)"
  echo "export RAY_ADDRESS=$(address)"
}

cmd_down() {
  local pid
  local -a left
  if pid=$(head_pid); then
    proc_stop ray "$STOP_TIMEOUT" "$pid"
    log "head stopped (pid $pid)"
  fi
  # Anything of this cluster that left the head's process tree (or outlived a head killed by hand).
  mapfile -t left < <(cluster_pids)
  if ((${#left[@]})); then
    log "stopping ${#left[@]} more process(es) of this cluster: ${left[*]}"
    proc_stop ray "$STOP_TIMEOUT" "${left[@]}"
  fi
  mapfile -t left < <(cluster_pids)
  if ((${#left[@]})); then log "still running: ${left[*]}"; exit 1; fi
  rm -f "$PIDFILE"
  echo "stopped"
}

cmd_status() {
  local pid
  if pid=$(head_pid) && answers "$(address)"; then
    echo "ray: running (pid $pid, RAY_ADDRESS=$(address), temp dir $TEMP)"
  else
    echo "ray: not running (state $STATE)"; return 3
  fi
}

case "${1:-}" in
  up|down)
    mkdir -p "$STATE"
    exec 9>"$STATE/.lock"  # one up/down at a time per state dir
    flock 9
    "cmd_$1" ;;
  status) cmd_status ;;
  *) echo "usage: bash infra/ray_cluster.sh up|down|status" >&2; exit 2 ;;
esac
