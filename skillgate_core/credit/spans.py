"""Selection-span detection: which sampled tokens chose which skill (docs/reads.md says what counts
as a read, and why).

What counts as a read is what the environment saw: the skills whose SKILL.md / README.md the
episode's processes opened in the sandbox, each recorded with the tool call that was running
(`Trajectory.skill_opens`, envs/skill_opens.py), whatever the command looked like. Each such open is
one read of the episode, in order:

- attributed: the call that opened it names the skill as a `/skills/NAME` path (in any string
  argument; in an exec command also after shell unquoting, so `cd /app\\ncat /skills/X/SKILL.md` and
  `cat "/skills/X/SKILL.md"` both name X). It becomes a `SelectionAction` whose identity tokens are
  the tokens of that name where the call writes it;
- unattributed: a glob (`cat /skills/*/SKILL.md`), a relative path after `cd /skills`, `grep -r`, a
  background job between calls. It counts in the utilities (the episode is not clean) but has no
  tokens to credit.

Running or reading a skill's other files (scripts, data) opens no SKILL.md: it is neither a read nor
a mismatch, but it is *consultation* (`Trajectory.skill_consults`: every skill any file of which a
process opened or executed, the read ones included). The report lists the consulted skills, and an
episode is clean (`SpanReport.clean_oracle`) only when it read the oracle alone, by name, and
consulted no other skill: running the oracle's own scripts after reading it stays clean, inspecting
the other skills' scripts does not. Listing (`ls`, `find`) opens no file: neither.

For each turn that ended normally, the shared parser locates the tool calls with their character
spans; the turn's sampled token ids are decoded with character offsets, and

    call tokens     = tokens overlapping the whole <tool_call>...</tool_call>, plus the turn's
                      trailing special tokens (<|im_end|>) when the call is the last thing in the
                      right-stripped turn text: a read that ends the turn owns its terminator
    identity tokens = tokens overlapping only the skill name where the call writes it

Everything that cannot be judged fails closed: a turn whose parsed calls differ from what the
environment dispatched, an attributed name that cannot be located in its call's text, or ids that
do not decode back to the response text is counted, and any nonzero counter rejects the whole group
downstream (`credit.groups.validate_group`). Nothing is ever re-tokenized: offsets come from the ids
the sampler produced.

Records made before the environment watched opens (`opens=None`) are judged by the calls' text as
before: a `read`, or an `exec` whose JSON matches a reader command, naming `/skills/NAME/SKILL.md`.
Tool names are normalised before any test (lowercase, the part after the last `.`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

from skillgate_core.credit.actions import Category, ConsultedSkill, SelectionAction, SkillOpen, SkillRead
from skillgate_core.formats.tool_calls import ToolCall, canonical_arguments, parse_tool_calls

__all__ = [
    "READER_COMMANDS",
    "normalise_tool_name",
    "SKILL_PATH",
    "named_skills",
    "AssistantTurn",
    "SpanReport",
    "decode_with_offsets",
    "special_token_strings",
    "detect_selection_spans",
    "first_mention_identity",
]

READER_COMMANDS = re.compile(r"\b(cat|sed|awk|grep|head|tail|less|more|python3?|perl|ruby|node)\b", re.IGNORECASE)
"""An exec call whose JSON arguments match this reads files."""
SKILL_PATH = re.compile(r"/skills/([A-Za-z0-9_.-]+)/(?:SKILL|README)\.md", re.IGNORECASE)
"""Records without observed opens: each match in a read call's raw text is one action (group 1: the name)."""
NAMED_SKILL = re.compile(r"/skills/([A-Za-z0-9_.-]+)(?![A-Za-z0-9_.-])")
"""A skill named by a call: `/skills/NAME` followed by `/` or the end of the name (group 1: the name)."""

FinishReason = Literal["stop", "length", "abort", "timeout"]


@dataclass(frozen=True)
class AssistantTurn:
    """One assistant turn as the rollout recorded it."""

    response_text: str
    """The text the sampler returned for this turn."""
    token_ids: Sequence[int]
    """The sampled ids of this turn (the terminator included)."""
    token_offset: int
    """Index of this turn's first id in the episode's response token sequence."""
    dispatched: Sequence[tuple[str, Mapping[str, Any]]]
    """(tool name, arguments) of every call the environment ran for this turn, in order."""
    finish: FinishReason = "stop"
    """Why the turn ended; only "stop" turns are scanned."""


@dataclass(frozen=True)
class SpanReport:
    """docs/method.md 4.6: the episode's actions and its three mismatch counters."""

    actions: tuple[SelectionAction, ...]
    """Attributed reads in order (turn, call, path)."""
    turns_checked: int
    """Turns that were scanned (ended with "stop")."""
    parse_dispatch_mismatch: int
    """Turns whose parsed calls differ from the dispatched ones."""
    span_mismatch: int
    """Skill mentions that could not be turned into a valid identity span."""
    alignment_mismatch: int
    """Turns whose ids do not decode back to the response text."""
    skill_reads: tuple[SkillRead, ...] = ()
    """Every read in order, attributed (pointing at its action) or not; empty with actions: one
    attributed read per action (a report built from the call texts alone)."""
    consulted: tuple[ConsultedSkill, ...] = ()
    """Every skill consulted (any file of it opened or executed), once, in order of first consultation;
    always holding every read skill (a read is a consultation: a record that observed reads but not
    consultation knows no more than its reads)."""

    def __post_init__(self) -> None:
        if not self.skill_reads and self.actions:
            object.__setattr__(self, "skill_reads", tuple(SkillRead(a.skill_name, a.category, i)
                                                          for i, a in enumerate(self.actions)))
        pointed = [r.action_index for r in self.skill_reads if r.action_index is not None]
        if pointed != list(range(len(self.actions))):
            raise ValueError(f"skill_reads must point at every action once, in order; got {pointed} "
                             f"for {len(self.actions)} actions")
        seen = {c.skill_name: c for c in self.consulted}
        for r in self.skill_reads:
            seen.setdefault(r.skill_name, ConsultedSkill(r.skill_name, r.category))
        object.__setattr__(self, "consulted", tuple(seen.values()))

    @property
    def clean(self) -> bool:
        return not (self.parse_dispatch_mismatch or self.span_mismatch or self.alignment_mismatch)

    def reads(self) -> list[str]:
        """The categories of every read, attributed or not, in order: the utilities' input."""
        return [r.category for r in self.skill_reads]

    def attributed(self) -> list[bool]:
        """Aligned with `reads()`: whether each read is an action (has tokens to credit)."""
        return [r.attributed for r in self.skill_reads]

    def consulted_names(self) -> list[str]:
        """The consulted skills' names, in order of first consultation (the read ones included)."""
        return [c.skill_name for c in self.consulted]

    def consulted_categories(self) -> list[str]:
        """Aligned with `consulted_names()`: each consulted skill's category (the utilities' input)."""
        return [c.category for c in self.consulted]

    @property
    def clean_oracle(self) -> bool:
        """docs/method.md 5: one read, an attributed oracle read, and no other skill consulted."""
        return (self.reads() == ["oracle"] and all(self.attributed())
                and all(c == "oracle" for c in self.consulted_categories()))

    def action_values(self, per_read: Sequence[float]) -> list[float]:
        """The values of the attributed reads (one per action, in action order) from one per read."""
        if len(per_read) != len(self.skill_reads):
            raise ValueError(f"{len(per_read)} values for {len(self.skill_reads)} reads")
        return [float(v) for v, r in zip(per_read, self.skill_reads, strict=True) if r.attributed]


@cache
def _byte_decoder() -> dict[str, int]:
    # Inverse of the GPT-2 byte-level alphabet: printable bytes map to themselves, the other 68
    # bytes to code points from 256 on, in order.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes, strict=True)}


def _token_bytes(tokenizer: Any, ids: Sequence[int]) -> list[bytes] | None:
    """Each id's bytes for byte-level BPE tokenizers (None when the tokenizer is not byte-level)."""
    decoder = _byte_decoder()
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = {i: t.content for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    out: list[bytes] = []
    for tid, tok in zip(ids, tokenizer.convert_ids_to_tokens(list(ids)), strict=True):
        if tid in special or tid in added:
            out.append(added.get(tid, tok).encode())
            continue
        try:
            out.append(bytes(decoder[ch] for ch in tok))
        except KeyError:
            return None
    return out


def decode_with_offsets(tokenizer: Any, ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """The decoded text of `ids` and each id's [start, end) character span in it.

    A token that ends inside a multi-byte character overlaps that whole character. Tokenizers that
    are not byte-level fall back to prefix decoding (slower, same contract).
    """
    text = tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
    pieces = _token_bytes(tokenizer, ids)
    if pieces is not None and b"".join(pieces).decode("utf-8", errors="replace") == text:
        # byte position -> index of the character holding it
        byte_to_char: list[int] = []
        for ci, ch in enumerate(text):
            byte_to_char.extend([ci] * len(ch.encode("utf-8", errors="surrogatepass")))
        byte_to_char.append(len(text))
        offsets, pos = [], 0
        for piece in pieces:
            start, end = pos, pos + len(piece)
            cs = byte_to_char[start] if start < len(byte_to_char) else len(text)
            ce = byte_to_char[end - 1] + 1 if end > start else cs
            offsets.append((cs, ce))
            pos = end
        if pos == len(byte_to_char) - 1:
            return text, offsets
    offsets, prev = [], ""
    for k in range(1, len(ids) + 1):
        cur = tokenizer.decode(list(ids[:k]), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        common = len(prev) if cur.startswith(prev) else len(_common_prefix(prev, cur))
        offsets.append((min(common, len(cur)), len(cur)))
        prev = cur
    return text, offsets


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _aligned(decoded: str, response: str, specials: Sequence[str]) -> bool:
    if not decoded.startswith(response):
        return False
    rest = decoded[len(response) :]
    while rest:
        for tok in specials:
            if tok and rest.startswith(tok):
                rest = rest[len(tok) :]
                break
        else:
            return False
    return True


def _overlapping(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    return [i for i, (lo, hi) in enumerate(offsets) if lo < end and hi > start]


def normalise_tool_name(name: str) -> str:
    """docs/method.md 4.2: lowercase, and only the part after the last `.` (`functions.Read` -> `read`)."""
    return name.lower().rsplit(".", 1)[-1]


def special_token_strings(tokenizer: Any) -> list[str]:
    """Every token text that `decode(skip_special_tokens=True)` drops (what a sampler's text omits), longest
    first: the named special tokens and every added token marked special. The named list alone depends on
    how the tokenizer was loaded (SmolLM2's GGUF read by transformers 5.17 names <|im_start|> as eos and
    leaves <|im_end|> out of it), the added tokens' flags do not."""
    names = set(getattr(tokenizer, "all_special_tokens", []) or [])
    names |= {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if getattr(t, "special", False)}
    return sorted((n for n in names if n), key=len, reverse=True)


def _trailing_special_tokens(tokenizer: Any, ids: Sequence[int]) -> list[int]:
    """Indices of the maximal run of special tokens that ends the turn (its terminator)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    special |= {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", False)}
    k = len(ids)
    while k > 0 and ids[k - 1] in special:
        k -= 1
    return list(range(k, len(ids)))


def _is_read(name: str, arguments: Mapping[str, Any]) -> bool:
    name = normalise_tool_name(name)
    if name == "read":
        return True
    return name == "exec" and READER_COMMANDS.search(json.dumps(arguments, ensure_ascii=False)) is not None


_SLATE_CATEGORIES: tuple[Category, ...] = ("misleading", "relevant", "irrelevant")


def _category(skill: str, gold: str, slate: Mapping[str, str]) -> Category:
    if skill == gold:
        return "oracle"
    cat = slate.get(skill)
    return next((c for c in _SLATE_CATEGORIES if c == cat), "unadvertised")


def _strings(arguments: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, text) of every string argument, nested ones included."""
    stack: list[tuple[str, Any]] = list(arguments.items())
    while stack:
        key, value = stack.pop()
        if isinstance(value, str):
            yield key, value
        elif isinstance(value, Mapping):
            stack += list(value.items())
        elif isinstance(value, list):
            stack += [(key, v) for v in value]


def named_skills(arguments: Mapping[str, Any]) -> set[str]:
    """Skills a call names as a `/skills/NAME` path: in any string argument as written, and in an exec
    command also after shell unquoting (`cat "/skills/X/SKILL.md"`, `/sk''ills/X/`). Arguments are the
    decoded JSON values, so a newline before the command is a newline, not `\\n`."""
    names: set[str] = set()
    for key, text in _strings(arguments):
        texts = [text]
        if key == "command":
            try:
                texts.append(" ".join(shlex.split(text, posix=True)))
            except ValueError:  # unbalanced quotes: the text as written is all there is
                pass
        for t in texts:
            names |= {m.group(1) for m in NAMED_SKILL.finditer(t)}
    return names


def _name_spans(raw: str, name: str) -> list[tuple[int, int]]:
    """Where the call's raw text writes `name`: as a path after skills/ (a JSON `\\/` too), else anywhere
    as a whole name (a path the shell unquotes, `/sk''ills/NAME`)."""
    word = re.escape(name)
    path = re.compile(r"skills(?:/|\\/)(" + word + r")(?![A-Za-z0-9_.-])")
    found = [m.span(1) for m in path.finditer(raw)]
    if not found:
        found = [m.span() for m in re.finditer(r"(?<![A-Za-z0-9_.-])" + word + r"(?![A-Za-z0-9_.-])", raw)]
    return found


def detect_selection_spans(
    turns: Sequence[AssistantTurn],
    tokenizer: Any,
    *,
    gold_name: str,
    slate: Mapping[str, str],
    opens: Sequence[SkillOpen] | None = None,
    consults: Sequence[SkillOpen] | None = None,
) -> SpanReport:
    """Scan an episode's assistant turns (module docstring).

    `slate` maps each advertised skill name to its category ("oracle", "misleading", "relevant",
    "irrelevant"); `gold_name` is the task's oracle skill. `opens` is what the environment saw
    opened (`Trajectory.skill_opens`), turn and call indices into `turns` and their dispatched calls;
    None judges reads by the call texts alone (records made before opens were observed). `consults`
    is every skill file the environment saw opened or executed (`Trajectory.skill_consults`); None:
    not observed (the reads are all that is known to have been consulted).
    """
    consulted = tuple(ConsultedSkill(name, _category(name, gold_name, slate))
                      for name in dict.fromkeys(o.skill_name for o in consults or ()))
    if opens is None:
        report = _spans_from_call_text(turns, tokenizer, gold_name=gold_name, slate=slate)
        return replace(report, consulted=consulted) if consulted else report
    specials = special_token_strings(tokenizer)
    checked = parse_mismatch = span_mismatch = align_mismatch = 0
    usable: dict[int, Sequence[ToolCall]] = {}
    for turn_index, turn in enumerate(turns):
        if turn.finish != "stop":
            continue
        checked += 1
        calls = parse_tool_calls(turn.response_text).calls
        if [c.key() for c in calls] != [(n, canonical_arguments(a)) for n, a in turn.dispatched]:
            parse_mismatch += 1
            continue
        usable[turn_index] = calls
    decoded: dict[int, list[tuple[int, int]] | None] = {}
    actions: list[SelectionAction] = []
    reads: list[SkillRead] = []
    seen: set[tuple[str, int | None, int | None]] = set()
    per_call: dict[tuple[int, int], int] = {}
    for o in opens:
        key = (o.skill_name, o.turn_index, o.call_index)
        if key in seen and o.turn_index is not None:
            continue  # one read per skill per call, however often it was opened
        seen.add(key)
        category = _category(o.skill_name, gold_name, slate)
        if o.turn_index is None or o.call_index is None:
            reads.append(SkillRead(o.skill_name, category, None))
            continue
        if not (0 <= o.turn_index < len(turns)) or (
            o.turn_index in usable and not 0 <= o.call_index < len(usable[o.turn_index])
        ):
            span_mismatch += 1  # an open recorded for a call that does not exist cannot be judged
            reads.append(SkillRead(o.skill_name, category, None))
            continue
        calls_of_turn = usable.get(o.turn_index)
        if calls_of_turn is None:  # a mismatched turn (counted above): the group is rejected anyway
            reads.append(SkillRead(o.skill_name, category, None))
            continue
        call = calls_of_turn[o.call_index]
        if o.skill_name not in named_skills(call.arguments):
            reads.append(SkillRead(o.skill_name, category, None))
            continue
        turn = turns[o.turn_index]
        if o.turn_index not in decoded:
            text, offsets = decode_with_offsets(tokenizer, turn.token_ids)
            aligned = _aligned(text, turn.response_text, specials)
            align_mismatch += not aligned
            decoded[o.turn_index] = offsets if aligned else None
        located = decoded[o.turn_index]
        if located is None:
            reads.append(SkillRead(o.skill_name, category, None))
            continue
        call_tokens = _overlapping(located, call.start, call.end)
        if call.end == len(turn.response_text.rstrip()):
            call_tokens = sorted(set(call_tokens) | set(_trailing_special_tokens(tokenizer, turn.token_ids)))
        identity = sorted({i for s, e in _name_spans(call.raw(turn.response_text), o.skill_name)
                           for i in _overlapping(located, call.start + s, call.start + e)})
        if not identity or not set(identity) <= set(call_tokens):
            span_mismatch += 1
            reads.append(SkillRead(o.skill_name, category, None))
            continue
        path_index = per_call.get((o.turn_index, o.call_index), 0)
        per_call[(o.turn_index, o.call_index)] = path_index + 1
        reads.append(SkillRead(o.skill_name, category, len(actions)))
        actions.append(SelectionAction(
            turn_index=o.turn_index,
            call_index=o.call_index,
            path_index=path_index,
            tool_name=normalise_tool_name(call.name),
            skill_name=o.skill_name,
            category=category,
            call_token_indices=tuple(turn.token_offset + i for i in call_tokens),
            identity_token_indices=tuple(turn.token_offset + i for i in identity),
        ))
    return SpanReport(tuple(actions), checked, parse_mismatch, span_mismatch, align_mismatch, tuple(reads),
                      consulted)


def _spans_from_call_text(
    turns: Sequence[AssistantTurn],
    tokenizer: Any,
    *,
    gold_name: str,
    slate: Mapping[str, str],
) -> SpanReport:
    """Records without observed opens: reads judged by the call texts (the rule before opens were observed)."""
    specials = special_token_strings(tokenizer)
    actions: list[SelectionAction] = []
    checked = parse_mismatch = span_mismatch = align_mismatch = 0
    for turn_index, turn in enumerate(turns):
        if turn.finish != "stop":
            continue
        checked += 1
        calls = parse_tool_calls(turn.response_text).calls
        parsed_keys = [c.key() for c in calls]
        dispatched_keys = [(n, canonical_arguments(a)) for n, a in turn.dispatched]
        if parsed_keys != dispatched_keys:
            parse_mismatch += 1
            continue
        read_calls = [(i, c) for i, c in enumerate(calls) if _is_read(c.name, c.arguments)]
        if not read_calls:
            continue
        decoded, offsets = decode_with_offsets(tokenizer, turn.token_ids)
        if not _aligned(decoded, turn.response_text, specials):
            align_mismatch += 1
            continue
        terminator = _trailing_special_tokens(tokenizer, turn.token_ids)
        text_end = len(turn.response_text.rstrip())
        for call_index, call in read_calls:
            raw = call.raw(turn.response_text)
            matches = list(SKILL_PATH.finditer(raw))
            if not matches:
                if "/skills/" in json.dumps(call.arguments, ensure_ascii=False):
                    span_mismatch += 1
                continue
            call_tokens = _overlapping(offsets, call.start, call.end)
            if call.end == text_end:
                call_tokens = sorted(set(call_tokens) | set(terminator))
            for path_index, m in enumerate(matches):
                s, e = call.start + m.start(1), call.start + m.end(1)
                identity = _overlapping(offsets, s, e)
                if not identity or not set(identity) <= set(call_tokens):
                    span_mismatch += 1
                    continue
                actions.append(
                    SelectionAction(
                        turn_index=turn_index,
                        call_index=call_index,
                        path_index=path_index,
                        tool_name=normalise_tool_name(call.name),
                        skill_name=m.group(1),
                        category=_category(m.group(1), gold_name, slate),
                        call_token_indices=tuple(turn.token_offset + i for i in call_tokens),
                        identity_token_indices=tuple(turn.token_offset + i for i in identity),
                    )
                )
    return SpanReport(tuple(actions), checked, parse_mismatch, span_mismatch, align_mismatch)


def first_mention_identity(report: SpanReport, turns: Sequence[AssistantTurn], tokenizer: Any) -> SpanReport:
    """The labelled variant identity_first_mention (an ablation, never the method's default): each action's
    identity tokens become the tokens of the FIRST mention of its skill name in its turn, in
    `<skill_reasoning>` or in the call, whichever comes first (the k-th action of a turn naming the same
    skill takes the k-th mention, so no token is written twice). Only the identity moves: reads, call
    tokens and the counters stay. A mention that lies after the action's own call, or that no token
    overlaps, leaves the action's identity as detected. Turns are decoded with offsets exactly as span
    detection does (nothing re-tokenized)."""
    if not report.actions:
        return report
    used: dict[tuple[int, str], int] = {}
    located: dict[int, list[tuple[int, int]]] = {}
    moved: list[SelectionAction] = []
    for action in report.actions:
        turn = turns[action.turn_index]
        if action.turn_index not in located:
            located[action.turn_index] = decode_with_offsets(tokenizer, turn.token_ids)[1]
        offsets = located[action.turn_index]
        word = re.escape(action.skill_name)
        mentions = [m.span() for m in re.finditer(r"(?<![A-Za-z0-9_.-])" + word + r"(?![A-Za-z0-9_.-])",
                                                  turn.response_text)]
        k = used.get((action.turn_index, action.skill_name), 0)
        used[(action.turn_index, action.skill_name)] = k + 1
        call_end = max(action.call_token_indices) - turn.token_offset
        identity: list[int] = []
        if k < len(mentions):
            start, end = mentions[k]
            identity = _overlapping(offsets, start, end)
        if not identity or min(identity) > call_end:
            moved.append(action)
            continue
        moved.append(SelectionAction(
            turn_index=action.turn_index, call_index=action.call_index, path_index=action.path_index,
            tool_name=action.tool_name, skill_name=action.skill_name, category=action.category,
            call_token_indices=action.call_token_indices,
            identity_token_indices=tuple(turn.token_offset + i for i in identity), first_mention=True,
        ))
    return SpanReport(tuple(moved), report.turns_checked, report.parse_dispatch_mismatch, report.span_mismatch,
                      report.alignment_mismatch, report.skill_reads, report.consulted)
