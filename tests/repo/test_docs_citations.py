"""Every page the repository cites is a page the repository has.

Users get the checkout, nothing beside it: a citation of a spec that lives outside it (METHOD.md,
DESIGN.md, ANCHORS.md, a `../shared` folder) sends them nowhere. The project's own pages are
docs/method.md (cited by section number: "docs/method.md 6", "docs/method.md 4.3", "4b"),
docs/design.md (cited by heading: "docs/design.md, Style") and the other docs/*.md pages; a citation
of a section must name one that exists.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

FOREIGN = re.compile(r"METHOD\.md|DESIGN\.md|ANCHORS\.md|\.\./shared|(?<![\w.-])shared/")
"""Pages and folders that are not in the repository (a folder named `shared` beside the checkout)."""

ALLOWED = {THIS: "names the forbidden citations to look for them"}
"""Files that may match FOREIGN, each with the reason. Keep it this short."""

SECTION = r"(?:section\s+)?(\d+[a-z]?(?:\.\d+)?)(?:\s*-\s*(\d+[a-z]?(?:\.\d+)?))?"
METHOD_CITE = re.compile(r"docs/method\.md,?\s+" + SECTION)
NUMBERED_CITE = re.compile(r"docs/(gpu)\.md,?\s+section\s+" + SECTION)
NAMED_CITE = re.compile(r"docs/(design|gpu|reads|security)\.md(?:,\s*|\s+\")\"?([A-Z][A-Za-z]*(?: [a-z]+)?)")
DOC_FILE = re.compile(r"(?<![\w/.\"'-])docs/([a-z_]+)\.md\b")
"""A page of this repository's docs/ (not another project's `docs/x.mdx`, not a file name in test data)."""


def repo_files(root: Path) -> list[str]:
    """Tracked files plus untracked ones git does not ignore (a new file counts before its commit)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return [f for f in out.splitlines() if (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):  # an exported tree without .git
        skip = {".git", ".venv", ".skillgate", "__pycache__", ".mypy_cache", ".ruff_cache", ".devbundle"}
        return [p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(root).parts)]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary files cite nothing


def foreign_citations(root: Path, files: list[str]) -> list[str]:
    """`file:line: text` for every line that cites a page or folder outside the repository."""
    found = []
    for name in files:
        if name in ALLOWED or (text := _text(root / name)) is None:
            continue
        found += [f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
                  if FOREIGN.search(line)]
    return found


def numbered_sections(page: str) -> set[str]:
    """Section numbers of a page's headings: `## 4b. ...` -> 4b, `### 4.3 ...` -> 4.3."""
    return {m.group(1) for m in re.finditer(r"^#+\s+(\d+[a-z]?(?:\.\d+)?)\.?\s", page, re.MULTILINE)}


def headings(page: str) -> list[str]:
    """A page's headings, lower-cased, without their section numbers."""
    return [m.group(1).lower() for m in re.finditer(r"^#+\s+(?:\d+[a-z]?(?:\.\d+)?\.?\s+)?(.*)$", page, re.MULTILINE)]


def unknown_sections(root: Path, files: list[str]) -> list[str]:
    """`file:line: citation` for every citation of a docs/ page or section the repository lacks."""
    pages = {p.stem: p.read_text(encoding="utf-8") for p in (root / "docs").glob("*.md")}
    numbers = {name: numbered_sections(text) for name, text in pages.items()}
    found = []
    for name in files:
        if name in ALLOWED or (text := _text(root / name)) is None:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            where = f"{name}:{i}: "
            found += [where + m.group(0) for m in DOC_FILE.finditer(line) if m.group(1) not in pages]
            cites = [("method", m.group(1), m.group(2), m.group(0)) for m in METHOD_CITE.finditer(line)]
            cites += [(m.group(1), m.group(2), m.group(3), m.group(0)) for m in NUMBERED_CITE.finditer(line)]
            for page, first, last, cite in cites:
                if page in pages and not {first, last or first} <= numbers[page]:
                    found.append(where + cite)
            for m in NAMED_CITE.finditer(line):
                page, heading = m.group(1), m.group(2).lower()
                if page in pages and not any(h.startswith(heading) for h in headings(pages[page])):
                    found.append(where + m.group(0))
    return found


def test_no_file_cites_a_page_outside_the_repository() -> None:
    found = foreign_citations(ROOT, repo_files(ROOT))
    assert not found, "cite the project's own pages (docs/method.md, docs/design.md, docs/gpu.md):\n" + "\n".join(found)


def test_every_cited_section_exists() -> None:
    found = unknown_sections(ROOT, repo_files(ROOT))
    assert not found, "citations of sections the docs do not have:\n" + "\n".join(found)


def test_the_method_page_keeps_its_numbering() -> None:
    # Code cites sections 1-11, 4b and rule numbers 4.1-4.6: renumbering the page would silently
    # point every citation at the wrong rule.
    sections = numbered_sections((ROOT / "docs" / "method.md").read_text(encoding="utf-8"))
    assert {str(n) for n in range(1, 12)} | {"4b"} | {f"4.{n}" for n in range(1, 7)} <= sections


@pytest.mark.parametrize("line", [
    "# the science (METHOD.md 5)", "see DESIGN.md", "bash ../shared/gpu/make_bundle.sh",
    "(shared/gpu/README.md)", "pitfalls (shared/ANCHORS.md)",
])
def test_a_foreign_citation_is_caught(tmp_path: Path, line: str) -> None:
    (tmp_path / "x.py").write_text(f"ok\n{line}\n")
    assert foreign_citations(tmp_path, ["x.py"]) == [f"x.py:2: {line}"]


def test_the_guard_passes_own_pages_and_lookalikes(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("docs/method.md 5; /dev/shm; a shared_memory/ buffer; 2 CPUs (shared)\n")
    assert foreign_citations(tmp_path, ["x.py"]) == []


def test_a_citation_of_a_missing_section_or_page_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "method.md").write_text("# M\n## 4. Spans\n### 4.1 Locate\n## 4b. Reads\n## 5. U\n")
    (tmp_path / "docs" / "design.md").write_text("# D\n## Style\n")
    good = "docs/method.md 4; docs/method.md 4.1; docs/method.md 4b; docs/method.md 4-5; docs/design.md, Style\n"
    bad = "docs/method.md 12; docs/method.md 4.7; docs/method.md section 3; docs/design.md, Layers; docs/train.md\n"
    (tmp_path / "x.py").write_text(good + bad)
    assert unknown_sections(tmp_path, ["x.py"]) == [
        "x.py:2: docs/train.md", "x.py:2: docs/method.md 12", "x.py:2: docs/method.md 4.7",
        "x.py:2: docs/method.md section 3", "x.py:2: docs/design.md, Layers"]


def test_the_results_the_readme_points_at_exist() -> None:
    # The README sends a reader of the demo's all-zero report to the GPU results; a renamed or
    # missing folder would leave that pointer dangling.
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    cited = {m.group(0).rstrip(".") for m in re.finditer(r"benchmarks/results/[\w./-]+", text)
             if text[m.end():m.end() + 1] not in ("{", "*")}  # criticality.{md,json}: a pattern, not a path
    assert "benchmarks/results/gpu/smollm2_pretrained_674e801/" in cited
    assert [c for c in sorted(cited) if not (ROOT / c).exists()] == []


RESULT_PATH = re.compile(r"(?<![=:\w/])benchmarks/results/[\w./@+-]*[\w/](?![\w./@+-]*[{*])")
"""A result path a page cites: not `OUT=benchmarks/results/...` (a folder a command is told to write), not
`git show COMMIT:benchmarks/results/...` (a deleted file git keeps), not `criticality.{md,json}` (a pattern)."""
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def missing_results(root: Path, pages: list[str]) -> list[str]:
    """`PAGE: path` for every cited result path (or, in a page under benchmarks/results, every relative
    markdown link) that names no file or folder of the checkout."""
    missing = []
    for page in pages:
        text = (root / page).read_text(encoding="utf-8")
        for m in RESULT_PATH.finditer(text):
            if not (root / m.group(0)).exists():
                missing.append(f"{page}: {m.group(0)}")
        if page.startswith("benchmarks/results/"):
            for link in MD_LINK.findall(text):
                if "://" not in link and not ((root / page).parent / link).exists():
                    missing.append(f"{page}: {link}")
    return missing


def test_every_result_a_page_cites_is_a_committed_file() -> None:
    # README, ARCHITECTURE, docs/ and the results' own READMEs: a number they quote must keep its file (the raw
    # logs and samples packed into raw.tar.xz are named there as members, not as paths)
    pages = [f for f in repo_files(ROOT) if f.endswith(".md") and (
        f in ("README.md", "ARCHITECTURE.md") or f.startswith(("docs/", "benchmarks/results/")))]
    assert "benchmarks/results/README.md" in pages and "docs/gpu.md" in pages
    assert missing_results(ROOT, pages) == []


def test_the_results_guard_catches_a_missing_file_and_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "results" / "gpu").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "here.json").write_text("{}")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "p.md").write_text("benchmarks/results/here.json, benchmarks/results/gone.json; "
                                            "OUT=benchmarks/results/gpu/new_run bash x.sh; `git show abc1234:benchmarks/results/old.json`; "
                                            "benchmarks/results/criticality.{md,json}\n")
    (tmp_path / "benchmarks" / "results" / "README.md").write_text("[a](here.json) [b](gpu/gone/) [c](https://x.y/z)\n")
    assert missing_results(tmp_path, ["docs/p.md", "benchmarks/results/README.md"]) == [
        "docs/p.md: benchmarks/results/gone.json", "benchmarks/results/README.md: gpu/gone/"]
