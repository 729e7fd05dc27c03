"""Skill names: `<codename>-<noun>-<suffix>`, unique across the suite.

Every oracle skill gets a codename unique within its (family, domain) cell; its five lookalikes
share the codename and noun and take the other five of the family's six suffixes. Which suffix
the oracle gets is dealt evenly per (family, split) (balanced_draws), so no suffix marks the oracle.
"""

from __future__ import annotations

import random

__all__ = ["CODENAMES", "cell_codenames", "skill_name"]

CODENAMES: tuple[str, ...] = (
    "kestrel", "osprey", "heron", "wren", "plover", "tern", "merlin", "finch", "egret", "lark", "ibis",
    "swift", "petrel", "gannet", "curlew", "dunlin", "avocet", "bittern", "shrike", "linnet", "siskin",
    "starling", "pipit", "junco", "vireo", "tanager", "oriole", "grebe", "rail", "crake", "skua", "auk",
    "puffin", "fulmar", "shag", "cormorant", "hobby", "harrier", "goshawk", "buzzard", "kite", "condor",
    "alder", "birch", "cedar", "elm", "hazel", "juniper", "larch", "maple", "rowan", "spruce", "willow",
    "yew", "aspen", "linden", "poplar", "sorrel", "tamarack", "hemlock", "cypress", "sequoia", "acacia",
    "banyan", "baobab", "cassia", "catalpa", "ginkgo", "magnolia", "mimosa", "myrtle", "olive", "walnut",
)
"""Codenames of house tools (birds and trees); a cell needs one per oracle skill."""


def cell_codenames(seed: int, family: str, domain: str, count: int) -> list[str]:
    """`count` distinct codenames for one (family, domain) cell, in a seeded order."""
    if count > len(CODENAMES):
        raise ValueError(f"{family}/{domain}: {count} skills requested, at most {len(CODENAMES)} codenames exist")
    names = list(CODENAMES)
    random.Random(f"{seed}:codenames:{family}:{domain}").shuffle(names)
    return names[:count]


def skill_name(codename: str, noun: str, suffix: str) -> str:
    """`kestrel-ledger-export`: at most 64 characters of [a-z0-9-] (the agentskills rule)."""
    name = f"{codename}-{noun}-{suffix}"
    if len(name) > 64:
        raise ValueError(f"skill name {name!r} is longer than 64 characters")
    return name
