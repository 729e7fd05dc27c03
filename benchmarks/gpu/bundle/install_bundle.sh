#!/usr/bin/env bash
# Runs on the GPU machine: installs .devbundle/ (made by make_bundle.sh) into /tmp/site; then
# export PYTHONPATH=/tmp/site. Installed packages are skipped on a warm machine.
set -e
b=${1:-.devbundle}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$b"/wheels/*.whl
[ -d /tmp/site/deepspeed ] || DS_BUILD_OPS=0 python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target /tmp/site "$b"/deepspeed-*.tar.gz
# ray is left out of a bundle made for in-process runs only (the launcher "process" never imports it)
[ -d /tmp/site/ray ] || [ ! -f "$b"/ray-slim.tar.xz ] || tar -C /tmp/site -xJf "$b"/ray-slim.tar.xz
