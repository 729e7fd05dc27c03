"""The `skillgate` command line: doctor, recipes, show, run (and the commands later steps add).

Every command is a thin layer over skillgate_core / flows / warehouse; an error the user can fix (a
config error, a missing file, a damaged warehouse, a state dir that cannot be written: errors.py)
becomes one red paragraph naming the file and the fix, and exit code 2.
"""

from __future__ import annotations

import sys

import typer

from skillgate_core.base.library_noise import quiet_library_output
from skillgate_core.base.paths import apply_cache_env

apply_cache_env()  # before any command module imports a library that caches in ~
quiet_library_output()  # before any library can announce itself on stdout

from deployments.cli import doctor_cmd, recipes_cmd, skills_cmd
from deployments.cli import task_cmd
from deployments.cli import warehouse_cmd
from deployments.cli import bench_cmd
from deployments.cli import experiments_cmd
from deployments.cli import runs_cmd
from deployments.cli import traj_cmd
from deployments.cli import paper_cmd
from deployments.cli import eval_cmd
from deployments.cli.errors import user_error_message

app = typer.Typer(
    name="skillgate",
    help="Train LLM agents to choose and use skills. Start with `skillgate doctor` and `skillgate recipes`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
doctor_cmd.register(app)
recipes_cmd.register(app)
skills_cmd.register(app)
task_cmd.register(app)
warehouse_cmd.register(app)
bench_cmd.register(app)
experiments_cmd.register(app)
runs_cmd.register(app)
traj_cmd.register(app)
paper_cmd.register(app)
eval_cmd.register(app)

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()  # a Ctrl-C ends in typer's Exit(130), without a traceback (deployments/cli/interrupts.py says what stops)
    except Exception as exc:
        message = user_error_message(exc)
        if message is None:  # a bug: its traceback is what the report needs
            raise
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        sys.exit(2)
