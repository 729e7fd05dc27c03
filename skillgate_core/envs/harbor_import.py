"""Import existing Harbor / Terminal-Bench task folders as SkillGate task packages.

    reports = import_harbor(Path("~/harbor-tasks"), Path("tasks/imported"))

HARBOR_DIR is one task (it holds task.toml) or a dataset (every folder below it holding task.toml).
Each task is copied to DEST/<task id>/ with task.toml rewritten into our canonical form:
- [task] id added (from the folder name) when absent;
- keys our sandboxes do not implement (e.g. [[environment.mcp_servers]], unknown sections) are
  dropped, each with a note;
- Harbor's default allow_internet = true is written out explicitly, since our sandboxes only give
  network when the SandboxConfig allows it (the note says so).
The id is checked before it is used as a path (an absolute or `../` id would leave DEST), the copy
is staged and loaded inside DEST, and only a copy that loads takes the place of DEST/<id>: nothing
outside DEST is written or deleted, and a failed import leaves DEST as it was. The strict load
refuses symbolic links that leave the package. Checks worth a human look are noted: a verifier
or solution that downloads tools (no network in our sandboxes), tests/ or solution/ files copied
into the image (the agent would see them), a solution that reads /skills (SkillGym's check), and
which backend can run it (bubblewrap or Docker only).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from skillgate_core.base.atomic import publish_dir
from skillgate_core.envs.task_package import (
    TASK_ID,
    AgentSection,
    EnvironmentSection,
    SolutionSection,
    TaskPackageError,
    TaskSection,
    VerifierSection,
    load_task_package,
)
from skillgate_core.envs.verifier import SEARCH_PATHS

__all__ = ["ImportReport", "find_harbor_tasks", "import_harbor", "import_harbor_task", "to_toml"]

_SECTIONS: dict[str, type] = {"task": TaskSection, "agent": AgentSection, "verifier": VerifierSection,
                              "environment": EnvironmentSection, "solution": SolutionSection}
_HARBOR_SIZE_KEYS = {"memory": "memory_mb", "storage": "storage_mb"}
_NETWORK_TOOLS = re.compile(r"\b(curl|wget|uvx|uv (pip|run|sync|add)|pip3? install|apt(-get)? install|npm (install|i)\b|"
                            r"git clone)", re.IGNORECASE)
_COPIED_SECRETS = re.compile(r"^\s*(COPY|ADD)\b.*\b(tests|solution)\b", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class ImportReport:
    """What importing one Harbor task did."""

    source: str
    """The Harbor task folder."""
    dest: str
    """Where the package was written ("" when it was not)."""
    task_id: str
    """The id it got."""
    ok: bool
    """The copy loads as a valid SkillGate task package."""
    notes: tuple[str, ...] = ()
    """Changes made and things to check by hand."""
    needs_docker: tuple[str, ...] = ()
    """Why bubblewrap cannot run it (empty: both backends can)."""
    error: str = ""
    """Why the import failed (ok is False)."""


def find_harbor_tasks(root: Path) -> list[Path]:
    """root when it holds task.toml, else every folder below it that does (sorted)."""
    if (root / "task.toml").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("task.toml"))


def import_harbor(harbor_dir: str | Path, dest_root: str | Path, overwrite: bool = False) -> list[ImportReport]:
    """Import one task or a whole dataset folder into dest_root/<task id>/."""
    src = Path(harbor_dir).expanduser().resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: not a directory (expected a Harbor task or dataset folder)")
    dest = Path(dest_root).expanduser().resolve()
    # Packages already imported under DEST (DEST inside the dataset) are not imported again.
    tasks = [t for t in find_harbor_tasks(src) if t != dest and dest not in t.parents]
    if not tasks:
        raise FileNotFoundError(f"{src}: no task.toml found (expected a Harbor task or dataset folder)")
    done: dict[str, Path] = {}
    reports = []
    for task in tasks:
        report = import_harbor_task(task, dest, overwrite, done)
        if report.ok:
            done[report.task_id] = task
        reports.append(report)
    return reports


def import_harbor_task(src: Path, dest_root: Path, overwrite: bool = False,
                       already: dict[str, Path] | None = None) -> ImportReport:
    """Import the Harbor task at `src` into dest_root/<task id>/.

    Nothing outside dest_root is ever written or deleted: the id is checked before it is used as a
    path, the copy is built and loaded in a staging folder inside dest_root, and only a copy that
    loads replaces dest_root/<id> (an existing package is kept when the new one fails). `already`
    maps the ids imported earlier in the same run to their sources (a repeated id is refused)."""
    notes: list[str] = []
    src = src.resolve()
    toml_path = src / "task.toml"
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return ImportReport(str(src), "", "", False, error=f"{toml_path}: {exc}")
    canonical, task_id = _canonical_config(data, src, notes)

    def failed(why: str) -> ImportReport:
        return ImportReport(str(src), "", task_id, False, tuple(notes), error=why)

    if not TASK_ID.match(task_id):
        return failed(f"{toml_path}: task.id: {task_id!r} is not a task id (expected 1-128 letters, digits, '.', "
                      "'_' or '-', starting with a letter or digit); nothing was written")
    root = dest_root.resolve()
    dest = root / task_id
    if root == src or src in root.parents:
        return failed(f"{root}: inside the task folder {src} (expected DEST outside it); nothing was written")
    if already is not None and task_id in already:
        return failed(f"{toml_path}: task.id: '{task_id}' already imported from {already[task_id]} in this run; "
                      "nothing was written")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        return failed(f"{dest}: exists and is not a package folder (a link or a file); nothing was written")
    if dest.exists() and not overwrite:
        return failed(f"{dest}: exists (use overwrite)")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".import-{task_id}-", dir=root))
    work = staging / task_id
    try:
        shutil.copytree(src, work, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        (work / "task.toml").write_text(to_toml(canonical), encoding="utf-8")
        try:
            package = load_task_package(work)  # links leaving the package are refused here
        except TaskPackageError as exc:
            return failed(str(exc).replace(str(work), str(src)))
        for script in (work / "tests" / "test.sh", work / "solution" / "solve.sh"):
            if script.is_file():
                script.chmod(script.stat().st_mode | 0o111)
        _content_notes(work, notes)
        for name in SEARCH_PATHS:
            inside = [p for p in package.env.get(name, "").split(":")
                      if p == package.workdir or p.startswith(package.workdir.rstrip("/") + "/")]
            if inside and name not in package.config.verifier.env:
                notes.append(f"environment/Dockerfile puts the workspace on {name} ({', '.join(inside)}): the "
                             f"verifier drops it (planted code would run in the grader); set [verifier] env "
                             f"{name} if the tests must import the graded code")
        publish_dir(work, dest, replace=True)  # an old package goes only once the new one is in place
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not package.has_solution:
        notes.append("no solution/solve.sh: the validity gate cannot pass it")
    return ImportReport(str(src), str(dest), task_id, True, tuple(notes), package.needs_docker)


def _canonical_config(data: dict[str, Any], src: Path, notes: list[str]) -> tuple[dict[str, Any], str]:
    out: dict[str, Any] = {}
    if "version" in data:
        out["version"] = str(data["version"])
    for name, value in data.items():
        if name in ("version", "metadata"):
            continue
        if name not in _SECTIONS:
            notes.append(f"dropped [{name}] (not used by SkillGate sandboxes)")
            continue
        if not isinstance(value, dict):
            notes.append(f"dropped {name} (expected a table)")
            continue
        known = {f.name for f in fields(_SECTIONS[name])}
        section: dict[str, Any] = {}
        for key, v in value.items():
            our = _HARBOR_SIZE_KEYS.get(key, key) if name == "environment" else key
            if our not in known:
                notes.append(f"dropped {name}.{key} (not supported)")
                continue
            section[key] = v
        out[name] = section
    task = out.setdefault("task", {})
    if not task.get("id"):
        task["id"] = re.sub(r"[^A-Za-z0-9._-]+", "-", src.name).strip("-.") or "task"
        notes.append(f"set task.id = '{task['id']}' from the folder name")
    env = out.setdefault("environment", {})
    if "allow_internet" not in env:
        env["allow_internet"] = True
        notes.append("allow_internet = true written out (Harbor's default); sandboxes still get no network "
                     "unless SandboxConfig.allow_network is set")
    if "metadata" in data:
        out["metadata"] = data["metadata"]
    return out, str(task["id"])


def _content_notes(dest: Path, notes: list[str]) -> None:
    test_sh = dest / "tests" / "test.sh"
    if test_sh.is_file() and _NETWORK_TOOLS.search(test_sh.read_text(encoding="utf-8", errors="replace")):
        notes.append("tests/test.sh downloads tools (curl/uv/pip/apt...): it needs network, which sandboxes "
                     "do not give by default; the base image has python3 + pytest")
    solve = dest / "solution" / "solve.sh"
    if solve.is_file():
        text = solve.read_text(encoding="utf-8", errors="replace")
        if _NETWORK_TOOLS.search(text):
            notes.append("solution/solve.sh downloads tools: it needs network")
        if "/skills" in text:
            notes.append("solution/solve.sh reads /skills: a solution must not depend on skill paths")
    dockerfile = dest / "environment" / "Dockerfile"
    if dockerfile.is_file():
        text = dockerfile.read_text(encoding="utf-8", errors="replace")
        if _COPIED_SECRETS.search(text):
            notes.append("environment/Dockerfile copies tests or solution files into the image: the agent "
                         "would see them")
        if re.search(r"^\s*COPY\s+\.\s+/root/?\s*$", text, re.MULTILINE):
            notes.append("environment/Dockerfile has `COPY . /root`: the build context (Dockerfile included) "
                         "lands in the agent's home")
    for leaked in ("tests", "solution"):
        if (dest / "environment" / leaked).exists():
            notes.append(f"environment/{leaked}/ exists: check it is not the verifier's or the solution's files")


def to_toml(data: dict[str, Any]) -> str:
    """A small TOML writer for task.toml: top-level scalars, then one [table] per dict."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{name}]"] if lines else [f"[{name}]"]
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        escaped = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{escaped}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if hasattr(v, "isoformat"):  # TOML dates and times are written bare
        return str(v.isoformat())
    raise TypeError(f"cannot write {type(v).__name__} to TOML")
