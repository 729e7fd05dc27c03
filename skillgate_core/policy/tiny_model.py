"""The embedded default policy: a small Qwen2-architecture model built from a config, no download.

`architecture="llama"` builds the same tiny model in the shape of SmolLM2 (no attention bias, query
heads grouped over fewer KV heads), so fast tests run the pretrained policy's code path on CPU.

It is saved as an ordinary Hugging Face model directory (config.json, model.safetensors, tokenizer
files with a ChatML chat template), so everything downstream loads it exactly the way it would load
Qwen3.5-9B: `AutoModelForCausalLM.from_pretrained(path)`. The tokenizer is a byte-level BPE trained
offline on the bundled corpus (`corpus.py`): byte-level so that any text round-trips and token
offsets map back onto characters (selection-span detection needs both).

Run it alone:  skillgate run demo --execute  (the `init-model` stage), or from Python:
    build_tiny_model(TinyModelConfig(), {}, Path("out"))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveInt, Range, check_ranges
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.policy.corpus import build_corpus

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "TinyModelConfig", "build_tiny_model", "train_tokenizer"]

# ChatML, as Qwen uses. Generation prompt = "<|im_start|>assistant\n"; a turn ends with <|im_end|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Only the chat-structure markers are special: tool-call tags stay ordinary text, so the model
# writes them token by token and span detection sees the same characters the parser sees.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the embedded-default policy and its tokenizer."""

    vocab_size: Annotated[int, Range(ge=512)] = 2048
    """BPE vocabulary size (special tokens included; at least 256 byte symbols + merges + specials)."""
    hidden_size: PositiveInt = 64
    """Model width."""
    intermediate_size: PositiveInt = 192
    """MLP width."""
    num_hidden_layers: PositiveInt = 2
    """Decoder layers."""
    num_attention_heads: PositiveInt = 4
    """Query heads."""
    num_key_value_heads: PositiveInt = 2
    """Key/value heads (grouped-query attention, as in Qwen2)."""
    max_position_embeddings: PositiveInt = 8192
    """Longest sequence the model accepts."""
    tie_word_embeddings: bool = True
    """Share input and output embeddings (as small Qwen2 models do)."""
    corpus_lines: PositiveInt = 4000
    """Lines of generated text the tokenizer is trained on."""
    seed: NonNegativeInt = 0
    """Seed for the corpus and for the weight initialisation."""
    architecture: Literal["qwen2", "llama"] = "qwen2"
    """Qwen2 (attention bias on q/k/v) or Llama (none; SmolLM2's architecture)."""

    def __post_init__(self) -> None:
        check_ranges(self)  # first: the divisibility checks below would divide by a zero head count
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")


def train_tokenizer(config: TinyModelConfig, lines: list[str]):
    """Byte-level BPE trained on `lines`, wrapped as a PreTrainedTokenizerFast with the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=config.max_position_embeddings,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(config: TinyModelConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Write a randomly initialised tiny model + tokenizer to out_dir/model (init-model's source `tiny`)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    lines = build_corpus(config.corpus_lines, config.seed)
    tokenizer = train_tokenizer(config, lines)
    config_class: Any = LlamaConfig if config.architecture == "llama" else Qwen2Config
    model_class: Any = LlamaForCausalLM if config.architecture == "llama" else Qwen2ForCausalLM
    model_config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    )
    torch.manual_seed(config.seed)
    model = model_class(model_config)
    model.generation_config.eos_token_id = model_config.eos_token_id
    model.generation_config.pad_token_id = model_config.pad_token_id
    target = out_dir / "model"
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    params = sum(p.numel() for p in model.parameters())
    return StageOutput(
        outputs={"base_model": target},
        metrics={"parameters": params, "vocab_size": len(tokenizer), "corpus_lines": len(lines),
                 "architecture": type(model).__name__},
    )
