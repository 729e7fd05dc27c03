"""Helpers shared by every embedded task script (python3 standard library only).

The engine modules beside this one are ordinary, importable, tested Python; they are also pasted
verbatim into the files a task ships (a skill's scripts/, the reference solution, the verifier),
because task sandboxes have only python3 and its standard library. `embed.py` does the pasting:
this module first, then the engine with its `# embed-drop` import lines removed, then the
parameters and a call of `tool_main` or `check_main`.

A workspace is handled as a dict {relative posix path: text}: engines are pure functions from the
input files to the output files, so the generator runs them in-process and the sandbox runs the
same code as a script.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import sys
from pathlib import Path

MAX_FILE_BYTES = 8 << 20
"""Files larger than this are not read into a workspace snapshot (agents may leave junk behind)."""


def read_tree(root: str | os.PathLike[str]) -> dict[str, str]:
    """{relative posix path: text} of every regular file under `root`, hidden folders skipped."""
    base = Path(root)
    files: dict[str, str] = {}
    for current, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(current) / name
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                continue
            files[path.relative_to(base).as_posix()] = path.read_bytes().decode("utf-8", "replace")
    return files


def write_tree(root: str | os.PathLike[str], outputs: dict[str, str]) -> None:
    """Write each {relative path: text} under `root`, creating folders."""
    for rel, text in sorted(outputs.items()):
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def parse_csv(text: str) -> list[dict[str, str]]:
    """Rows of a CSV text with a header line, as dicts (values stripped)."""
    rows = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(rows, [])]
    width = len(header)
    return [dict(zip(header, [c.strip() for c in row] + [""] * (width - len(row)), strict=False))
            for row in rows if row]


def csv_rows(text: str) -> list[list[str]]:
    """All rows of a CSV text (no header handling), cells stripped, blank lines dropped."""
    return [[c.strip() for c in row] for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]


def format_csv(header: list[str], rows: list[list[str]]) -> str:
    """CSV text with `header` then `rows`, '\\n' line endings."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def files_under(files: dict[str, str], folder: str) -> list[str]:
    """Sorted paths of `files` directly or indirectly under `folder` ('' means all)."""
    prefix = folder.rstrip("/") + "/" if folder else ""
    return sorted(p for p in files if p.startswith(prefix))


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tool_main(solve, params: dict) -> None:
    """Run `solve` on the current directory's files and write what it returns (a skill script)."""
    root = Path.cwd()
    outputs = solve(params, read_tree(root))
    write_tree(root, outputs)
    for rel, text in sorted(outputs.items()):
        print(f"wrote {rel} ({len(text.splitlines())} lines)")


def check_main(check, params: dict, input_sha256: dict[str, str]) -> None:
    """Verify the workspace (argv[1], default /app): exit 0 when it passes, 1 with reasons when not.

    The inputs are checked against their digests first: a verifier that recomputes the expected
    result from the inputs must not be fooled by an agent that edited or deleted them.
    """
    root = sys.argv[1] if len(sys.argv) > 1 else "/app"
    files = read_tree(root)
    problems = [f"input {rel}: missing or modified (inputs must stay as given)"
                for rel, digest in sorted(input_sha256.items())
                if rel not in files or text_sha256(files[rel]) != digest]
    if not problems:
        # Only the digested inputs feed the recomputation: files the agent added cannot change it.
        inputs = {rel: files[rel] for rel in input_sha256}
        try:
            problems = list(check(params, inputs, files))
        except Exception as exc:  # a malformed output must fail the task, not crash the grader
            problems = [f"output could not be read: {type(exc).__name__}: {exc}"]
    for line in problems[:20]:
        print("FAIL:", line)
    if len(problems) > 20:
        print(f"FAIL: ... {len(problems) - 20} more")
    print("PASS" if not problems else f"{len(problems)} problem(s)")
    sys.exit(0 if not problems else 1)
