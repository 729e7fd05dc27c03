#!/usr/bin/env bash
# A real local Prefect server + process work pool + worker, with the deployments of prefect.yaml.
#   bash infra/prefect_server.sh          # start (idempotent); prints the UI/API address
#   bash infra/prefect_server.sh stop
# Then: prefect deployment run skillgate/rl-train   (with PREFECT_API_URL exported as printed)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VENV=${VENV:-$REPO/.venv}
HOME_DIR=${SKILLGATE_HOME:-$REPO/.skillgate}
export PREFECT_HOME=${PREFECT_HOME:-$HOME_DIR/prefect}
export PREFECT_SERVER_ANALYTICS_ENABLED=false
PORT=${PREFECT_PORT:-4200}
export PREFECT_API_URL=${PREFECT_API_URL:-http://127.0.0.1:$PORT/api}
export SKILLGATE_REPO=$REPO
LOGS=$HOME_DIR/logs; mkdir -p "$LOGS" "$PREFECT_HOME"
PREFECT="$VENV/bin/prefect"

if [ "${1:-start}" = stop ]; then
  for f in worker server; do [ -f "$LOGS/$f.pid" ] && kill "$(cat "$LOGS/$f.pid")" 2>/dev/null || true; rm -f "$LOGS/$f.pid"; done
  echo "stopped"; exit 0
fi

if ! curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1; then
  nohup "$PREFECT" server start --host 127.0.0.1 --port "$PORT" >"$LOGS/server.log" 2>&1 &
  echo $! >"$LOGS/server.pid"
  for _ in $(seq 1 120); do curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1 && break; sleep 1; done
fi
curl -fsS "$PREFECT_API_URL/health" >/dev/null || { echo "prefect server did not answer; see $LOGS/server.log" >&2; exit 1; }
"$PREFECT" work-pool inspect skillgate-process >/dev/null 2>&1 || "$PREFECT" work-pool create skillgate-process --type process >/dev/null
"$PREFECT" --no-prompt deploy --all >"$LOGS/deploy.log" 2>&1 || { cat "$LOGS/deploy.log" >&2; exit 1; }
if ! { [ -f "$LOGS/worker.pid" ] && kill -0 "$(cat "$LOGS/worker.pid")" 2>/dev/null; }; then
  nohup "$PREFECT" worker start --pool skillgate-process --type process >"$LOGS/worker.log" 2>&1 &
  echo $! >"$LOGS/worker.pid"
fi
echo "Prefect UI/API: ${PREFECT_API_URL%/api}  (export PREFECT_API_URL=$PREFECT_API_URL)"
echo "deployments:"; "$PREFECT" deployment ls 2>/dev/null | grep skillgate || true
