"""Import existing Harbor / Terminal-Bench task folders as SkillGate task packages.

    reports = import_harbor(Path("~/harbor-tasks"), Path("tasks/imported"))

HARBOR_DIR is one task (it holds task.toml) or a dataset (every folder below it holding task.toml).
Each task is copied to DEST/<task id>/ with task.toml rewritten into our canonical form:
- [task] id added (from the folder name) when absent;
- keys our sandboxes do not implement (e.g. [[environment.mcp_servers]], unknown sections) are
  dropped, each with a note;
- Harbor's default allow_internet = true is written out explicitly, since our sandboxes only give
  network when the SandboxConfig allows it (the note says so).
Then the copy is loaded with the strict loader, and checks worth a human look are noted: a verifier
or solution that downloads tools (no network in our sandboxes), tests/ or solution/ files copied
into the image (the agent would see them), a solution that reads /skills (SkillGym's check), and
which backend can run it (bubblewrap or Docker only).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from skillgate_core.envs.task_package import (
    AgentSection,
    EnvironmentSection,
    SolutionSection,
    TaskPackageError,
    TaskSection,
    VerifierSection,
    load_task_package,
)

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
    tasks = find_harbor_tasks(src)
    if not tasks:
        raise FileNotFoundError(f"{src}: no task.toml found (expected a Harbor task or dataset folder)")
    return [import_harbor_task(t, Path(dest_root), overwrite) for t in tasks]


def import_harbor_task(src: Path, dest_root: Path, overwrite: bool = False) -> ImportReport:
    """Import the Harbor task at `src` into dest_root/<task id>/."""
    notes: list[str] = []
    toml_path = src / "task.toml"
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return ImportReport(str(src), "", "", False, error=f"{toml_path}: {exc}")
    canonical, task_id = _canonical_config(data, src, notes)
    dest = dest_root.resolve() / task_id
    if dest.exists():
        if not overwrite:
            return ImportReport(str(src), "", task_id, False, error=f"{dest}: exists (use overwrite)")
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    (dest / "task.toml").write_text(to_toml(canonical), encoding="utf-8")
    for script in (dest / "tests" / "test.sh", dest / "solution" / "solve.sh"):
        if script.is_file():
            script.chmod(script.stat().st_mode | 0o111)
    _content_notes(dest, notes)
    try:
        package = load_task_package(dest)
    except TaskPackageError as exc:
        return ImportReport(str(src), str(dest), task_id, False, tuple(notes), error=str(exc))
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


def _toml_value(v: Any) -> str:
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
