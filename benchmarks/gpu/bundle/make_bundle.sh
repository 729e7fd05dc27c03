#!/usr/bin/env bash
# Builds .devbundle/ in the current repo: the packages the GPU machine lacks (docs/gpu.md, "What
# travels"), to send there with the repo. Run it from the repo root on a machine with network:
#   bash benchmarks/gpu/bundle/make_bundle.sh
#   wheels/   pure or cp312 manylinux wheels (trl, datasets, pydantic, hjson, jsonschema, ...)
#   deepspeed-*.tar.gz  (installed there from source with --no-build-isolation; ops JIT-compile on use)
#   ray-slim.tar.xz     Ray without java jars, rllib, serve, llm, dashboard client, at xz -9e (ray 2.60: 24.4 MB, -6 gave
#                       29.0 MB, which with the 32-MB checkout passed the 64 MiB a call carries; ~2 min to compress)
# On the GPU machine, start each command with:  bash .devbundle/install_bundle.sh && export PYTHONPATH=/tmp/site
# (install_bundle.sh is copied into .devbundle/, so the bundle installs itself.)
set -euo pipefail
out=.devbundle; mkdir -p "$out/wheels"
grep -qx '/.devbundle/' .git/info/exclude 2>/dev/null || { [ -d .git ] && mkdir -p .git/info && echo '/.devbundle/' >> .git/info/exclude; } || true
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
# Every package is pinned to infra/requirements-lock.txt, so a new release on the index changes
# nothing a GPU run measures; a package the lock lacks (pydantic-core: pydantic pins it) stays as asked.
lock=infra/requirements-lock.txt
pinned() {
  local name spec
  for name in "$@"; do
    spec=$(grep -i -m1 -E "^${name//[-_]/[-_]}==" "$lock" || true)
    echo "${spec:-$name}"
  done
}
python3 -m pip download -q --no-deps "${plat[@]}" -d "$out/wheels" \
  $(pinned trl datasets dill multiprocess pydantic pydantic-core annotated-types typing-inspection hjson \
    jsonschema jsonschema-specifications referencing rpds-py tensorboardx) ${EXTRA_WHEELS:-}
python3 -m pip download -q --no-deps --no-binary=:all: -d "$out" "$(pinned deepspeed)"
# NO_RAY=1 leaves Ray out (in-process runs never import it, and the checkout plus Ray pass 64 MiB).
if [ -z "${NO_RAY:-}" ] && [ ! -f "$out/ray-slim.tar.xz" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps "${plat[@]}" -d "$tmp" "$(pinned ray)"
  (cd "$tmp" && unzip -q ray-*.whl && rm -rf ray/jars ray/rllib ray/serve ray/llm ray/dashboard/client ray/tests \
     && find . -name __pycache__ -prune -exec rm -rf {} + && tar -cf - ray ray-*.dist-info | xz -T2 -9e) > "$out/ray-slim.tar.xz"
  rm -rf "$tmp"
fi
cp "$(dirname "$0")/install_bundle.sh" "$out/"
du -sh "$out"
