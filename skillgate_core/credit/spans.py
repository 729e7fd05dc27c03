"""Selection-span detection (METHOD.md 4): which sampled tokens chose which skill.

For each assistant turn that ended normally, the shared parser locates the tool calls with their
character spans; a call that reads (`read`, or `exec` running a reader such as cat/sed/python) and
names `/skills/NAME/SKILL.md` is one *action* per path. The turn's sampled token ids are decoded
with character offsets, and

    call tokens     = tokens overlapping the whole <tool_call>...</tool_call>, plus the turn's
                      trailing special tokens (<|im_end|>) when the call is the last thing in the
                      right-stripped turn text: a read that ends the turn owns its terminator
    identity tokens = tokens overlapping only the NAME capture

Tool names are normalised before the read test (lowercase, the part after the last `.`), so a model
writing `functions.Read` reads like one writing `read`.

Everything fails closed: a turn whose parsed calls differ from what the environment dispatched, a
skill path that cannot be located, or ids that do not decode back to the response text is counted,
and any nonzero counter rejects the whole group downstream (`credit.groups.validate_group`).
Nothing is ever re-tokenized: offsets come from the ids the sampler produced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from skillgate_core.credit.actions import Category, SelectionAction
from skillgate_core.tool_calls import canonical_arguments, parse_tool_calls

__all__ = [
    "READER_COMMANDS",
    "normalise_tool_name",
    "SKILL_PATH",
    "AssistantTurn",
    "SpanReport",
    "decode_with_offsets",
    "detect_selection_spans",
]

READER_COMMANDS = re.compile(r"\b(cat|sed|awk|grep|head|tail|less|more|python3?|perl|ruby|node)\b", re.IGNORECASE)
"""An exec call whose JSON arguments match this reads files."""
SKILL_PATH = re.compile(r"/skills/([A-Za-z0-9_.-]+)/(?:SKILL|README)\.md", re.IGNORECASE)
"""Each match in a read call's raw text is one action; group 1 is the skill's identity."""

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
    """METHOD.md 4.6: the episode's actions and its three mismatch counters."""

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

    @property
    def clean(self) -> bool:
        return not (self.parse_dispatch_mismatch or self.span_mismatch or self.alignment_mismatch)

    def reads(self) -> list[str]:
        """The categories of the actions, in order: the input of `credit.selector_advantages`."""
        return [a.category for a in self.actions]


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
    """METHOD.md 4.2: lowercase, and only the part after the last `.` (`functions.Read` -> `read`)."""
    return name.lower().rsplit(".", 1)[-1]


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


def detect_selection_spans(
    turns: Sequence[AssistantTurn],
    tokenizer: Any,
    *,
    gold_name: str,
    slate: Mapping[str, str],
) -> SpanReport:
    """Scan an episode's assistant turns (METHOD.md 4.1-4.6).

    `slate` maps each advertised skill name to its category ("oracle", "misleading", "relevant",
    "irrelevant"); `gold_name` is the task's oracle skill.
    """
    specials = sorted(getattr(tokenizer, "all_special_tokens", []) or [], key=len, reverse=True)
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
