"""More copies of one SFT trajectory under fresh skill names, renamed in its token ids.

Collect-time aliasing (skills.aliases) gives each episode one set of fresh names. A 24.7M policy
SFT-ed for 900 steps on 768 episodes, half of them aliased, learned the *shape* of a pseudo-word but
not to copy the slate's: 234 of its 280 eval70_v1 trials read a name that existed nowhere, none the
oracle (H200, 2026-12-01, commit 6d9a5b6, benchmarks/results/gpu/LOG.md section 4). Seen ~10 times
under one name set, an episode's names can be memorised; under a new set each time, only copying them
from the slate lowers the loss.

The renaming works on the trajectory's token ids, so nothing is re-rendered and the loss mask stays
the teacher's. It is exact for the byte-level BPE tokenizers whose pre-tokenizer splits letter runs
(GPT-2's regex, which init-model's tokenizer uses): a skill name such as `potu-archive-assign` is the
pre-tokens `potu` `-` `archive` `-` `assign` (or ` potu` ... after a space), each encoded on its own,
so its ids are the same wherever it stands, and the renamed copy equals what tokenizing the renamed
text would give. An occurrence counts only at pre-token boundaries (no letter or digit glued on
either side, no `-` after it), longest name first, as skills.aliases rewrites files. Each occurrence
is spliced once, so nothing renamed is renamed again.

    copies = renamed_copies(prompt_ids, response_ids, loss_mask, slate_names, tokenizer, 4, rng)
    -> [(prompt_ids, response_ids, loss_mask), ...]  # 4 copies, each under its own fresh names
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from skillgate_core.skills.aliases import alias_names

__all__ = ["name_occurrences", "renamed_copies"]

Occurrence = tuple[int, int, int, bool]
"""(start, end, index of the name in the slate, preceded by a space) in one token stream."""


def _variants(tokenizer: Any, names: Sequence[str]) -> list[tuple[list[int], int, bool]]:
    """(ids, name index, spaced) for each name bare and after a space, longest first."""
    out = []
    for i, name in enumerate(names):
        for spaced in (False, True):
            ids = tokenizer.encode((" " if spaced else "") + name, add_special_tokens=False)
            if ids:
                out.append((list(ids), i, spaced))
    return sorted(out, key=lambda v: -len(v[0]))


def _glued(text: str, at_end: bool) -> bool:
    """Whether a neighbour token's text would have merged with a name's pre-tokens."""
    if not text:
        return False
    ch = text[-1] if at_end else text[0]
    return ch.isalnum() or (not at_end and ch in "-_")


def name_occurrences(ids: Sequence[int], names: Sequence[str], tokenizer: Any) -> list[Occurrence]:
    """Where each slate name stands in `ids`, as whole pre-tokens; non-overlapping, in order."""
    by_first: dict[int, list[tuple[list[int], int, bool]]] = {}
    for variant in _variants(tokenizer, names):
        by_first.setdefault(variant[0][0], []).append(variant)
    text_of: dict[int, str] = {}

    def text(tok: int) -> str:
        if tok not in text_of:
            text_of[tok] = tokenizer.decode([tok])
        return text_of[tok]

    found: list[Occurrence] = []
    i, n = 0, len(ids)
    while i < n:
        hit = None
        for pattern, index, spaced in by_first.get(ids[i], ()):
            end = i + len(pattern)
            if list(ids[i:end]) != pattern:
                continue
            if not spaced and i > 0 and _glued(text(ids[i - 1]), at_end=True):
                continue
            if end < n and _glued(text(ids[end]), at_end=False):
                continue
            hit = (i, end, index, spaced)
            break
        if hit:
            found.append(hit)
            i = hit[1]
        else:
            i += 1
    return found


def _splice(values: Sequence[int], found: list[Occurrence], replacements: list[list[int]]) -> list[int]:
    """`values` with each occurrence's span replaced by its replacement, in order."""
    out: list[int] = []
    last = 0
    for (start, end, _, _), replacement in zip(found, replacements, strict=True):
        out.extend(values[last:start])
        out.extend(replacement)
        last = end
    out.extend(values[last:])
    return out


def renamed_copies(prompt_ids: Sequence[int], response_ids: Sequence[int], loss_mask: Sequence[int],
                   slate_names: Sequence[str], tokenizer: Any, copies: int,
                   rng: random.Random, *,
                   shuffle_suffixes: bool = True) -> list[tuple[list[int], list[int], list[int]]]:
    """`copies` versions of one trajectory, each with every slate name's first part replaced by a
    fresh pseudo-word (skills.aliases.alias_names; never one of the trajectory's own first parts) and,
    with `shuffle_suffixes`, each lookalike group's suffixes permuted."""
    if len(response_ids) != len(loss_mask):
        raise ValueError(f"response_ids ({len(response_ids)}) and loss_mask ({len(loss_mask)}) differ in length")
    names = list(slate_names)
    if not names or copies <= 0:
        return []
    in_prompt = name_occurrences(prompt_ids, names, tokenizer)
    in_response = name_occurrences(response_ids, names, tokenizer)
    out = []
    for _ in range(copies):
        mapping = alias_names(names, rng, shuffle_suffixes=shuffle_suffixes)
        new_ids = {(i, spaced): list(tokenizer.encode((" " if spaced else "") + mapping[name], add_special_tokens=False))
                   for i, name in enumerate(names) for spaced in (False, True)}
        renamed_prompt = [new_ids[(index, spaced)] for _, _, index, spaced in in_prompt]
        renamed_response = [new_ids[(index, spaced)] for _, _, index, spaced in in_response]
        # a name inside one message has one mask value; if a boundary ever split it, train on none of it
        masks = [[min(loss_mask[start:end])] * len(new) for (start, end, _, _), new in zip(in_response, renamed_response,
                                                                                           strict=True)]
        out.append((_splice(prompt_ids, in_prompt, renamed_prompt), _splice(response_ids, in_response, renamed_response),
                    _splice(loss_mask, in_response, masks)))
    return out
