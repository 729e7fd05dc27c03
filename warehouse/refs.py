"""References: whatever a user copies from SkillGate's output, resolved to the one thing it names.

A reference is any of

    a run id              collect-20251130T120000-a1b2c3     (what a stage run records)
    an experiment id      grpo-selector-clean-oracle-action-credit-0b75cdcf15
    an export id          grpo-.../step-00000200              (EXPERIMENT_ID/NAME)
    an evaluation id      grpo-.../eval70-step-200
    a metric id           grpo-.../eval70-step-200/trial_success
    a content digest      3f2a9c...  (sha256 of a dataset, a stage output or a model's weights)
    a config digest       9b1e04...  (sha256 of a stage config: `skillgate show` prints it)
    a path                SKILLGATE_HOME/artifacts/collect/KEY[/trajectories], an export folder, ...

each by its full text or by a unique prefix (digests: at least MIN_DIGEST_PREFIX hex characters, so a
short word never matches a digest by accident; "sha256:" in front is ignored). An export or evaluation
may also be named without its EXPERIMENT_ID/ (as `skillgate experiments` lists them, in the
experiment's row) when one experiment has that name. An exact id, digest or recorded path always
wins over a bare name, and a bare name over prefixes. A path is matched against what the warehouse recorded
(an output's uri, an export's or evaluation's folder); a folder holding several outputs of one stage
run names that run; a file inside an output names the output; an unrecorded file (or a folder
under the state dir) is looked up by its content digest.

    match = resolve_ref(state, "3f2a9c")   # RefMatch(kind="dataset", id="3f2a9c...", uri=..., via="prefix")
    match = match_ref(con, text, state)    # the same on an open read connection

AmbiguousRef lists the candidates (kind, id, what it is); UnknownRef says which kinds were searched.
Both are RefError (a LookupError), and the CLI prints either as one message (deployments/cli/errors.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import duckdb

from skillgate_core.base.paths import StateLayout, state_layout

__all__ = [
    "MIN_DIGEST_PREFIX",
    "REF_KINDS",
    "AmbiguousRef",
    "RefError",
    "RefKind",
    "RefMatch",
    "UnknownRef",
    "match_ref",
    "ref_candidates",
    "resolve_ref",
]

Con = duckdb.DuckDBPyConnection
RefKind = Literal["run", "experiment", "export", "evaluation", "metric", "dataset", "config"]
RefVia = Literal["id", "prefix", "path", "content"]
REF_KINDS: tuple[RefKind, ...] = ("run", "experiment", "export", "evaluation", "metric", "dataset", "config")
MIN_DIGEST_PREFIX = 6
"""Shortest digest prefix that is looked up (a git-style short digest)."""
SHOWN_CANDIDATES = 12
"""An ambiguous reference lists at most this many candidates."""
_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class RefMatch:
    """What a reference names."""

    kind: RefKind
    """run, experiment, export, evaluation, metric, dataset (a content digest) or config (a config digest)."""
    id: str
    """Its full id or digest: what every warehouse query takes."""
    uri: str | None = None
    """Its folder or file when it has one (datasets, exports, evaluations, experiments)."""
    via: RefVia = "id"
    """How it was found: the whole id, a unique prefix, a recorded path, or a path's content digest."""
    detail: str = ""
    """A few words on what it is (stage, dataset kind, config type), for listings."""

    def describe(self) -> str:
        extra = ", ".join(x for x in (self.detail, self.uri or "") if x)
        return f"{self.kind} {self.id}" + (f" ({extra})" if extra else "")


class RefError(LookupError):
    """A reference that names nothing, or more than one thing."""


class UnknownRef(RefError):
    """Nothing has this id, digest, prefix or path."""


class AmbiguousRef(RefError):
    """Several things match; `candidates` lists them."""

    def __init__(self, message: str, candidates: tuple[RefMatch, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates


# (kind, id column query, detail column) per id kind: "select id, detail, uri from ... where <cond>"
_ID_SOURCES: tuple[tuple[RefKind, str], ...] = (
    ("run", "select run_id, stage || ' run, ' || status, null from v_run"),
    ("experiment", "select experiment_id, algorithm, uri from experiment"),
    ("export", "select export_id, 'step ' || step, uri from model_export"),
    ("evaluation", "select eval_id, 'evaluation of ' || export_id, uri from evaluation"),
    ("metric", "select metric_id, name || ' = ' || cast(round(value, 4) as varchar), null from eval_metric"),
)
_ID_COLUMN = {"run": "run_id", "experiment": "experiment_id", "export": "export_id", "evaluation": "eval_id",
              "metric": "metric_id"}
_DATASETS = "select sha256, kind || coalesce(' from ' || produced_by_run, ''), uri from dataset_version"
_DIGEST_SOURCES: tuple[tuple[RefKind, str, str], ...] = (
    ("dataset", _DATASETS, "sha256"),
    ("config", "select config_digest, config_type, null from config", "config_digest"),
)


_PATH_SOURCES: tuple[tuple[RefKind, str], ...] = (
    ("export", "select export_id, 'step ' || step, uri from model_export"),
    ("evaluation", "select eval_id, 'evaluation of ' || export_id, uri from evaluation"),
    ("dataset", _DATASETS),
    ("experiment", "select experiment_id, algorithm, uri from experiment"),
)


def _rows(con: Con, kind: RefKind, sql: str, params: list, via: RefVia) -> list[RefMatch]:
    return [RefMatch(kind, row[0], row[2], via, row[1] or "")
            for row in con.execute(sql, params).fetchall()]


def _by_id(con: Con, text: str, exact: bool) -> list[RefMatch]:
    out: list[RefMatch] = []
    for kind, sql in _ID_SOURCES:
        col = _ID_COLUMN[kind]
        if exact:
            out += _rows(con, kind, f"{sql} where {col} = ?", [text], "id")
        else:
            out += _rows(con, kind, f"{sql} where starts_with({col}, ?) order by {col} limit ?",
                         [text, SHOWN_CANDIDATES + 1], "prefix")
    return out


def _digest_text(text: str) -> str | None:
    """The hex digest or prefix `text` spells (lowercased, "sha256:" dropped), or None."""
    t = text.strip().lower().removeprefix("sha256:")
    return t if MIN_DIGEST_PREFIX <= len(t) <= 64 and _HEX.fullmatch(t) else None


def _by_digest(con: Con, text: str) -> tuple[list[RefMatch], list[RefMatch]]:
    """(exact matches, prefix matches) of a digest or digest prefix."""
    hexa = _digest_text(text)
    if hexa is None:
        return [], []
    exact: list[RefMatch] = []
    prefix: list[RefMatch] = []
    for kind, sql, col in _DIGEST_SOURCES:
        if len(hexa) == 64:
            exact += _rows(con, kind, f"{sql} where {col} = ?", [hexa], "id")
        else:
            prefix += _rows(con, kind, f"{sql} where starts_with({col}, ?) order by {col} limit ?",
                            [hexa, SHOWN_CANDIDATES + 1], "prefix")
    return exact, prefix


def _path_of(text: str, home: Path) -> Path | None:
    """The existing or recorded-looking path `text` spells (absolute, or relative to the cwd or the state
    dir), or None when it cannot be one."""
    if "\0" in text or not text.strip():
        return None
    raw = Path(text).expanduser()
    if raw.is_absolute():
        return raw
    for base in (Path.cwd(), home):
        if (base / raw).exists():
            return base / raw
    return None


def _forms(path: Path) -> list[str]:
    """The spellings a recorded uri of `path` may have (as given, absolute, links resolved)."""
    forms = {str(path), str(path.absolute())}
    try:
        forms.add(str(path.resolve()))
    except OSError:
        pass
    return sorted(f.rstrip("/") or "/" for f in forms)


def _by_path(con: Con, text: str, home: Path) -> list[RefMatch]:
    """Things recorded at, inside, or around the path `text` names (see the module docstring)."""
    path = _path_of(text, home)
    if path is None:
        return []
    forms = _forms(path)
    exact: list[RefMatch] = []
    for kind, sql in _PATH_SOURCES:
        for form in forms:
            exact += _rows(con, kind, f"{sql} where rtrim(uri, '/') = ?", [form], "path")
    if exact:
        return _prefer_exports(con, exact)
    # a file or folder inside a recorded output: the innermost output holding it
    inside: list[RefMatch] = []
    for form in forms:
        inside += _rows(con, "dataset", f"{_DATASETS} where starts_with(?, rtrim(uri, '/') || '/')", [form], "path")
    if inside:
        longest = max(len(m.uri or "") for m in inside)
        return _prefer_exports(con, (m for m in inside if len(m.uri or "") == longest))
    # a folder around recorded outputs (a stage run's folder): its run when they share one
    around: list[tuple] = []
    for form in forms:
        around += con.execute("select sha256, kind || coalesce(' from ' || produced_by_run, ''), uri, produced_by_run"
                              " from dataset_version where starts_with(uri, ? || '/') order by uri", [form]).fetchall()
    runs = {r[3] for r in around}
    if around and len(runs) == 1 and None not in runs:
        return [replace(m, via="path") for m in _by_id(con, str(runs.pop()), exact=True) if m.kind == "run"]
    if around:
        return _unique(RefMatch("dataset", r[0], r[2], "path", r[1] or "") for r in around)
    return _by_content(con, path, home)


def _by_content(con: Con, path: Path, home: Path) -> list[RefMatch]:
    """An unrecorded file, or folder under the state dir, that exists: the dataset with its content
    digest, if any. (A folder elsewhere is not hashed: `skillgate lineage /` must not read the disk.)"""
    if not (path.is_file() or (path.is_dir() and path.resolve().is_relative_to(home.resolve()))):
        return []
    from skillgate_core.base.digests import path_sha256

    sha = path_sha256(path)
    return [replace(m, via="content") for m in _by_digest(con, sha)[0] if m.kind == "dataset"]


def _prefer_exports(con: Con, matches: Iterable[RefMatch]) -> list[RefMatch]:
    """An export's folder is also recorded as its weights' dataset: the export is the richer answer."""
    out = []
    for m in matches:
        if m.kind == "dataset":
            found = _rows(con, "export", "select export_id, 'step ' || step, uri from model_export "
                          "where weights_sha256 = ? and uri = ?", [m.id, m.uri], m.via)
            m = found[0] if found else m
        out.append(m)
    return _unique(out)


def _unique(matches: Iterable[RefMatch]) -> list[RefMatch]:
    seen: dict[tuple[str, str], RefMatch] = {}
    for m in matches:
        seen.setdefault((m.kind, m.id), m)
    return list(seen.values())


def ref_candidates(con: Con, text: str, state: StateLayout | None = None) -> list[RefMatch]:
    """Every match of `text` at the best level there is: exact ids, digests and recorded paths first;
    only when none of those match, unique-prefix candidates ([] when nothing matches)."""
    home = (state or state_layout()).home
    text = text.strip()
    digest_exact, digest_prefix = _by_digest(con, text)
    exact = _unique([*_by_id(con, text, exact=True), *digest_exact, *_by_path(con, text, home)])
    if exact:
        return exact
    if "/" not in text and (bare := _by_bare_name(con, text)):
        return bare
    return _unique([*_by_id(con, text, exact=False), *digest_prefix])


def _by_bare_name(con: Con, text: str) -> list[RefMatch]:
    """Exports and evaluations whose id is EXPERIMENT_ID/`text` (every experiment's: AmbiguousRef lists them)."""
    out: list[RefMatch] = []
    for kind in ("export", "evaluation"):
        sql = dict(_ID_SOURCES)[kind]
        out += _rows(con, kind, f"{sql} where ends_with({_ID_COLUMN[kind]}, '/' || ?) order by {_ID_COLUMN[kind]}",
                     [text], "id")
    return out


def _searched() -> str:
    return ("run ids, experiment ids, export and evaluation ids (EXPERIMENT_ID/NAME), metric ids, dataset and "
            f"output sha256 digests and config digests (a prefix of at least {MIN_DIGEST_PREFIX} hex characters), "
            "and output paths under SKILLGATE_HOME (artifacts/, datasets/, experiments/)")


def match_ref(con: Con, text: str, state: StateLayout | None = None) -> RefMatch:
    """The one thing `text` names (module docstring); UnknownRef or AmbiguousRef otherwise."""
    found = ref_candidates(con, text, state)
    if len(found) == 1:
        return found[0]
    if not found:
        hint = ""
        hexa = text.strip().lower().removeprefix("sha256:")
        if _HEX.fullmatch(hexa or "-") and len(hexa) < MIN_DIGEST_PREFIX:
            hint = f"; a digest prefix needs at least {MIN_DIGEST_PREFIX} characters"
        raise UnknownRef(f"nothing in the warehouse matches '{text}'{hint}. Searched: {_searched()}. "
                         "List what exists with `skillgate runs`, `skillgate experiments` or "
                         "`skillgate sql \"select sha256, kind, uri from dataset_version\"`.")
    shown = found[:SHOWN_CANDIDATES]
    more = "\n  ... and more (give a longer prefix)" if len(found) > SHOWN_CANDIDATES else ""
    listing = "\n".join(f"  {m.describe()}" for m in shown)
    raise AmbiguousRef(f"'{text}' matches {len(found) if not more else 'more than ' + str(SHOWN_CANDIDATES)} "
                       f"things; give more of one of them:\n{listing}{more}", tuple(shown))


def resolve_ref(state: StateLayout | None, text: str) -> RefMatch:
    """`match_ref` on a fresh read connection to the warehouse of `state` (default: SKILLGATE_HOME)."""
    from warehouse.read import read_connection

    state = state or state_layout()
    with read_connection(state) as con:
        return match_ref(con, text, state)
