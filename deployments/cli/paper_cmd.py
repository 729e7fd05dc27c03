"""`skillgate paper build ROWS_DIR [--training DIR]... --out DIR [KEY=VALUE...]`.

Rebuild every paper table and figure from raw evaluation rows (every eval_trials.parquet under
ROWS_DIR) and training files (metrics.jsonl, credit_episodes.jsonl under ROWS_DIR and each --training
DIR): OUT/report.md, OUT/paper.json, OUT/tables/, OUT/figures/. KEY=VALUE overrides any PaperConfig
field (e.g. baseline=selector_action_credit). The same rows give the same bytes. Rows of one protocol
with two fingerprints are refused (exit 2), naming both. Evaluations tagged nightly-* (the nightly
regression's re-runs of the same exports) are left out and listed (exclude_tags=[] keeps them).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["register"]

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def register(app: typer.Typer) -> None:
    paper_app = typer.Typer(help="The paper's tables and figures, from raw evaluation rows.", no_args_is_help=True)

    @paper_app.command("build")
    def build(
        rows: Path = typer.Argument(..., metavar="ROWS_DIR", help="folder of evaluations (eval_trials.parquet)"),
        overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE...]", help="PaperConfig overrides"),
        training: list[Path] = typer.Option(None, "--training", help="folder with metrics.jsonl / "
                                            "credit_episodes.jsonl (repeatable)"),
        out: Path = typer.Option(..., "--out", help="output folder (empty, new, or an earlier paper build)"),
    ) -> None:
        """Build report.md, paper.json, tables/ (markdown + LaTeX) and figures/ (PNG)."""
        from skillgate_core.base.config import config_from_mapping, parse_override
        from skillgate_core.evaluation.bootstrap import TaskSetMismatchError
        from skillgate_core.evaluation.paper import PaperOutputError, PassAtKError, build_paper
        from skillgate_core.evaluation.paper_config import PaperConfig
        from skillgate_core.evaluation.protocol import ProtocolMismatchError
        from skillgate_core.evaluation.rows import EvalRowsError

        values = dict(parse_override(o) for o in overrides or [])
        config = config_from_mapping(PaperConfig, values, "command line")
        try:  # k not given: fewer repeats than the default k lower it, with a note; a given k is required
            built = build_paper(rows, out, config, training_dirs=training or [], auto_k="k" not in values)
        except (ProtocolMismatchError, TaskSetMismatchError, EvalRowsError, PaperOutputError, PassAtKError) as exc:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
        m = built.metrics
        console.print(f"{m['trials']} trials of {len(m['methods'])} method(s) on {len(m['protocols'])} protocol(s), "
                      f"{m['training_files']} training file(s)", highlight=False)
        if m.get("left_out"):
            console.print(f"left out {len(m['left_out'])} tagged evaluation(s) (exclude_tags="
                          f"{list(config.exclude_tags)}; exclude_tags=[] keeps them): "
                          f"{escape(', '.join(m['left_out']))}", highlight=False)
        for name, note in m.get("k_notes", {}).items():
            console.print(f"[yellow]note[/] ({escape(name)}): {escape(note)}", highlight=False)
        for key, value in sorted(m.items()):
            if key.endswith("_difference"):
                ci = m[key.removesuffix("_difference") + "_ci"]
                console.print(f"  {key.removesuffix('_difference')}: {100 * value:+.1f} pp "
                              f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]", highlight=False)
        console.print(f"{m['tables']} tables ({len(built.tables)} files), {m['figures']} figures -> {out}",
                      highlight=False)
        console.print(f"report {out / 'report.md'}\nnumbers {out / 'paper.json'}", highlight=False)

    app.add_typer(paper_app, name="paper")
