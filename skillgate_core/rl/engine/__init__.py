"""The trainer's engine room: the machinery GRPO runs on, none of the method.

- `deepspeed_engine`: the DeepSpeed ZeRO policy engine, the frozen reference, the colocated replica
  (`build_engine`, `build_reference`, `load_replica`, `refresh_replica`, `backward`, `optimizer_step`).
- `zero_choice`: which ZeRO stage "auto" picks (pure: parameters, world, free memory, dtype).
- `checkpoint_load`: a resume checkpoint loaded without running code that came with it.
- `flat_grad_norm`: DeepSpeed's bf16 gradient norm and clipping over each group's flat buffer.
- `varlen_attention`: packed rows through PyTorch's varlen flash kernel (no flash-attn package).
- `packing`, `logprobs`: samples -> one-row micro-batches; their float32 per-token log-probs.
- `collectives`: global sums, maxima and gathers across ranks (valid with no process group).
- `launch`: N Ray Train workers, or this process, running one per-worker function.
"""
