"""SkillGym-style generation for real skills: fit-check, builder, validity gate, reviewer, repairs.

    from skillgate_core.benchgen.skillgym import ChatClient, SkillGymConfig, generate_from_skill
    client = ChatClient(base_url="http://127.0.0.1:8000/v1", model="deepseek-chat", api_key=key)
    records = generate_from_skill(Path("skills/pdf-merge"), client, Path("out"), SkillGymConfig())

Works with any OpenAI-compatible endpoint. Tested here with a scripted local endpoint only: the
quality of tasks built by a real model is not measured in this repository.
"""

from skillgate_core.benchgen.skillgym.checks import static_problems
from skillgate_core.benchgen.skillgym.client import ChatClient
from skillgate_core.benchgen.skillgym.loop import SkillGymConfig, generate_from_skill, validity_gate
from skillgate_core.benchgen.skillgym.prompts import STRUCTURES
from skillgate_core.benchgen.skillgym.protocol import ReplyError, parse_build, parse_fit, parse_review
from skillgate_core.benchgen.skillgym.records import BuildRecord, CallRecord

__all__ = [
    "STRUCTURES",
    "BuildRecord",
    "CallRecord",
    "ChatClient",
    "ReplyError",
    "SkillGymConfig",
    "generate_from_skill",
    "parse_build",
    "parse_fit",
    "parse_review",
    "static_problems",
    "validity_gate",
]
