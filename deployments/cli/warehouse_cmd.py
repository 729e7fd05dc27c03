"""`skillgate sql`, `skillgate lineage`, and `skillgate warehouse status|verify|rebuild|ingest|requeue|reap`.

    skillgate sql "select stage, status, git_sha from v_run order by started_at"
    skillgate sql "select * from metric_lineage('exp-1/eval70-s200/trial_success')" --format json
    skillgate sql "select * from v_run" -f vertical      # one block per row (the default when too wide)
    skillgate lineage exp-1/eval70-s200/trial_success      # metric -> evaluation -> export -> run -> config, inputs
    skillgate lineage exp-1/step-200                       # an export (or an evaluation, run, experiment)
    skillgate lineage 3f2a9c                               # a dataset/output or config digest, by unique prefix
    skillgate lineage $SKILLGATE_HOME/artifacts/collect/KEY  # an output path (a stage run's folder: its run)
    skillgate warehouse verify                             # files vs warehouse; exit 1 on drift
    skillgate warehouse rebuild                            # rebuild the file from the event archive
    skillgate warehouse requeue                            # retry refused events (see verify for why)
    skillgate warehouse reap                               # runs of killed processes -> interrupted

All reads go through warehouse.read (ingest pending events first, then a read-only connection), and
`sql` runs only one SELECT on a connection with file, network and extension access locked off
(warehouse/sql_guard.py), so it can change neither the warehouse nor anything else.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import duckdb
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from deployments.cli.result_format import FORMATS, cell_text, print_rows, printable, write_row_stream

if TYPE_CHECKING:
    from warehouse.queries import LineageNode

__all__ = ["register"]

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


def _facts(facts: dict[str, Any]) -> str:
    parts = []
    for k, v in facts.items():
        if v is None or v == "":
            continue
        text = cell_text(v)
        parts.append(f"{k}={text if len(text) <= 160 else text[:157] + '...'}")
    return "  ".join(parts)


def _tree(node: LineageNode, into: Tree | None = None) -> Tree:
    label = f"[bold]{node.kind}[/] {escape(node.id)}  [dim]{escape(_facts(node.facts))}[/]"
    branch = Tree(label) if into is None else into.add(label)
    for child in node.children:
        _tree(child, branch)
    return branch


def register(app: typer.Typer) -> None:
    wh_app = typer.Typer(help="The experiment warehouse: status, verify (files vs rows), rebuild, ingest.",
                         no_args_is_help=True)
    app.add_typer(wh_app, name="warehouse")

    @app.command()
    def sql(
        statement: str = typer.Argument(..., help="one SQL statement (read-only)"),
        fmt: str = typer.Option(None, "--format", "-f", show_default=False,
                                help="table, vertical (one block per row: `column: value` lines), csv or json; "
                                     "default: table, or vertical when the table is wider than the terminal"),
        limit: int = typer.Option(None, show_default=False,
                                  help="print at most this many rows (0: all); default: 1000 for table and "
                                       "vertical, all for csv and json"),
    ) -> None:
        """Run one read-only query (SELECT, DESCRIBE, SHOW, EXPLAIN) on the warehouse and print the rows.

        Nothing else runs: no COPY/EXPORT, ATTACH, INSTALL/LOAD, SET/PRAGMA or CREATE, and no file or
        network access from inside a query (warehouse/sql_guard.py).
        """
        from warehouse import query_stream

        if fmt is not None and fmt not in FORMATS:
            raise _fail(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if limit is None:  # machine formats get every row: a silent cut would look like the whole answer
            limit = 0 if fmt in ("csv", "json") else 1000
        try:
            # the rows are read in batches as they are printed (csv, json) or counted (table, vertical: the first
            # `limit` kept): 20 million rows are never held at once
            with query_stream(statement, untrusted=True) as stream:
                if fmt in ("csv", "json"):
                    printed, total = write_row_stream(stream.columns, stream.batches(), fmt, limit)
                else:
                    kept: list[tuple[Any, ...]] = []
                    total = 0
                    for batch in stream.batches():
                        total += len(batch)
                        kept += batch[: max(0, limit - len(kept))] if limit > 0 else batch
                    printed = len(kept)
                    title = f"{total} row(s)" + (f", first {limit} shown" if printed < total else "")
                    print_rows(stream.columns, kept, fmt, title, console)
                pending = stream.pending
        except duckdb.Error as exc:  # ReadOnlySqlError included
            raise _fail(str(exc).splitlines()[0]) from None
        if printed < total:  # on stderr too: csv and json carry no title
            err_console.print(f"[yellow]note:[/] printed {printed} of {total} rows; --limit 0 prints all",
                              highlight=False)
        if pending:
            err_console.print(f"[yellow]note:[/] {pending} event file(s) not ingested yet (warehouse busy)")

    @app.command()
    def lineage(
        ref: str = typer.Argument(..., metavar="REF", help="a run, experiment, export, evaluation or metric id, a "
                                  "dataset/output or config sha256 digest (or a unique prefix: >= 6 characters for "
                                  "digests), or an output path"),
        as_json: bool = typer.Option(False, "--json", help="print the chain as JSON"),
    ) -> None:
        """Print the upstream chain of anything SkillGate recorded: evaluation, export, run, config, commit, inputs.

        REF is whatever `skillgate run`, `skillgate runs`, `skillgate experiments` or a stage's folder shows
        you; an ambiguous prefix lists the candidates.
        """
        from skillgate_core.base.paths import state_layout
        from warehouse import RefError, lineage_tree, match_ref, read_connection

        state = state_layout()
        with read_connection(state) as con:
            try:
                match = match_ref(con, ref, state)
            except RefError as exc:
                raise _fail(str(exc), code=1) from None
            node = lineage_tree(con, match.id, match.kind)
        assert node is not None, match  # the match came from the same connection
        if as_json:
            print(json.dumps(dataclasses.asdict(node), default=str, indent=2))
            return
        if match.via != "id":
            err_console.print(f"[dim]{escape(ref)} -> {escape(match.describe())} (by {match.via})[/]", highlight=False)
        console.print(_tree(node))

    @wh_app.command("status")
    def status_cmd() -> None:
        """File, schema version, row counts and the event log."""
        from warehouse import warehouse_status

        s = warehouse_status()
        table = Table(title=f"warehouse {s.file}")
        table.add_column("what")
        table.add_column("value")
        version = "busy" if s.busy else f"{s.schema_version} (code ships {s.latest_version})"
        runs: list[tuple[str, object]] = [(f"runs {status}", n) for status, n in s.runs.items()]
        if s.dead_runs:
            runs.append(("runs whose process is gone", f"{s.dead_runs} (still 'running': skillgate warehouse reap)"))
        for k, v in [("exists", s.exists), ("schema version", version), ("pending events", s.pending),
                     ("rejected events", s.rejected), ("archived events", s.archived), *runs, *s.rows.items()]:
            table.add_row(str(k), escape(str(v)))
        console.print(table)

    @wh_app.command()
    def verify(
        quick: bool = typer.Option(False, "--quick", help="skip recomputing content digests"),
        as_json: bool = typer.Option(False, "--json", help="print the drift as JSON"),
    ) -> None:
        """Check that the experiment folders and the warehouse agree; list every drift (exit 1 if any)."""
        from warehouse import verify as run_verify

        report = run_verify(digests=not quick)
        if as_json:
            print(json.dumps({"ok": report.ok, "checked": report.checked,
                              "drift": [dataclasses.asdict(d) for d in report.drift]}, indent=2))
        else:
            checked = ", ".join(f"{v} {k}" for k, v in report.checked.items())
            if report.ok:
                console.print(f"[green]ok[/]: files and warehouse agree ({checked})")
            else:
                table = Table(title=f"{len(report.drift)} drift(s) ({checked} checked)")
                for c in ("kind", "subject", "detail"):
                    table.add_column(c, overflow="fold")
                for d in report.drift:
                    table.add_row(d.kind, escape(printable(d.subject)), escape(printable(d.detail)))
                console.print(table)
        if not report.ok:
            raise typer.Exit(1)

    @wh_app.command()
    def rebuild() -> None:
        """Rebuild the warehouse file from the event archive (after deleting or corrupting it)."""
        from warehouse import rebuild as run_rebuild

        report = run_rebuild()
        console.print(f"rebuilt from {report.files} archived event file(s) in {report.seconds} s"
                      + (f"; then ingested {report.after.ingested} pending" if report.after else ""))
        if report.set_aside:
            console.print(f"the unreadable old file is kept as {escape(str(report.set_aside))}", highlight=False)
        for name, reason in report.failed:
            err_console.print(f"[bold red]refused on replay:[/] {name}: {escape(reason)}")
        if report.failed:
            raise typer.Exit(1)

    @wh_app.command()
    def requeue(names: list[str] = typer.Argument(None, help="rejected event files (default: all)")) -> None:
        """Put rejected events back in the spool (after recording what they lacked) and ingest them."""
        from skillgate_core.base.paths import state_layout
        from warehouse import event_log
        from warehouse import ingest as run_ingest
        from warehouse.spool import requeue_rejected

        state = state_layout()
        moved = requeue_rejected(event_log(state), names or None)
        r = run_ingest(state, lock_wait_s=10.0, db_wait_s=10.0)
        console.print(f"re-queued {len(moved)}; ingested {r.ingested}, rejected again {r.rejected}")

    @wh_app.command()
    def reap() -> None:
        """Mark runs whose process is gone (killed, crashed) as interrupted and delete their temp outputs."""
        from warehouse import mark_interrupted

        report = mark_interrupted()
        console.print(f"marked {len(report.marked)} run(s) interrupted; "
                      f"removed {len(report.removed)} temp output folder(s)")
        for run in report.marked:
            console.print(f"  {escape(run.run_id)} ({run.stage}): {escape(run.detail())}", highlight=False)
        for path in report.removed:
            console.print(f"  removed {escape(str(path))}", highlight=False)

    @wh_app.command()
    def ingest() -> None:
        """Apply pending events now (normally every record and every read does this)."""
        from warehouse import ingest as run_ingest

        r = run_ingest(lock_wait_s=10.0, db_wait_s=10.0)
        console.print(f"ingested {r.ingested}, rejected {r.rejected}, pending {r.pending}" + (" (busy)" if r.busy else ""))
