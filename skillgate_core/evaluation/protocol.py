"""Frozen evaluation protocols and their fingerprints (METHOD.md 8).

A protocol's identity is `SPEC__SKILLMODE__rREPEATS__FP10`, FP10 being the first 10 hex of the
sha256 of a payload holding the sha256 of the task list, the skill snapshot digest, the slate
manifest sha256, the prompt profile and tool schema digests, the seed, the sampling settings and
the context size. Two results can only be compared when their fingerprints are equal; re-using an
identity with a different body aborts (`register_protocol`).

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

from skillgate_core.config import canonical_json, config_from_mapping, config_to_dict
from skillgate_core.digests import atomic_write_json

__all__ = ["EvalProtocol", "ProtocolConflictError", "ProtocolMismatchError", "assert_same_protocol", "register_protocol"]


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
    """Sampling seed of trial 0 (trial r uses seed + r)."""
    temperature: float
    """Sampling temperature."""
    top_p: float
    """Sampling nucleus mass."""
    max_new_tokens: int
    """Per-turn generation limit."""
    context_size: int
    """Tokens of context the policy may use per episode."""

    def fingerprint(self) -> str:
        payload = {k: v for k, v in config_to_dict(self).items() if k not in ("spec_id", "skill_mode", "repeats")}
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()

    def protocol_id(self) -> str:
        return f"{self.spec_id}__{self.skill_mode}__r{self.repeats}__{self.fingerprint()[:10]}"

    def body(self) -> dict[str, Any]:
        return {"protocol_id": self.protocol_id(), "fingerprint": self.fingerprint(), **config_to_dict(self)}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], source: str) -> EvalProtocol:
        values = {k: v for k, v in body.items() if k not in ("protocol_id", "fingerprint")}
        return config_from_mapping(cls, values, source)


def register_protocol(protocol: EvalProtocol, root: str | Path) -> Path:
    """Write root/PROTOCOL_ID.json once; the same id with another body raises ProtocolConflictError."""
    path = Path(root) / f"{protocol.protocol_id()}.json"
    if path.exists():
        existing = json.loads(path.read_text())
        if existing != protocol.body():
            raise ProtocolConflictError(
                f"{path}: protocol id {protocol.protocol_id()} is registered with a different body; "
                "a changed protocol needs a new spec id"
            )
        return path
    return atomic_write_json(path, protocol.body())


def assert_same_protocol(fingerprints: Iterable[tuple[str, str]]) -> str:
    """Refuse a comparison whose rows (label, fingerprint) do not share one fingerprint; returns it."""
    rows = sorted(set(fingerprints))  # one mention per (label, fingerprint): tables pass one per row
    distinct = sorted({fp for _, fp in rows})
    if len(distinct) != 1:
        detail = ", ".join(f"{label}={fp[:10]}" for label, fp in rows)
        raise ProtocolMismatchError(f"rows come from {len(distinct)} protocol fingerprints ({detail}); refusing to compare")
    return distinct[0]
