#!/usr/bin/env bash
# An SGLang server for server-mode rollouts (grpo.rollout_source = "sglang"). GPU-ONLY: SGLang needs
# NVIDIA GPUs and the optional extra (`.venv/bin/pip install -e '.[sglang]'`); on a CPU machine this
# script refuses to start.
#   bash infra/sglang_server.sh MODEL_DIR [PORT]   # start `python -m sglang.launch_server`, wait for /health
#   bash infra/sglang_server.sh stop [PORT]
# Then train with grpo.rollout_source=sglang, SKILLGATE_SGLANG_URLS=http://HOST:PORT set where the worker runs
#   (the servers are worker configuration, not a run parameter: docs/deploy.md, Server-mode rollouts)
# Environment: SGLANG_HOST (127.0.0.1), SGLANG_TP (tensor-parallel GPUs, 1), SGLANG_WAIT_S (600),
#   SGLANG_ARGS (more launch_server flags, e.g. "--mem-fraction-static 0.6"), VENV, SKILLGATE_HOME.
# MODEL_DIR is the policy the run starts from (the SFT model); the trainer pushes its own weights
# before the first rollout and after every optimizer step, so any model of the same architecture works.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VENV=${VENV:-$REPO/.venv}
HOME_DIR=${SKILLGATE_HOME:-$REPO/.skillgate}
LOGS=$HOME_DIR/logs; mkdir -p "$LOGS"
HOST=${SGLANG_HOST:-127.0.0.1}

if [ "${1:-}" = stop ]; then
  PORT=${2:-30000}
  PIDFILE=$LOGS/sglang-$PORT.pid
  # the server runs in its own session: end its whole process group (scheduler, detokenizer too)
  [ -f "$PIDFILE" ] && kill -- "-$(cat "$PIDFILE")" 2>/dev/null || true
  rm -f "$PIDFILE"; echo "stopped"; exit 0
fi

MODEL=${1:?usage: bash infra/sglang_server.sh MODEL_DIR [PORT] | stop [PORT]}
PORT=${2:-30000}
URL=http://$HOST:$PORT
PIDFILE=$LOGS/sglang-$PORT.pid
LOG=$LOGS/sglang-$PORT.log
healthy() { curl -fsS -o /dev/null "$URL/health" 2>/dev/null; }

if healthy; then echo "SGLang server already answers at $URL"; exit 0; fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no NVIDIA GPU here (nvidia-smi): SGLang server mode is GPU-only; use grpo.rollout_source=policy" >&2; exit 1
fi
if ! "$VENV/bin/python" -c "import sglang" 2>/dev/null; then
  echo "sglang is not installed in $VENV: $VENV/bin/pip install -e '.[sglang]'" >&2; exit 1
fi
[ -f "$MODEL/config.json" ] || { echo "$MODEL is not an HF model dir (no config.json)" >&2; exit 1; }

# Log-probs must be those of the tempered sampling distribution, the trainer's quantity
# (policy/sglang_client.py); this variable would make SGLang return pre-temperature ones.
unset SGLANG_RETURN_ORIGINAL_LOGPROB
# shellcheck disable=SC2086  # SGLANG_ARGS is a list of flags
setsid nohup "$VENV/bin/python" -m sglang.launch_server --model-path "$MODEL" --host "$HOST" --port "$PORT" \
  --tp-size "${SGLANG_TP:-1}" ${SGLANG_ARGS:-} >"$LOG" 2>&1 &
PID=$!
echo "$PID" >"$PIDFILE"
for _ in $(seq 1 "${SGLANG_WAIT_S:-600}"); do
  healthy && { echo "SGLang server: $URL (pid $PID, log $LOG)"; exit 0; }
  kill -0 "$PID" 2>/dev/null || { echo "SGLang server exited; last lines of $LOG:" >&2; tail -n 30 "$LOG" >&2; rm -f "$PIDFILE"; exit 1; }
  sleep 1
done
echo "SGLang server did not answer $URL/health within ${SGLANG_WAIT_S:-600} s; see $LOG" >&2
exit 1
