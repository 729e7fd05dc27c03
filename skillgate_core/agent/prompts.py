"""Prompt profiles: the system prompt an episode starts from (docs/method.md 2).

Prompt = [system, user]. System = tool schemas + agent instructions + (when the episode has skills)
the skills section and the `<available_skills>` block in slate order. User = the task instruction,
which never names the skill. A profile is frozen and digested: it is part of the evaluation
protocol's fingerprint.

    messages = build_messages(DEFAULT_PROFILE, instruction, slate)   # slate=None: no-skill episode
    ids = render_prompt_ids(tokenizer, messages)                      # what the policy is conditioned on
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from skillgate_core.agent.tool_schemas import tool_schemas_json
from skillgate_core.base.config import config_digest
from skillgate_core.skills import Slate, render_available_skills

__all__ = ["DEFAULT_PROFILE", "PROMPT_PROFILES", "PromptProfile", "build_messages", "get_prompt_profile",
           "render_prompt_ids"]

_AGENT = """You are an autonomous agent working in a Linux sandbox. Solve the user's task by calling tools.
Call a tool with <tool_call>{"name": TOOL, "arguments": {...}}</tool_call>; you may make up to 5 calls in one turn.
Tool results come back in <tool_response name='TOOL'>...</tool_response>. When the task is done, reply without any tool call."""

_SKILLS = """Skills are folders of instructions for specialised tasks. Before acting, scan the descriptions in <available_skills>.
If exactly one skill applies (or the most specific of several), read its SKILL.md at the exact <location> first.
If none applies, read nothing. Never read more than one skill up front.
You may open your first turn with <skill_reasoning>...</skill_reasoning> saying why you read a skill or none."""


@dataclass(frozen=True)
class PromptProfile:
    """The fixed text around a task."""

    name: str = "openclaw-v1"
    """Profile id, recorded with every trajectory and evaluation."""
    agent_instructions: str = _AGENT
    """How to call tools and when to stop."""
    skills_instructions: str = _SKILLS
    """The skills section (docs/method.md 2), shown only when the episode has a slate."""
    description_chars: int = 300
    """Characters of each skill description in <available_skills>."""

    def digest(self) -> str:
        return config_digest(self)


DEFAULT_PROFILE = PromptProfile()

PROMPT_PROFILES: Mapping[str, PromptProfile] = MappingProxyType({DEFAULT_PROFILE.name: DEFAULT_PROFILE})
"""name -> profile: the prompt profiles a config may name."""


def get_prompt_profile(name: str) -> PromptProfile:
    """The prompt profile called `name`; ValueError listing the known names."""
    try:
        return PROMPT_PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown prompt profile {name!r}; known: {', '.join(PROMPT_PROFILES)}") from None


def build_messages(profile: PromptProfile, instruction: str, slate: Slate | None) -> list[dict[str, str]]:
    """[system, user] for one episode; `slate=None` is the no-skill condition."""
    parts = ["# Tools", tool_schemas_json(), "", profile.agent_instructions]
    if slate is not None:
        parts += ["", "# Skills", profile.skills_instructions,
                  render_available_skills(slate, description_chars=profile.description_chars)]
    return [{"role": "system", "content": "\n".join(parts)}, {"role": "user", "content": instruction}]


def render_prompt_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> list[int]:
    """The prompt's token ids: the policy's own chat template with the generation prompt, tokenized once.

    Every consumer of a prompt (episodes, RL data prep, the supervised baselines) calls this, so the ids a
    policy is trained on are the ids it is sampled from."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{getattr(tokenizer, 'name_or_path', 'tokenizer')}: has no chat template; a policy's "
                         "tokenizer must carry the template its prompts are rendered with")
    return list(tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True,
                                              return_dict=False))
