"""Which policy is evaluated, and which experiment owns its evaluation (docs/method.md 10).

A policy is given as
  * a stage output `policy_export/` (grpo) whose export.json names experiment_id and export_id,
  * a published export folder experiments/EXP/model/exports/ID (its lineage.json names them),
  * any other HF model folder (the SFT model, a BC/DPO baseline, a downloaded checkpoint), or
  * the URL of an OpenAI-compatible endpoint plus a model name.
The first two are owned by their experiment. The last two belong to no experiment, so they get a
clearly named standalone evaluation experiment: `standalone-eval-<sha10>` holding the model as
export `model-<sha10>` (sha10 = the folder's content digest; files hard-linked), or
`standalone-eval-endpoint-<sha10>` holding an endpoint export (sha10 of URL + model name). The same
model always lands in the same experiment, so its evaluations resume and compare.

    ref = resolve_policy("runs/grpo/policy_export", root=experiments_root(state_layout()))
    ref.experiment_id, ref.export_id, ref.model_dir
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillgate_core.base.atomic import link_tree
from skillgate_core.base.digests import path_sha256
from skillgate_core.ownership import (
    ExperimentExists,
    UnknownExperiment,
    build_endpoint_export,
    build_export,
    create_experiment,
    experiment_dir,
    finish_segment,
    load_export,
    open_experiment,
    start_segment,
)
from skillgate_core.ownership.exports import weights_problems
from skillgate_core.ownership.layout import COMPLETE_MARKER, LINEAGE_FILE
from skillgate_core.policy.openai_chat import OpenAIEndpoint

__all__ = ["EXPORT_JSON", "PolicyRef", "is_endpoint", "resolve_policy"]

EXPORT_JSON = "export.json"
"""What a training stage writes beside its policy_export (experiment_id, export_id, ...)."""


@dataclass(frozen=True)
class PolicyRef:
    """A policy to evaluate and its owner."""

    kind: Literal["export", "model", "endpoint"]
    """export: owned by a training experiment; model / endpoint: owned by a standalone evaluation experiment."""
    location: str
    """What the user gave: a folder path or the endpoint URL."""
    experiment_id: str
    """The owning experiment."""
    export_id: str
    """The export within it."""
    model_dir: Path | None = None
    """The weights to load (None for an endpoint)."""
    endpoint: OpenAIEndpoint | None = None
    """The endpoint (kind endpoint)."""
    created: tuple[str, ...] = field(default=())
    """What this call created ('experiment', 'segment', 'export'), for the caller to record."""
    profile: str = ""
    """The training profile that produced the export (from its lineage; '' when none did)."""

    @property
    def label(self) -> str:
        """Default method label of the rows: the training profile (what the paper's tables compare),
        else the served model name or the export id."""
        if self.profile:
            return self.profile
        return self.endpoint.model if self.endpoint is not None else self.export_id

    @property
    def standalone(self) -> bool:
        return self.kind != "export"


def is_endpoint(policy: str) -> bool:
    return policy.startswith(("http://", "https://"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:40] or "model"


def _ensure_experiment(root: Path, experiment_id: str, init: str, hypothesis: str) -> bool:
    try:
        open_experiment(root, experiment_id)
        return False
    except UnknownExperiment:
        pass
    try:
        create_experiment(root, experiment_id, algorithm="none: standalone evaluation", data="-", init=init,
                          hypothesis=hypothesis)
        return True
    except ExperimentExists:  # created concurrently
        return False


def _publish(root: Path, experiment_id: str, export_id: str, publish) -> tuple[str, ...]:
    """Publish a standalone experiment's one export in a short segment of its own (the import)."""
    exp = experiment_dir(root, experiment_id)
    if load_export(exp, export_id) is not None:
        return ()
    run_name = f"import-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    start_segment(root, run_name, experiment_id=experiment_id)
    try:
        publish(run_name)
    except BaseException:
        finish_segment(root, experiment_id, run_name, "failed")
        raise
    finish_segment(root, experiment_id, run_name, "completed")
    return ("segment", "export")


def _owned(path: Path, root: Path) -> PolicyRef | None:
    """The owner named by export.json or lineage.json beside the weights, checked against the experiment."""
    for name in (EXPORT_JSON, LINEAGE_FILE):
        meta = path / name
        if not meta.is_file():
            continue
        data: dict[str, Any] = json.loads(meta.read_text())
        experiment_id, export_id = data.get("experiment_id"), data.get("export_id")
        if not experiment_id or not export_id:
            raise ValueError(f"{meta}: names no experiment_id / export_id")
        if name == LINEAGE_FILE and not (path / COMPLETE_MARKER).is_file():
            raise ValueError(f"{path}: an export folder without its COMPLETE marker (a build in progress?)")
        exp, _ = open_experiment(root, experiment_id)
        if load_export(exp, export_id) is None:
            raise ValueError(f"{meta}: export '{export_id}' is not a published export of experiment "
                             f"'{experiment_id}' under {root}")
        lineage = json.loads((path / LINEAGE_FILE).read_text()) if (path / LINEAGE_FILE).is_file() else {}
        profile = str(lineage.get("lineage", {}).get("profile", ""))
        return PolicyRef("export", str(path), experiment_id, export_id, model_dir=path, profile=profile)
    return None


def resolve_policy(policy: str, *, root: Path, model: str = "", endpoint_options: dict[str, Any] | None = None
                   ) -> PolicyRef:
    """The PolicyRef of `policy` (module docstring); creates the standalone experiment when needed."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if is_endpoint(policy):
        if not model:
            raise ValueError(f"policy {policy} is an endpoint URL: --model must name the served model")
        endpoint = OpenAIEndpoint(base_url=policy, model=model, **(endpoint_options or {}))
        sha10 = hashlib.sha256(f"{policy.rstrip('/')}\n{model}".encode()).hexdigest()[:10]
        experiment_id, export_id = f"standalone-eval-endpoint-{sha10}", f"endpoint-{_slug(model)}"
        created: tuple[str, ...] = ("experiment",) if _ensure_experiment(
            root, experiment_id, init=f"{policy} model {model}",
            hypothesis=f"evaluation of the model '{model}' served at {policy}, which no SkillGate experiment owns",
        ) else ()
        created += _publish(root, experiment_id, export_id, lambda run: build_endpoint_export(
            root, experiment_id, export_id, run_name=run, base_url=policy, model=model))
        return PolicyRef("endpoint", policy, experiment_id, export_id, endpoint=endpoint, created=created)
    path = Path(policy).expanduser().resolve()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: not a model folder (no config.json) and not an http(s) endpoint URL")
    owned = _owned(path, root)
    if owned is not None:
        return owned
    problems = weights_problems(path)  # before the standalone experiment exists: a refusal leaves nothing behind
    if problems:
        raise FileNotFoundError(f"{path}: not a model folder: {'; '.join(problems)}")
    sha = path_sha256(path)
    experiment_id, export_id = f"standalone-eval-{sha[:10]}", f"model-{sha[:10]}"
    created = ("experiment",) if _ensure_experiment(
        root, experiment_id, init=f"{path} (sha256 {sha})",
        hypothesis=f"evaluation of the model at {path}, which no SkillGate experiment owns",
    ) else ()
    created += _publish(root, experiment_id, export_id, lambda run: build_export(
        root, experiment_id, export_id, run_name=run, step=0, write=lambda tmp: link_tree(path, tmp),
        lineage={"kind": "standalone", "source": str(path), "source_sha256": sha}))
    exported = load_export(experiment_dir(root, experiment_id), export_id)
    assert exported is not None
    return PolicyRef("model", str(path), experiment_id, export_id, model_dir=Path(exported.path), created=created)
