"""Which tokenizer a model dir carries: one digest over the files that decide how text becomes ids.

Token ids rendered with one tokenizer are meaningless to another, so data that stores ids (the RL
table, the baselines' rows) records this digest and every consumer checks it against its policy.

    tokenizer_digest(Path("model"))   # sha256 hex over tokenizer.json, tokenizer_config.json, template...
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["TOKENIZER_FILES", "tokenizer_digest"]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "chat_template.json", "vocab.json", "merges.txt", "tokenizer.model")
"""Files of an HF model dir that decide tokenization and the chat template (those present are digested)."""


def tokenizer_digest(model_dir: str | Path) -> str:
    """sha256 over (name, bytes) of each tokenizer file present, in TOKENIZER_FILES order."""
    root = Path(model_dir)
    present = [name for name in TOKENIZER_FILES if (root / name).is_file()]
    if not present:
        raise FileNotFoundError(f"{root}: no tokenizer files ({', '.join(TOKENIZER_FILES[:2])}, ...)")
    h = hashlib.sha256()
    for name in present:
        h.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return h.hexdigest()
