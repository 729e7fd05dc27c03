#!/usr/bin/env bash
# The one device command (docs/gpu.md): installs the dev bundle, then runs
#   1. benchmarks/gpu/grpo_step_vs_trl.py    TRL GRPOTrainer anchor vs our GRPO step (one GPU)
#   2. benchmarks/gpu/trainer_throughput.py  plain PyTorch anchor vs our engine presets, process + Ray
# inside one time budget (RUN_ALL_BUDGET_S, default 530 s: the whole command ends before 9 minutes
# on one H200; each script writes its JSON as it goes, so a part cut short still leaves numbers).
# Results: $OUT/{run_all.log, grpo_step_vs_trl.json, grpo_profile.txt, trl_anchor.log, trainer_throughput.json}.
#
#   device run:  bash benchmarks/gpu/run_all.sh            carry: [".devbundle"]   timeout_s: 600
#   extra args:  GRPO_ARGS="--steps 2" TRAINER_ARGS="--num-gpus 2" bash benchmarks/gpu/run_all.sh
set -uo pipefail
. "$(dirname "$0")/device_env.sh" "${RUN_ALL_BUDGET_S:-530}"   # repo root, $OUT, the env, left()

{
  echo "== $(date -u +%FT%TZ) run_all.sh, budget ${RUN_ALL_BUDGET_S:-530} s"
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | head -9
  if [ -f .devbundle/install_bundle.sh ]; then
    bash .devbundle/install_bundle.sh || { echo "bundle install failed"; exit 1; }
  else
    echo "no .devbundle/ here: run benchmarks/gpu/bundle/make_bundle.sh in the repo root and carry .devbundle"; exit 1
  fi
  export PYTHONPATH=/tmp/site:$PWD
  python3 -c "import torch, transformers, deepspeed, trl, ray; print('torch', torch.__version__, 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__, 'trl', trl.__version__, 'ray', ray.__version__, 'gpus', torch.cuda.device_count())" 2>&1 | grep -v WARNING

  # 1. GRPO step vs TRL: leave the trainer benchmark at least 170 s
  t1=$(( $(left) - 170 )); [ "$t1" -gt 360 ] && t1=360
  echo "== $(date -u +%T) grpo_step_vs_trl.py (timeout ${t1} s)"
  timeout --kill-after=10 "$t1" python3 benchmarks/gpu/grpo_step_vs_trl.py --out "$OUT" --trl-timeout 170 ${GRPO_ARGS:-}
  echo "grpo_step_vs_trl.py exit $?"

  # 2. trainer throughput: what is left, the presets' own budget half of it per launcher
  t2=$(( $(left) - 5 ))
  echo "== $(date -u +%T) trainer_throughput.py (timeout ${t2} s)"
  timeout --kill-after=10 "$t2" python3 benchmarks/gpu/trainer_throughput.py --out "$OUT" \
    --anchor-timeout 90 --budget-s $(( (t2 - 60) / 2 )) ${TRAINER_ARGS:-}
  echo "trainer_throughput.py exit $?"
  echo "== $(date -u +%T) done, $(left) s of the budget left"
} 2>&1 | grep --line-buffered -v "FutureWarning\|return func(\*args, \*\*kwargs)" | tee "$OUT/run_all.log"
