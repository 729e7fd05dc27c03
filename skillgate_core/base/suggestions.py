"""`did_you_mean`: the close match to name beside an unknown key, stage, recipe or role.

    raise ConfigError(f"unknown key 'sft.{key}'{did_you_mean(key, fields, prefix='sft.')}; valid keys: ...")
    # -> unknown key 'sft.max_step' (did you mean 'sft.max_steps'?); valid keys: ...
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]

CUTOFF = 0.6
"""difflib's similarity ratio a candidate needs (its default): `max_step` finds `max_steps`, `lr` finds
nothing among long names, so an unrelated key is never offered."""


def did_you_mean(word: str, choices: Iterable[str], *, prefix: str = "", form: str = "'{}'") -> str:
    """' (did you mean 'PREFIX+match'?)' for the closest choice, or '' when none is close; `form` is how
    the match is written (a TOML table: "[{}]")."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=CUTOFF)
    return f" (did you mean {form.format(prefix + match[0])}?)" if match else ""
