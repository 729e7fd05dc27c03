"""Frozen evaluation protocols and their fingerprints (docs/method.md 8).

A protocol's identity is `SPEC__SKILLMODE__rREPEATS__FP10`, FP10 being the first 10 hex of its
fingerprint: the sha256 of a payload holding the sha256 of the task list, the skill snapshot
digest, the slate manifest sha256, the prompt profile and tool schema digests, the seed, the
sampling settings, the context size and the episode limits, together with the spec id, the skill
mode and the repeats (a demo run with fewer repeats is another protocol, never comparable with the
full one). Two results can only be compared when their fingerprints are equal; re-using an identity
with a different fingerprint aborts, naming both (`register_protocol`).

    spec = EvalProtocol(spec_id="eval70_v1", skill_mode="mixed", repeats=4, task_list_sha256=..., ...)
    spec.protocol_id()   # 'eval70_v1__mixed__r4__3fa2c01b9e'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillgate_core.base.atomic import atomic_write_json
from skillgate_core.base.config import canonical_json, config_from_mapping, config_to_dict

__all__ = [
    "EvalProtocol",
    "ProtocolConflictError",
    "ProtocolMismatchError",
    "assert_same_protocol",
    "check_pinned_id",
    "register_protocol",
]


class ProtocolConflictError(RuntimeError):
    """A protocol id is already registered with a different body."""


class ProtocolMismatchError(ValueError):
    """Rows compared in one table come from different protocol fingerprints."""


@dataclass(frozen=True)
class EvalProtocol:
    """Everything that must be equal for two evaluation results to be comparable."""

    spec_id: str
    """Protocol family, e.g. eval70_v1 or claw147_v1."""
    skill_mode: Literal["mixed", "none", "oracle"]
    """Which skills the agent is shown: the 16-skill slate, none, or only the oracle."""
    repeats: int
    """Trials per task."""
    task_list_sha256: str
    """sha256 of the ordered task-id list."""
    snapshot_digest: str
    """Digest of the frozen skill snapshot mounted at /skills."""
    manifest_sha256: str
    """sha256 of the slate manifest (skills.json of every task, in task order)."""
    prompt_profile_digest: str
    """Digest of the prompt profile (agent/prompts.py)."""
    tool_schema_digest: str
    """Digest of the tool schemas shown to the model."""
    seed: int
    """Protocol sampling seed; each trial's own seed is derived from it, the task and the repeat
    (evaluation.trials.trial_seed), so a trial's sample never depends on which trials ran with it."""
    temperature: float
    """Sampling temperature."""
    top_p: float
    """Sampling nucleus mass."""
    max_new_tokens: int
    """Per-turn generation limit."""
    context_size: int
    """Tokens of context the policy may use per episode."""
    split: str = ""
    """The bench split the tasks come from (eval70_v1, slate147, ...)."""
    tasks: int = 0
    """Number of tasks (what the bench holds: a demo bench may hold fewer than the spec's nominal count)."""
    max_turns: int = 30
    """Assistant turns per episode (seed 30)."""
    wall_clock_s: float = 850.0
    """Seconds per episode (seed 850)."""
    backend: str = "bwrap"
    """Sandbox backend (comparison hygiene: the same sandbox mode for every row)."""

    def fingerprint(self) -> str:
        """sha256 of every field (spec id, mode and repeats included)."""
        return hashlib.sha256(canonical_json(config_to_dict(self)).encode()).hexdigest()

    def protocol_id(self) -> str:
        return f"{self.spec_id}__{self.skill_mode}__r{self.repeats}__{self.fingerprint()[:10]}"

    def body(self) -> dict[str, Any]:
        return {"protocol_id": self.protocol_id(), "fingerprint": self.fingerprint(), **config_to_dict(self)}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], source: str) -> EvalProtocol:
        values = {k: v for k, v in body.items() if k not in ("protocol_id", "fingerprint")}
        return config_from_mapping(cls, values, source)


def register_protocol(protocol: EvalProtocol, root: str | Path) -> Path:
    """Write root/PROTOCOL_ID.json once; the same id with another body raises ProtocolConflictError
    naming both fingerprints."""
    path = Path(root) / f"{protocol.protocol_id()}.json"
    if path.exists():
        existing = json.loads(path.read_text())
        if existing != protocol.body():
            raise ProtocolConflictError(
                f"{path}: protocol id {protocol.protocol_id()} is registered with fingerprint "
                f"{existing.get('fingerprint', '?')}, this run gives fingerprint {protocol.fingerprint()} "
                "(a different body); refusing to reuse the id: a changed protocol needs a new spec id"
            )
        return path
    return atomic_write_json(path, protocol.body())


def check_pinned_id(protocol: EvalProtocol, pinned_id: str) -> None:
    """Refuse a run whose protocol id differs from the one the caller pinned (e.g. the id recorded
    with earlier rows): same spec, another fingerprint means the bench, prompt, tools, skills or
    settings changed. The message names both fingerprints (the pinned one by its 10-hex prefix)."""
    if protocol.protocol_id() != pinned_id:
        raise ProtocolConflictError(
            f"protocol id {pinned_id} was pinned (fingerprint {pinned_id.rsplit('__', 1)[-1]}...), but this "
            f"bench and settings give {protocol.protocol_id()} (fingerprint {protocol.fingerprint()}); "
            "results of the two are not comparable: refusing to run"
        )


def assert_same_protocol(fingerprints: Iterable[tuple[str, str]]) -> str:
    """Refuse a comparison whose rows (label, fingerprint) do not share one fingerprint; returns it."""
    rows = sorted(set(fingerprints))  # one mention per (label, fingerprint): tables pass one per row
    distinct = sorted({fp for _, fp in rows})
    if len(distinct) != 1:
        detail = ", ".join(f"{label}={fp[:10]}" for label, fp in rows)
        raise ProtocolMismatchError(f"rows come from {len(distinct)} protocol fingerprints ({detail}); refusing to compare")
    return distinct[0]
