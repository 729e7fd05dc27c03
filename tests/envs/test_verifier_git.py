"""A repository the agent leaves is graded without running anything its config or hooks name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from skillgate_core.envs.verifier import neutralize_git_script

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

EVIL_CONFIG = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tfsmonitor = "touch FSMONITOR_RAN; false"
\thooksPath = /tmp/hooks
[core] sshCommand = evil
[user]
\tname = Agent Smith
\temail = a@example.com
[alias]
\tst = !touch ALIAS_RAN
[filter "x"]
\tclean = touch FILTER_RAN; cat
[branch "main"]
\tremote = origin
\tmerge = refs/heads/main
[include]
\tpath = /tmp/more.gitconfig
[user]
\tsigningkey = first \\
\tfsmonitor = continued
"""


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"})


def test_only_inert_settings_survive_and_hooks_are_gone(tmp_path):
    repo = tmp_path / "ws" / "app"
    repo.mkdir(parents=True)
    assert git(repo, "init", "-q").returncode == 0
    (repo / ".git" / "config").write_text(EVIL_CONFIG)
    hook = repo / ".git" / "hooks" / "post-index-change"
    hook.write_text("#!/bin/sh\ntouch HOOK_RAN\n")
    hook.chmod(0o755)
    (repo / ".gitattributes").write_text("* filter=x\n")
    (repo / "a.txt").write_text("a\n")
    (repo / ".git" / ".config.graded").symlink_to(tmp_path / "victim")  # must not be written through
    bare = tmp_path / "ws" / "data" / "b.git"
    bare.parent.mkdir()
    assert git(bare.parent, "init", "-q", "--bare", str(bare)).returncode == 0
    (bare / "config").write_text('[core]\n\tbare = true\n\tfsmonitor = "touch X"\n')

    done = subprocess.run(["bash", "-c", neutralize_git_script([str(tmp_path / "ws" / "app"), str(tmp_path / "ws" / "data")])],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "victim").exists()
    kept = dict(line.split("=", 1) for line in git(repo, "config", "--list", "--local").stdout.splitlines())
    assert kept == {"core.repositoryformatversion": "0", "core.filemode": "true", "core.bare": "false",
                    "user.name": "Agent Smith", "user.email": "a@example.com",
                    "branch.main.remote": "origin", "branch.main.merge": "refs/heads/main"}
    assert not (repo / ".git" / "hooks").exists()
    assert git(repo, "add", "-A").returncode == 0 and git(repo, "status", "--short").returncode == 0
    assert git(repo, "st").returncode != 0  # the alias is gone
    assert not [p.name for p in repo.iterdir() if p.name.endswith("_RAN")]
    assert git(bare, "config", "--list", "--local").stdout.splitlines() == ["core.bare=true"]


def test_a_missing_or_linked_config_becomes_a_minimal_one(tmp_path):
    repo = tmp_path / "app"
    repo.mkdir()
    assert git(repo, "init", "-q").returncode == 0
    (repo / ".git" / "config").unlink()
    (repo / ".git" / "config").symlink_to("/etc/passwd")
    done = subprocess.run(["bash", "-c", neutralize_git_script([str(repo)])], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    config = repo / ".git" / "config"
    assert not config.is_symlink() and config.read_text() == "[core]\n\trepositoryformatversion = 0\n"
    assert git(repo, "status").returncode == 0
