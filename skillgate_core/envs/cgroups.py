"""Per-sandbox cgroups (v1 or v2) for the bubblewrap backend: memory, pids and CPU limits, kill-all.

A cgroup is the only limit that holds for a whole process tree: RLIMIT_NPROC counts per user (all
sandboxes share one uid) and RLIMIT_AS breaks programs that reserve address space. It needs root
(or a delegated subtree); without one `create_cgroup` returns None and the sandbox falls back to
rlimits. Our groups live under `<controller>/skillgate/<name>`, so orphans are easy to find.

Processes join a group by writing their pid to `procs_files()` *before* they fork anything: the
sandbox launcher does it in a tiny shell that then execs bwrap.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SandboxCgroup", "cgroup_names", "create_cgroup", "open_cgroup"]

ROOT = Path("/sys/fs/cgroup")
PARENT = "skillgate"
_V1_CONTROLLERS = ("memory", "pids", "cpu", "freezer")


@dataclass(frozen=True)
class SandboxCgroup:
    """One sandbox's cgroup: a directory per controller (v1) or one directory (v2)."""

    name: str
    """Group name (the sandbox session id)."""
    dirs: tuple[Path, ...]
    """The group's directories, one per v1 controller, or the single v2 directory."""
    version: int
    """1 or 2."""

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except OSError:
                continue
        return found

    def kill_all(self, timeout: float = 5.0) -> bool:
        """SIGKILL every process in the group (frozen first, so a fork bomb cannot outrun us)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            _write(self.dirs[0] / "cgroup.kill", "1")
        freezer = next((d for d in self.dirs if d.parent.parent.name == "freezer"), None)
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            if freezer is not None:
                _write(freezer / "freezer.state", "FROZEN")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if freezer is not None:
                _write(freezer / "freezer.state", "THAWED")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and delete the group's directories."""
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while the last processes exit
                    time.sleep(0.02)

    def memory_failcnt(self) -> int:
        """How often the memory limit was hit (0 when unknown)."""
        for d in self.dirs:
            for name in ("memory.failcnt", "memory.events"):
                f = d / name
                if f.exists():
                    text = f.read_text()
                    if name == "memory.failcnt":
                        return int(text.strip() or 0)
                    for line in text.splitlines():
                        if line.startswith("max "):
                            return int(line.split()[1])
        return 0


def create_cgroup(name: str, memory_bytes: int, pids_max: int, cpus: float) -> SandboxCgroup | None:
    """Create the group with its limits, or None when cgroups are not writable here."""
    if os.geteuid() != 0:
        return None
    try:
        if _v2_usable():
            return _create_v2(name, memory_bytes, pids_max, cpus)
        if all((ROOT / c).is_dir() for c in ("memory", "pids")):
            return _create_v1(name, memory_bytes, pids_max, cpus)
    except OSError:
        return None
    return None


def open_cgroup(name: str) -> SandboxCgroup | None:
    """The existing group `name` (for orphan cleanup), or None."""
    if _v2_usable():
        d = ROOT / PARENT / name
        return SandboxCgroup(name, (d,), 2) if d.is_dir() else None
    dirs = tuple(ROOT / c / PARENT / name for c in _V1_CONTROLLERS if (ROOT / c / PARENT / name).is_dir())
    return SandboxCgroup(name, dirs, 1) if dirs else None


def cgroup_names() -> set[str]:
    """Names of every group under our parent (for orphan cleanup)."""
    parents = [ROOT / PARENT] if _v2_usable() else [ROOT / c / PARENT for c in _V1_CONTROLLERS]
    names: set[str] = set()
    for p in parents:
        if p.is_dir():
            names.update(d.name for d in p.iterdir() if d.is_dir())
    return names


def _v2_usable() -> bool:
    controllers = ROOT / "cgroup.controllers"
    return controllers.exists() and {"memory", "pids"} <= set(controllers.read_text().split())


def _create_v1(name: str, memory_bytes: int, pids_max: int, cpus: float) -> SandboxCgroup:
    dirs = []
    for c in _V1_CONTROLLERS:
        if not (ROOT / c).is_dir():
            continue
        d = ROOT / c / PARENT / name
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(d)
        if c == "memory":
            _write(d / "memory.limit_in_bytes", str(memory_bytes))
            if (d / "memory.memsw.limit_in_bytes").exists():  # no swap beyond the limit
                _write(d / "memory.memsw.limit_in_bytes", str(memory_bytes), missing_ok=True)
        elif c == "pids":
            _write(d / "pids.max", str(pids_max))
        elif c == "cpu":
            _write(d / "cpu.cfs_period_us", "100000", missing_ok=True)
            _write(d / "cpu.cfs_quota_us", str(max(1000, int(cpus * 100000))), missing_ok=True)
    return SandboxCgroup(name, tuple(dirs), 1)


def _create_v2(name: str, memory_bytes: int, pids_max: int, cpus: float) -> SandboxCgroup:
    parent = ROOT / PARENT
    parent.mkdir(exist_ok=True)
    wanted = {"memory", "pids", "cpu"} & set((ROOT / "cgroup.controllers").read_text().split())
    _write(ROOT / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted)), missing_ok=True)
    _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted)), missing_ok=True)
    d = parent / name
    d.mkdir(exist_ok=True)
    _write(d / "memory.max", str(memory_bytes))
    _write(d / "memory.swap.max", "0", missing_ok=True)
    _write(d / "pids.max", str(pids_max))
    _write(d / "cpu.max", f"{max(1000, int(cpus * 100000))} 100000", missing_ok=True)
    return SandboxCgroup(name, (d,), 2)


def _write(path: Path, value: str, missing_ok: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not missing_ok:
            raise
