"""catalog.json: an index of every experiment, its segments, exports and evaluations.

The catalog is derived data: `refresh_catalog` rescans the folders and rewrites it atomically
under a lock, so it is never half-written and two refreshes never interleave. Every ownership
function that creates or ends an experiment, segment, export or evaluation refreshes it; it holds
no per-checkpoint or per-row facts, so it stays current between those events. The folders stay
the truth; `skillgate warehouse verify` reports a catalog that disagrees with them.

    load_catalog(root)["experiments"]["exp-1"]["exports"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillgate_core.digests import atomic_write_json
from skillgate_core.ownership.atomic import read_json
from skillgate_core.ownership.evals import list_evals
from skillgate_core.ownership.experiment import list_experiments
from skillgate_core.ownership.exports import list_exports
from skillgate_core.ownership.layout import CATALOG_FILE, experiment_dir
from skillgate_core.ownership.locks import file_lock
from skillgate_core.ownership.segments import list_segments

__all__ = ["load_catalog", "refresh_catalog", "scan_catalog"]

CATALOG_VERSION = 1


def scan_catalog(root: Path) -> dict[str, Any]:
    """The catalog as the folders say it is now (no timestamps, so two scans compare equal)."""
    experiments: dict[str, Any] = {}
    for rec in list_experiments(root):
        exp = experiment_dir(root, rec.experiment_id)
        experiments[rec.experiment_id] = {
            "algorithm": rec.algorithm,
            "created_at": rec.created_at,
            "segments": [
                {"run_name": s.run_name, "ordinal": s.ordinal, "exit_reason": s.exit_reason,
                 "resumed_from_step": s.resumed_from.step if s.resumed_from else None}
                for s in list_segments(exp)
            ],
            "exports": [
                {"export_id": x.export_id, "run_name": x.run_name, "step": x.step} for x in list_exports(exp)
            ],
            "evals": [
                {"eval_id": e.eval_id, "export_id": e.export_id, "status": e.status,
                 "protocol_fingerprint": e.protocol_fingerprint}
                for e in list_evals(exp)
            ],
        }
    return {"version": CATALOG_VERSION, "experiments": experiments}


def refresh_catalog(root: Path) -> dict[str, Any]:
    """Rescan and rewrite root/catalog.json; returns the catalog."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".catalog.lock"):
        catalog = scan_catalog(root)
        atomic_write_json(root / CATALOG_FILE, catalog)
    return catalog


def load_catalog(root: Path) -> dict[str, Any]:
    f = Path(root) / CATALOG_FILE
    return read_json(f) if f.is_file() else {"version": CATALOG_VERSION, "experiments": {}}
