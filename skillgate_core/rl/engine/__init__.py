"""The trainer's engine room: the machinery GRPO runs on, none of the method.

- `deepspeed_engine`: the DeepSpeed ZeRO policy engine, the frozen reference, the colocated replica
  (`build_engine`, `build_reference`, `load_replica`, `refresh_replica`, `backward`, `optimizer_step`).
- `zero_choice`: which ZeRO stage "auto" picks (pure: parameters, world, free memory, dtype).
- `lora_adapters`: LoRA adapters on the policy (`lora_rank > 0`) and the merged weights copied out of it.
- `checkpoint_load`: a resume checkpoint loaded without running code that came with it.
- `flat_grad_norm`: DeepSpeed's bf16 gradient norm and clipping over each group's flat buffer.
- `varlen_attention`: packed rows through PyTorch's varlen flash kernel (no flash-attn package).
- `packing`, `logprobs`: samples -> one-row micro-batches; their float32 per-token log-probs.
- `collectives`: global sums, maxima and gathers across ranks (valid with no process group).
- `launch`: N Ray Train workers, or this process, running one per-worker function.

Every public name below (each module's `__all__`) is importable from here:

    from skillgate_core.rl.engine import EngineConfig, build_engine, token_logprobs

A name is imported from its module on first use, not with this package: most modules need torch,
and the CLI's config checks reach `zero_choice` (through `rl.grpo_config`) without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Names, not logic, below: the room's public surface, module by module, for the reader and for mypy
# (at run time `__getattr__` finds them; F401: nothing here uses them). tests/rl/test_engine_face.py
# checks the list against each module's __all__.
if TYPE_CHECKING:
    from skillgate_core.rl.engine.checkpoint_load import (  # noqa: F401
        UnsafeCheckpoint,
        check_checkpoint_files,
        load_engine_checkpoint,
        safe_globals,
        save_engine_checkpoint,
    )
    from skillgate_core.rl.engine.collectives import (  # noqa: F401
        all_gather_objects,
        all_reduce_max,
        all_reduce_sum,
        barrier,
        rank,
        world_size,
    )
    from skillgate_core.rl.engine.deepspeed_engine import (  # noqa: F401
        EngineConfig,
        StepStats,
        backward,
        build_engine,
        build_reference,
        compute_dtype,
        deepspeed_config,
        gathered_state_dict,
        iter_gathered_parameters,
        load_replica,
        optimizer_step,
        parameter_count,
        refresh_replica,
        resolve_zero,
    )
    from skillgate_core.rl.engine.flat_grad_norm import install_flat_grad_norm  # noqa: F401
    from skillgate_core.rl.engine.launch import (  # noqa: F401
        LaunchConfig,
        LaunchResult,
        WorkerContext,
        WorkerFn,
        init_ray,
        launch_ray,
        run_in_process,
        unique_run_name,
        worker_env,
    )
    from skillgate_core.rl.engine.logprobs import (  # noqa: F401
        attention_inputs,
        has_active_dropout,
        model_device,
        packs_varlen,
        token_logprobs,
    )
    from skillgate_core.rl.engine.lora_adapters import (  # noqa: F401
        LORA_TARGETS,
        effective_alpha,
        is_lora,
        merged_parameters,
        plain_name,
        wrap_with_lora,
    )
    from skillgate_core.rl.engine.packing import (  # noqa: F401
        MicroBatch,
        PackingConfig,
        Sample,
        TrainSample,
        block_causal_mask,
        empty_micro_batch,
        flash_attention_kwargs,
        pack_samples,
        pad_micro_batches,
        unpack,
    )
    from skillgate_core.rl.engine.varlen_attention import (  # noqa: F401
        TORCH_VARLEN,
        register,
        self_check,
        torch_varlen_available,
        varlen_attention_forward,
    )
    from skillgate_core.rl.engine.zero_choice import (  # noqa: F401
        FUSED_ADAM_WHY,
        LORA_STAGE3_REFUSED,
        STAGE2_BUCKET,
        STATE_BYTES,
        STATE_FRACTION,
        StateBytes,
        ZeroChoice,
        ZeroStage,
        choose_zero,
        explicit_zero,
        lora_zero,
        resumed_zero,
    )

MODULES = ("zero_choice", "deepspeed_engine", "lora_adapters", "checkpoint_load", "flat_grad_norm", "varlen_attention",
           "packing", "logprobs", "collectives", "launch")
"""The room's modules; their `__all__` names are this package's public names. zero_choice first: a
name of it is found without importing torch."""


def __getattr__(name: str) -> object:
    """A public name of the room (or one of its modules), imported from its module on first use."""
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    for module_name in MODULES:
        module = importlib.import_module(f"{__name__}.{module_name}")
        if name in module.__all__:
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (public names: the __all__ of {MODULES})")
