"""The task package loader: the hand-written tasks load; every malformed part is named in the error."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from envtest_paths import BROKEN, GOOD

from skillgate_core.envs.task_package import DEFAULT_WORKDIR, TaskPackageError, load_task_package


def test_hand_written_tasks_load():
    csv = load_task_package(GOOD / "csv-column-sum")
    assert csv.task_id == "csv-column-sum"
    assert csv.workdir == "/srv/shop"
    assert csv.env == {"SUM_COLUMN": "price", "PYTHONDONTWRITEBYTECODE": "1"}
    assert csv.config.environment.memory_mb == 512 and csv.config.environment.storage_mb == 128
    assert csv.config.verifier.env == {"EXPECTED_COLUMN": "price"}
    assert csv.slate is not None and csv.slate.oracle == "csv-column-sum" and len(csv.slate.names) == 16
    assert len(csv.slate.members("misleading")) == 5 and csv.slate.category_of("git-rebase") == "irrelevant"
    assert csv.bwrap_compatible and csv.has_solution
    hello = load_task_package(GOOD / "hello-file")
    assert hello.config.agent.timeout_sec == 60 and hello.config.metadata["difficulty"] == "easy"
    assert hello.dockerfile is not None and hello.dockerfile.base_images == ("ubuntu:24.04",)
    docker_only = load_task_package(GOOD / "docker-only-build")
    assert not docker_only.bwrap_compatible and "line 4: RUN" in docker_only.needs_docker[0]
    for d in BROKEN.iterdir():
        assert load_task_package(d).task_id == d.name  # broken in behaviour, well-formed on disk


def test_digest_is_content_addressed(tmp_path: Path):
    a = shutil.copytree(GOOD / "hello-file", tmp_path / "a")
    b = shutil.copytree(GOOD / "hello-file", tmp_path / "b")
    assert load_task_package(a).digest == load_task_package(b).digest
    (b / "instruction.md").write_text("Something else.\n")
    assert load_task_package(a).digest != load_task_package(b).digest


def test_defaults_without_task_id_or_workdir(tmp_path: Path):
    root = shutil.copytree(GOOD / "hello-file", tmp_path / "my-task.v2")
    (root / "task.toml").write_text("")
    (root / "environment" / "Dockerfile").write_text("FROM alpine\n")
    task = load_task_package(root)
    assert task.task_id == "my-task.v2" and task.workdir == DEFAULT_WORKDIR
    assert task.config.agent.timeout_sec == 600 and task.config.verifier.timeout_sec == 300
    assert task.config.environment.allow_internet is False


def _write(rel: str, text: str | bytes) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text)
    return mutate


def _delete(rel: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        p = root / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return mutate


def _both(*fs: Callable[[Path], None]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for f in fs:
            f(root)
    return mutate


def _manifest(*members: tuple[str, str]) -> str:
    """A skills.json (the ordered slate) with these (name, category) entries; one oracle by default."""
    members = members or (("a", "oracle"),)
    entries = [{"name": n, "category": c, "description": f"{n} skill", "location": f"/skills/{n}/SKILL.md"}
               for n, c in members]
    return json.dumps({"task_id": "hello-file", "bench": "b", "split": "eval", "seed": 1, "entries": entries})


MALFORMED = {
    "no task.toml": (_delete("task.toml"), ["task.toml", "missing"]),
    "toml syntax": (_write("task.toml", "[agent\ntimeout_sec = 1\n"), ["task.toml", "invalid TOML"]),
    "wrong type": (_write("task.toml", '[agent]\ntimeout_sec = "soon"\n'), ["task.toml", "agent.timeout_sec", "expected float"]),
    "unknown key": (_write("task.toml", "[verifier]\ntimeout = 5\n"), ["task.toml", "verifier.timeout", "valid keys: env, timeout_sec"]),
    "unknown section": (_write("task.toml", "[agnet]\ntimeout_sec = 5\n"), ["task.toml", "'agnet'"]),
    "negative timeout": (_write("task.toml", "[verifier]\ntimeout_sec = -1\n"), ["task.toml", "verifier", "timeout_sec", "positive"]),
    "bad memory string": (_write("task.toml", '[environment]\nmemory = "lots"\n'), ["environment.memory", "'2G'"]),
    "memory twice": (_write("task.toml", '[environment]\nmemory = "1G"\nmemory_mb = 5\n'), ["memory or memory_mb"]),
    "gpus": (_write("task.toml", "[environment]\ngpus = 1\n"), ["environment.gpus", "expected 0"]),
    "bad task id": (_write("task.toml", '[task]\nid = "has space"\n'), ["task.id", "'has space'"]),
    "env not str": (_write("task.toml", "[verifier]\nenv = { N = 3 }\n"), ["verifier.env.N", "expected str"]),
    "no instruction": (_delete("instruction.md"), ["instruction.md", "missing"]),
    "empty instruction": (_write("instruction.md", "  \n"), ["instruction.md", "empty"]),
    "binary instruction": (_write("instruction.md", b"\xff\xfe\x00bad"), ["instruction.md", "not UTF-8"]),
    "no Dockerfile, no image": (_delete("environment/Dockerfile"), ["environment/Dockerfile", "docker_image"]),
    "Dockerfile unknown instruction": (_write("environment/Dockerfile", "FROM x\nRUNN echo\n"), ["Dockerfile:2", "RUNN"]),
    "Dockerfile no FROM": (_write("environment/Dockerfile", "WORKDIR /app\n"), ["Dockerfile", "FROM"]),
    "COPY source missing": (_write("environment/Dockerfile", "FROM x\nCOPY nope.txt /app/\n"), ["Dockerfile:2", "nope.txt"]),
    "COPY outside context": (_write("environment/Dockerfile", "FROM x\nCOPY ../task.toml /app/\n"), ["Dockerfile:2", "outside the build context"]),
    "no test.sh": (_delete("tests/test.sh"), ["tests/test.sh", "missing", "reward.txt"]),
    "solution without solve.sh": (_both(_delete("solution/solve.sh"), _write("solution/notes.md", "x")), ["solution/solve.sh"]),
    "skills.json not JSON": (_write("skills.json", "{oracle: x}"), ["skills.json", "invalid JSON", "line 1"]),
    "skills.json old role form": (_write("skills.json", '{"oracle": "a", "relevant": []}'),
                                  ["skills.json", "missing key 'task_id'"]),
    "skills.json no oracle": (_write("skills.json", _manifest(("a", "relevant"))),
                              ["skills.json", "exactly one entry with category 'oracle'", "found 0"]),
    "skills.json two oracles": (_write("skills.json", _manifest(("a", "oracle"), ("b", "oracle"))),
                                ["skills.json", "found 2: a, b"]),
    "skills.json bad name": (_write("skills.json", _manifest(("Bad_Name", "oracle"))),
                             ["skills.json", "entries[0]: name", "'Bad_Name'"]),
    "skills.json entries type": (_write("skills.json", json.dumps({**json.loads(_manifest()), "entries": "a"})),
                                 ["skills.json", "entries", "list"]),
    "skills.json duplicate": (_write("skills.json", _manifest(("a", "oracle"), ("b", "misleading"), ("b", "irrelevant"))),
                              ["skills.json", "entries[2]", "'b'", "entries[1]"]),
    "skills.json unknown key": (_write("skills.json", json.dumps({**json.loads(_manifest()), "gold": "b"})),
                                ["skills.json", "'gold'"]),
    "skills.json bad category": (_write("skills.json", _manifest(("a", "oracle"), ("b", "gold"))),
                                 ["skills.json", "entries[1]", "category"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_part_is_named(case: str, tmp_path: Path):
    mutate, expected = MALFORMED[case]
    root = shutil.copytree(GOOD / "hello-file", tmp_path / "task")
    mutate(root)
    with pytest.raises(TaskPackageError) as err:
        load_task_package(root)
    for fragment in expected:
        assert fragment in str(err.value), f"{case}: {fragment!r} not in {err.value}"


def test_not_a_directory(tmp_path: Path):
    with pytest.raises(TaskPackageError, match="not a directory"):
        load_task_package(tmp_path / "nowhere")


def test_docker_image_only_task(tmp_path: Path):
    root = shutil.copytree(GOOD / "hello-file", tmp_path / "img")
    (root / "environment" / "Dockerfile").unlink()
    (root / "task.toml").write_text('[environment]\ndocker_image = "ghcr.io/x/y:1"\n')
    task = load_task_package(root)
    assert task.dockerfile is None and not task.bwrap_compatible
    assert "docker_image" in task.needs_docker[0]
