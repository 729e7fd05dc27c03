"""The Dockerfile subset: what bubblewrap honours, what it refuses (with the line), and COPY semantics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillgate_core.envs.dockerfile_subset import DockerfileError, materialize, parse_dockerfile


def test_env_arg_workdir():
    spec = parse_dockerfile(
        "# escape=\\\n"
        "ARG BASE=debian:12\n"
        "FROM ${BASE}\n"
        "ARG APP=/srv\n"
        "ENV A=1 B=\"two words\" \\\n"
        "    C=${APP}/c\n"
        "ENV LEGACY some value here\n"
        "WORKDIR ${APP}\n"
        "WORKDIR app\n"
        "USER nobody\n"
        "CMD [\"bash\"]\n"
        "EXPOSE 80\n"
    )
    assert spec.base_images == ("debian:12",)
    assert spec.env == {"A": "1", "B": "two words", "C": "/srv/c", "LEGACY": "some value here"}
    assert spec.workdir == "/srv/app" and spec.user == "nobody"
    assert spec.bwrap_compatible


@pytest.mark.parametrize("line, reason", [
    ("RUN apt-get update && apt-get install -y jq", "RUN apt-get"),
    ("RUN pip install numpy", "RUN pip"),
    ("RUN mkdir -p /a; rm -rf /b", "RUN mkdir"),
    ("RUN echo hi > /app/x", "RUN echo"),
    ("COPY --from=builder /out /app/out", "--from=builder"),
    ("ADD https://example.com/x.tgz /app/", "URL"),
    ("ADD data.tar.gz /app/", "archive"),
    ("COPY x.txt /usr/local/bin/x", "/usr"),
    ("RUN mkdir -p /etc/app", "/etc"),
    ("FROM python:3.12 AS second", "multi-stage"),
    ("ONBUILD RUN true", "ONBUILD"),
])
def test_needs_docker_names_the_line(line: str, reason: str):
    spec = parse_dockerfile(f"FROM python:3.12\nWORKDIR /app\n{line}\n")
    assert not spec.bwrap_compatible
    assert any(r.startswith("line 3:") and reason in r for r in spec.needs_docker), spec.needs_docker


@pytest.mark.parametrize("run", ["mkdir -p /app/a /data/b", "mkdir -p out && chmod 755 out && touch out/.keep",
                                 '["mkdir", "-p", "/app/x"]', "chmod -R u+rwX,go-w /app"])
def test_run_file_subset_is_accepted(run: str):
    assert parse_dockerfile(f"FROM x\nWORKDIR /app\nRUN {run}\n").bwrap_compatible


@pytest.mark.parametrize("text, fragment", [
    ("WORKDIR /app\n", "first instruction must be FROM"),
    ("FROM x\nFROBNICATE y\n", ":2: unknown instruction 'FROBNICATE'"),
    ("FROM x\nCOPY only-one\n", ":2: COPY expects at least one source"),
    ("FROM x\nCOPY [\"a\", 1]\n", ":2: COPY: expected a JSON array of strings"),
    ("FROM x\nRUN <<EOF\necho\nEOF\n", "heredocs"),
    ("FROM x\nENV =bad\n", ":2: ENV expects KEY=VALUE"),
    ("FROM x\nRUN echo \\\n", "ends inside a line continuation"),
    ("FROM a b c d\n", "FROM expects"),
])
def test_syntax_errors_name_file_and_line(text: str, fragment: str):
    with pytest.raises(DockerfileError) as err:
        parse_dockerfile(text, "env/Dockerfile")
    assert str(err.value).startswith("env/Dockerfile") and fragment in str(err.value)


def _context(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    (ctx / "data" / "sub").mkdir(parents=True)
    (ctx / "data" / "a.csv").write_text("a")
    (ctx / "data" / "sub" / "b.csv").write_text("b")
    (ctx / "data" / "secret.key").write_text("k")
    (ctx / "run.sh").write_text("#!/bin/sh\n")
    (ctx / "one.txt").write_text("1")
    (ctx / "two.txt").write_text("2")
    (ctx / ".dockerignore").write_text("# comment\ndata/*.key\n")
    return ctx


def test_copy_semantics(tmp_path: Path):
    ctx = _context(tmp_path)
    spec = parse_dockerfile(
        "FROM x\nWORKDIR /app\n"
        "COPY data /app/data\n"             # a folder: its contents (.dockerignore applies)
        "COPY one.txt .\n"                   # into an existing folder
        "COPY one.txt /app/renamed.txt\n"    # to a file path
        "COPY *.txt /opt/texts/\n"           # a glob into a folder
        "COPY --chmod=755 run.sh bin/\n"     # relative to WORKDIR, with a mode
        "RUN mkdir -p /data/empty && touch /data/empty/.keep && chmod 600 /app/one.txt\n"
    )
    root = tmp_path / "root"
    materialize(spec, ctx, root)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["app/bin/run.sh", "app/data/a.csv", "app/data/sub/b.csv", "app/one.txt", "app/renamed.txt",
                     "data/empty/.keep", "opt/texts/one.txt", "opt/texts/two.txt"]
    assert os.stat(root / "app/bin/run.sh").st_mode & 0o777 == 0o755
    assert os.stat(root / "app/one.txt").st_mode & 0o777 == 0o600


def test_dockerignore_matches_as_docker_does(tmp_path: Path):
    """`*` stays within one folder (fnmatch's would cross '/'), `**` spans folders, a folder pattern
    covers its contents, `!` re-includes, and an excluded .dockerignore is not copied."""
    ctx = tmp_path / "ctx"
    for rel in ("notes.txt", "docs/a.txt", "docs/deep/b.txt", "keys/x.key", "keys/deep/y.key", "build/out.o",
                "build/keep.o", "src/main.py"):
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text(rel)
    (ctx / ".dockerignore").write_text("*.txt\n**/*.key\nbuild\n!build/keep.o\n.dockerignore\n")
    root = tmp_path / "root"
    materialize(parse_dockerfile("FROM x\nCOPY . /app/\n"), ctx, root)
    files = sorted(p.relative_to(root / "app").as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["build/keep.o", "docs/a.txt", "docs/deep/b.txt", "src/main.py"]


def test_materialize_refuses_needs_docker(tmp_path: Path):
    spec = parse_dockerfile("FROM x\nRUN apt-get install -y jq\n", "D")
    with pytest.raises(DockerfileError, match="needs Docker"):
        materialize(spec, tmp_path, tmp_path / "root")

