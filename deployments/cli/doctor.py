"""`skillgate doctor`: one table of what this machine has, with a fix for every failing row."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from typing import Literal

from skillgate_core.base.paths import default_home, state_layout

__all__ = ["CheckRow", "run_checks"]

REQUIRED_PACKAGES = (
    "prefect", "ray", "deepspeed", "torch", "transformers", "trl", "peft", "accelerate",
    "datasets", "tokenizers", "docker", "duckdb", "polars", "typer", "rich",
)
MIN_FREE_GIB = 2.0


@dataclass(frozen=True)
class CheckRow:
    """One doctor row."""

    name: str
    """What was checked."""
    status: Literal["ok", "warn", "fail"]
    """fail makes `doctor` exit 1; warn is a degraded but working setup."""
    detail: str
    """What was found."""
    fix: str = ""
    """How to fix it (empty when ok)."""


def _python() -> CheckRow:
    v = sys.version_info
    ok = v >= (3, 11)
    return CheckRow("python", "ok" if ok else "fail", sys.version.split()[0], "" if ok else "use Python >= 3.11")


def _packages() -> list[CheckRow]:
    rows = []
    for name in REQUIRED_PACKAGES:
        try:
            rows.append(CheckRow(f"package {name}", "ok", md.version(name)))
        except md.PackageNotFoundError:
            rows.append(CheckRow(f"package {name}", "fail", "not installed", "make setup"))
    return rows


def _torch_device() -> CheckRow:
    try:
        import torch
    except ImportError:
        return CheckRow("torch device", "fail", "torch not importable", "make setup")
    if torch.cuda.is_available():
        return CheckRow("torch device", "ok", f"cuda x{torch.cuda.device_count()} ({torch.cuda.get_device_name(0)})")
    return CheckRow("torch device", "ok", f"cpu ({torch.get_num_threads()} threads; no CUDA: embedded default)")


def _docker() -> list[CheckRow]:
    from skillgate_core.envs import docker_sandbox
    from skillgate_core.envs.sandbox_config import BASE_IMAGE

    reason = docker_sandbox.unavailable_reason()
    if reason:
        fix = "sudo bash infra/dockerd.sh (starts dockerd; bubblewrap is used meanwhile)"
        return [CheckRow("docker daemon", "warn", reason[:120], fix)]
    from skillgate_core.envs.docker_images import docker_client

    client = docker_client()
    rows = [CheckRow("docker daemon", "ok", f"server {client.version().get('Version', '?')}")]
    try:
        image = client.api.inspect_image(BASE_IMAGE)
        rows.append(CheckRow("sandbox base image", "ok", f"{BASE_IMAGE} ({image['Id'][7:19]})"))
    except Exception:
        rows.append(CheckRow("sandbox base image", "warn", f"{BASE_IMAGE} missing (built on first docker sandbox)",
                             "sudo bash infra/base_image.sh (debootstrap, no registry; cached afterwards)"))
    return rows


def _bwrap() -> CheckRow:
    from skillgate_core.envs import bwrap_sandbox

    if not shutil.which("bwrap"):
        return CheckRow("bubblewrap", "fail", "bwrap not found", "apt-get install bubblewrap (make setup does it as root)")
    reason = bwrap_sandbox.unavailable_reason()
    if reason:
        return CheckRow("bubblewrap", "fail", reason[:120], "enable unprivileged user namespaces or run as root")
    if os.geteuid() == 0:
        return CheckRow("bubblewrap", "ok", "no network; runs as uid 65534; cgroup memory/pids/CPU; tmpfs workspace")
    return CheckRow("bubblewrap", "warn", "no network; limits by rlimits only (no cgroup, no workspace size cap)",
                    "run as root for cgroup limits and a size-capped workspace")


def _prefect_api() -> CheckRow:
    url = os.environ.get("PREFECT_API_URL")
    if not url:
        return CheckRow("prefect api", "ok", "embedded: an ephemeral server starts on demand")
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=5) as resp:
            return CheckRow("prefect api", "ok", f"{url} answers ({resp.status})")
    except Exception as exc:
        return CheckRow("prefect api", "fail", f"{url}: {type(exc).__name__}",
                        "bash infra/prefect_server.sh, or unset PREFECT_API_URL for the embedded server")


def _warehouse() -> CheckRow:
    from warehouse import warehouse_status

    try:
        s = warehouse_status(state_layout())
    except Exception as exc:
        return CheckRow("warehouse", "fail", f"{state_layout().warehouse_file}: {str(exc)[:120]}",
                        "skillgate warehouse rebuild")
    log = f"{s.pending} pending, {s.rejected} rejected, {s.archived} archived events"
    if not s.exists:
        return CheckRow("warehouse", "ok", f"{s.file} (not created yet: the first run creates it; {log})")
    if s.busy:
        return CheckRow("warehouse", "warn", f"{s.file}: locked by a writer for 3 s ({log})", "retry in a moment")
    detail = f"{s.file}: schema v{s.schema_version} (code v{s.latest_version}), {s.rows.get('run', 0)} runs; {log}"
    if s.schema_version < s.latest_version:
        return CheckRow("warehouse", "warn", detail, "skillgate warehouse ingest (migrates the schema)")
    if s.rejected:
        return CheckRow("warehouse", "warn", detail, "skillgate warehouse verify (lists refused events and why)")
    if s.dead_runs:
        return CheckRow("warehouse", "warn", f"{detail}; {s.dead_runs} run(s) 'running' whose process is gone",
                        "skillgate warehouse reap (marks them interrupted)")
    return CheckRow("warehouse", "ok", detail)


def _state_dir() -> list[CheckRow]:
    home = state_layout().home
    rows = []
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home):
            pass
        rows.append(CheckRow("state dir", "ok", f"{home} (chosen by: {default_home()[1]})"))
    except OSError as exc:
        rows.append(CheckRow("state dir", "fail", f"{home}: {exc.strerror}", "set SKILLGATE_HOME to a writable dir"))
        return rows
    free = shutil.disk_usage(home).free / 2**30
    status: Literal["ok", "fail"] = "ok" if free >= MIN_FREE_GIB else "fail"
    rows.append(CheckRow("free disk", status, f"{free:.1f} GiB at {home}",
                         "" if status == "ok" else f"free at least {MIN_FREE_GIB} GiB"))
    return rows


def run_checks() -> list[CheckRow]:
    return [_python(), *_packages(), _torch_device(), *_docker(), _bwrap(), _prefect_api(), _warehouse(), *_state_dir()]
