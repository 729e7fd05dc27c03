"""A protocol's context against the model's: said before the first trial, for a local model and for an
endpoint evaluated with --tokenizer (the tokenizer's folder says what the model was trained to).

    limit = model_context_limit(Path("path/to/model"))       # 8192 for SmolLM2-135M-Instruct
    line = context_warning(protocol, limit, "the model at path/to/model")   # '' when it fits

Past its trained positions a model's attention runs out of distribution: trials that run that long
would measure that, not the policy. The limit is config.json's max_position_embeddings, else
tokenizer_config.json's model_max_length (a tokenizer-only folder); neither there, it is unknown.
"""

from __future__ import annotations

import json
from pathlib import Path

from skillgate_core.evaluation.protocol import EvalProtocol

__all__ = ["context_warning", "model_context_limit"]

# transformers writes int(1e30) as model_max_length when a tokenizer has no limit: not a limit
_NO_LIMIT = 10**9


def _read_int(path: Path, key: str) -> int | None:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None  # unreadable or not a JSON object: the limit is unknown, the warning is best effort
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < _NO_LIMIT else None


def model_context_limit(folder: Path) -> int | None:
    """The positions the model of `folder` (a model or a tokenizer folder) was trained to, or None."""
    folder = Path(folder).expanduser()
    return (_read_int(folder / "config.json", "max_position_embeddings")
            or _read_int(folder / "tokenizer_config.json", "model_max_length"))


def context_warning(protocol: EvalProtocol, limit: int | None, what: str) -> str:
    """One line when the protocol allows more context than `what` (the model, in words) was trained to; ''
    when it fits or the limit is unknown."""
    if limit is None or protocol.context_size <= limit:
        return ""
    return (f"protocol {protocol.protocol_id()} allows {protocol.context_size:,} context tokens, {what} was trained "
            f"to {limit:,} positions: episodes may run past them and measure that (for such a model: a protocol "
            f"with context_size <= {limit:,}, e.g. eval70_v1_ctx8k)")
