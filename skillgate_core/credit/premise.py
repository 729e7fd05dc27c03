"""The premise checks: does a set of episodes have what the method's claim needs? (docs/method.md 8b)

The claim is that an outcome reward spread over a long trajectory reaches the few tokens that choose a
skill too weakly to teach them, and that token-local selector credit does. That can only show on
episodes where (P1) the outcome is not already the selection: many oracle-reading episodes resolve
without a clean read or fail with one, and (P2) the choosing tokens are a small share of what the
policy generated. Both are measured on the episodes themselves, never assumed from the bench.

    facts = [premise_episode(reads, names, resolved=..., turns=..., sampled_tokens=..., ...), ...]
    numbers = summarize_premise(facts)        # flat, JSON-able: counts, shares, their denominators
    tally = premise_tally(facts)              # summable counts (GRPO adds them over groups and ranks)
    premise_numbers(tally) == numbers

Per episode (`PremiseEpisode`, built from any record by `premise_episode`):

- P1, outcome vs selection: among the episodes that read the oracle's SKILL.md at all, the share
  whose outcome differs from a clean oracle read: resolved XOR clean, clean = the distinct skills
  read are exactly {oracle} (the callers fold in consultation: no other skill's files opened or run,
  docs/reads.md). Its two parts are the clean reads
  that failed and the resolved episodes without a clean read; the oracle readers that failed (clean
  or not) are given too.
- P2, dilution: shares of the SAMPLED tokens (loss mask 1) that are skill-name tokens (the identity
  tokens of the attributed read actions), read-call tokens (the whole calls of those actions; the
  name tokens lie inside them) and `<skill_reasoning>` tokens; sampled tokens and turns per episode.
  Shares pool the tokens of every measured episode (a ratio of sums, like the trainer's
  selection_token_share), so a long episode weighs what it generated.
- Reads: the multi-read rate (>= 2 distinct skills read), the recovery rate (among episodes whose
  first read is not the oracle, the share that later read it; an episode that reads nothing has no
  first read) and the success rate of those recoveries.

Aborted episodes (infrastructure failures, docs/method.md 2) are counted apart and left out of every
number: they say nothing about the policy or the bench. Every share is None on an empty denominator,
and each share's denominator is a count beside it (PREMISE_DENOMINATORS).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from skillgate_core.credit.spans import AssistantTurn, SpanReport, decode_with_offsets

__all__ = [
    "PREMISE_DENOMINATORS",
    "PREMISE_PREFIX",
    "REASONING_SPAN",
    "PremiseEpisode",
    "premise_episode",
    "premise_numbers",
    "premise_tally",
    "prefixed",
    "reasoning_token_indices",
    "summarize_premise",
    "token_counts",
]

PREMISE_PREFIX = "premise/"
"""Prefix of the premise numbers where they sit among other metrics (GRPO's metrics.jsonl, stage metrics)."""
REASONING_SPAN = re.compile(r"<skill_reasoning>.*?(?:</skill_reasoning>|\Z)", re.DOTALL)
"""A `<skill_reasoning>` span, tags included; an unclosed one (a turn cut inside it) runs to the turn's end."""

PREMISE_DENOMINATORS: dict[str, str] = {
    "p1_disagreement_share": "oracle_read_episodes",
    "p1_clean_failed_share": "oracle_read_episodes",
    "p1_unclean_resolved_share": "oracle_read_episodes",
    "p1_oracle_read_failed_share": "oracle_read_episodes",
    "name_token_share": "sampled_tokens",
    "call_token_share": "sampled_tokens",
    "reasoning_token_share": "sampled_tokens",
    "sampled_tokens_mean": "token_episodes",
    "turns_mean": "episodes",
    "multi_read_rate": "episodes",
    "recovery_rate": "recovery_candidates",
    "recovery_success_rate": "recovered",
}
"""Each share or mean -> the count (a key of the same numbers) it is taken over."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class PremiseEpisode:
    """What the premise checks need of one episode (built by `premise_episode`)."""

    oracle_read: bool
    """The episode read the oracle's SKILL.md at least once."""
    clean: bool
    """A clean oracle read: the distinct skills read are exactly {oracle} (or the caller's stricter rule)."""
    resolved: bool
    """Its score is >= 1 (docs/method.md 3)."""
    first_read: str | None
    """Category of the first skill read (oracle, misleading, ...), None when nothing was read."""
    distinct_reads: int
    """Distinct skills read (by name)."""
    turns: int
    """Assistant turns."""
    sampled_tokens: int | None = None
    """Tokens the policy generated (loss mask 1); None: not recorded."""
    name_tokens: int | None = None
    """Sampled tokens that are skill-name (identity) tokens of attributed read actions; None: not measured."""
    call_tokens: int | None = None
    """Sampled tokens of those actions' whole read calls (the name tokens included); None: not measured."""
    reasoning_tokens: int | None = None
    """Sampled tokens overlapping a `<skill_reasoning>` span; None: not measured."""
    aborted: bool = False
    """An infrastructure failure: counted apart, in no number."""

    def as_record(self) -> dict[str, Any]:
        """Plain JSON-able form (a trajectories row's `premise` column)."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PremiseEpisode:
        """Inverse of `as_record`."""
        def count(key: str) -> int | None:
            value = record.get(key)
            return None if value is None else int(value)

        return cls(oracle_read=bool(record["oracle_read"]), clean=bool(record["clean"]),
                   resolved=bool(record["resolved"]), first_read=record.get("first_read"),
                   distinct_reads=int(record["distinct_reads"]), turns=int(record["turns"]),
                   sampled_tokens=count("sampled_tokens"), name_tokens=count("name_tokens"),
                   call_tokens=count("call_tokens"), reasoning_tokens=count("reasoning_tokens"),
                   aborted=bool(record.get("aborted", False)))

    @property
    def tokens_measured(self) -> bool:
        """Whether the P2 token counts were measured (all four, or none)."""
        return None not in (self.sampled_tokens, self.name_tokens, self.call_tokens, self.reasoning_tokens)


def premise_episode(reads: Sequence[str], read_names: Sequence[str], *, resolved: bool, turns: int,
                    sampled_tokens: int | None = None, name_tokens: int | None = None,
                    call_tokens: int | None = None, reasoning_tokens: int | None = None, aborted: bool = False,
                    clean: bool | None = None) -> PremiseEpisode:
    """One episode's facts from its reads in order (`reads`: categories, `read_names`: the skills, aligned).

    clean: None takes the reads' part of the clean-oracle rule (the distinct names read are exactly the
    oracle's, docs/method.md 8); a caller that knows more (no other skill's files consulted either:
    agent.premise_facts, evaluation.metrics.Trial) passes its own verdict, which must not call an episode
    clean that never read the oracle."""
    if len(reads) != len(read_names):
        raise ValueError(f"{len(reads)} read categories but {len(read_names)} read names: they must be aligned")
    oracle_names = {n for c, n in zip(reads, read_names, strict=True) if c == "oracle"}
    distinct = set(read_names)
    rule = bool(oracle_names) and distinct == oracle_names and len(distinct) == 1
    if clean and not oracle_names:
        raise ValueError("clean=True for an episode that read no oracle")
    return PremiseEpisode(oracle_read=bool(oracle_names), clean=rule if clean is None else bool(clean),
                          resolved=bool(resolved), first_read=reads[0] if reads else None,
                          distinct_reads=len(distinct), turns=int(turns), sampled_tokens=sampled_tokens,
                          name_tokens=name_tokens, call_tokens=call_tokens, reasoning_tokens=reasoning_tokens,
                          aborted=bool(aborted))


def reasoning_token_indices(turn: AssistantTurn, tokenizer: Any) -> list[int]:
    """Offsets (into the episode's response tokens) of this turn's tokens that overlap a `<skill_reasoning>`
    span. The spans are found in the text the turn's sampled ids decode to, mapped back to the ids with
    `decode_with_offsets`: nothing is re-tokenized, and a token overlapping a span by one character counts."""
    if "<skill_reasoning>" not in turn.response_text:
        return []  # the common case spares the decode
    text, offsets = decode_with_offsets(tokenizer, turn.token_ids)
    spans = [m.span() for m in REASONING_SPAN.finditer(text)]
    return [turn.token_offset + i for i, (lo, hi) in enumerate(offsets)
            if any(lo < end and hi > start for start, end in spans)]


def token_counts(report: SpanReport, turns: Sequence[AssistantTurn], loss_mask: Sequence[int],
                 tokenizer: Any) -> tuple[int, int, int, int]:
    """(sampled, name, call, reasoning) token counts of one episode: each a count of DISTINCT sampled
    (loss mask 1) tokens, so a call that names two skills counts its tokens once."""
    sampled = {i for i, m in enumerate(loss_mask) if m}
    names = {i for a in report.actions for i in a.identity_token_indices} & sampled
    calls = {i for a in report.actions for i in a.call_token_indices} & sampled
    reasoning = {i for t in turns for i in reasoning_token_indices(t, tokenizer)} & sampled
    return len(sampled), len(names), len(calls), len(reasoning)


_TALLY_KEYS = ("episodes", "aborted", "oracle_read", "p1_disagreement", "p1_clean_failed", "p1_unclean_resolved",
               "p1_oracle_read_failed", "multi_read", "recovery_candidates", "recovered", "recovered_resolved",
               "turns", "token_episodes", "sampled_tokens", "name_tokens", "call_tokens", "reasoning_tokens")


def premise_tally(episodes: Iterable[PremiseEpisode]) -> dict[str, int]:
    """Counts that add: two tallies summed key by key are the tally of both sets of episodes."""
    t: Counter[str] = Counter(dict.fromkeys(_TALLY_KEYS, 0))
    for e in episodes:
        if e.aborted:
            t["aborted"] += 1
            continue
        t["episodes"] += 1
        t["turns"] += e.turns
        t["multi_read"] += e.distinct_reads >= 2
        if e.oracle_read:
            t["oracle_read"] += 1
            t["p1_disagreement"] += e.resolved != e.clean
            t["p1_clean_failed"] += e.clean and not e.resolved
            t["p1_unclean_resolved"] += e.resolved and not e.clean
            t["p1_oracle_read_failed"] += not e.resolved
        if e.first_read is not None and e.first_read != "oracle":
            t["recovery_candidates"] += 1
            if e.oracle_read:
                t["recovered"] += 1
                t["recovered_resolved"] += e.resolved
        if e.tokens_measured:
            t["token_episodes"] += 1
            t["sampled_tokens"] += e.sampled_tokens or 0
            t["name_tokens"] += e.name_tokens or 0
            t["call_tokens"] += e.call_tokens or 0
            t["reasoning_tokens"] += e.reasoning_tokens or 0
    return dict(t)


def _share(num: float, den: float) -> float | None:
    return num / den if den else None


def premise_numbers(tally: Mapping[str, float]) -> dict[str, Any]:
    """The premise numbers of a (summed) tally: flat, JSON-able, each share with its count beside it."""
    t = {k: int(tally.get(k, 0)) for k in _TALLY_KEYS}
    readers = t["oracle_read"]
    out: dict[str, Any] = {"episodes": t["episodes"], "episodes_aborted": t["aborted"], "oracle_read_episodes": readers}
    for part in ("p1_disagreement", "p1_clean_failed", "p1_unclean_resolved", "p1_oracle_read_failed"):
        out[part] = t[part]
        out[f"{part}_share"] = _share(t[part], readers)
    sampled = t["sampled_tokens"]
    out.update(token_episodes=t["token_episodes"], sampled_tokens=sampled, name_tokens=t["name_tokens"],
               call_tokens=t["call_tokens"], reasoning_tokens=t["reasoning_tokens"],
               name_token_share=_share(t["name_tokens"], sampled), call_token_share=_share(t["call_tokens"], sampled),
               reasoning_token_share=_share(t["reasoning_tokens"], sampled),
               sampled_tokens_mean=_share(sampled, t["token_episodes"]), turns_mean=_share(t["turns"], t["episodes"]),
               multi_read_episodes=t["multi_read"], multi_read_rate=_share(t["multi_read"], t["episodes"]),
               recovery_candidates=t["recovery_candidates"], recovered=t["recovered"],
               recovery_rate=_share(t["recovered"], t["recovery_candidates"]),
               recovered_resolved=t["recovered_resolved"],
               recovery_success_rate=_share(t["recovered_resolved"], t["recovered"]))
    return out


def summarize_premise(episodes: Iterable[PremiseEpisode]) -> dict[str, Any]:
    """`premise_numbers` of these episodes (module docstring)."""
    return premise_numbers(premise_tally(episodes))


def prefixed(numbers: Mapping[str, Any], prefix: str = PREMISE_PREFIX) -> dict[str, Any]:
    """The numbers under `prefix` (`premise/p1_disagreement_share`), for a flat metrics row."""
    return {f"{prefix}{k}": v for k, v in numbers.items()}
