"""Task packages written by someone else: a package must never reach the host through a symbolic link.

Each package here is an attack a task author could ship. The host folder the links aim at must be
unchanged afterwards (no new file, same mode, same contents), on both backends, and the loader /
the sandbox must say which link it refused.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deployments.cli import app
from skillgate_core.envs.backends import start_sandbox
from skillgate_core.envs.dockerfile_subset import DockerfileError, materialize, parse_dockerfile
from skillgate_core.envs.harbor_import import import_harbor
from skillgate_core.envs.sandbox import SandboxError
from skillgate_core.envs.task_package import TaskPackageError, load_task_package
from skillgate_core.envs.validity_gate import check_task

runner = CliRunner()
DEEP = 8
"""Folders between environment/data and a link: `../` x DEEP stays inside the package on the host, but
from a sandbox's root (/var/tmp/skillgate-sandboxes/ID/root, 5 deep) it climbs to the host's `/`."""


@pytest.fixture
def host_dir(tmp_path: Path) -> Path:
    """A host folder a malicious package aims at: a private secret inside a private folder."""
    d = tmp_path / "host-private"
    d.mkdir(mode=0o700)
    (d / "secret").write_text("host secret\n")
    (d / "secret").chmod(0o600)
    return d


def _snapshot(d: Path) -> dict[str, tuple[int, bytes]]:
    out = {".": (stat.S_IMODE(d.lstat().st_mode), b"")}
    for p in sorted(d.rglob("*")):
        out[p.relative_to(d).as_posix()] = (stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else b"")
    return out


def _package(root: Path, dockerfile: str, links: dict[str, str], files: dict[str, str] | None = None) -> Path:
    """A task package on disk (not loaded): environment/ gets `files` and the symlinks `links`."""
    env = root / "environment"
    for rel in ("environment", "tests", "solution"):
        (root / rel).mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text('[task]\nid = "evil"\n')
    (root / "instruction.md").write_text("Do the thing.\n")
    (root / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    (env / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / rel).write_text(text)
    for rel, target in links.items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, env / rel)
    return root


def _link_out_package(tmp_path: Path, host_dir: Path) -> Path:
    """The reported attack: data/link -> a host folder, then RUN/COPY through /app/link."""
    return _package(tmp_path / "link-out", "FROM ubuntu:24.04\nWORKDIR /app\nCOPY data/ /app/\n"
                    "RUN touch /app/link/x\nRUN chmod 666 /app/link/secret\nCOPY payload.txt /app/link/\n",
                    {"data/link": str(host_dir)}, {"payload.txt": "pwned\n", "data/keep.txt": "ok\n"})


def _deep_dirs() -> str:
    return "/".join(f"d{i}" for i in range(DEEP))


def _climbing_package(tmp_path: Path, host_dir: Path, dockerfile_tail: str, name: str) -> Path:
    """A link that stays inside the package on the host (so a host-side check passes it) but climbs
    to the host's / from the sandbox's root: data/d0/.../d7/up -> ../../../../../../../.."""
    return _package(tmp_path / name, f"FROM ubuntu:24.04\nWORKDIR /app\nCOPY data/{_deep_dirs()}/ /app/\n"
                    + dockerfile_tail, {f"data/{_deep_dirs()}/up": "../" * DEEP,
                                        f"data/{_deep_dirs()}/tmplink": "../" * DEEP + str(host_dir).lstrip("/")},
                    {"payload.txt": "pwned\n", f"data/{str(host_dir).lstrip('/')}/decoy": "in the package\n"})


def test_loader_refuses_links_that_leave_the_package(tmp_path: Path, host_dir: Path):
    root = _link_out_package(tmp_path, host_dir)
    with pytest.raises(TaskPackageError) as err:
        load_task_package(root)
    msg = str(err.value)
    assert "environment/data/link" in msg and str(host_dir) in msg and "leaves the task package" in msg
    # An absolute link anywhere (tests/, solution/, the instruction) is refused the same way.
    for rel in ("tests/data.txt", "instruction.md"):
        other = _package(tmp_path / f"abs-{rel.replace('/', '-')}", "FROM ubuntu:24.04\n", {})
        (other / rel).unlink(missing_ok=True)
        os.symlink(host_dir / "secret", other / rel)
        with pytest.raises(TaskPackageError, match=f"{rel}: symbolic link to .*leaves the task package"):
            load_task_package(other)


def test_task_check_refuses_the_link_and_leaves_the_host_alone(backend: str, tmp_path: Path, host_dir: Path):
    before = _snapshot(host_dir)
    root = _link_out_package(tmp_path, host_dir)
    report = check_task(root, backend=backend, repeats=1)  # type: ignore[arg-type]
    assert not report.valid and "environment/data/link" in report.error, report
    result = runner.invoke(app, ["task", "check", str(root), "--backend", backend, "--repeats", "1", "--json"])
    assert result.exit_code == 1 and '"valid": false' in result.output, result.output
    assert _snapshot(host_dir) == before


def test_materializer_never_follows_a_link_out_of_its_root(tmp_path: Path, host_dir: Path):
    """Called directly (no loader in front): a link copied into the root is never followed on the host."""
    before = _snapshot(host_dir)
    attacks = {
        "run-touch": f"RUN touch /app/up/{str(host_dir).lstrip('/')}/x\n",
        "run-chmod": f"RUN chmod 666 /app/up/{str(host_dir).lstrip('/')}/secret\n",
        "run-mkdir": f"RUN mkdir -p /app/up/{str(host_dir).lstrip('/')}/newdir\n",
        "copy-into": f"COPY payload.txt /app/up/{str(host_dir).lstrip('/')}/\n",
        "copy-onto": f"COPY payload.txt /app/up/{str(host_dir).lstrip('/')}/secret\n",
        "top-level": f"COPY data/{_deep_dirs()}/tmplink /tmp\n",
    }
    for name, tail in attacks.items():
        root = _climbing_package(tmp_path, host_dir, tail, name)
        spec = parse_dockerfile((root / "environment" / "Dockerfile").read_text(), "Dockerfile")
        target = tmp_path / f"{name}-image"
        target.mkdir()
        try:
            materialize(spec, root / "environment", target)
        except DockerfileError as exc:
            assert "symbolic link" in str(exc) and "Dockerfile:" in str(exc), (name, exc)
        else:
            assert not (target / "tmp").is_symlink(), name
        assert _snapshot(host_dir) == before, name


def test_sandbox_start_never_follows_a_link_out_of_its_root(backend: str, tmp_path: Path, host_dir: Path):
    """The in-package climbing link through the whole start: setup (chmod of /tmp, binds) on bubblewrap,
    a real image build on Docker; the host folder stays as it was either way."""
    before = _snapshot(host_dir)
    for name, tail in {"run": f"RUN touch /app/up/{str(host_dir).lstrip('/')}/x\n",
                       "top": f"COPY data/{_deep_dirs()}/tmplink /tmp\n"}.items():
        task = load_task_package(_climbing_package(tmp_path, host_dir, tail, f"{backend}-{name}"))
        try:
            with start_sandbox(task, backend=backend) as box:  # type: ignore[arg-type]
                r = box.exec("ls -A /tmp; touch /tmp/from-sandbox 2>&1; echo done")
                assert "secret" not in r.stdout and r.stdout.endswith("done\n"), r
        except SandboxError as exc:
            assert backend == "docker" or "symbolic link" in str(exc), exc
        assert _snapshot(host_dir) == before, name


# ---------------------------------------------------------------- skillgate task import (item 2)


def _harbor(root: Path, task_id: str | None, extra_toml: str = "") -> Path:
    src = _package(root, "FROM python:3.13-slim\nWORKDIR /app\n", {})
    (src / "task.toml").write_text((f"[task]\nid = {task_id!r}\n" if task_id is not None else "") + extra_toml)
    return src


def _tree(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*")) if d.exists() else []


@pytest.mark.parametrize("bad_id", ["{victim}", "../victim", "a/../../victim", "..", ".", "", "x" * 200,
                                    "sub/dir", "-flag"])
def test_import_validates_the_id_before_touching_the_disk(tmp_path: Path, bad_id: str):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    task_id = bad_id.format(victim=victim)
    src = _harbor(tmp_path / "harbor", task_id)
    for overwrite in (False, True):
        [report] = import_harbor(src, dest, overwrite=overwrite)
        if task_id == "":  # an empty id means "use the folder name": imported under DEST as usual
            assert report.ok and Path(report.dest).parent == dest.resolve(), report
            continue
        assert not report.ok and report.dest == "", report
        assert f"{src / 'task.toml'}: task.id" in report.error and "nothing was written" in report.error, report
    assert (victim / "precious.txt").read_text() == "keep me\n" and _tree(victim) == ["precious.txt"]
    assert _tree(dest) in ([], ["harbor", *[f"harbor/{p}" for p in _tree(dest / "harbor")]])
    assert not list(tmp_path.glob("*/.import-*")) and not (tmp_path / "harbor" / "x").exists()


def test_failed_import_leaves_nothing_and_keeps_the_old_package(tmp_path: Path, host_dir: Path):
    dest = tmp_path / "dest"
    good = _harbor(tmp_path / "v1" / "t", "t")
    assert import_harbor(good, dest)[0].ok
    before = {p: (dest / p).read_bytes() for p in _tree(dest) if (dest / p).is_file()}
    broken = _harbor(tmp_path / "v2" / "t", "t", "[verifier]\ntimeout_sec = -1\n")
    linked = _harbor(tmp_path / "v3" / "t", "t")
    os.symlink(host_dir / "secret", linked / "tests" / "expected.txt")
    missing = _harbor(tmp_path / "v4" / "t", "t")
    (missing / "tests" / "test.sh").unlink()
    for src, why in ((broken, "timeout_sec"), (linked, "leaves the task package"), (missing, "test.sh: missing")):
        [report] = import_harbor(src, dest, overwrite=True)
        assert not report.ok and why in report.error and report.dest == "", report
        assert str(src) in report.error and ".import-" not in report.error, report.error
        assert {p: (dest / p).read_bytes() for p in _tree(dest) if (dest / p).is_file()} == before
    fresh = tmp_path / "fresh"
    assert not import_harbor(broken, fresh)[0].ok and _tree(fresh) == []


def test_import_never_deletes_through_a_link_or_into_its_source(tmp_path: Path, host_dir: Path):
    before = _snapshot(host_dir)
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(host_dir, dest / "t")  # DEST/<id> is a link to a folder elsewhere
    [report] = import_harbor(_harbor(tmp_path / "h" / "t", "t"), dest, overwrite=True)
    assert not report.ok and "not a package folder" in report.error, report
    assert _snapshot(host_dir) == before and (dest / "t").is_symlink()
    # DEST inside the task folder itself: refused instead of copying the copy into itself.
    src = _harbor(tmp_path / "self" / "t2", "t2")
    [report] = import_harbor(src, src / "imported")
    assert not report.ok and "inside the task folder" in report.error and not (src / "imported").exists()


def test_import_refuses_a_repeated_id_in_one_run(tmp_path: Path):
    _harbor(tmp_path / "ds" / "a", "same")
    _harbor(tmp_path / "ds" / "b", "same")
    (tmp_path / "ds" / "b" / "instruction.md").write_text("The second one.\n")
    reports = import_harbor(tmp_path / "ds", tmp_path / "dest", overwrite=True)
    assert [r.ok for r in reports] == [True, False] and "already imported" in reports[1].error
    assert (tmp_path / "dest" / "same" / "instruction.md").read_text() == "Do the thing.\n"


def test_cli_import_reports_a_bad_id(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    src = _harbor(tmp_path / "h", str(victim))
    result = runner.invoke(app, ["task", "import", str(src), str(tmp_path / "dest"), "--overwrite"],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 1 and "task.id" in result.output, result.output
    assert (victim / "precious.txt").read_text() == "keep me\n"
    result = runner.invoke(app, ["task", "import", str(tmp_path / "nope"), str(tmp_path / "dest")])
    assert result.exit_code == 1 and "not a directory" in result.output, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a traceback


# ---------------------------------------------------------------- timeouts (item 7)


@pytest.mark.parametrize("field,value", [("verifier.timeout_sec", "inf"), ("verifier.timeout_sec", "nan"),
                                         ("verifier.timeout_sec", "-inf"), ("verifier.timeout_sec", "1e300"),
                                         ("verifier.timeout_sec", "-5"), ("verifier.timeout_sec", "0"),
                                         ("agent.timeout_sec", "inf"), ("environment.build_timeout_sec", "inf"),
                                         ("environment.build_timeout_sec", "1e30")])
def test_absurd_timeouts_are_refused_naming_file_and_field(tmp_path: Path, field: str, value: str):
    section, key = field.split(".")
    root = _package(tmp_path / "t", "FROM ubuntu:24.04\nWORKDIR /app\n", {})
    (root / "task.toml").write_text(f'[task]\nid = "t"\n\n[{section}]\n{key} = {value}\n')
    with pytest.raises(TaskPackageError) as err:
        load_task_package(root)
    msg = str(err.value)
    assert f"{root / 'task.toml'}: {section}: {key}: expected" in msg and "seconds" in msg, msg
    assert "at most 86400" in msg, msg


def test_task_check_with_an_infinite_verifier_timeout_ends_at_once(backend: str, tmp_path: Path):
    root = _package(tmp_path / "t", "FROM ubuntu:24.04\nWORKDIR /app\n", {})
    (root / "task.toml").write_text('[task]\nid = "t"\n\n[verifier]\ntimeout_sec = inf\n')
    (root / "tests" / "test.sh").write_text("#!/bin/bash\nsleep infinity\n")
    report = check_task(root, backend=backend, repeats=1)  # type: ignore[arg-type]
    assert not report.valid and "verifier: timeout_sec" in report.error and not report.trials, report


def test_import_notes_a_workspace_search_path(tmp_path: Path):
    src = _harbor(tmp_path / "h" / "pp", "pp")
    (src / "environment" / "Dockerfile").write_text("FROM python:3.13-slim\nWORKDIR /app\nENV PYTHONPATH=/app/src\n")
    [report] = import_harbor(src, tmp_path / "dest")
    assert report.ok and any("PYTHONPATH (/app/src): the verifier drops it" in n for n in report.notes), report


def test_a_linked_package_folder_is_refused(tmp_path: Path, host_dir: Path):
    """A bench whose tasks/ID (or tasks/ itself) is a link to a host folder holding a package: loading
    it through the bench names the link (the package would be the host folder's, its tests and all)."""
    from envtest_paths import GOOD

    shutil.copytree(GOOD / "hello-file", host_dir / "pkg")
    bench = tmp_path / "bench"
    (bench / "tasks").mkdir(parents=True)
    os.symlink(host_dir / "pkg", bench / "tasks" / "hello")
    with pytest.raises(TaskPackageError, match=f"{bench / 'tasks' / 'hello'}: symbolic link to {host_dir / 'pkg'}"):
        load_task_package(bench / "tasks" / "hello", within=bench)
    with pytest.raises(TaskPackageError, match="symbolic link"):
        load_task_package(bench / "tasks" / "hello")  # the package folder itself, whoever names it
    other = tmp_path / "bench-2"
    other.mkdir()
    os.symlink(host_dir, other / "tasks")
    with pytest.raises(TaskPackageError, match=f"{other / 'tasks'}: symbolic link to {host_dir}"):
        load_task_package(other / "tasks" / "pkg", within=other)
    assert load_task_package(host_dir / "pkg").task_id  # the real folder itself loads
