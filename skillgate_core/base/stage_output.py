"""What every stage function returns; kept apart from the stage registry so that the library's low
layers (policy, agent, sft, benchgen) can return it without importing the registry above them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["StageOutput"]


@dataclass(frozen=True)
class StageOutput:
    """What a stage function returns: its output paths by role, plus small metrics for the record."""

    outputs: Mapping[str, Path]
    """Output role -> path (inside the stage's out_dir)."""
    metrics: Mapping[str, Any] = field(default_factory=dict)
    """JSON-able numbers and facts worth recording (sizes, counts, timings)."""
