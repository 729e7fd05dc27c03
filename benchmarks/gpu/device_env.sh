# Sourced by the device commands (run_all.sh, run_grpo_and_rollouts.sh) right after `set -uo pipefail`:
#   . "$(dirname "$0")/device_env.sh" BUDGET_SECONDS
# Moves to the repo root; makes $OUT (default benchmarks/results/gpu); exports what every run wants
# (unbuffered Python, Ray without auth tokens, NVLink multicast off); defines `left`, the seconds of
# the budget still left.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-$PWD/benchmarks/results/gpu}
mkdir -p "$OUT"
export OUT PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # KINDS.md: keep multicast off
deadline=$(( $(date +%s) + $1 ))
left() { echo $(( deadline - $(date +%s) )); }
