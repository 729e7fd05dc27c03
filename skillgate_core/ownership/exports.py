"""Model exports: built in a temp folder, validated, marked COMPLETE, renamed into place.

An export is an ordinary Hugging Face model folder owned by one experiment:

    model/exports/EXPORT_ID/
      config.json                          required
      model.safetensors                    one file, or shards listed by ...
      model.safetensors.index.json         {"weight_map": {tensor: shard file}}
      (tokenizer files, chat template, ...)
      lineage.json                         experiment, segment, step, caller facts (run id, config digest)
      COMPLETE                             written last, just before the rename

    rec = build_export(root, "exp-1", "step-200", run_name="run-a", step=200,
                       write=lambda d: model.save_pretrained(d), lineage={"run_id": run_id})
    rec.weights_sha256     # path_sha256 of the published folder (what a downstream stage digests)

Validation (all problems are reported at once, ExportInvalid.problems): config.json is a JSON
object; with an index, every shard it names is present, each shard's tensor names equal the
index's for that shard, and no other *.safetensors sits beside them; without one, model.safetensors
is present; every shard's header parses and its data offsets fit in the file (a truncated shard
fails); lineage.json names this export. A process killed at any point leaves only a .tmp- folder:
`list_exports` never shows it and a retry with the same EXPORT_ID succeeds (stale temp builds of
dead processes are removed first).

An *endpoint export* (`build_endpoint_export`) stands for a model served behind an
OpenAI-compatible endpoint whose weights no experiment holds: endpoint.json (base_url, model) +
lineage.json + COMPLETE, no weights. It exists so that evaluations of such a model are owned like
any other (docs/method.md 10).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from skillgate_core.base.atomic import building_dir, read_json, remove_stale_builds
from skillgate_core.base.digests import path_sha256
from skillgate_core.ownership.errors import ExportExists, ExportInvalid, OnBadRecord, UnknownSegment
from skillgate_core.ownership.experiment import open_experiment
from skillgate_core.ownership.layout import COMPLETE_MARKER, LINEAGE_FILE, ExperimentDir, check_name
from skillgate_core.ownership.records import ExportRecord, read_or_report, utc_now

__all__ = [
    "CONFIG_FILE",
    "ENDPOINT_FILE",
    "INDEX_FILE",
    "SINGLE_WEIGHTS_FILE",
    "build_endpoint_export",
    "build_export",
    "list_exports",
    "load_export",
    "safetensors_keys",
    "validate_export_dir",
    "weights_problems",
]

CONFIG_FILE = "config.json"
ENDPOINT_FILE = "endpoint.json"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_WEIGHTS_FILE = "model.safetensors"
_MAX_HEADER = 100 * 2**20  # a safetensors header larger than this is corrupt, not a model


def safetensors_keys(path: Path) -> set[str]:
    """Tensor names in a safetensors file; ValueError if its header is corrupt or the file truncated."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ValueError("shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", raw)
        if n > _MAX_HEADER or 8 + n > size:
            raise ValueError(f"header length {n} does not fit in {size} bytes")
        header = json.loads(fh.read(n))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    end = 0
    keys = set()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        keys.add(name)
        end = max(end, int(info["data_offsets"][1]))
    if 8 + n + end > size:
        raise ValueError(f"truncated: data ends at byte {8 + n + end}, file has {size}")
    return keys


def validate_export_dir(path: Path, export_id: str) -> list[str]:
    """Every problem found in the export folder at `path` (empty list: valid)."""
    problems: list[str] = []
    cfg = path / CONFIG_FILE
    if not cfg.is_file():
        problems.append(f"{CONFIG_FILE} missing")
    else:
        try:
            if not isinstance(read_json(cfg), dict):
                problems.append(f"{CONFIG_FILE} is not a JSON object")
        except ValueError as exc:
            problems.append(f"{CONFIG_FILE} unreadable: {exc}")
    problems += _validate_weights(path)
    lin = path / LINEAGE_FILE
    if not lin.is_file():
        problems.append(f"{LINEAGE_FILE} missing")
    else:
        try:
            data = read_json(lin)
            if not isinstance(data, dict) or data.get("export_id") != export_id:
                problems.append(f"{LINEAGE_FILE} does not name export '{export_id}'")
            else:
                missing = [k for k in ("experiment_id", "run_name", "step") if k not in data]
                if missing:
                    problems.append(f"{LINEAGE_FILE} lacks {', '.join(missing)}")
        except ValueError as exc:
            problems.append(f"{LINEAGE_FILE} unreadable: {exc}")
    return problems


def weights_problems(path: Path) -> list[str]:
    """Every problem with the safetensors weights of an HF model folder (empty list: complete and readable)."""
    return _validate_weights(Path(path))


def _validate_weights(path: Path) -> list[str]:
    index = path / INDEX_FILE
    present = {p.name for p in path.glob("*.safetensors")}
    if not index.is_file():
        if SINGLE_WEIGHTS_FILE not in present:
            return [f"no weights: neither {INDEX_FILE} nor {SINGLE_WEIGHTS_FILE}"]
        try:
            return [] if safetensors_keys(path / SINGLE_WEIGHTS_FILE) else [f"{SINGLE_WEIGHTS_FILE} holds no tensors"]
        except (ValueError, KeyError, TypeError) as exc:
            return [f"{SINGLE_WEIGHTS_FILE}: {exc}"]
    try:
        weight_map = read_json(index)["weight_map"]
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError("weight_map is empty or not an object")
    except (ValueError, KeyError, TypeError) as exc:
        return [f"{INDEX_FILE} unreadable: {exc}"]
    by_shard: dict[str, set[str]] = {}
    for tensor, shard in weight_map.items():
        by_shard.setdefault(str(shard), set()).add(tensor)
    problems = []
    for shard, expected in sorted(by_shard.items()):
        if shard not in present:
            problems.append(f"shard {shard} missing (named by {INDEX_FILE})")
            continue
        try:
            keys = safetensors_keys(path / shard)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"shard {shard}: {exc}")
            continue
        if keys != expected:
            extra, lacking = sorted(keys - expected), sorted(expected - keys)
            problems.append(
                f"shard {shard}: keys differ from the index (not in index: {extra[:3]}, missing: {lacking[:3]})"
            )
    stray = sorted(present - set(by_shard))
    if stray:
        problems.append(f"shards not named by {INDEX_FILE}: {', '.join(stray)}")
    return problems


def build_export(
    root: Path,
    experiment_id: str,
    export_id: str,
    *,
    run_name: str,
    step: int,
    write: Callable[[Path], None],
    lineage: Mapping[str, Any] | None = None,
) -> ExportRecord:
    """Write, validate and publish export EXPORT_ID of `experiment_id`; returns its record.

    `write(tmp_dir)` puts the model files into a fresh temp folder. ExportInvalid (nothing
    published) when validation fails; ExportExists when EXPORT_ID is already published.
    """
    return _publish_export(root, experiment_id, export_id, run_name=run_name, step=step,
                           lineage=dict(lineage or {}), write=write, validate=True)


def build_endpoint_export(
    root: Path,
    experiment_id: str,
    export_id: str,
    *,
    run_name: str,
    base_url: str,
    model: str,
    lineage: Mapping[str, Any] | None = None,
) -> ExportRecord:
    """Publish an endpoint export (module docstring): endpoint.json instead of weights."""
    if not base_url or not model:
        raise ValueError("an endpoint export needs base_url and model")

    def write(tmp: Path) -> None:
        (tmp / ENDPOINT_FILE).write_text(json.dumps({"base_url": base_url, "model": model}, indent=2,
                                                    sort_keys=True) + "\n")

    return _publish_export(root, experiment_id, export_id, run_name=run_name, step=0,
                           lineage={"kind": "endpoint", **dict(lineage or {})}, write=write, validate=False)


def _publish_export(
    root: Path,
    experiment_id: str,
    export_id: str,
    *,
    run_name: str,
    step: int,
    lineage: dict[str, Any],
    write: Callable[[Path], None],
    validate: bool,
) -> ExportRecord:
    """The publication every export goes through: checks (segment known, EXPORT_ID free), stale builds
    of dead processes removed, then in a temp folder `write`, lineage.json, validation (when
    `validate`: a weights export), COMPLETE, digest, and the rename into place."""
    exp, _ = open_experiment(root, experiment_id)
    check_name("EXPORT_ID", export_id)
    if not exp.segment_file(run_name).is_file():
        raise UnknownSegment(f"export '{export_id}': no segment '{run_name}' in experiment '{experiment_id}'")
    final = exp.export(export_id)
    if final.exists():
        raise ExportExists(f"export '{export_id}' of experiment '{experiment_id}' already exists ({final})")
    remove_stale_builds(exp.exports)  # leftovers of killed builds, so a retry starts clean
    record = ExportRecord(export_id=export_id, experiment_id=experiment_id, run_name=run_name, step=step,
                          created_at=utc_now(), lineage=lineage)
    try:
        with building_dir(final) as tmp:
            write(tmp)
            (tmp / LINEAGE_FILE).write_text(json.dumps(record.lineage_json(), indent=2, sort_keys=True) + "\n")
            problems = validate_export_dir(tmp, export_id) if validate else []
            if problems:
                raise ExportInvalid(export_id, problems)
            (tmp / COMPLETE_MARKER).write_text(record.created_at + "\n")
            digest = path_sha256(tmp)  # relative paths: identical once renamed
    except FileExistsError:
        raise ExportExists(f"export '{export_id}' of experiment '{experiment_id}' was published concurrently") from None
    return ExportRecord(**{**record.__dict__, "path": str(final), "weights_sha256": digest})


def load_export(
    exp: ExperimentDir, export_id: str, *, digest: bool = False, on_bad: OnBadRecord | None = None
) -> ExportRecord | None:
    """The record of a published export (None if absent or incomplete); `digest` recomputes its sha256.

    An unreadable lineage.json is BadRecord, or with `on_bad` handed to it (and None returned)."""
    path = exp.export(export_id)
    if not (path / COMPLETE_MARKER).is_file() or not (path / LINEAGE_FILE).is_file():
        return None
    rec = read_or_report(on_bad, ExportRecord, path / LINEAGE_FILE, {"path": str(path)}, export_id=export_id,
                         experiment_id=exp.experiment_id)
    if rec is None:
        return None
    if digest:
        rec = ExportRecord(**{**rec.__dict__, "weights_sha256": path_sha256(path)})
    return rec


def list_exports(exp: ExperimentDir, *, digest: bool = False, on_bad: OnBadRecord | None = None) -> list[ExportRecord]:
    """Published exports (COMPLETE marker present), by step then id; temp builds are never listed.

    `on_bad`: as for load_export (an export with a bad lineage.json is not listed)."""
    if not exp.exports.is_dir():
        return []
    recs = [
        load_export(exp, p.name, digest=digest, on_bad=on_bad)
        for p in exp.exports.iterdir()
        if p.is_dir() and not p.name.startswith(".")
    ]
    return sorted((r for r in recs if r is not None), key=lambda r: (r.step, r.export_id))
