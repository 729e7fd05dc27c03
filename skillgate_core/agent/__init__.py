"""The agent harness: tools, prompt profiles, the episode loop, trajectory records, collect.

The tool-call parser (JSON and Qwen XML forms) lives in skillgate_core.formats.tool_calls, shared by
SFT, rollouts, eval and spans; its names are re-exported here.
- `tool_schemas`, `prompts`: what the model is shown (both digested into evaluation fingerprints).
- `tools`: the nine tools over a sandbox (`ToolBox`), built from `tool_args` (arguments checked
  against the schemas), `tool_results` (results and the observation text), `unified_diff`
  (apply_patch's parser and applier), `shell` (a persistent shell per episode) and `globs`
  (bounded glob matching for find/grep).
- `episode`: lockstep episodes that keep the exact token stream, graded by the task's verifier.
- `trajectory`: `Trajectory` (one graded episode, its token stream and turns) and its span report.
- `policies`: a local transformers policy and the skill-following teacher; `seeded_policy`,
  `openai_policy`: a local model sampled per episode from its own seed (evaluation), and a model
  behind an OpenAI-compatible endpoint (evaluation, the `collect` teacher).
- `collect`: the `collect` stage (teacher trajectories -> parquet with selection spans).
- `selection_scores`: a policy's first read scored teacher-forced (which slate skill it would open
  first, without an episode): the evaluation's selection probe and the trainer's held-in probe.
- `premise_facts`: one episode's premise facts (credit.premise) from a Trajectory or a stored row.
"""

from skillgate_core.formats.tool_calls import MAX_CALLS_PER_TURN, ParsedTurn, ToolCall, parse_tool_calls

__all__ = ["MAX_CALLS_PER_TURN", "ParsedTurn", "ToolCall", "parse_tool_calls"]
