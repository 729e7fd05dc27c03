"""The stage registry: every pipeline stage, what it consumes and produces, and where its code lives.

A stage is a pure function `run(config, inputs, out_dir) -> StageOutput` over paths. `inputs` and the
outputs are keyed by *role* ("base_model", "bench", "trajectories", ...): a recipe wires a stage's
input role to the output of an earlier stage with the same role, or to a path in its [inputs] table.
A stage whose `entrypoint` is None is declared but not built yet: recipes may list it, plans show
it, and running it says so instead of producing anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skillgate_core.base.stage_output import StageOutput
from skillgate_core.base.suggestions import did_you_mean

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["STAGES", "StageOutput", "StageSpec", "UnknownStageError", "get_stage", "stage_names"]


@dataclass(frozen=True)
class StageSpec:
    """One pipeline stage."""

    name: str
    """Stage name as used in recipes, flows and the warehouse (kebab-case)."""
    summary: str
    """One line: what the stage does."""
    inputs: tuple[str, ...]
    """Input roles it needs."""
    outputs: tuple[str, ...]
    """Output roles it produces."""
    config: str | None = None
    """'module:Class' of its frozen config dataclass; None while the stage is not built."""
    entrypoint: str | None = None
    """'module:function' of its pure run function; None while the stage is not built."""
    planned_in: str = ""
    """The plan step that builds it, for the 'not built yet' message."""
    experiment: str | None = None
    """'module:function' `(config, inputs) -> ExperimentRecord` for a stage whose runs belong to an
    experiment (docs/method.md 10): opens or creates the experiment the run will train in, before it
    runs, so the run is recorded as that experiment's from its start. None: no experiment."""
    gathers: tuple[str, ...] = ()
    """Input roles it takes from every producer in the run, gathered into one folder (paper-tables
    compares every evaluation of the run); other roles come from one producer."""

    @property
    def built(self) -> bool:
        return self.entrypoint is not None and self.config is not None

    def config_class(self) -> type[DataclassInstance]:
        if self.config is None:
            raise UnknownStageError(f"stage '{self.name}' is not built yet ({self.planned_in})")
        return _load(self.config)

    def experiment_function(self) -> Callable[..., Any] | None:
        return _load(self.experiment) if self.experiment else None

    def run_function(self) -> Callable[..., StageOutput]:
        if self.entrypoint is None:
            raise UnknownStageError(f"stage '{self.name}' is not built yet ({self.planned_in})")
        return _load(self.entrypoint)


class UnknownStageError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0])


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


# Data, not logic: each stage is one StageSpec declaration.
STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        name="init-model",
        summary="the starting policy: a tiny model built from a config, or SmolLM2-135M-Instruct from its package",
        inputs=(),
        outputs=("base_model",),
        config="skillgate_core.policy.init_model:InitModelConfig",
        entrypoint="skillgate_core.policy.init_model:init_model",
    ),
    StageSpec(
        name="bench-build",
        summary="generate the bundled benchmark suite (4 families, skills, slates, eval70, 147-slate)",
        inputs=(),
        outputs=("bench",),
        config="skillgate_core.benchgen.stage:BenchBuildConfig",
        entrypoint="skillgate_core.benchgen.stage:build_bench",
        planned_in="step 4 of 10, [benchmarks]",
    ),
    StageSpec(
        name="collect",
        summary="teacher trajectories through the real harness and sandboxes",
        inputs=("bench", "base_model"),
        outputs=("trajectories",),
        config="skillgate_core.agent.collect:CollectConfig",
        entrypoint="skillgate_core.agent.collect:collect_trajectories",
    ),
    StageSpec(
        name="sft",
        summary="TRL SFT (+ LoRA merge) on the collected trajectories",
        inputs=("base_model", "trajectories"),
        outputs=("sft_model",),
        config="skillgate_core.sft.trainer:SFTStageConfig",
        entrypoint="skillgate_core.sft.trainer:train_sft",
    ),
    StageSpec(
        name="rl-data-prep",
        summary="deterministic RL parquet: task, frozen slate order, prompt token ids",
        inputs=("bench", "sft_model"),
        outputs=("rl_data",),
        config="skillgate_core.rl.data_prep:RLDataPrepConfig",
        entrypoint="skillgate_core.rl.data_prep:prepare_rl_data",
    ),
    StageSpec(
        name="bc",
        summary="Gold Selector BC baseline: SFT on [system, user, first turn reading the gold skill]",
        inputs=("sft_model", "rl_data"),
        outputs=("policy_export",),
        config="skillgate_core.sft.baselines:BCStageConfig",
        entrypoint="skillgate_core.sft.baselines:train_bc",
    ),
    StageSpec(
        name="dpo",
        summary="SelSkill-style DPO baseline: gold-read turn over misleading-read turns, sigmoid, beta 0.1",
        inputs=("sft_model", "rl_data"),
        outputs=("policy_export",),
        config="skillgate_core.sft.baselines:DPOStageConfig",
        entrypoint="skillgate_core.sft.baselines:train_dpo",
    ),
    StageSpec(
        name="grpo",
        summary="GRPO with the selector-credit loss on Ray Train + DeepSpeed ZeRO-3",
        inputs=("sft_model", "rl_data", "bench"),
        outputs=("policy_export",),
        config="skillgate_core.rl.grpo_config:GRPOConfig",
        entrypoint="skillgate_core.rl.grpo_stage:train_grpo",
        experiment="skillgate_core.rl.grpo_stage:prepare_experiment",
    ),
    StageSpec(
        name="eval70",
        summary="the frozen eval70_v1 protocol (70 held-out tasks x 4 repeats) on a policy export",
        inputs=("policy_export", "bench"),
        outputs=("eval_rows",),
        config="skillgate_core.evaluation.stage:Eval70Config",
        entrypoint="skillgate_core.evaluation.stage:run_eval70",
    ),
    StageSpec(
        name="paper-tables",
        summary="rebuild the paper's tables and figures from raw evaluation rows",
        inputs=("eval_rows",),
        outputs=("report",),
        config="skillgate_core.evaluation.paper_config:PaperConfig",
        entrypoint="skillgate_core.evaluation.paper:build_paper_tables",
        gathers=("eval_rows",),
    ),
)

_BY_NAME = {s.name: s for s in STAGES}


# Alike in shape to rl.profiles' lookup: a table by name, an error that lists the names.
def stage_names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def get_stage(name: str) -> StageSpec:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownStageError(f"unknown stage '{name}'{did_you_mean(name, _BY_NAME)}; "
                                f"known stages: {', '.join(_BY_NAME)}") from None
