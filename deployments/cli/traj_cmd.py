"""`skillgate traj show SOURCE [--list | --episode N | --task ID [--repeat R]]`: one episode's turns.

    skillgate traj show $SKILLGATE_HOME/artifacts/collect/KEY/trajectories --list
    skillgate traj show 3f2a9c --episode 4          # a trajectories dataset by digest (prefix), or its collect run id
    skillgate traj show grpo-.../eval70-step-200 --task diagnosis-data-formats-ev0003 --repeat 1
    skillgate traj show PATH --episode 0 --json     # the same facts as JSON

SOURCE is a trajectories dataset (collect: the folder or its trajectories.parquet), an evaluation's
folder or one per-trial trajectory.json, or anything `skillgate lineage` resolves to one of those.
Each assistant turn is printed as written, coloured as the loss mask trains it: green = sampled
tokens (loss mask 1), dim = context (prompt, tool responses: mask 0). Selection actions (read calls
naming /skills/NAME/SKILL.md) are marked in the text: the call in yellow (its tokens get no outcome
credit), the skill name in the category's colour (its identity tokens carry the selector credit),
and listed under the turn with their token counts and, where the record holds the task's group, the
selector advantage they would get (skillgate_core/evaluation/recorded_episodes.py). The list ends with the
record's premise numbers (docs/method.md 8b: P1 outcome vs selection, P2 dilution, multi-read, recovery);
in `--list --json` each episode carries its own facts (`premise`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from deployments.cli.result_format import printable

__all__ = ["register"]

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

TRAINED = "green"
CONTEXT = "dim"
READ_CALL = "yellow"
CATEGORY_STYLE = {"oracle": "bold black on green", "misleading": "bold white on red", "relevant": "bold black on cyan",
                  "irrelevant": "bold black on magenta", "unadvertised": "bold black on white"}
TOOL_CALL = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)
PREVIEW_LINES = 12
"""Lines of the system prompt and of each tool response shown without --full."""
PREVIEW_CHARS = 1500
"""Characters of the same shown without --full."""
TOOL_RESPONSE = re.compile(r"<tool_response name='([^']*)'>(.*?)</tool_response>", re.DOTALL)


def _source_path(source: str) -> Path:
    """SOURCE as a path: itself when it exists, else what the warehouse reference names."""
    path = Path(source).expanduser()
    if path.exists():
        return path
    from skillgate_core.base.paths import state_layout
    from warehouse import read_connection
    from warehouse.refs import match_ref
    from warehouse.runs import run_outputs

    state = state_layout()
    with read_connection(state) as con:
        match = match_ref(con, source, state)
        if match.kind == "run":
            outputs = run_outputs(con, match.id)
            found = [o for o in outputs if o["role"] == "trajectories"] or outputs
            if len(found) != 1:
                raise FileNotFoundError(f"run {match.id} has no trajectories output (outputs: "
                                        f"{', '.join(o['role'] for o in outputs) or 'none'})")
            return Path(found[0]["uri"])
    if match.kind not in ("dataset", "evaluation") or match.uri is None:
        raise FileNotFoundError(f"{source} names {match.describe()}, which holds no episodes of its own; give a "
                                "trajectories dataset, an evaluation, or a collect run")
    return Path(match.uri)


def _printable_fields(value: Any) -> Any:
    """`value` with every string in it (dataclass fields, tuples, mappings) made printable: what an
    episode holds was written by an agent (turn text, tool output, its calls) or by a task package,
    and must not reach the terminal as control sequences. Rich markup is not interpreted in these
    strings either: every one is printed as a Text, or escaped where it goes into markup."""
    if isinstance(value, str):
        return printable(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _printable_fields(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, tuple):
        return tuple(_printable_fields(v) for v in value)
    if isinstance(value, list):
        return [_printable_fields(v) for v in value]
    if isinstance(value, Mapping):
        return {_printable_fields(k): _printable_fields(v) for k, v in value.items()}
    return value


def _preview(text: str, full: bool) -> str:
    if full:
        return text
    lines = text.splitlines()
    cut = "\n".join(lines[:PREVIEW_LINES])
    cut = cut[:PREVIEW_CHARS]
    if len(cut) >= len(text.rstrip("\n")):
        return text
    return cut + f"\n... ({len(text) - len(cut)} more characters, {max(0, len(lines) - PREVIEW_LINES)} more lines: --full)"


def _observation_text(observation: str) -> str:
    """Tool responses as a person reads them: each tool's JSON result with its strings' newlines real."""
    parts = []
    for m in TOOL_RESPONSE.finditer(observation):
        try:
            result = json.loads(m.group(2))
        except ValueError:
            parts.append(f"[{m.group(1)}] {m.group(2)}")
            continue
        if not isinstance(result, dict):
            parts.append(f"[{m.group(1)}] {json.dumps(result)}")
            continue
        short = {k: v for k, v in result.items() if not (isinstance(v, str) and "\n" in v)}
        parts.append(f"[{m.group(1)}] " + json.dumps(short, ensure_ascii=False))
        parts += [f"{k}:\n{v.rstrip()}" for k, v in result.items() if isinstance(v, str) and "\n" in v]
    # printable again: the JSON decoded above turns an escaped control character back into itself
    return printable("\n".join(parts)) if parts else observation


def _turn_text(turn) -> Text:
    """The turn's text, trained-green, with each attributed read call and its skill names marked."""
    text = Text(turn.text, style=TRAINED)
    names = {a.skill_name: a.category for a in turn.actions}
    if not names:
        return text
    from skillgate_core.credit.spans import SKILL_PATH

    for call in TOOL_CALL.finditer(turn.text):
        hits = [m for m in SKILL_PATH.finditer(call.group(0)) if m.group(1) in names]
        if not hits:
            continue
        text.stylize(READ_CALL, call.start(), call.end())
        for m in hits:
            text.stylize(CATEGORY_STYLE.get(names[m.group(1)], "bold"), call.start() + m.start(1), call.start() + m.end(1))
    return text


def _action_line(a) -> Text:
    tokens = "" if a.call_tokens is None else f" · {a.call_tokens} call tokens (no outcome credit), " \
                                              f"{a.identity_tokens} identity tokens"
    credit = "" if a.selector_advantage is None else f" · A_sel = {a.selector_advantage:+.3f}"
    line = Text("▶ selection: ", style="bold")
    line.append(f"{a.tool_name} ")
    line.append(f" {a.skill_name} ", style=CATEGORY_STYLE.get(a.category, "bold"))
    line.append(f" ({a.category}, call {a.call_index}){tokens}{credit}")
    return line


def _header(ep, total: int) -> Panel:
    reads = ", ".join(f"{a.skill_name} ({a.category})" for a in ep.actions) or "none"
    lines = [
        f"[bold]{escape(ep.task_id)}[/] ({escape(ep.bench)}) · repeat {ep.repeat} · policy {escape(ep.policy)} · "
        f"{escape(ep.status)} · score {ep.score:g}" + ("" if ep.raw_score in (None, ep.score) else f" (raw {ep.raw_score:g})"),
        f"gold skill: {escape(ep.gold or '-')} · reads: {escape(reads)}",
    ]
    read_names = {a.skill_name for a in ep.actions}
    beyond = [f"{n} ({c})" for n, c in ep.consulted or () if n not in read_names]
    if beyond:  # files of skills it never read by name: not clean (docs/reads.md)
        lines.append(f"consulted beyond its reads: {escape(', '.join(beyond))}")
    if ep.response_tokens is not None and ep.trained_tokens is not None:
        lines.append(f"tokens: prompt {ep.prompt_tokens} [dim](context)[/] · response {ep.response_tokens}: "
                     f"[{TRAINED}]{ep.trained_tokens} trained (loss mask 1)[/], "
                     f"[dim]{ep.response_tokens - ep.trained_tokens} context (mask 0)[/]")
    else:
        lines.append("tokens: not recorded by this source (an evaluation log keeps text and calls only)")
    if ep.credit is not None:
        c = ep.credit
        what = f"credit in its group ({c.group_size} episodes of this task in the record, utility {c.utility})"
        lines.append(f"{what}: " + (f"A_task = {c.task_advantage:+.3f}" if c.task_advantage is not None
                                    else escape(c.note)))
    else:
        lines.append("credit: the record holds no other episode of this task (a group needs several)")
    if any(ep.mismatches.values()):
        lines.append(f"[bold red]span detection mismatches: {dict(ep.mismatches)}[/]")
    legend = Text.assemble(("trained", TRAINED), " · ", ("context", CONTEXT), " · ", ("read call", READ_CALL), " · ",
                           *[(f" {c} ", s) for c, s in CATEGORY_STYLE.items()])
    return Panel(Group(*[Text.from_markup(x) for x in lines], legend),
                 title=f"episode {ep.number} of {total} · {escape(ep.source)}", title_align="left")


def _show(ep, total: int, full: bool) -> None:
    ep = _printable_fields(ep)
    console.print(_header(ep, total))
    console.print(Panel(Text(_preview(ep.system, full), style=CONTEXT), title="system prompt · context",
                        title_align="left", border_style="dim"))
    console.print(Panel(Text(ep.instruction, style=CONTEXT), title="task instruction · context", title_align="left",
                        border_style="dim"))
    for i, turn in enumerate(ep.turns):
        span = "" if turn.tokens is None else f" · tokens {turn.tokens[0]}-{turn.tokens[1]} · " \
                                              f"trained {turn.trained_tokens}/{turn.tokens[1] - turn.tokens[0]}"
        body = [_turn_text(turn), *[_action_line(a) for a in turn.actions]]
        console.print(Panel(Group(*body), title=f"assistant turn {i}{span} · finish {turn.finish}", title_align="left",
                            border_style=TRAINED))
        if turn.observation is not None:
            count = "" if turn.context_tokens_after is None else f" · {turn.context_tokens_after} tokens, mask 0"
            console.print(Panel(Text(_preview(_observation_text(turn.observation), full), style=CONTEXT),
                                title=f"tool response · context{count}", title_align="left", border_style="dim"))
    console.print(f"verifier: {escape(ep.verifier_detail or '-')}", highlight=False)


def _choosing_tokens(premise) -> str:
    """name / read-call / reasoning tokens of one episode, '-' where not measured."""
    if premise is None:
        return "-"
    return "/".join("-" if n is None else str(n)
                    for n in (premise.name_tokens, premise.call_tokens, premise.reasoning_tokens))


def _share(value: float | None, num: int, den: int, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}% ({num}/{den})"


def _premise_block(numbers: Mapping[str, Any]) -> Panel:
    """The record's premise numbers (docs/method.md 8b), each share with its count."""
    p = numbers
    readers = p["oracle_read_episodes"]
    lines = [
        f"episodes: {p['episodes']} (aborted, left out: {p['episodes_aborted']}; without facts: {p['without_facts']})",
        f"P1 outcome vs selection: {_share(p['p1_disagreement_share'], p['p1_disagreement'], readers)} of the "
        f"oracle readers' outcomes differ from a clean oracle read · clean, failed "
        f"{_share(p['p1_clean_failed_share'], p['p1_clean_failed'], readers)} · resolved, not clean "
        f"{_share(p['p1_unclean_resolved_share'], p['p1_unclean_resolved'], readers)} · oracle read, failed "
        f"{_share(p['p1_oracle_read_failed_share'], p['p1_oracle_read_failed'], readers)}",
        f"P2 dilution ({p['token_episodes']} episodes with token ids, {p['sampled_tokens']} sampled tokens): name "
        f"{_share(p['name_token_share'], p['name_tokens'], p['sampled_tokens'], 2)} · read call "
        f"{_share(p['call_token_share'], p['call_tokens'], p['sampled_tokens'], 2)} · <skill_reasoning> "
        f"{_share(p['reasoning_token_share'], p['reasoning_tokens'], p['sampled_tokens'], 2)} · per episode: "
        + ("-" if p["sampled_tokens_mean"] is None else f"{p['sampled_tokens_mean']:.0f}") + " sampled tokens, "
        + ("-" if p["turns_mean"] is None else f"{p['turns_mean']:.1f}") + " turns",
        f"reads: multi-read {_share(p['multi_read_rate'], p['multi_read_episodes'], p['episodes'])} · recovery "
        f"{_share(p['recovery_rate'], p['recovered'], p['recovery_candidates'])} of first reads not the oracle, "
        f"resolved {_share(p['recovery_success_rate'], p['recovered_resolved'], p['recovered'])}",
    ]
    return Panel(Group(*[Text(x) for x in lines]), title="premise (docs/method.md 8b)", title_align="left")


def _list(episodes, source: Path) -> None:
    from skillgate_core.evaluation.recorded_episodes import recorded_premise

    table = Table(title=f"{len(episodes)} episode(s) in {escape(printable(str(source)))}")
    # the task id whole where the terminal allows it: it is what --task takes
    longest = min(40, max((len(printable(e.task_id)) for e in episodes), default=4))
    for col in ("#", "task", "repeat", "status", "score", "reads", "turns", "trained / response tokens", "A_task",
                "clean", "name/call/ reasoning"):
        table.add_column(col, overflow="fold", min_width=longest if col == "task" else None)
    for ep in map(_printable_fields, episodes):
        tokens = "-" if ep.trained_tokens is None else f"{ep.trained_tokens} / {ep.response_tokens}"
        adv = "-" if ep.credit is None or ep.credit.task_advantage is None else f"{ep.credit.task_advantage:+.3f}"
        clean = "-" if ep.premise is None else ("yes" if ep.premise.clean else "no")
        table.add_row(str(ep.number), escape(ep.task_id), str(ep.repeat), escape(ep.status), f"{ep.score:g}",
                      escape(", ".join(ep.reads) or "-"), str(len(ep.turns)), tokens, adv, clean,
                      _choosing_tokens(ep.premise))
    console.print(table)
    console.print(_premise_block(recorded_premise(episodes)))
    console.print("[dim]show one: skillgate traj show SOURCE --episode N (or --task ID [--repeat R])[/]")


def register(app: typer.Typer) -> None:
    traj_app = typer.Typer(help="Recorded episodes (trajectories, evaluation logs): list them, show one.",
                           no_args_is_help=True)

    @traj_app.command("show")
    def show(
        source: str = typer.Argument(..., metavar="SOURCE", help="a trajectories dataset or evaluation (path, digest "
                                     "or id), or one trajectory.json"),
        episode: int = typer.Option(None, "--episode", "-e", min=0, help="the episode's number (see --list)"),
        task: str = typer.Option(None, "--task", help="the first episode of this task (with --repeat: that one)"),
        repeat: int = typer.Option(None, "--repeat", min=0, help="with --task: which repeat"),
        list_: bool = typer.Option(False, "--list", help="list the episodes instead"),
        utility: str = typer.Option("clean_oracle", "--utility",
                                    help="selection utility of the group credit: clean_oracle (SkillGate) or "
                                         "first_oracle"),
        full: bool = typer.Option(False, "--full", help="print the system prompt and tool responses whole"),
        as_json: bool = typer.Option(False, "--json", help="print the episode (or the list) as JSON"),
    ) -> None:
        """Show one recorded episode: each turn, trained vs context tokens, selection actions and their credit."""
        from skillgate_core.credit import UTILITIES
        from skillgate_core.evaluation.recorded_episodes import load_episodes

        if utility not in UTILITIES:
            raise typer.BadParameter(f"expected one of {', '.join(UTILITIES)}, got {utility!r}", param_hint="--utility")
        if repeat is not None and task is None:
            raise typer.BadParameter("--repeat needs --task", param_hint="--repeat")
        path = _source_path(source)
        episodes = load_episodes(path, utility)
        if list_ or (episode is None and task is None):
            if as_json:
                print(json.dumps([dataclasses.asdict(e) for e in episodes], indent=2, default=str))
            else:
                _list(episodes, path)
            return
        if episode is not None:
            if episode >= len(episodes):
                raise typer.BadParameter(f"{path} holds episodes 0-{len(episodes) - 1}", param_hint="--episode")
            chosen = episodes[episode]
        else:
            matching = [e for e in episodes if e.task_id == task and (repeat is None or e.repeat == repeat)]
            if not matching:
                tasks = sorted({f"{e.task_id} (repeat {e.repeat})" for e in episodes})
                raise typer.BadParameter(f"no episode of task {task!r}" + (f" repeat {repeat}" if repeat is not None
                                         else "") + f" in {path}; it holds: {', '.join(tasks)}", param_hint="--task")
            chosen = matching[0]
        if as_json:
            print(json.dumps(dataclasses.asdict(chosen), indent=2, default=str))
        else:
            _show(chosen, len(episodes), full)

    app.add_typer(traj_app, name="traj")
