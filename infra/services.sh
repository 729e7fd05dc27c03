#!/usr/bin/env bash
# Start what the sandboxes need, when it can be started: dockerd (as root) and the local base image.
# Without Docker the sandboxes fall back to bubblewrap, so a failure here is reported, not fatal.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -f infra/dockerd.sh ] && [ "$(id -u)" = 0 ]; then
  bash infra/dockerd.sh || echo "services: dockerd could not be started; sandboxes use bubblewrap" >&2
fi
if [ -f infra/base_image.sh ] && docker info >/dev/null 2>&1; then
  bash infra/base_image.sh || echo "services: base image build failed; docker-backed tasks will fail" >&2
fi
exit 0
