"""Anchor: TRL GRPOTrainer throughput on a random-init causal LM, offline tokenizer, with a step clock.

anchor_trl.py (the recorded anchor, byte-identical) plus two things: --generation and a wall clock
around every step.

--generation picks TRL's offline generation: plain (transformers generate, the recorded anchor),
continuous (use_transformers_continuous_batching) or static (cache_implementation="static"). Every
step's wall time is recorded (a callback around each optimizer step), so the figures come both ways:
steady (steps after the first) and end to end (all steps, the first with its warm-up)."""
import os, sys, time, json, random, argparse
import torch
from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=896)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--heads", type=int, default=14)
p.add_argument("--kv", type=int, default=2)
p.add_argument("--inter", type=int, default=4864)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--bs", type=int, default=8)
p.add_argument("--gens", type=int, default=8)
p.add_argument("--maxlen", type=int, default=256)
p.add_argument("--out", default="/tmp/trl_out")
p.add_argument("--generation", default="plain", choices=["plain", "continuous", "static"])
a = p.parse_args()

words = ["read", "skill", "exec", "file", "grep", "the", "task", "oracle", "ls", "cat", "json", "tool", "call", "result"]
corpus = [" ".join(random.choice(words) + str(random.randint(0, 999)) for _ in range(40)) for _ in range(3000)]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=a.vocab, special_tokens=["<unk>", "<pad>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
cfg = Qwen2Config(vocab_size=len(hf_tok), hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                  num_key_value_heads=a.kv, intermediate_size=a.inter, max_position_embeddings=4096,
                  pad_token_id=hf_tok.pad_token_id, eos_token_id=hf_tok.eos_token_id, bos_token_id=hf_tok.eos_token_id)
cuda = torch.cuda.is_available()
model = Qwen2ForCausalLM(cfg).to(torch.bfloat16 if cuda else torch.float32)
nparams = sum(p.numel() for p in model.parameters())
print(f"params={nparams/1e6:.1f}M cuda={cuda}", flush=True)
ds = Dataset.from_list([{"prompt": "task " + " ".join(random.choice(words) for _ in range(30))} for _ in range(a.bs * (a.steps + 2))])
def reward(completions, **kw):
    return [float(len(c) % 7) for c in completions]
args = GRPOConfig(output_dir=a.out, per_device_train_batch_size=a.bs, num_generations=a.gens, max_completion_length=a.maxlen,
                  learning_rate=1e-6, logging_steps=1, max_steps=a.steps, bf16=cuda, report_to=[], save_strategy="no",
                  temperature=1.0, beta=0.0,
                  use_transformers_continuous_batching=a.generation == "continuous",
                  cache_implementation="static" if a.generation == "static" else None)


class StepClock(TrainerCallback):
    """Wall time of every optimizer step (generation included: TRL generates inside the step)."""
    def __init__(self):
        self.starts, self.ends = [], []
    def on_step_begin(self, args, state, control, **kw):
        if cuda: torch.cuda.synchronize()
        self.starts.append(time.time())
    def on_step_end(self, args, state, control, **kw):
        if cuda: torch.cuda.synchronize()
        self.ends.append(time.time())


clock = StepClock()
tr = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds, processing_class=hf_tok, callbacks=[clock])
t0 = time.time(); tr.train(); dt = time.time() - t0
hist = [h for h in tr.state.log_history if "completions/mean_length" in h]
step_tokens = [h["completions/mean_length"] * a.bs for h in hist]
toks = sum(step_tokens)
steps_s = [e - b for b, e in zip(clock.starts, clock.ends)]
steady_s, steady_tok = sum(steps_s[1:]), sum(step_tokens[1:len(steps_s)])
print(json.dumps({"anchor": "trl_grpo", "generation": a.generation, "params_M": round(nparams/1e6,1), "steps": a.steps,
                  "wall_s": round(dt,2), "s_per_step": round(dt/a.steps,2), "completion_tokens": toks,
                  "completion_tok_per_s": round(toks/dt,1), "mean_len": [h["completions/mean_length"] for h in hist],
                  "steps_s": [round(x, 3) for x in steps_s], "step_tokens": step_tokens,
                  "steady_s_per_step": round(steady_s / max(1, len(steps_s) - 1), 3) if len(steps_s) > 1 else None,
                  "steady_completion_tok_per_s": round(steady_tok / steady_s, 1) if steady_s else None}), flush=True)
