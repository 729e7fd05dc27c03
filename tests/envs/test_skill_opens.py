"""The host's record of skill opens (envs/skill_opens.py) on both backends: what a process opens is seen,
listing is neither a read nor consultation, other skill files are consultation but not reads, and
flooding opens does not hide a later one."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.envs.backends import start_sandbox
from skillgate_core.envs.skill_opens import WindowOpens


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name in ("alpha", "beta", "gamma", "delta"):
        (root / name / "scripts").mkdir(parents=True)
        (root / name / "scripts" / "run.sh").write_text("echo used\n")
    for name in ("alpha", "beta", "gamma"):
        (root / name / "SKILL.md").write_text(f"# {name}\n")
    (root / "delta" / "readme.md").write_text("# delta\n")  # README.md in any case is read like SKILL.md
    return root


def test_opens_are_seen_per_window_and_a_flood_hides_nothing(backend: str, hello_task, skills: Path):
    box = start_sandbox(hello_task, backend=backend, skills_dir=skills)  # type: ignore[arg-type]
    try:
        assert box.drain_skill_opens() == WindowOpens()
        box.exec("ls -l /skills /skills/alpha /skills/gamma/scripts && find /skills && stat /skills/alpha/SKILL.md")
        assert box.drain_skill_opens() == WindowOpens()  # listing and stat open no file
        box.exec("sh /skills/beta/scripts/run.sh && cat /skills/gamma/scripts/run.sh >/dev/null")
        assert box.drain_skill_opens() == WindowOpens((), ("beta", "gamma"))  # consultation, not reads
        box.exec("cd /skills/delta && cat readme.md >/dev/null")
        assert box.drain_skill_opens() == WindowOpens(("delta",), ("delta",))
        # 40,000 alternating opens (more events than the kernel queues by default), then one more skill
        box.exec("i=0; while [ $i -lt 20000 ]; do : </skills/alpha/SKILL.md; : </skills/beta/scripts/run.sh; "
                 "i=$((i+1)); done; cat /skills/gamma/SKILL.md >/dev/null", timeout=120)
        assert box.drain_skill_opens() == WindowOpens(("alpha", "gamma"), ("alpha", "beta", "gamma"))
        assert box.drain_skill_opens() == WindowOpens()
    finally:
        box.stop()
    assert box.skill_watch is not None and box.drain_skill_opens() == WindowOpens()  # closed with the sandbox
