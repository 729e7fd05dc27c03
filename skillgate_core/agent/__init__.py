"""The agent harness: tool-call parsing, tools, prompt profiles, the episode loop, trajectory records."""

from skillgate_core.agent.tool_calls import MAX_CALLS_PER_TURN, ParsedTurn, ToolCall, parse_tool_calls

__all__ = ["MAX_CALLS_PER_TURN", "ParsedTurn", "ToolCall", "parse_tool_calls"]
