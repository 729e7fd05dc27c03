"""Docker images for task sandboxes, with no registry: the local base image and per-task builds.

- `ensure_base_image()` makes sure `skillgate/base:bookworm` exists, running infra/base_image.sh
  (debootstrap -> cached rootfs tarball -> `docker import`) the first time.
- `task_image(task)` builds environment/ with its Dockerfile's FROM lines mapped onto local images
  (an explicit `image_map` entry, else the image itself when it is present locally, else the base
  image), plus one extra layer that snapshots the WORKDIR into /.skillgate/workspace.tar: the
  sandbox's workspace is a size-capped tmpfs volume, and Docker does not pre-fill those.
  Builds are cached by content: tag = skillgate/task-<id>:<sha256 of Dockerfile, context, base,
  build settings>. Builds have no network (network_mode none), like the sandboxes they make.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillgate_core.base.digests import path_sha256
from skillgate_core.base.file_locks import file_lock
from skillgate_core.envs.sandbox import SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import DEFAULT_WORKDIR, TaskPackage

if TYPE_CHECKING:
    import docker  # at run time imported inside the functions that use it, as before

__all__ = ["docker_client", "ensure_base_image", "map_from_lines", "prune_task_images", "task_image",
           "workspace_seed_path"]

LABEL = "org.skillgate.sandbox"
WORKSPACE_SEED = "/.skillgate/workspace.tar"
BASE_IMAGE_SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "base_image.sh"
_BUILD_SETTINGS = "network=none"
"""How images are built, part of the cache key: a change here rebuilds instead of reusing."""
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)


def workspace_seed_path() -> str:
    return WORKSPACE_SEED


@functools.cache
def docker_client() -> Any:
    """One shared docker.DockerClient (thread-safe connection pool sized for many sandboxes)."""
    import docker

    return docker.DockerClient(base_url=os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
                               version="auto", timeout=120, max_pool_size=64)


def _image_exists(client: docker.DockerClient, ref: str) -> bool:
    import docker.errors

    try:
        client.api.inspect_image(ref)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError:
        return False


def ensure_base_image(config: SandboxConfig | None = None) -> str:
    """The base image's id; builds it with infra/base_image.sh when missing (needs root then)."""
    cfg = config or SandboxConfig()
    client = docker_client()
    if not _image_exists(client, cfg.base_image):
        if not BASE_IMAGE_SCRIPT.is_file():
            raise SandboxError(f"base image {cfg.base_image} is missing and {BASE_IMAGE_SCRIPT} is not here; "
                               "run infra/base_image.sh from a SkillGate checkout")
        env = {**os.environ, "SKILLGATE_BASE_IMAGE": cfg.base_image}
        done = subprocess.run(["bash", str(BASE_IMAGE_SCRIPT)], capture_output=True, text=True, env=env)
        if done.returncode != 0 or not _image_exists(client, cfg.base_image):
            raise SandboxError(f"building {cfg.base_image} failed: {done.stderr.strip()[-800:]}")
    return client.api.inspect_image(cfg.base_image)["Id"]


def map_from_lines(dockerfile_text: str, resolve: Callable[[str], str]) -> tuple[str, dict[str, str]]:
    """Rewrite each FROM image with resolve(image) (stage names kept); returns text + {old: new}."""
    stages: set[str] = set()
    mapping: dict[str, str] = {}
    out = []
    for line in dockerfile_text.splitlines():
        m = _FROM.match(line)
        if m:
            prefix, flags, image, rest = m.groups()
            stage = re.match(r"\s+as\s+(\S+)", rest, re.IGNORECASE)
            if image not in stages:
                new = resolve(image)
                mapping[image] = new
                image = new
            if stage:
                stages.add(stage.group(1))
            line = f"{prefix}{flags}{image}{rest}"
        out.append(line)
    return "\n".join(out) + "\n", mapping


def task_image(task: TaskPackage, config: SandboxConfig | None = None) -> tuple[str, str]:
    """(image tag, workdir) for `task`, building it when the content-addressed tag is missing."""
    cfg = config or SandboxConfig()
    client = docker_client()
    base_id = ensure_base_image(cfg)

    def resolve(image: str) -> str:
        if image in cfg.image_map:
            return cfg.image_map[image]
        if "$" not in image and image != "scratch" and _image_exists(client, image):
            return image
        return cfg.base_image

    if task.dockerfile is not None:
        text = (task.environment_dir / "Dockerfile").read_text(encoding="utf-8")
        workdir = task.workdir
    else:
        image = resolve(task.config.environment.docker_image)
        attrs = client.api.inspect_image(image)
        workdir = (attrs.get("Config") or {}).get("WorkingDir") or "/"
        if workdir == "/":  # the workspace is a volume: never at the root
            workdir = DEFAULT_WORKDIR
        text = f"FROM {task.config.environment.docker_image}\n"
    text, _ = map_from_lines(text, resolve)
    user = task.dockerfile.user if task.dockerfile is not None else ""
    # Snapshot the workspace as root, then restore the task's USER.
    text += (f"USER root\nWORKDIR {workdir}\n"
             f"RUN mkdir -p /.skillgate && tar -C {workdir} -cf {WORKSPACE_SEED} .\n"
             + (f"USER {user}\n" if user else ""))
    context_digest = path_sha256(task.environment_dir) if task.environment_dir.is_dir() else ""
    # _BUILD_SETTINGS: images built before the builds went offline are not reused.
    key = hashlib.sha256("\0".join([text, context_digest, base_id, _BUILD_SETTINGS]).encode()).hexdigest()[:16]
    slug = re.sub(r"[^a-z0-9._-]+", "-", task.task_id.lower()).strip("-.")[:100] or "task"
    tag = f"skillgate/task-{slug}:{key}"
    if _image_exists(client, tag):
        return tag, workdir
    lock_path = Path(tempfile.gettempdir()) / f"skillgate-build-{key}.lock"
    with file_lock(lock_path):  # concurrent sandboxes of one task build it once
        if not _image_exists(client, tag):
            _build(client, task, text, tag, min(task.config.environment.build_timeout_sec,
                                                  cfg.docker_build_timeout_sec), base_id)
    return tag, workdir


def _build(client: docker.DockerClient, task: TaskPackage, dockerfile_text: str, tag: str, timeout: float, base_id: str) -> None:
    with tempfile.TemporaryDirectory(prefix="skillgate-build-") as tmp:
        ctx = Path(tmp) / "context"
        if task.environment_dir.is_dir():
            shutil.copytree(task.environment_dir, ctx, symlinks=True)
        else:
            ctx.mkdir()
        (ctx / "Dockerfile.skillgate").write_text(dockerfile_text, encoding="utf-8")
        log: list[str] = []
        try:
            # network_mode none: the author's RUN lines are as offline as the sandbox will be.
            for chunk in client.api.build(path=str(ctx), dockerfile="Dockerfile.skillgate", tag=tag, rm=True,
                                          forcerm=True, pull=False, decode=True, timeout=int(timeout),
                                          network_mode="none",
                                          labels={LABEL: "image", "org.skillgate.task": task.task_id,
                                                  "org.skillgate.base": base_id}):
                if "stream" in chunk:
                    log.append(chunk["stream"].rstrip())
                if "error" in chunk:
                    raise SandboxError(f"building task {task.task_id} ({task.environment_dir / 'Dockerfile'}): "
                                       f"{chunk['error'].strip()}\n" + "\n".join(log[-15:]))
        except SandboxError:
            raise
        except Exception as exc:  # daemon errors, timeouts
            raise SandboxError(f"building task {task.task_id}: {type(exc).__name__}: {exc}") from exc


def prune_task_images(config: SandboxConfig | None = None) -> int:
    """Remove task images built on another base image than the current one; returns how many."""
    cfg = config or SandboxConfig()
    client = docker_client()
    if not _image_exists(client, cfg.base_image):
        return 0
    base_id = client.api.inspect_image(cfg.base_image)["Id"]
    removed = 0
    for image in client.api.images(filters={"label": f"{LABEL}=image"}):
        if (image.get("Labels") or {}).get("org.skillgate.base") == base_id:
            continue
        for tag in image.get("RepoTags") or [image["Id"]]:
            try:
                client.api.remove_image(tag, noprune=False)
                removed += 1
            except Exception:  # in use by a running sandbox: kept
                pass
    return removed
