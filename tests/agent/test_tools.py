"""The nine agent tools against real sandboxes (docs/method.md 2), plus their pure parts.

Most sandbox tests run on bubblewrap (one sandbox for the module, a fresh folder and ToolBox per
test); a representative subset runs on both backends through the `backend` fixture of
tests/envs/conftest.py (loaded below, so there is one source of truth for backend readiness).
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillgate_core.agent.tool_schemas import TOOL_NAMES
from skillgate_core.agent.tools import (
    PatchError,
    ToolBox,
    ToolResult,
    apply_unified_diff,
    format_observation,
    glob_matcher,
    parse_unified_diff,
    truncate_middle,
)
from skillgate_core.envs.backends import start_sandbox
from skillgate_core.envs.sandbox import Sandbox, SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import TaskPackage, load_task_package
from skillgate_core.formats.tool_calls import parse_tool_calls

_ENVS = Path(__file__).resolve().parents[1] / "envs"
if str(_ENVS) not in sys.path:
    sys.path.insert(0, str(_ENVS))  # that conftest imports envtest_paths by name
_spec = importlib.util.spec_from_file_location("_skillgate_envs_fixtures", _ENVS / "conftest.py")
assert _spec is not None and _spec.loader is not None
_envs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_envs)
backend = _envs.backend  # bwrap_ready / docker_ready themselves: tests/conftest.py's, one per session
_no_leftover_sandboxes = _envs._no_leftover_sandboxes


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> TaskPackage:
    root = tmp_path_factory.mktemp("tools-task")
    (root / "environment").mkdir()
    (root / "tests").mkdir()
    (root / "task.toml").write_text('[task]\nid = "tools"\n[environment]\nmemory_mb = 512\nstorage_mb = 64\n')
    (root / "instruction.md").write_text("Use the tools.\n")
    (root / "environment" / "Dockerfile").write_text("FROM skillgate/base:bookworm\nWORKDIR /app\nENV GREETING=hi\n")
    (root / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    return load_task_package(root)


@pytest.fixture(scope="module")
def boxes(task: TaskPackage) -> Iterator[dict[str, Sandbox]]:
    """One sandbox per backend for the whole module, started on first use."""
    started: dict[str, Sandbox] = {}
    yield started
    for box in started.values():
        box.stop()


_counter = iter(range(10_000))


def _toolbox(boxes: dict[str, Sandbox], task: TaskPackage, which: str, **kw) -> ToolBox:
    if which not in boxes:
        boxes[which] = start_sandbox(task, backend=which)  # type: ignore[arg-type]
    box = boxes[which]
    home = f"/app/t{next(_counter)}"
    box.exec(f"mkdir -p {home}")
    return ToolBox(box, workspace=home, **kw)


@pytest.fixture
def tools(bwrap_ready, boxes, task) -> ToolBox:
    """A fresh shell on the module's bubblewrap sandbox, starting in its own empty folder."""
    return _toolbox(boxes, task, "bwrap")


@pytest.fixture
def both(backend: str, boxes, task) -> ToolBox:
    """The same, once per backend."""
    return _toolbox(boxes, task, backend)


def ok(t: ToolBox, name: str, **args) -> dict:
    r = t.call(name, args)
    assert r.ok, r.error
    return r.payload


def err(t: ToolBox, name: str, **args) -> str:
    r = t.call(name, args)
    assert not r.ok and r.error and r.payload == {}, r
    return r.error


# ---------------------------------------------------------------- truncate_middle / observations


def test_truncate_middle_keeps_head_and_tail_with_an_exact_count():
    assert truncate_middle("short", 10) == "short"
    text = "".join(chr(ord("a") + i % 26) for i in range(100_000))
    cut = truncate_middle(text, 16_000)
    assert len(cut) == 16_000
    head, rest = cut.split("\n...[")
    count, tail = rest.split(" characters omitted]...\n")
    assert text.startswith(head) and text.endswith(tail) and len(head) - len(tail) in (0, 1)
    assert int(count) == len(text) - len(head) - len(tail)
    assert truncate_middle("abcdefghij" * 10, 40) == "abcde\n...[91 characters omitted]...\nghij"
    with pytest.raises(ValueError):
        truncate_middle("x", 0)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.integers(min_value=1, max_value=300))
def test_truncate_middle_property(text: str, limit: int):
    cut = truncate_middle(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    elif "characters omitted]" in cut:
        head, rest = cut.split("\n...[", 1)
        count, tail = rest.split(" characters omitted]...\n", 1)
        assert text.startswith(head) and text.endswith(tail) and len(head) + int(count) + len(tail) == len(text)
        assert len(cut) == limit
    else:  # the limit is smaller than the marker itself
        assert cut == text[:limit]


def test_format_observation_one_message_sorted_unicode_and_cut():
    results = [ToolResult("exec", True, {"stdout": "é" + "x" * 50, "exit_code": 0}),
               ToolResult("bad'name<x>", False, {}, "unknown tool"),
               ToolResult("read", False, {}, "e" * 300)]
    text = format_observation(results, limit=40)
    lines = text.split("\n")
    assert len(lines) == 3 and all(ln.startswith("<tool_response name='") and ln.endswith("</tool_response>")
                                   for ln in lines)
    first = json.loads(lines[0].removeprefix("<tool_response name='exec'>").removesuffix("</tool_response>"))
    assert list(first) == ["exit_code", "stdout"] and first["stdout"].startswith("é") and "omitted" in first["stdout"]
    assert "é" in lines[0]  # ensure_ascii=False
    assert lines[1].startswith("<tool_response name='bad_name_x_'>{\"error\": \"unknown tool\"}")
    assert len(json.loads(lines[2].split(">", 1)[1].rsplit("<", 1)[0])["error"]) == 40


# ---------------------------------------------------------------- unified diffs (pure)


def _diff(a: list[str], b: list[str], n: int = 3) -> str:
    return "".join(difflib.unified_diff(a, b, "a/f.txt", "b/f.txt", n=n))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["alpha\n", "beta\n", "gamma\n", "delta\n", "\n", "eps\n"]), max_size=30),
       st.lists(st.sampled_from(["alpha\n", "beta\n", "zeta\n", "delta\n", "\n", "eta\n"]), max_size=30),
       st.integers(min_value=0, max_value=3))
def test_applying_difflib_diffs_reproduces_the_target(a, b, n):
    text = _diff(a, b, n)
    if not text:
        return
    (fp,) = parse_unified_diff(text)
    assert fp.old_path == fp.new_path == "f.txt"
    assert apply_unified_diff("".join(a), fp.hunks) == "".join(b)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["keep", "drop", "replace", "insert"]), min_size=1, max_size=40),
       st.integers(min_value=1, max_value=3), st.integers(min_value=0, max_value=6))
def test_hunks_are_found_when_the_file_moved_on(ops, n, shift):
    """Lines added above the changes since the diff was made: each hunk is found by its context."""
    a = [f"line {i}\n" for i in range(len(ops))]
    b: list[str] = []
    for i, op in enumerate(ops):
        b += {"keep": [a[i]], "drop": [], "replace": [f"new {i}\n"], "insert": [f"ins {i}\n", a[i]]}[op]
    text = _diff(a, b, n)
    if not text:
        return
    (fp,) = parse_unified_diff(text)
    pre = [f"pre {i}\n" for i in range(shift)]
    assert apply_unified_diff("".join(pre + a), fp.hunks) == "".join(pre + b)


def test_patch_leniencies_and_no_newline_at_eof():
    # Wrong header counts, a blank context line written without its space, trailing blank lines.
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n def f():\n\n-    return 1\n+    return 2\n\n\n"
    (fp,) = parse_unified_diff("Here is the fix:\n" + patch)
    assert apply_unified_diff("def f():\n\n    return 1\n", fp.hunks) == "def f():\n\n    return 2\n"
    # Trailing whitespace / CRLF differences in context still match (patch -l); the file keeps its own.
    assert apply_unified_diff("def f():  \r\n\r\n    return 1\r\n", fp.hunks) == "def f():  \r\n\r\n    return 2\n"
    no_eol = "--- a/n\n+++ b/n\n@@ -1 +1,2 @@\n-last\n\\ No newline at end of file\n+last\n+more\n"
    (fp,) = parse_unified_diff(no_eol)
    assert apply_unified_diff("last", fp.hunks) == "last\nmore\n"
    keep = "--- a/n\n+++ b/n\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    (fp,) = parse_unified_diff(keep)
    assert apply_unified_diff("a\nb", fp.hunks) == "a\nc"
    # Bare '@@' headers (no line numbers): each hunk is placed by its context alone, in order.
    (fp,) = parse_unified_diff("--- a/x\n+++ b/x\n@@\n a\n-b\n+c\n@@ @@\n d\n-e\n+f\n")
    assert apply_unified_diff("z\na\nb\nq\nd\ne\n", fp.hunks) == "z\na\nc\nq\nd\nf\n"
    (fp,) = parse_unified_diff("--- a/x\n+++ b/x\n@@\n+only\n")
    with pytest.raises(PatchError, match="neither line numbers nor context"):
        apply_unified_diff("z\n", fp.hunks)


def test_patch_errors_and_git_headers():
    with pytest.raises(PatchError, match="no file changes"):
        parse_unified_diff("just prose")
    with pytest.raises(PatchError, match="Begin Patch"):
        parse_unified_diff("*** Begin Patch\n*** Update File: x\n*** End Patch")
    with pytest.raises(PatchError, match="before any"):
        parse_unified_diff("@@ -1 +1 @@\n-a\n+b\n")
    (fp,) = parse_unified_diff("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n")
    with pytest.raises(PatchError, match="hunk 1 .* does not match"):
        apply_unified_diff("one\nthree\n", fp.hunks, "f")
    git = ("diff --git a/new.sh b/new.sh\nnew file mode 100755\nindex 0000000..1111111\n--- /dev/null\n"
           "+++ b/new.sh\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+echo hi\n"
           "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
           "diff --git a/a.txt b/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to b.txt\n")
    new, old, moved = parse_unified_diff(git)
    assert (new.old_path, new.new_path, new.executable) == (None, "new.sh", True)
    assert apply_unified_diff("", new.hunks) == "#!/bin/sh\necho hi\n"
    assert (old.old_path, old.new_path) == ("old.txt", None)
    assert (moved.old_path, moved.new_path, moved.rename, moved.hunks) == ("a.txt", "b.txt", True, ())


def test_glob_matcher():
    py = glob_matcher("*.py")
    assert py("a.py") and py("src/deep/b.py") and not py("a.pyc")
    src = glob_matcher("src/*.py")
    assert src("src/a.py") and not src("src/x/a.py") and not src("lib/src/a.py")
    deep = glob_matcher("src/**/*.py")
    assert deep("src/a.py") and deep("src/x/y/a.py") and not deep("lib/a.py")
    braces = glob_matcher("*.{ts,tsx}")
    assert braces("a.ts") and braces("b/c.tsx") and not braces("a.js")
    assert glob_matcher("data_[0-9].csv")("data_3.csv") and not glob_matcher("data_[!0-9].csv")("data_3.csv")


# ---------------------------------------------------------------- argument checking


def test_unknown_tools_and_bad_arguments_are_errors_not_crashes(tools: ToolBox):
    assert "unknown tool 'bash'" in err(tools, "bash", command="ls") and "exec" in err(tools, "bash")
    assert err(tools, "read").startswith("missing required argument 'path' (string)")
    assert err(tools, "read", path=3) == "argument 'path': expected string, got integer (3)"
    assert "expected integer, got string" in err(tools, "read", path="x", offset="2")
    assert "expected integer, got boolean" in err(tools, "read", path="x", limit=True)
    assert "unexpected argument 'file'" in err(tools, "read", path="x", file="y")
    assert "edits[1].newText" in err(tools, "edit", path="x", edits=[{"oldText": "a", "newText": "b"},
                                                                     {"oldText": "a"}])
    assert "'edits[0].oldText': expected string" in err(tools, "edit", path="x", edits=[{"oldText": 1, "newText": ""}])
    assert "expected array, got object" in err(tools, "edit", path="x", edits={"oldText": "a", "newText": "b"})
    assert "expected one of list, poll, kill" in err(tools, "process", action="stop")
    assert "expected boolean" in err(tools, "exec", command="true", background="yes")
    assert "expected an object" in tools.call("ls", ["x"]).error  # type: ignore[arg-type]
    # null for an optional argument means "not given"; integral floats are integers
    assert ok(tools, "ls", path=None)["count"] == 0
    ok(tools, "write", path="f", content="1\n2\n3\n")
    assert ok(tools, "read", path="f", offset=2.0, limit=None)["content"] == "2\n3\n"
    # Parsed straight from a model turn (XML form included), never raising.
    turn = parse_tool_calls("<tool_call><function=read><parameter=path>f</parameter>"
                            "<parameter=limit>1</parameter></function></tool_call>")
    (r,) = tools.run_all(turn.calls)
    assert r.ok and r.payload["content"] == "1\n"
    assert set(TOOL_NAMES) == {"read", "write", "edit", "apply_patch", "grep", "find", "ls", "exec", "process"}


# ---------------------------------------------------------------- exec: the persistent shell


def test_cwd_and_env_persist(both: ToolBox):
    start = both.cwd
    r = ok(both, "exec", command="mkdir -p sub/deeper && cd sub && export MODE=fast LIST='a b' && echo hi")
    assert r == {"exit_code": 0, "stdout": "hi\n", "stderr": "", "timed_out": False, "cwd": f"{start}/sub"}
    r = ok(both, "exec", command='pwd; echo "$MODE|$LIST|$GREETING"; cd deeper; exit 3')
    assert (r["stdout"], r["exit_code"], r["cwd"]) == (f"{start}/sub\nfast|a b|hi\n", 3, f"{start}/sub/deeper")
    # unset sticks, even for a variable of the image's ENV; cd - works across calls
    ok(both, "exec", command="unset MODE GREETING")
    r = ok(both, "exec", command='echo "[${MODE-unset}][${GREETING-unset}]"; cd - >/dev/null; pwd')
    assert r["stdout"] == f"[unset][unset]\n{start}/sub\n"
    # relative paths of the other tools follow the shell's cwd
    assert ok(both, "write", path="here.txt", content="x")["path"] == f"{start}/sub/here.txt"
    assert ok(both, "ls", path="..")["entries"] == "sub/"
    # workdir runs one command elsewhere without moving the shell; env changes there still persist
    r = ok(both, "exec", command="pwd; export W=1", workdir="deeper")
    assert (r["stdout"], r["cwd"]) == (f"{start}/sub/deeper\n", f"{start}/sub")
    assert ok(both, "exec", command="echo $W")["stdout"] == "1\n"
    assert "not an existing directory" in err(both, "exec", command="echo no", workdir="/nope")
    assert both.cwd == f"{start}/sub"


def test_exec_timeout_and_failures(both: ToolBox):
    t0 = time.monotonic()
    r = ok(both, "exec", command="cd /tmp; echo before; sleep 30", timeout=1)
    assert r["timed_out"] and r["exit_code"] == 124 and time.monotonic() - t0 < 10
    assert "killed after 1 s" in r["stderr"] and r["cwd"] == both.cwd != "/tmp"  # state of a killed call is lost
    r = ok(both, "exec", command="echo (")  # a syntax error is the command's failure, not the tool's
    assert r["exit_code"] == 2 and "line 1: syntax error" in r["stderr"]
    r = ok(both, "exec", command="cat; echo rc=$?")  # stdin is /dev/null: nothing waits for input
    assert r["stdout"] == "rc=0\n"
    assert "non-empty" in err(both, "exec", command="   ")
    assert "expected seconds >= 1" in err(both, "exec", command="true", timeout=0)


def test_exec_timeout_is_capped_by_max_and_deadline(tools: ToolBox):
    with pytest.raises(ValueError):
        ToolBox(tools.sandbox, default_timeout=5, max_timeout=1)
    small = ToolBox(tools.sandbox, default_timeout=1, max_timeout=1, workspace=tools.cwd)
    r = ok(small, "exec", command="sleep 20", timeout=300)
    assert r["timed_out"] and "(the maximum)" in r["stderr"]
    r = small.call("exec", {"command": "sleep 20"}, deadline=time.monotonic() + 0.5)
    assert r.ok and r.payload["timed_out"]
    r = tools.call("exec", {"command": "true"}, deadline=time.monotonic() - 1)
    assert not r.ok and "time budget" in (r.error or "")


def test_what_a_command_leaves_running_dies_with_the_call(both: ToolBox):
    t0 = time.monotonic()
    r = ok(both, "exec", command="(sleep 0.6; echo late > late.txt) & sleep 30 & echo started")
    assert r["stdout"] == "started\n" and not r["timed_out"] and time.monotonic() - t0 < 1.5
    time.sleep(0.8)
    r = ok(both, "exec", command="ps -eo args; ls")
    assert "sleep 30" not in r["stdout"] and "late.txt" not in r["stdout"]


def test_state_survives_exit_traps_and_stdout_tricks(tools: ToolBox):
    r = ok(tools, "exec", command="set -eu; export A=1; false; echo unreachable")
    assert r["exit_code"] == 1 and r["stdout"] == ""
    assert ok(tools, "exec", command="echo $A")["stdout"] == "1\n"  # set -e exit still saved the state
    # The command redirected the shell's stdout: the state comes from the state file instead.
    r = ok(tools, "exec", command="mkdir -p d; cd d; export B=2; exec > out.txt; echo hidden")
    assert r["stdout"] == "" and r["cwd"].endswith("/d")
    assert ok(tools, "exec", command="cat out.txt; echo $B")["stdout"] == "hidden\n2\n"
    # The command replaced the EXIT trap and exited: the state is lost and the model is told.
    r = ok(tools, "exec", command="cd /; trap 'echo bye' EXIT; exit 4")
    assert r["exit_code"] == 4 and "could not be read" in r["stderr"] and r["cwd"] != "/"
    # A trap set without exiting does not get in the way (a persistent shell never exits).
    r = ok(tools, "exec", command="trap 'echo bye' EXIT; cd /tmp")
    assert r["cwd"] == "/tmp" and r["stdout"] == ""


def test_deleted_cwd_falls_back_to_the_workspace(tools: ToolBox):
    home = tools.cwd
    ok(tools, "exec", command="mkdir gone && cd gone")
    ok(tools, "exec", command="rmdir ../gone")
    r = ok(tools, "exec", command="pwd")
    assert r["stdout"] == f"{home}\n" and "no longer exists" in r["stderr"]


def test_huge_variables_are_not_carried(tools: ToolBox):
    r = ok(tools, "exec", command="export BIG=$(head -c 40000 /dev/zero | tr '\\0' x) SMALL=ok; echo ${#BIG}")
    assert r["stdout"] == "40000\n" and "not kept" in r["stderr"] and "BIG" in r["stderr"]
    assert ok(tools, "exec", command='echo "${BIG-unset} $SMALL"')["stdout"] == "unset ok\n"


def test_big_output_is_cut_in_the_middle_and_state_still_read(bwrap_ready, task: TaskPackage):
    cfg = SandboxConfig(output_limit_bytes=5000)
    with start_sandbox(task, backend="bwrap", config=cfg) as box:
        t = ToolBox(box, output_chars=1000)
        r = ok(t, "exec", command="mkdir -p /tmp/w && cd /tmp/w && export K=v && seq 1 100000")
        assert r["cwd"] == "/tmp/w" and "bytes per stream was dropped" in r["stderr"]
        assert len(r["stdout"]) == 1000 and r["stdout"].startswith("1\n2\n") and "characters omitted" in r["stdout"]
        assert ok(t, "exec", command="echo $K")["stdout"] == "v\n"


def test_infrastructure_failure_propagates(bwrap_ready, task: TaskPackage):
    box = start_sandbox(task, backend="bwrap")
    t = ToolBox(box)
    box.stop()
    with pytest.raises(SandboxError):
        t.call("exec", {"command": "true"})
    with pytest.raises(SandboxError):
        t.call("read", {"path": "x"})


# ---------------------------------------------------------------- background jobs


def test_background_jobs(both: ToolBox):
    r = both.call("exec", {"command": "echo started; sleep 0.5; echo done; exit 7", "background": True})
    if both.sandbox.backend == "bwrap":
        assert not r.ok and "background jobs need the docker backend" in (r.error or "")
        assert ok(both, "process", action="list")["jobs"] == []
        assert "no background job 'job-1'" in err(both, "process", action="poll", sessionId="job-1")
        return
    assert r.ok and r.payload["status"] == "running" and r.payload["cwd"] == both.cwd
    job = r.payload["sessionId"]
    ok(both, "exec", command="cd /tmp")  # the shell goes on while the job runs
    deadline = time.monotonic() + 10
    seen = ""
    while time.monotonic() < deadline:
        p = ok(both, "process", action="poll", sessionId=job)
        seen += p["stdout"]
        if p["status"] != "running":
            break
        time.sleep(0.2)
    assert (p["status"], p["exit_code"], seen) == ("exited", 7, "started\ndone\n")
    assert ok(both, "process", action="poll", sessionId=job)["stdout"] == ""  # only new output
    long = ok(both, "exec", command="while :; do sleep 0.1; done", background=True, workdir="/tmp")
    assert long["cwd"] == "/tmp"
    listed = {j["sessionId"]: j["status"] for j in ok(both, "process", action="list")["jobs"]}
    assert listed == {job: "exited", long["sessionId"]: "running"}
    assert ok(both, "process", action="kill", sessionId=long["sessionId"])["status"] == "killed"
    time.sleep(0.2)
    procs = ok(both, "exec", command="ps -eo args")["stdout"]
    assert f"{long['sessionId']}.sh" not in procs and "sleep 0.1" not in procs
    assert "missing required argument 'sessionId'" in err(both, "process", action="kill")


# ---------------------------------------------------------------- file tools


def test_read_write_edit(both: ToolBox):
    home = both.cwd
    assert ok(both, "write", path="pkg/mod.py", content="a = 1\nb = 2\nc = 3\nb = 2\n") == {
        "path": f"{home}/pkg/mod.py", "bytes": 24}
    r = ok(both, "read", path="pkg/mod.py", offset=2, limit=2)
    assert (r["content"], r["start_line"], r["end_line"], r["total_lines"]) == ("b = 2\nc = 3\n", 2, 3, 4)
    assert ok(both, "read", path=f"{home}/pkg/mod.py")["content"] == "a = 1\nb = 2\nc = 3\nb = 2\n"
    assert "is a directory" in err(both, "read", path="pkg")
    assert "no such file" in err(both, "read", path="nope.txt")
    assert "past the end" in err(both, "read", path="pkg/mod.py", offset=9)
    # all-or-nothing: the second edit is ambiguous, so the first is not applied either
    e = err(both, "edit", path="pkg/mod.py", edits=[{"oldText": "a = 1", "newText": "a = 10"},
                                                    {"oldText": "b = 2", "newText": "b = 20"}])
    assert e.startswith("edits[1]: oldText occurs 2 times")
    assert "edits[0]: oldText not found" in err(both, "edit", path="pkg/mod.py",
                                                 edits=[{"oldText": "zzz", "newText": ""}])
    r = ok(both, "edit", path="pkg/mod.py", edits=[{"oldText": "a = 1", "newText": "a = 10"},
                                                   {"oldText": "b = 2", "newText": "b = 20", "replaceAll": True}])
    assert r["replacements"] == 3
    assert ok(both, "read", path="pkg/mod.py")["content"] == "a = 10\nb = 20\nc = 3\nb = 20\n"
    # an edited script keeps its mode; writes outside the writable areas are the agent's error
    ok(both, "write", path="run.sh", content="#!/bin/sh\necho one\n")
    ok(both, "exec", command="chmod 755 run.sh")
    ok(both, "edit", path="run.sh", edits=[{"oldText": "one", "newText": "two"}])
    assert ok(both, "exec", command="./run.sh; stat -c %a run.sh")["stdout"] == "two\n755\n"
    assert "cannot write" in err(both, "write", path="/usr/bin/evil", content="x")


def test_read_edge_cases(tools: ToolBox):
    ok(tools, "write", path="noeol.txt", content="one\ntwo")
    r = ok(tools, "read", path="noeol.txt", offset=2)
    assert (r["content"], r["total_lines"], r["end_line"]) == ("two", 2, 2)
    ok(tools, "write", path="empty.txt", content="")
    assert ok(tools, "read", path="empty.txt")["content"] == ""
    ok(tools, "exec", command="printf 'caf\\xc3\\xa9 \\xff\\n' > bin.txt")
    assert ok(tools, "read", path="bin.txt")["content"] == "café \ufffd\n"
    assert "not UTF-8" in err(tools, "edit", path="bin.txt", edits=[{"oldText": "caf", "newText": "x"}])
    assert ok(tools, "write", path="~/h.txt", content="home")["path"] == "/root/h.txt"
    assert ok(tools, "write", path="s.txt", content="\ud800")["bytes"] == 1  # a lone surrogate becomes '?'
    big = "".join(f"line {i}\n" for i in range(5000))
    ok(tools, "write", path="big.txt", content=big)
    r = ok(tools, "read", path="big.txt")
    assert len(r["content"]) == 16_000 and "characters omitted" in r["content"] and r["total_lines"] == 5000


def test_apply_patch_in_the_sandbox(both: ToolBox):
    ok(both, "write", path="app/main.py", content="import os\n\n\ndef main():\n    return 1\n")
    ok(both, "write", path="app/old.txt", content="bye\n")
    patch = (
        "diff --git a/app/main.py b/app/main.py\n--- a/app/main.py\n+++ b/app/main.py\n@@ -3,3 +3,3 @@\n\n"
        " def main():\n-    return 1\n+    return 2\n"
        "diff --git a/tool.sh b/tool.sh\nnew file mode 100755\n--- /dev/null\n+++ b/tool.sh\n@@ -0,0 +1,2 @@\n"
        "+#!/bin/sh\n+echo tool\n"
        "--- a/app/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n")
    r = ok(both, "apply_patch", patch=patch)
    home = both.cwd
    assert r == {"modified": [f"{home}/app/main.py"], "created": [f"{home}/tool.sh"], "deleted": [f"{home}/app/old.txt"]}
    out = ok(both, "exec", command="cat app/main.py; ./tool.sh; ls app")["stdout"]
    assert out == "import os\n\n\ndef main():\n    return 2\ntool\nmain.py\n"
    # A hunk that does not fit changes nothing, not even the files whose hunks did fit.
    bad = ("--- a/app/main.py\n+++ b/app/main.py\n@@ -1 +1 @@\n-import os\n+import sys\n"
           "--- a/tool.sh\n+++ b/tool.sh\n@@ -2 +2 @@\n-echo nope\n+echo x\n")
    e = err(both, "apply_patch", patch=bad)
    assert "tool.sh: hunk 1" in e and "no file was changed" in e
    assert ok(both, "read", path="app/main.py")["content"].startswith("import os\n")
    assert "already exists" in err(both, "apply_patch", patch="--- /dev/null\n+++ b/tool.sh\n@@ -0,0 +1 @@\n+x\n")
    assert "no such file" in err(both, "apply_patch", patch="--- a/missing\n+++ b/missing\n@@ -1 +1 @@\n-a\n+b\n")
    assert "unified diff" in err(both, "apply_patch", patch="please change main")


def test_apply_patch_rename_and_plain_paths(tools: ToolBox):
    ok(tools, "write", path="a.txt", content="one\ntwo\n")
    r = ok(tools, "apply_patch", patch="diff --git a/a.txt b/b.txt\nsimilarity index 80%\nrename from a.txt\n"
                                       "rename to b.txt\n--- a/a.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
    assert r["renamed"] == [f"{tools.cwd}/a.txt -> {tools.cwd}/b.txt"]
    assert ok(tools, "ls")["entries"] == "b.txt"
    # paths without a/ b/ prefixes, relative to the shell's cwd; '--- x.orig' patches x in place
    ok(tools, "exec", command="mkdir sub && cd sub && printf 'k=1\\n' > conf")
    assert ok(tools, "apply_patch", patch="--- conf.orig\n+++ conf\n@@ -1 +1 @@\n-k=1\n+k=2\n")["modified"]
    assert ok(tools, "read", path="conf")["content"] == "k=2\n"


def test_grep_find_ls(both: ToolBox):
    home = both.cwd
    for path, text in {"src/a.py": "def alpha():\n    return 1\n", "src/pkg/b.py": "ALPHA = 'x'\n",
                       "docs/readme.md": "alpha docs\n", ".git/config": "alpha\n", "src/c.ts": "let alpha\n"}.items():
        ok(both, "write", path=path, content=text)
    ok(both, "exec", command="ln -s src link")
    r = ok(both, "grep", pattern="alpha|ALPHA", glob="*.py")
    assert r["matches"] == f"{home}/src/a.py:1:def alpha():\n{home}/src/pkg/b.py:1:ALPHA = 'x'" and r["count"] == 2
    assert ok(both, "grep", pattern="zzz")["count"] == 0
    assert ok(both, "grep", pattern="^let", path="src", glob="*.{ts,js}")["matches"] == f"{home}/src/c.ts:1:let alpha"
    assert "grep:" in err(both, "grep", pattern="x", path="nowhere")
    assert "grep:" in err(both, "grep", pattern="(unclosed")
    r = ok(both, "find", pattern="*.py")
    assert r["matches"] == f"{home}/src/a.py\n{home}/src/pkg/b.py" and r["count"] == 2  # .git is skipped
    assert ok(both, "find", pattern="src/*.py")["matches"] == f"{home}/src/a.py"
    assert ok(both, "find", pattern="src/**/*.py")["count"] == 2
    assert ok(both, "find", pattern=f"{home}/src/**/b.py")["matches"] == f"{home}/src/pkg/b.py"
    assert ok(both, "find", pattern="pkg", path="src")["matches"] == f"{home}/src/pkg/"
    assert "no such file" in err(both, "find", pattern="*", path="nowhere")
    r = ok(both, "ls")
    assert r["entries"] == ".git/\ndocs/\nlink -> src\nsrc/" and r["count"] == 4
    assert "not a directory" in err(both, "ls", path="src/a.py")
    assert "no such file" in err(both, "ls", path="nowhere")


def test_many_entries_are_capped(tools: ToolBox):
    ok(tools, "exec", command="mkdir many && cd many && seq -f 'f%04g' 1 1200 | xargs touch")
    r = ok(tools, "ls", path=".")  # (the shell is in many/ now)
    assert r["count"] == 1200 and r["truncated"] and r["entries"].count("\n") == 999
    r = ok(tools, "find", pattern="f0*")
    assert r["count"] == 999 and "truncated" not in r
