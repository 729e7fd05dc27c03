"""What `skillgate eval` takes from the warehouse: the policy an export id names, and the default bench.

An export id is what `skillgate experiments` prints (NAME, within its experiment) and what `skillgate
lineage` prints (EXPERIMENT_ID/NAME, or a unique prefix of it); either names an export folder on
record. The default bench is the newest bench-build output on record whose folder still holds a bench
(a folder once given as --bench is recorded with its evaluation, and is not it). Both are looked up
here, in the CLI layer: skillgate_core takes paths and never reads the warehouse. Nothing here writes anything (a state dir
without a warehouse file is not given one).

    policy, model = policy_of_export_id("grpo-.../step-00000002")   # (export folder, "")
    found = newest_bench()                                           # (folder, recorded at) or None
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from skillgate_core.base.paths import state_layout
from skillgate_core.ownership.exports import ENDPOINT_FILE

__all__ = ["PolicyNotFound", "newest_bench", "policy_of_export_id"]


def _on_record() -> bool:
    """Whether anything was recorded under the state dir (a warehouse file, or events waiting for one)."""
    from warehouse import event_log

    state = state_layout()
    spool = event_log(state).spool
    return state.warehouse_file.exists() or (spool.is_dir() and any(spool.iterdir()))


class PolicyNotFound(LookupError):
    """--policy is neither a folder, an endpoint URL nor one export on record (the message says which)."""


def policy_of_export_id(text: str) -> tuple[str, str]:
    """(what resolve_policy takes: the export's folder or its endpoint URL, the served model name or '')
    of the export `text` names; PolicyNotFound naming what was searched otherwise."""
    from warehouse import AmbiguousRef, RefError, match_ref, read_connection

    state = state_layout()
    if not _on_record():
        raise PolicyNotFound(f"{text}: no such folder, not an http(s) endpoint URL, and no warehouse under "
                             f"{state.home} to look an export id up in")
    with read_connection(state) as con:
        named = con.execute("select export_id, uri from model_export where export_name = ? order by export_id",
                            [text]).fetchall()
        if len(named) > 1:
            raise PolicyNotFound(f"{text}: {len(named)} experiments have an export of that name; give one of "
                                 + ", ".join(r[0] for r in named))
        if named:
            export_id, uri = named[0]
        else:
            try:
                match = match_ref(con, text, state)
            except AmbiguousRef as exc:  # a prefix of an export's id is also one of its evaluations' ids
                candidates = [c for c in exc.candidates if c.kind == "export"]
                if len(candidates) != 1:
                    raise PolicyNotFound(f"{text}: not one export on record ({exc})") from None
                match = candidates[0]
            except RefError as exc:
                raise PolicyNotFound(f"{text}: no such folder, not an http(s) endpoint URL, and not an export id "
                                     f"on record ({exc})") from None
            if match.kind != "export":
                exports = [str(r[0]) for r in con.execute("select export_id from model_export where experiment_id = ? "
                                                     "order by export_id", [match.id]).fetchall()]
                also = f"; its exports: {', '.join(exports)}" if exports else ""
                raise PolicyNotFound(f"{text}: names {match.kind} {match.id}, not an export{also}")
            export_id, uri = match.id, match.uri
    folder = Path(str(uri))
    if not folder.is_dir():
        raise PolicyNotFound(f"{text}: export {export_id} is recorded at {folder}, which no longer exists")
    served = folder / ENDPOINT_FILE
    if served.is_file():  # an endpoint's export: the URL and model it was evaluated as
        endpoint = json.loads(served.read_text())
        return str(endpoint["base_url"]), str(endpoint["model"])
    return str(folder), ""


def newest_bench() -> tuple[Path, datetime] | None:
    """(the newest bench a completed bench-build run built whose folder still holds tasks.jsonl, when that
    run finished), or None. Only a bench-build output: a folder an evaluation was given (--bench) or a stage
    run's input (inputs.bench=PATH) is on record too, but choosing it once must not make it the default."""
    from warehouse.outputs import newest_outputs

    if not _on_record():
        return None
    rows = [(r["uri"], r["finished_at"]) for r in newest_outputs("bench", state_layout()) if r["stage"] == "bench-build"]
    for uri, created in rows:
        folder = Path(uri)
        for candidate in (folder, folder / "bench"):
            if (candidate / "tasks.jsonl").is_file():
                return candidate, created
    return None
