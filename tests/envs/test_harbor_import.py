"""Importing Harbor / Terminal-Bench task folders: normalised task.toml, notes, strict reload, the CLI."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillgate_core.envs.harbor_import import import_harbor, to_toml
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.envs.validity_gate import check_task

HARBOR_TOML = """\
version = "1.0"

[metadata]
author_name = "someone"
difficulty = "medium"
tags = ["files", "bash"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory = "1G"
storage = "2G"

[[environment.mcp_servers]]
name = "mcp-server"
transport = "streamable-http"
url = "http://mcp-server:8000/mcp"
"""


def _harbor_task(root: Path, name: str, test_sh: str, solve_sh: str = "echo 42 > /app/answer.txt\n") -> Path:
    t = root / name
    (t / "environment").mkdir(parents=True)
    (t / "tests").mkdir()
    (t / "solution").mkdir()
    (t / "task.toml").write_text(HARBOR_TOML)
    (t / "instruction.md").write_text("Write 42 to /app/answer.txt.\n")
    (t / "environment" / "Dockerfile").write_text("FROM python:3.13-slim-bookworm\nWORKDIR /app\nCOPY seed.txt .\n")
    (t / "environment" / "seed.txt").write_text("seed\n")
    (t / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
    (t / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve_sh)
    return t


OFFLINE_TEST = ('if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then echo 1; else echo 0; fi '
                "> /logs/verifier/reward.txt\n")


def test_import_normalises_and_notes(tmp_path: Path):
    src = _harbor_task(tmp_path / "harbor", "answer-42", "curl -LsSf https://astral.sh/uv/install.sh | sh\n"
                       "uvx pytest /tests/test_outputs.py\n", solve_sh="cat /skills/x/SKILL.md; echo 42 > /app/answer.txt\n")
    [report] = import_harbor(src, tmp_path / "out")
    assert report.ok, report.error
    assert report.task_id == "answer-42" and Path(report.dest) == (tmp_path / "out" / "answer-42").resolve()
    notes = "\n".join(report.notes)
    for fragment in ("environment.mcp_servers", "task.id = 'answer-42'", "allow_internet = true",
                     "tests/test.sh downloads tools", "reads /skills"):
        assert fragment in notes, fragment
    data = tomllib.loads((tmp_path / "out" / "answer-42" / "task.toml").read_text())
    assert data["task"]["id"] == "answer-42" and data["environment"]["memory"] == "1G"
    assert data["metadata"]["tags"] == ["files", "bash"] and "mcp_servers" not in data["environment"]
    task = load_task_package(report.dest)
    assert task.config.environment.memory_mb == 1024 and task.config.agent.timeout_sec == 900
    assert task.bwrap_compatible and report.needs_docker == ()
    assert (Path(report.dest) / "tests" / "test.sh").stat().st_mode & 0o111


def test_import_dataset_and_gate_the_result(tmp_path: Path, bwrap_ready):
    dataset = tmp_path / "dataset"
    _harbor_task(dataset, "good-one", OFFLINE_TEST)
    _harbor_task(dataset, "needs-apt", OFFLINE_TEST)
    dockerfile = dataset / "needs-apt" / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN apt-get update && apt-get install -y jq\n")
    (dataset / "broken").mkdir()
    (dataset / "broken" / "task.toml").write_text("[agent]\ntimeout_sec = 10\n")  # no instruction, no tests
    reports = {r.task_id: r for r in import_harbor(dataset, tmp_path / "out")}
    assert reports["good-one"].ok and reports["needs-apt"].ok and not reports["broken"].ok
    assert "instruction.md" in reports["broken"].error
    assert reports["needs-apt"].needs_docker and "RUN apt-get" in reports["needs-apt"].needs_docker[0]
    gate = check_task(reports["good-one"].dest, backend="bwrap")
    assert gate.valid, gate


def test_existing_destination_needs_overwrite(tmp_path: Path):
    src = _harbor_task(tmp_path / "h", "t1", OFFLINE_TEST)
    assert import_harbor(src, tmp_path / "out")[0].ok
    again = import_harbor(src, tmp_path / "out")[0]
    assert not again.ok and "exists" in again.error
    assert import_harbor(src, tmp_path / "out", overwrite=True)[0].ok


def test_missing_source(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        import_harbor(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no task.toml"):
        import_harbor(tmp_path / "empty", tmp_path / "out")


def test_toml_writer_round_trips():
    data = {"version": "1.0", "task": {"id": "x"}, "verifier": {"timeout_sec": 1.5, "env": {"A B": "q\"x"}},
            "metadata": {"tags": ["a", "b"], "nested": {"k": True}, "n": 3}}
    assert tomllib.loads(to_toml(data)) == data


def test_cli_import(tmp_path: Path):
    from deployments.cli import app

    src = _harbor_task(tmp_path / "h", "cli-task", OFFLINE_TEST)
    result = CliRunner().invoke(app, ["task", "import", str(src), str(tmp_path / "out")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "cli-task" in result.output and "ok" in result.output
    assert (tmp_path / "out" / "cli-task" / "task.toml").is_file()
