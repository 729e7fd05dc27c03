"""`skillgate eval run` (in the spirit of `harbor run`) and `skillgate eval protocol`.

run: evaluate a policy (a model folder, an export folder or an export id as `skillgate experiments` /
`skillgate lineage` print it, or an OpenAI-compatible endpoint URL + --model) under a protocol (eval70_v1, slate147 or a spec .toml) on a bench; prints the metrics table and
where the rows and per-trial logs are. The evaluation is owned by the experiment that owns the
model (a standalone evaluation experiment for a model no experiment owns) and recorded in the
warehouse as it runs. Interrupted (Ctrl-C, kill) or stopped by --max-trials, it is incomplete: the
same command resumes it and plays only the missing trials. --repeats N is a labelled non-protocol
run: another protocol id and fingerprint, never compared with the protocol's rows.
protocol: the protocol a spec gives on a bench (id, fingerprint, tasks, what differs from nominal).
Without --bench, each command takes the newest bench on record (one line says which).

An endpoint's model needs no local tokenizer: without --tokenizer its tokens are counted from the
endpoint's usage, and a printed note (and the summary's token_counts_note) says what is then not
measured. --request-timeout bounds one request; a request that times out is never sent again. A
refused argument is refused before anything is written: no experiment folder, no warehouse row.

Before the first trial it says what the run will take (the recorded episode time of this protocol,
warehouse/eval_cost.py) and whether the protocol's context exceeds what the model (or --tokenizer's
model) was trained to. A trial aborted by an infrastructure failure (the endpoint did not answer, a
sandbox died) gets no row: the progress bar counts it (errors=N), the next run plays it again, and
--stop-after-errors N of them in a row (default 8) stop the run at once with an error naming the
cause. Exit codes: 0 completed, 1 incomplete (resumable), 2 a refused argument or a user error,
3 stopped on errors in a row (resumable), 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()


def _default_bench() -> Path:
    """The newest bench on record (said in one line), else the seed-0 bench `skillgate bench build` makes."""
    from deployments.cli.eval_inputs import newest_bench
    from skillgate_core.base.paths import state_layout

    found = newest_bench()
    if found is None:
        return state_layout().datasets / "bench" / "seed-0" / "bench"
    folder, recorded = found
    console.print(f"bench {escape(str(folder))} (the newest on record, {recorded:%Y-%m-%d %H:%M}; --bench to choose)",
                  highlight=False, soft_wrap=True)
    return folder


def _bench(path: Path | None) -> Path:
    folder = path or _default_bench()
    if (folder / "bench" / "tasks.jsonl").is_file():
        folder = folder / "bench"
    if not (folder / "tasks.jsonl").is_file():
        raise FileNotFoundError(f"{folder}: no bench here (tasks.jsonl missing); build one with `skillgate bench build` "
                                "or pass --bench DIR")
    return folder


def _model_folder(policy: str) -> Path:
    """The model folder --policy names, refused (before anything is written) unless it holds config.json and
    complete safetensors weights: a folder refused later would leave an experiment behind, or a traceback."""
    from skillgate_core.ownership.exports import weights_problems

    folder = Path(policy).expanduser().resolve()
    if not (folder / "config.json").is_file():
        raise typer.BadParameter(f"{folder}: not a model folder (no config.json)", param_hint="--policy")
    problems = weights_problems(folder)
    if problems:
        raise typer.BadParameter(f"{folder}: not a model folder: {'; '.join(problems)}", param_hint="--policy")
    return folder


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def metrics_table(summary: dict[str, Any], title: str) -> Table:
    """The docs/method.md 8 metrics of a summary, one per row (errors counted in every denominator and alone)."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    n = summary["trials"]
    resolved = round(summary["trial_success"] * n)
    table.add_row("trials (tasks)", f"{n} ({summary['tasks']})")
    table.add_row("trial success", f"{summary['trial_success']:.3f} ({resolved}/{n})")
    for key in sorted(k for k in summary if k.startswith("pass@")):
        table.add_row(key, _fmt(summary[key]))
    table.add_row("errors (in the denominator)", str(summary["errors"]))
    for bench, value in summary["trial_success_by_benchmark"].items():
        table.add_row(f"  success: {bench}", _fmt(value))
    for k, v in summary["tasks_with_at_least"].items():
        table.add_row(f"tasks solved {k}", str(v))
    for key in ("read_rate", "p_resolved_given_read", "p_resolved_given_no_read", "skill_reasoning_rate",
                "oracle_exposure", "misleading_exposure", "p_oracle_given_any_read", "clean_oracle_rate",
                "unique_reads_per_trial"):
        table.add_row(key.replace("_", " "), _fmt(summary.get(key)))
    first = ", ".join(f"{c} {_fmt(v)}" for c, v in summary["first_read_category"].items() if v)
    share = ", ".join(f"{c} {_fmt(v)}" for c, v in summary["read_share_by_category"].items() if v)
    table.add_row("first read", first or "-")
    table.add_row("read share", share or "-")
    return table


def _say_the_context(resolved: Any, ref: Any, tokenizer: str) -> None:
    """A warning line when the protocol's context exceeds the model's (a local model, or --tokenizer's)."""
    from skillgate_core.evaluation.context_limit import context_warning, model_context_limit

    folder, what = ((Path(tokenizer), f"the model of --tokenizer {tokenizer}") if tokenizer
                    else (ref.model_dir, f"the model at {ref.model_dir}"))
    if folder is None:  # an endpoint without --tokenizer: nothing here says what the served model was trained to
        return
    line = context_warning(resolved.protocol, model_context_limit(folder), what)
    if line:
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _say_earlier_aborted_rows(exp: Any, eval_id: str) -> None:
    """A note when a resumed evaluation holds rows recording aborted trials (written before aborts stopped
    getting rows): they stay as recorded, and a new --tag measures without them."""
    from skillgate_core.ownership import list_eval_rows

    if not exp.eval(eval_id).is_dir():
        return
    aborted = sum(row.get("status") == "aborted" for row in list_eval_rows(exp, eval_id).values())
    if aborted:
        console.print(f"[yellow]note:[/] {aborted} rows of this evaluation record aborted trials (written before "
                      "infrastructure failures stopped getting rows): they stay as recorded, errors in the "
                      "denominator; to measure without them, evaluate under a new --tag", highlight=False,
                      soft_wrap=True)


def _say_the_estimate(resolved: Any, ref: Any, config: Any, root: Path) -> None:
    """What the trials still to play will take, from the recorded episode time under this protocol
    (warehouse/eval_cost.py), said before the first one."""
    from skillgate_core.evaluation.runner import eval_id_for
    from skillgate_core.ownership import count_eval_rows, experiment_dir
    from warehouse.eval_cost import estimate_evaluation

    p = resolved.protocol
    exp = experiment_dir(root, ref.experiment_id)
    eval_id = eval_id_for(ref.export_id, p.protocol_id(), config.tag)
    left = resolved.trial_count() - (count_eval_rows(exp, eval_id) if exp.eval(eval_id).is_dir() else 0)
    if left <= 0:
        return
    _say_earlier_aborted_rows(exp, eval_id)
    try:
        estimate = estimate_evaluation(p.fingerprint(), p.protocol_id(), trials=left, targets=[ref.experiment_id],
                                       batch=config.batch_episodes)
    except Exception as exc:  # the estimate informs; the evaluation reports its own errors
        console.print(f"estimate: none ({type(exc).__name__}: {escape(str(exc))})", highlight=False)
        return
    line = estimate.line(cpu_only=False)
    if estimate.seconds is None:
        line += "; the progress bar's remaining time is measured from the first batch on"
    console.print(f"estimate: {escape(line)}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    eval_app = typer.Typer(help="Evaluate a policy under a frozen protocol (eval70_v1, slate147).",
                           no_args_is_help=True)

    @eval_app.command("run")
    def run(
        policy: str = typer.Option(..., "--policy", help="model folder, export folder or export id (skillgate experiments / lineage), or an OpenAI-compatible URL (http://host:8000/v1)"),
        model: str = typer.Option("", "--model", help="served model name (with an endpoint URL)"),
        protocol: str = typer.Option("eval70_v1", "--protocol", help="protocol spec: eval70_v1, slate147 or a .toml path"),
        bench: Path = typer.Option(None, "--bench", help="bench folder (default: the newest on record)"),
        repeats: int = typer.Option(0, "--repeats", min=0, help="labelled non-protocol run with N repeats (another protocol id)"),
        tag: str = typer.Option("", "--tag", help="evaluation tag (part of the evaluation id)"),
        method: str = typer.Option("", "--method", help="row label (default: export id / model name)"),
        batch: int = typer.Option(8, "--batch", min=1, help="episodes in flight together (one lockstep batch)"),
        workers: int = typer.Option(4, "--workers", min=1, help="sandbox worker threads"),
        device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (local models)"),
        tokenizer: str = typer.Option("", "--tokenizer", help="HF tokenizer folder of the served model (without: tokens counted from the endpoint's usage)"),
        concurrency: int = typer.Option(16, "--concurrency", min=1, help="endpoint requests in flight"),
        request_timeout: float = typer.Option(600.0, "--request-timeout", min=1.0, help="seconds one endpoint request may take; a request past it fails its trial and is not sent again"),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="env var holding the endpoint key: OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY"),
        max_trials: int = typer.Option(0, "--max-trials", min=0, help="stop after N trials (incomplete; rerun resumes)"),
        pin: str = typer.Option("", "--pin", help="refuse unless the protocol id is exactly this"),
        stop_after_errors: int = typer.Option(8, "--stop-after-errors", min=0, help="stop (exit 3) once N trials in a row aborted on infrastructure failures, e.g. a dead endpoint (0 = never)"),
    ) -> None:
        """Run (or resume) an evaluation; print its metrics and where its rows and logs are."""
        from deployments.cli.eval_inputs import PolicyNotFound, policy_of_export_id
        from deployments.cli.interrupts import stop_on_interrupt
        from skillgate_core.base.paths import state_layout
        from skillgate_core.evaluation.observer import observing
        from skillgate_core.evaluation.owner import is_endpoint, resolve_policy
        from skillgate_core.evaluation.runner import (
            EvalRunConfig,
            TrialsAbortedInARow,
            run_evaluation,
            token_counts,
        )
        from skillgate_core.evaluation.specs import build_protocol, load_spec
        from skillgate_core.policy.endpoint_keys import check_api_key_env, check_key_destination
        from warehouse.evaluations import WarehouseEvalObserver

        if device not in ("auto", "cpu", "cuda"):
            raise typer.BadParameter(f"expected auto, cpu or cuda, got {device!r}", param_hint="--device")
        # Every refusal comes before resolve_policy: a refused argument leaves no experiment folder, no row.
        if not is_endpoint(policy) and not Path(policy).expanduser().exists():
            try:  # an export id: its folder (or its endpoint) on record
                policy, recorded_model = policy_of_export_id(policy)
            except PolicyNotFound as exc:
                raise typer.BadParameter(str(exc), param_hint="--policy") from None
            if recorded_model and model and model != recorded_model:
                raise typer.BadParameter(f"the export is the endpoint's model '{recorded_model}', not '{model}'",
                                         param_hint="--model")
            model = model or recorded_model
        if not is_endpoint(policy):
            _model_folder(policy)
        if is_endpoint(policy):
            try:
                check_api_key_env(api_key_env, "--api-key-env")
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--api-key-env") from None
            try:  # the key in --api-key-env goes only to the base URLs listed beside it (docs/deploy.md)
                check_key_destination(api_key_env, policy, "endpoint")
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--policy") from None
            if not model:
                raise typer.BadParameter("an endpoint URL needs the served model's name", param_hint="--model")
        if tokenizer and not any((Path(tokenizer).expanduser() / f).is_file()
                                 for f in ("tokenizer.json", "tokenizer_config.json")):
            raise typer.BadParameter(f"{tokenizer}: not a tokenizer folder (no tokenizer.json or "
                                     "tokenizer_config.json)", param_hint="--tokenizer")
        folder = _bench(bench)
        spec = load_spec(protocol)
        resolved = build_protocol(spec, folder, demo_repeats=repeats)
        root = state_layout().experiments
        options = {"concurrency": concurrency, "api_key_env": api_key_env, "timeout_s": request_timeout,
                   "deadline_s": max(request_timeout, 900.0)} if is_endpoint(policy) else None
        ref = resolve_policy(policy, root=root, model=model, endpoint_options=options)
        p = resolved.protocol
        console.print(f"protocol [bold]{p.protocol_id()}[/] (fingerprint {p.fingerprint()[:16]}...): "
                      f"{len(resolved.tasks)} tasks x {p.repeats} repeats = {resolved.trial_count()} trials",
                      highlight=False)
        if resolved.note():
            console.print(f"[yellow]note:[/] {escape(resolved.note())}", highlight=False)
        if resolved.demo:
            console.print(f"[yellow]labelled non-protocol run[/]: not comparable with {spec.spec_id} as specified "
                          f"({spec.repeats} repeats)", highlight=False)
        owner = "standalone evaluation experiment" if ref.standalone else "experiment"
        console.print(f"policy {escape(ref.location)} -> {owner} {ref.experiment_id}, export {ref.export_id}",
                      highlight=False)
        config = EvalRunConfig(batch_episodes=batch, sandbox_workers=workers, tag=tag, method=method,
                               device=device, max_trials=max_trials, pin=pin, tokenizer=tokenizer,  # type: ignore[arg-type]  # device: checked above
                               stop_after_errors=stop_after_errors)
        counted, unmeasured = token_counts(ref, config)
        if unmeasured:
            console.print(f"[yellow]note:[/] no --tokenizer: {escape(unmeasured)}", highlight=False)
        _say_the_context(resolved, ref, tokenizer)
        _say_the_estimate(resolved, ref, config, root)
        try:
            # The first Ctrl-C stops at once: the requests in flight are left to their daemon threads
            # (never waited for), the sandboxes are stopped, the evaluation is recorded interrupted by SIGINT.
            with stop_on_interrupt(console, "the evaluation (requests in flight are abandoned, sandboxes stopped)"), \
                    observing(WarehouseEvalObserver(trigger="cli")):
                result = run_evaluation(resolved, ref, config, root=root)
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]: the evaluation is incomplete; run the same command to resume it "
                          "(only the missing trials run)")
            raise typer.Exit(130) from None
        except TrialsAbortedInARow as exc:
            console.print(f"[bold red]stopped:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(3) from None
        if result.summary is not None:
            console.print(metrics_table(result.summary, f"{result.summary['method']} on {p.protocol_id()}"))
            if unmeasured:
                console.print(f"token counts: {counted} (not measured: see the note above; also in summary.json)",
                              highlight=False)
        style = "green" if result.status == "completed" else "yellow"
        aborted = (f", {result.trials_aborted} aborted on infrastructure failures: no row, the next run plays "
                   "them again" if result.trials_aborted else "")
        console.print(f"status [{style}]{result.status}[/]: {result.trials_done}/{result.trials_total} trials "
                      f"({result.trials_run} run now{aborted})", highlight=False)
        console.print(f"evaluation {result.experiment_id}/{result.eval_id}", highlight=False, soft_wrap=True)
        console.print(f"per-trial logs: {result.rows_dir}/ROW_ID/{{row.json,trajectory.json}}", highlight=False,
                      soft_wrap=True)
        if result.status == "completed":
            console.print(f"rows: {result.parquet}", highlight=False, soft_wrap=True)
        else:
            console.print("run the same command again to resume (only the missing trials run)")
            raise typer.Exit(1)

    @eval_app.command("protocol")
    def show_protocol(
        protocol: str = typer.Argument("eval70_v1", help="protocol spec: eval70_v1, slate147 or a .toml path"),
        bench: Path = typer.Option(None, "--bench", help="bench folder (default: the newest on record)"),
        repeats: int = typer.Option(0, "--repeats", min=0, help="show the labelled non-protocol variant"),
    ) -> None:
        """The protocol a spec gives on a bench: id, fingerprint and what it is made of."""
        from skillgate_core.evaluation.specs import build_protocol, load_spec

        resolved = build_protocol(load_spec(protocol), _bench(bench), demo_repeats=repeats)
        table = Table(title=f"{resolved.protocol.protocol_id()} ({resolved.spec.source})")
        table.add_column("field")
        table.add_column("value")
        for key, value in resolved.protocol.body().items():
            table.add_row(key, str(value))
        console.print(table)
        if resolved.note():
            console.print(f"[yellow]note:[/] {escape(resolved.note())}", highlight=False)

    @eval_app.command("probe")
    def probe(
        policy: str = typer.Option(..., "--policy", help="model folder, export folder or export id to probe"),
        protocol: str = typer.Option("eval70_v1", "--protocol", help="protocol spec: eval70_v1, slate147 or a .toml path"),
        bench: Path = typer.Option(None, "--bench", help="bench folder (default: the newest on record)"),
        out: Path = typer.Option(None, "--out", help="folder for probe_rows.parquet + probe_summary.json"),
        turn: str = typer.Option("call", "--turn", help="scored first turn: call (the read call) or reasoning"),
        max_tasks: int = typer.Option(0, "--max-tasks", min=0, help="probe only the first N tasks (0 = all)"),
        device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
        method: str = typer.Option("", "--method", help="label of the summary (default: the folder name)"),
    ) -> None:
        """The selection probe: for each task, the policy's teacher-forced choice among the 16 slate skills
        as its first read (no episode); oracle rank-1 rate with a bootstrap interval, masses per category."""
        from deployments.cli.eval_inputs import PolicyNotFound, policy_of_export_id
        from skillgate_core.evaluation.probe import ProbeConfig, probe_selection, write_probe
        from skillgate_core.evaluation.specs import build_protocol, load_spec

        if device not in ("auto", "cpu", "cuda"):
            raise typer.BadParameter(f"expected auto, cpu or cuda, got {device!r}", param_hint="--device")
        if turn not in ("call", "reasoning"):
            raise typer.BadParameter(f"expected call or reasoning, got {turn!r}", param_hint="--turn")
        if not Path(policy).expanduser().exists():
            try:
                policy = policy_of_export_id(policy)[0]
            except PolicyNotFound as exc:
                raise typer.BadParameter(str(exc), param_hint="--policy") from None
        model_dir = _model_folder(policy)
        resolved = build_protocol(load_spec(protocol), _bench(bench))
        config = ProbeConfig(turn=turn, max_tasks=max_tasks, device=device)  # type: ignore[arg-type]  # checked above
        result = probe_selection(resolved, model_dir, config)
        s = result.summary
        table = Table(title=f"selection probe: {escape(model_dir.name)} on {resolved.protocol.protocol_id()}")
        for column in ("benchmark", "tasks", "oracle@1", "oracle mass", "misleading", "relevant", "irrelevant"):
            table.add_column(column, justify="left" if column == "benchmark" else "right")
        for name, block in [*s["by_benchmark"].items(), ("all", s)]:
            table.add_row(name, str(block["tasks"]), f"{block['oracle_rank1']}/{block['tasks']} "
                          f"({block['oracle_rank1_rate']:.3f})", *(f"{block[f'{c}_mass']:.3f}" for c in
                                                                  ("oracle", "misleading", "relevant", "irrelevant")))
        console.print(table)
        low, high = s["oracle_rank1_ci"]
        console.print(f"oracle rank-1 rate {s['oracle_rank1_rate']:.3f}, {100 * s['confidence']:.0f}% interval "
                      f"[{low:.3f}, {high:.3f}] over {s['tasks']} tasks (chance {s['chance']:.4f})", highlight=False)
        if out is not None:
            written = write_probe(result, out, method=method or model_dir.name)
            console.print(f"written: {written.parent}", highlight=False, soft_wrap=True)

    app.add_typer(eval_app, name="eval")
