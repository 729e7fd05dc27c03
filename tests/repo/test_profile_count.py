"""The number of RL profiles has one home, the registry (skillgate_core/rl/profiles.py): prose and comments
say "the profiles" and tests count `profile_names()`, so a new profile changes no sentence."""

from __future__ import annotations

import re
from pathlib import Path

from skillgate_core.rl.profiles import profile_names

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+)"
# "the seven RL profiles", "Seven training profiles": a count of the whole set. "four profiles" (no "the",
# no qualifier) is a subset and stays allowed.
COUNT_OF_THE_PROFILES = re.compile(
    rf"\bthe\s+{NUMBER}\s+(?:(?:RL|GRPO|training)\s+)?profiles\b|\b{NUMBER}\s+(?:RL|GRPO|training)\s+profiles\b",
    re.IGNORECASE)


def _prose_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for folder in ("skillgate_core", "deployments", "flows", "tasks", "warehouse", "benchmarks", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if (path.suffix in (".py", ".sh", ".md", ".toml") and "results" not in path.relative_to(ROOT).parts
                    and path != Path(__file__).resolve()):  # this file quotes the phrases it refuses
                files.append(path)
    return files


def counts_of_the_profiles(root: Path, files: list[Path]) -> list[str]:
    """`FILE:LINE: text` for every sentence that states how many profiles there are."""
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in COUNT_OF_THE_PROFILES.finditer(text):
            found.append(f"{path.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}: {' '.join(m.group(0).split())}")
    return found


def test_no_prose_states_how_many_profiles_there_are():
    assert len(profile_names()) > 1
    assert counts_of_the_profiles(ROOT, _prose_files()) == [], "count profile_names() instead of stating the number"


def test_the_guard_catches_a_stated_count_and_passes_a_subset(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("The seven RL\nprofiles differ.\nEight training profiles.\nthe tables of four profiles.\n")
    assert [line.split(": ", 1)[1] for line in counts_of_the_profiles(tmp_path, [page])] == [
        "The seven RL profiles", "Eight training profiles"]
