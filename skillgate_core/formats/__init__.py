"""File and text formats shared by several layers, with their one parser each.

- `slate_manifest`: a task's skills.json (which skills a task offers, which one it needs).
- `tool_calls`: the tool-call syntax in model text (JSON and Qwen XML forms), shared by SFT,
  rollouts, evaluation and the credit spans.
"""
