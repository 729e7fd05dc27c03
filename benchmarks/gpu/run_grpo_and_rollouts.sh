#!/usr/bin/env bash
# One device command on `nvidia-h200-x2` (docs/gpu.md), two GPUs used side by side:
#   GPU 0: benchmarks/gpu/grpo_step_vs_trl.py   TRL GRPOTrainer anchor, then our GRPO step per preset
#   GPU 1: benchmarks/gpu/agent_rollouts.py     the harness with bubblewrap sandboxes, sampler on the GPU
# The rollouts start only once TRL has finished, so TRL runs on a quiet machine and our step shares
# the CPUs with the sandboxes (the comparison can only be pessimistic for us).
# Results in $OUT: run.log, grpo_step_vs_trl.json, grpo_profile_<preset>.txt, trl_anchor.log,
# agent_rollouts.json, rollouts.log.
#
#   device run:  bash benchmarks/gpu/run_grpo_and_rollouts.sh    carry: [".devbundle", ".bwrap"]   timeout_s: 600
#   DEVBUNDLE=path/.devbundle BWRAP_DEBS=path/.bwrap  (defaults: ./.devbundle, ./.bwrap: bubblewrap's .deb and
#   its libraries, from `apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0` on a Debian machine)
#   GRPO_ARGS="..." ROLLOUT_ARGS="..." BUDGET_S=560   SKIP_GRPO=1: the rollouts alone, on GPU 0
set -uo pipefail
. "$(dirname "$0")/device_env.sh" "${BUDGET_S:-560}"   # repo root, $OUT, the env, left()
bundle=${DEVBUNDLE:-.devbundle}
debs=${BWRAP_DEBS:-.bwrap}

{
  echo "== $(date -u +%FT%TZ) run_grpo_and_rollouts.sh, budget ${BUDGET_S:-560} s, commit ${SKILLGATE_GIT_COMMIT:-?}"
  nvidia-smi --query-gpu=index,name,memory.total,clocks.sm --format=csv 2>&1 | head -4
  bash "$bundle/install_bundle.sh" "$bundle" || { echo "bundle install failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
  # bubblewrap from its Debian package, unpacked beside (not over) the system
  mkdir -p /tmp/bwrap && for f in "$debs"/*.deb; do dpkg -x "$f" /tmp/bwrap; done
  bw=/tmp/bwrap/usr/bin
  if ldd "$bw/bwrap" | grep -q "not found"; then
    export LD_LIBRARY_PATH=/tmp/bwrap/lib/x86_64-linux-gnu:/tmp/bwrap/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  echo "bwrap: $("$bw/bwrap" --version 2>&1); setpriv: $(command -v setpriv); kernel: $(uname -r)"
  "$bw/bwrap" --unshare-all --as-pid-1 --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin \
    --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev -- /bin/true \
    && echo "bwrap namespaces: ok" || echo "bwrap namespaces: FAILED"
  mkdir -p /tmp/tmpfs-probe && mount -t tmpfs -o size=1m probe /tmp/tmpfs-probe && echo "tmpfs mount: ok" \
    && umount /tmp/tmpfs-probe || echo "tmpfs mount: FAILED"
  echo "cgroup: $(stat -fc %T /sys/fs/cgroup 2>&1) $(head -c 200 /sys/fs/cgroup/cgroup.controllers 2>&1)"

  if [ -n "${SKIP_GRPO:-}" ]; then
    echo "== $(date -u +%T) GPU 0: agent_rollouts.py alone ($(left) s left)"
    CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=8 timeout --kill-after=10 $(( $(left) - 10 )) \
      python3 benchmarks/gpu/agent_rollouts.py --out "$OUT" --bwrap-dir "$bw" ${ROLLOUT_ARGS:-} 2>&1 \
      | grep --line-buffered -v "Warning\|warn(" | tee "$OUT/rollouts.log" | grep --line-buffered "^pass\|^bwrap\|Error"
    echo "agent_rollouts.py exit $?"; echo "== $(date -u +%T) done, $(left) s of the budget left"; exit 0
  fi
  echo "== $(date -u +%T) GPU 0: grpo_step_vs_trl.py"
  CUDA_VISIBLE_DEVICES=0 timeout --kill-after=10 $(( $(left) - 20 )) python3 benchmarks/gpu/grpo_step_vs_trl.py \
    --out "$OUT" --trl-timeout 200 ${GRPO_ARGS:---presets z3,z2} 2>&1 \
    | grep --line-buffered -v "FutureWarning\|return func(\*args, \*\*kwargs)" | sed -u 's/^/[grpo] /' &
  grpo=$!
  # wait for TRL to finish (its numbers are in the JSON), then start the rollouts on GPU 1
  while kill -0 $grpo 2>/dev/null && ! grep -qs '"trl"' "$OUT/grpo_step_vs_trl.json"; do sleep 2; done
  echo "== $(date -u +%T) GPU 1: agent_rollouts.py ($(left) s left)"
  CUDA_VISIBLE_DEVICES=1 OMP_NUM_THREADS=8 timeout --kill-after=10 $(( $(left) - 10 )) \
    python3 benchmarks/gpu/agent_rollouts.py --out "$OUT" --bwrap-dir "$bw" ${ROLLOUT_ARGS:-} > "$OUT/rollouts.log" 2>&1 &
  roll=$!
  wait $grpo; echo "grpo_step_vs_trl.py exit $?"
  wait $roll; echo "agent_rollouts.py exit $? (log: rollouts.log)"
  grep "^pass\|SUMMARY\|Error\|error" "$OUT/rollouts.log" | cut -c1-1500 | tail -8
  echo "== $(date -u +%T) done, $(left) s of the budget left"
} 2>&1 | tee "$OUT/run.log"
