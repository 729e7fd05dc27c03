#!/usr/bin/env bash
# Deliverable 4 of issue [gpu], the learning result, in device commands that each end within 10 minutes
# (docs/gpu.md, "4. The learning result"). The stages run through benchmarks/gpu/learning_result.py
# (pipeline.run_stage on the stage functions; no Prefect, no warehouse).
#
#   PART=a  on GPU 0: init-model -> collect (reference teacher, selection noise) -> sft, then the first eval70_v1
#           trials of the SFT policy (does it act, does it copy a slate name: the measurement that decides b and c),
#           then rl-data-prep of the arms' tables and a short GRPO run of the SkillGate arm (its step time sizes b),
#           each only if the budget leaves room
#   PART=b  prep (reused when the machine is warm, else rebuilt), then the training of every arm of ARMS (default
#           the three GRPO arms mixed_task_reward, SkillGate = selector_clean_oracle_action_credit,
#           selector_clean_oracle_masked_task_only), one process each, in parallel over the GPUs round-robin (any
#           number of arms and GPUs: several processes share a GPU)
#   PART=c  prep, then eval70_v1 of the SFT policy and of each arm, in parallel likewise (needs the machine warm
#           from b: an arm's export is never rebuilt implicitly; an evaluation cut off resumes in another c)
#   PART=all prep, then eval70 of the SFT policy and training + eval70 of each arm, all in parallel: the whole
#           result in one command (a fresh machine; fewer GRPO steps: LR_ARGS="--grpo-steps N")
#   PART=d  CPU machine: the paper build from what a-c brought back (LR_COLLECTED: folders or .tar.gz files)
#
# ARMS: the arms, space- or comma-separated, each PROFILE (GRPO seed 0) or PROFILE@sN (GRPO seed N), PROFILE one of
# the GRPO profiles (skillgate_core/rl/profiles.py) or bc / dpo (the supervised baselines from the same SFT
# policy); e.g. ARMS="mixed_task_reward@s1 selector_action_credit no_skill bc". Every GRPO arm is the scale's one
# [grpo] config with its profile and seed set; a seeded arm's eval rows are labelled PROFILE@sN. A selector profile
# may add labelled variants (docs/method.md): selector_clean_oracle_action_credit+identity_first_mention. An unknown
# or malformed arm ends the command before prep (learning_result.py arms).
#
# State between commands: the stage cache under LR_HOME (/tmp/skillgate-lr on the device machine). A machine
# still warm from the last command reuses every finished stage (so b and c should follow a, and each other,
# within the machine's 30 s idle window); a fresh one rebuilds prep from the carried bench (same configs, same
# inputs: init-model, collect, rl-data-prep are deterministic, SFT has the same seed and data) before training.
#
# Carried (device `carry`): .devbundle (install_bundle.sh: trl, datasets, deepspeed, ...), and the checkout copy
# holding .lr/bench.tar.xz (`learning_result.py write-bench`, ~7 MB) and .bwrap/*.deb (bubblewrap + libs).
# Results: $OUT/lr_<part>.tar.gz (the driver's JSON per command, eval/<label>/, training/<label>/; no
# weights) and $OUT/lr_<part>.log. Environment: ARMS, BUDGET_S (default 540: the whole command), DEVBUNDLE,
# BWRAP_DEBS, LR_BENCH, LR_HOME, LR_ARGS (extra driver arguments, e.g. "--grpo-steps 12 --eval-repeats 1"),
# JOBS_PER_GPU (default 4: driver processes one GPU runs at once; the rest queue for a slot), EVAL_SFT (default 1;
# 0: parts c and all evaluate the arms only, for a session adding arms to a cohort whose SFT eval is already in).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
part=${PART:-${1:-a}}
OUT=${OUT:-$PWD/benchmarks/results/gpu/lr-local}
mkdir -p "$OUT"
export OUT PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE=disabled
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # KINDS.md: keep multicast off
export LR_HOME=${LR_HOME:-/tmp/skillgate-lr}
# cuBLAS's fixed workspace: PyTorch's strict deterministic mode (SFT, sft.determinism) needs it before cuBLAS starts
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
deadline=$(( $(date +%s) + ${BUDGET_S:-540} ))
left() { echo $(( deadline - $(date +%s) )); }
bundle=${DEVBUNDLE:-.devbundle}
debs=${BWRAP_DEBS:-.bwrap}
bench=${LR_BENCH:-.lr/bench.tar.xz}
driver=benchmarks/gpu/learning_result.py
py=${PYTHON:-python3}
# lr KEEP ARGS...: the driver under what is left of the budget minus KEEP s (SIGTERM first: an evaluation cut
# off is recorded as incomplete and resumed by the next command on a warm machine); ARGS after LR_ARGS: they win
lr() { local keep=$1; shift; local t=$(( $(left) - keep ))
       [ "$t" -gt 20 ] || { echo "skipped (no time left): $*"; return 0; }
       timeout -s TERM --kill-after=15 "$t" "$py" "$driver" ${LR_ARGS:-} --bench "$bench" --out "$OUT/lr" "$@"; }

pack() {  # everything the driver wrote, as one file (the device returns at most 8 files, 2 folders down)
  [ -d "$OUT/lr" ] && tar -czf "$OUT/lr_${part}.tar.gz" -C "$OUT" lr && rm -rf "$OUT/lr"
  echo "== $(date -u +%T) packed $(du -h "$OUT/lr_${part}.tar.gz" 2>/dev/null | cut -f1) ($(left) s of the budget left)"
}

setup() {
  echo "== $(date -u +%FT%TZ) learning_result.sh part $part, budget ${BUDGET_S:-540} s, commit ${SKILLGATE_GIT_COMMIT:-?}"
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>&1 | head -4
  if [ -n "${LR_LOCAL:-}" ]; then echo "LR_LOCAL: this machine's Python and bwrap"; return 0; fi
  if [ ! -d /tmp/site/trl ]; then bash "$bundle/install_bundle.sh" "$bundle" || { echo "bundle install failed"; exit 1; }
  else echo "bundle: already in /tmp/site (warm machine)"; fi
  export PYTHONPATH=/tmp/site:$PWD
  mkdir -p /tmp/bwrap && for f in "$debs"/*.deb; do dpkg -x "$f" /tmp/bwrap; done
  export PATH=/tmp/bwrap/usr/bin:$PATH
  if ldd /tmp/bwrap/usr/bin/bwrap | grep -q "not found"; then
    export LD_LIBRARY_PATH=/tmp/bwrap/lib/x86_64-linux-gnu:/tmp/bwrap/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  echo "bwrap: $(bwrap --version 2>&1); state home $LR_HOME: $(ls "$LR_HOME/artifacts" 2>/dev/null | tr '\n' ' ')"
  python3 -c "import polars" 2>/dev/null && echo "note: polars is present here (the driver blocks it anyway)"
}

if [ "$part" = d ]; then  # CPU machine: the paper from the returned files
  work=$(mktemp -d); args=()
  for src in ${LR_COLLECTED:-benchmarks/results/gpu/lr_a.tar.gz}; do
    if [ -d "$src" ]; then args+=(--collected "$src")
    else d="$work/$(basename "$src" .tar.gz)"; mkdir -p "$d" && tar -xzf "$src" -C "$d" && args+=(--collected "$d"); fi
  done
  "$py" "$driver" paper "${args[@]}" --home "${LR_HOME}" --out "${LR_PAPER_OUT:-benchmarks/results/gpu/lr_paper}"
  exit $?
fi

arms_text=${ARMS:-mixed_task_reward selector_clean_oracle_action_credit selector_clean_oracle_masked_task_only}
read -ra arms <<< "${arms_text//,/ }"

{
  setup
  # every arm checked before anything runs (an unknown profile, a malformed seed, an arm named twice)
  # shellcheck disable=SC2086  # LR_ARGS: driver arguments, split
  "$py" "$driver" arms ${LR_ARGS:-} --arms "${arms[*]}" || { echo "ARMS=\"$arms_text\": refused"; exit 2; }
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
  case "$part" in
    a)
      # 2026-12-01: prep then probes ran out of budget in rl-data-prep, before the eval probe; now the eval
      # probe follows SFT (the probe command preps only the policy when it runs no GRPO)
      echo "== $(date -u +%T) SFT policy, then its eval70_v1 probe, on GPU 0 ($(left) s left)"
      CUDA_VISIBLE_DEVICES=0 lr 25 probe --probe-grpo-steps 0 --tag a_eval --budget-s $(( $(left) - 40 )) \
        > "$OUT/probe_eval.log" 2>&1
      echo "eval probe exit $?"
      echo "== $(date -u +%T) rl-data-prep of the arms' tables, then the GRPO probe, on GPU 0 ($(left) s left)"
      CUDA_VISIBLE_DEVICES=0 lr 25 probe --probe-eval-trials 0 --arms "${arms[*]}" --tag a_grpo \
        --budget-s $(( $(left) - 40 )) > "$OUT/probe_grpo.log" 2>&1
      echo "grpo probe exit $?"
      grep -h "^\[..:..:..\]\|SUMMARY\|Error" "$OUT"/probe_*.log | grep -v "WARNING\|reused" | cut -c1-400 | tail -24
      mkdir -p "$OUT/lr" && mv "$OUT"/probe_*.log "$OUT/lr/" ;;
    b|c|all)
      echo "== $(date -u +%T) prep on GPU 0 ($(left) s left)"
      CUDA_VISIBLE_DEVICES=0 lr 60 prep --arms "${arms[*]}" --tag "${part}_prep"; echo "prep exit $?"
      # b: each arm's training; c: eval70 of the SFT policy and of each arm. One process each, spread over the
      # GPUs round-robin (SmolLM2-135M leaves an H200 mostly idle: 2026-12-01, three arms shared one)
      # all: the SFT policy's eval70 and each arm's training followed by its eval70, in one command
      # b after a probe on this machine: the steps that fit what is left (arms share a GPU when there are
      # fewer GPUs than arms), chosen once and kept in the home for c (an explicit --grpo-steps wins)
      # At most JOBS_PER_GPU processes on one GPU at once (default 4); the rest wait for a slot on their GPU.
      # 2026-12-02, one H200: seven GRPO arms at once took 11-24 GiB each and five died of CUDA OOM in their
      # first step; four at once fit (benchmarks/results/gpu/learning_smollm2_9a6e7f9/README.md).
      per_gpu=${JOBS_PER_GPU:-4}
      n=$(( gpus > 0 ? gpus : 1 ))
      fit=""
      if [ "$part" = b ] && [ -f "$LR_HOME/probe_timing.json" ]; then
        queue=$(( (${#arms[@]} + n - 1) / n )); share=$(( queue < per_gpu ? queue : per_gpu ))
        waves=$(( (queue + per_gpu - 1) / per_gpu )); fit_s=$(( ($(left) - 45) / waves ))
        fit="--fit-budget-s $fit_s --gpu-share $share"
        echo "== fitting the GRPO steps to $fit_s s ($waves wave(s)), $share arm(s) a GPU: $(cat "$LR_HOME/probe_timing.json" | tr -d '\n ')"
      fi
      jobs=(); cmds=()
      # EVAL_SFT=0: a later session of a cohort (its SFT printed the digest an earlier session's did) leaves the
      # SFT policy's eval70 to the folder that has it; the paper build refuses two differing copies of one label
      if [ "$part" != b ] && [ "${EVAL_SFT:-1}" != 0 ]; then jobs=(sft); cmds=(eval); fi
      for one in "${arms[@]}"; do
        jobs+=("$one")
        case "$part" in b) cmds+=("arm $fit") ;; c) cmds+=(eval) ;; all) cmds+=("arm --eval") ;; esac
      done
      rm -f "$OUT"/job_"${part}"_*.rc
      job() {  # job I GPU: one driver process; its exit status in job_<part>_I.rc
        local i=$1 g=$2
        echo "== $(date -u +%T) GPU $g: start ${cmds[$i]} ${jobs[$i]} ($(left) s left)"
        # shellcheck disable=SC2086  # cmds[i] is a subcommand and its flag
        CUDA_VISIBLE_DEVICES=$g lr 25 ${cmds[$i]} --arms "${jobs[$i]}" --tag "${part}_$i" > "$OUT/job_${part}_$i.log" 2>&1
        local rc=$?; echo "$rc" > "$OUT/job_${part}_$i.rc"
        echo "== $(date -u +%T) GPU $g: end ${cmds[$i]} ${jobs[$i]} exit $rc"
      }
      for (( g = 0; g < n; g++ )); do
        (  # this GPU's queue: jobs g, g+n, ... (round-robin), per_gpu at a time
          running=0
          for i in "${!jobs[@]}"; do
            [ $(( i % n )) -eq "$g" ] || continue
            if [ "$running" -ge "$per_gpu" ]; then wait -n; running=$(( running - 1 )); fi
            job "$i" "$g" & running=$(( running + 1 ))
          done
          wait
        ) &
      done
      wait
      for i in "${!jobs[@]}"; do
        echo "${cmds[$i]} ${jobs[$i]} exit $(cat "$OUT/job_${part}_$i.rc" 2>/dev/null || echo "? (never ran)")"
      done
      rm -f "$OUT"/job_"${part}"_*.rc
      grep -h "^\[..:..:..\]\|SUMMARY\|Error" "$OUT"/job_"${part}"_*.log | grep -v "WARNING\|reused" | cut -c1-400 | tail -30
      mkdir -p "$OUT/lr" && mv "$OUT"/job_"${part}"_*.log "$OUT/lr/" 2>/dev/null ;;
    *) echo "unknown PART=$part (a, b, c on the device; d on the CPU machine)"; exit 2 ;;
  esac
  pack
} 2>&1 | grep --line-buffered -v "FutureWarning\|UserWarning\|warnings.warn\|return func(\*args" | tee "$OUT/lr_${part}.log"
