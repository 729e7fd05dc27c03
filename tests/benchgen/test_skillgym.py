"""The SkillGym builder/reviewer loop against a REAL local HTTP endpoint serving scripted
chat-completion replies, with the real validity gate (bubblewrap): a fit-check skip, a successful
build, a repair round that fixes a leak, and an unresolved task kept apart with its reason."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from skillgate_core.benchgen.skillgym import (
    ChatClient,
    SkillGymConfig,
    generate_from_skill,
    static_problems,
)
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.policy.openai_chat import EndpointError

SKILL = "house-wordcount-report"
SKILL_MD = """---
name: house-wordcount-report
description: "Write the documentation team's word-count report (WCR): one line FILE<TAB>WORDS per file, most words first."
---
# House word-count report (WCR)

1. Count words (whitespace-separated) of every `*.txt` under `docs/`.
2. Write `report.wcr`: `FILE<TAB>WORDS`, sorted by WORDS descending, then FILE ascending.

```bash
python3 - <<'PY'
import pathlib
rows = sorted(((len(p.read_text().split()), p.name) for p in pathlib.Path("docs").glob("*.txt")),
              key=lambda t: (-t[0], t[1]))
open("report.wcr", "w").write("".join(f"{name}\t{n}\n" for n, name in rows))
PY
```
"""

COUNT = ("import pathlib\n"
         "rows = sorted(((len(p.read_text().split()), p.name) for p in pathlib.Path('/app/docs').glob('*.txt')),"
         " key=lambda t: (-t[0], t[1]))\n"
         "text = ''.join(f'{n}\\t{w}\\n' for w, n in rows)\n")


def package(instruction: str, test_verdict: str = "python", solve_reads_skill: bool = False) -> dict[str, str]:
    docs = {f"environment/workspace/docs/doc{i:02d}.txt": " ".join(["word"] * (i * 7 % 23 + 1)) + "\n"
            for i in range(40)}
    solve = ("python3 /skills/house-wordcount-report/run.py\n" if solve_reads_skill else
             f"python3 - <<'PY'\n{COUNT}open('/app/report.wcr', 'w').write(text)\nPY\n")
    if test_verdict == "python":
        test = ("mkdir -p /logs/verifier\npython3 - <<'PY'\n" + COUNT
                + "import os\nok = os.path.exists('/app/report.wcr') and open('/app/report.wcr').read() == text\n"
                  "open('/logs/verifier/reward.txt', 'w').write('1' if ok else '0')\nPY\n")
    else:  # too weak to be valid: the no-op agent would pass
        test = "mkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"
    return {
        "instruction.md": instruction,
        "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n',
        "environment/Dockerfile": "FROM skillgate/base:bookworm\nWORKDIR /app\nCOPY workspace/ /app/\n",
        **docs,
        "solution/solve.sh": "#!/bin/bash\nset -e\n" + solve,
        "tests/test.sh": "#!/bin/bash\n" + test,
    }


GOOD = package("Write the documentation team's word-count report for `docs/` to `report.wcr`.\n")
LEAKY = package("Write `report.wcr` for `docs/`: one line per file, FILE<TAB>WORDS, most words first "
                "(the expected file is doc03.txt\t22 first).\n")
READS_SKILL = package("Write the word-count report for `docs/` to `report.wcr`.\n", solve_reads_skill=True)
ALWAYS_PASSES = package("Write the word-count report for `docs/` to `report.wcr`.\n", test_verdict="always")


def reply(obj) -> str:
    return "Here you go:\n```json\n" + json.dumps(obj) + "\n```"


class ScriptedEndpoint:
    """A real HTTP server speaking /v1/chat/completions; replies are scripted per role."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = {role: list(replies) for role, replies in script.items()}
        self.requests: list[dict] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(body)
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                system = body["messages"][0]["content"]
                role = system.split("\n", 1)[0].removeprefix("ROLE: ").strip()
                if not endpoint.script.get(role):
                    self.send_response(400)
                    self.end_headers()
                    self.wfile.write(f"no scripted reply left for {role}".encode())
                    return
                content = endpoint.script[role].pop(0)
                prompt = sum(len(m["content"]) for m in body["messages"]) // 4
                data = {"id": "x", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": prompt, "completion_tokens": len(content) // 4,
                                  "total_tokens": prompt + len(content) // 4}}
                payload = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedEndpoint:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def roles(self) -> list[str]:
        return [r["messages"][0]["content"].split("\n", 1)[0].removeprefix("ROLE: ") for r in self.requests]


@pytest.fixture
def skill_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "input-skills" / SKILL
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    return folder


@pytest.fixture
def endpoint() -> Iterator[callable]:
    servers: list[ScriptedEndpoint] = []

    def start(script: dict[str, list[str]]) -> ScriptedEndpoint:
        server = ScriptedEndpoint(script).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


needs_bwrap = pytest.mark.usefixtures("bwrap_ready")
CONFIG = dict(max_repairs=5, price_in_per_mtok=0.5, price_out_per_mtok=2.0, gate_backend="bwrap", gate_repeats=1)


@needs_bwrap
def test_fit_check_skip_and_a_successful_build(tmp_path: Path, skill_dir: Path, endpoint):
    server = endpoint({"fit-check": [reply({"fit": True, "reason": "a procedure over many files"}),
                                     reply({"fit": False, "reason": "nothing to order"})],
                       "builder": [reply({"files": GOOD})],
                       "reviewer": [reply({"blockingPass": True, "blockingIssues": []})]})
    client = ChatClient(base_url=server.url, model="scripted", api_key="k")
    out = tmp_path / "out"
    config = SkillGymConfig(structures=("procedural", "planning"), **CONFIG)
    accepted, skipped = generate_from_skill(skill_dir, client, out, config)

    assert accepted.verdict == "accepted" and accepted.rounds == 1 and accepted.reason == ""
    assert Path(accepted.path) == out / "accepted" / f"{SKILL}-procedural"
    assert (Path(accepted.path) / "tests" / "test.sh").is_file()
    slate = load_task_package(Path(accepted.path)).slate  # a one-entry slate: its oracle, in the one format
    assert slate is not None and slate.names == (SKILL,) and slate.oracle == SKILL
    assert slate.task_id == f"{SKILL}-procedural" and slate.entries[0].description
    assert [c.role for c in accepted.calls] == ["fit-check", "builder", "reviewer"]
    assert accepted.prompt_tokens > 0 and accepted.completion_tokens > 0
    assert accepted.cost_usd == pytest.approx((accepted.prompt_tokens * 0.5 + accepted.completion_tokens * 2.0) / 1e6)

    assert skipped.verdict == "skipped" and "nothing to order" in skipped.reason and skipped.path == ""
    assert not (out / "accepted" / f"{SKILL}-planning").exists()
    assert server.roles() == ["fit-check", "builder", "reviewer", "fit-check"]
    assert all(r["model"] == "scripted" for r in server.requests)
    assert all(set(r) == {"model", "messages", "temperature", "max_tokens"} for r in server.requests)  # no top_p, seed
    # The skill library beside the tasks is byte-identical to the input skill.
    assert (out / "skills" / SKILL / "SKILL.md").read_bytes() == (skill_dir / "SKILL.md").read_bytes()
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in lines] == ["accepted", "skipped"]
    assert lines[0]["prompt_tokens"] == accepted.prompt_tokens


@needs_bwrap
def test_a_repair_round_fixes_a_leak(tmp_path: Path, skill_dir: Path, endpoint):
    server = endpoint({"fit-check": [reply({"fit": True, "reason": "ok"})],
                       "builder": [reply({"files": LEAKY}), reply({"files": GOOD})],
                       "reviewer": [reply({"blockingPass": False, "blockingIssues": [
                           {"kind": "leak", "detail": "instruction.md gives the first expected line"}]}),
                                    reply({"blockingPass": True, "blockingIssues": []})]})
    client = ChatClient(base_url=server.url, model="scripted")
    (record,) = generate_from_skill(skill_dir, client, tmp_path / "out",
                                    SkillGymConfig(structures=("procedural",), **CONFIG))
    assert record.verdict == "accepted" and record.rounds == 2
    assert record.history == ("round 1: leak: instruction.md gives the first expected line",)
    repair = server.requests[3]["messages"][1]["content"]
    assert "leak: instruction.md gives the first expected line" in repair and "previous package" in repair
    accepted = Path(record.path)
    assert "expected file" not in (accepted / "instruction.md").read_text()


@needs_bwrap
def test_an_unresolved_task_is_kept_apart_with_its_reason(tmp_path: Path, skill_dir: Path, endpoint):
    server = endpoint({"fit-check": [reply({"fit": True, "reason": "ok"})],
                       "builder": ["I think the package is fine.", reply({"files": READS_SKILL}),
                                   reply({"files": ALWAYS_PASSES})]})
    client = ChatClient(base_url=server.url, model="scripted")
    out = tmp_path / "out"
    config = SkillGymConfig(structures=("diagnosis",), **{**CONFIG, "max_repairs": 2})
    (record,) = generate_from_skill(skill_dir, client, out, config)

    assert record.verdict == "unresolved" and record.rounds == 3
    assert "expected one JSON object" in record.history[0]           # malformed reply -> a repair round
    assert "reads /skills" in record.history[1]                      # static check, before any sandbox
    assert "nop gate failed" in record.history[2]                    # the real validity gate
    assert "nop gate failed" in record.reason
    kept = out / "unresolved" / f"{SKILL}-diagnosis"
    assert Path(record.path) == kept
    assert "nop gate failed" in json.loads((kept / "reason.json").read_text())["reason"]
    assert not (out / "accepted").exists() and not (out / "work" / f"{SKILL}-diagnosis").exists()
    assert "reviewer" not in server.roles()


def test_static_checks_and_client_errors(tmp_path: Path, endpoint):
    assert static_problems(GOOD, SKILL) == []
    named = {**GOOD, "instruction.md": f"Use {SKILL} to write the report."}
    assert any("names the skill" in p for p in static_problems(named, SKILL))
    bad_docker = {**GOOD, "environment/Dockerfile": "FROM python:3.11\nCOPY . /root\n"}
    problems = static_problems(bad_docker, SKILL)
    assert any("FROM skillgate/base" in p for p in problems) and any("COPY . /root" in p for p in problems)
    assert any("missing" in p for p in static_problems({"instruction.md": "x"}, SKILL))
    server = endpoint({})
    with pytest.raises(EndpointError, match="HTTP 400"):
        ChatClient(base_url=server.url, model="m", retries=0).chat([{"role": "system", "content": "ROLE: builder"}])


def test_a_builder_cannot_write_outside_its_package_even_when_every_round_fails(tmp_path: Path, skill_dir: Path,
                                                                                  endpoint):
    """Paths from the endpoint are checked before anything is written, whatever the round's outcome:
    an absolute or '../' path is a malformed reply (back to the builder), never a file on the host."""
    outside = tmp_path / "outside"
    hostile = {**GOOD, "../../escape.sh": "#!/bin/sh\necho pwned\n", f"{outside}/abs.sh": "#!/bin/sh\necho pwned\n"}
    server = endpoint({"fit-check": [reply({"fit": True, "reason": "ok"})],
                       "builder": [reply({"files": hostile}), reply({"files": {**hostile, "a/./../../b.sh": "x"}})]})
    out = tmp_path / "out"
    (record,) = generate_from_skill(skill_dir, ChatClient(base_url=server.url, model="scripted"), out,
                                    SkillGymConfig(structures=("procedural",), **{**CONFIG, "max_repairs": 1}))
    assert record.verdict == "unresolved" and record.rounds == 2
    assert "expected a relative path inside" in record.history[0]
    assert not outside.exists() and not (tmp_path / "escape.sh").exists() and not (out.parent / "escape.sh").exists()
    assert not list(tmp_path.rglob("escape.sh")) and not list(tmp_path.rglob("abs.sh"))


def test_write_files_inside_checks_every_path_first_and_never_follows_a_link(tmp_path: Path):
    from skillgate_core.base.safe_paths import UnsafeNameError, write_files_inside

    folder, target = tmp_path / "pkg", tmp_path / "target"
    target.mkdir()
    for bad in ("/etc/x", "../x", "a/../../x", "", "a//b", "./a", "a\\..\\b"):
        with pytest.raises(UnsafeNameError, match="expected a relative path inside"):
            write_files_inside(folder, {"ok.txt": "fine", bad: "x"}, source="reply")
        assert not (folder / "ok.txt").exists()  # nothing written before every path is checked
    folder.mkdir(exist_ok=True)
    (folder / "tests").symlink_to(target)
    with pytest.raises(UnsafeNameError, match="a link"):
        write_files_inside(folder, {"tests/test.sh": "x"}, source="reply")
    assert list(target.iterdir()) == []
    written = write_files_inside(tmp_path / "pkg2", {"tests/test.sh": "#!/bin/sh\n", "a/b.txt": "b"}, source="reply",
                                 executable=lambda rel: rel.endswith(".sh"))
    assert sorted(p.relative_to(tmp_path / "pkg2").as_posix() for p in written) == ["a/b.txt", "tests/test.sh"]
    assert (tmp_path / "pkg2" / "tests" / "test.sh").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "pkg2" / "a" / "b.txt").stat().st_mode & 0o777 == 0o644


def test_colliding_paths_are_a_repair_round_not_a_crash(tmp_path: Path, skill_dir: Path, endpoint):
    colliding = {**GOOD, "tests/test.sh/inner": "x"}
    server = endpoint({"fit-check": [reply({"fit": True, "reason": "ok"})], "builder": [reply({"files": colliding})]})
    (record,) = generate_from_skill(skill_dir, ChatClient(base_url=server.url, model="scripted"), tmp_path / "out",
                                    SkillGymConfig(structures=("procedural",), **{**CONFIG, "max_repairs": 0}))
    assert record.verdict == "unresolved" and "collides" in record.history[0]
