"""Write one skill folder: SKILL.md (front matter + body) and its scripts/.

    write_skill(lib, "kestrel-ledger-export", description, body, {"export_records.py": text})

The front matter holds only `name` and `description` (the agentskills fields): nothing in a skill
says whether it is an oracle or a lookalike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

__all__ = ["skill_md_text", "write_skill"]


def skill_md_text(name: str, description: str, body: str) -> str:
    """SKILL.md text; the description is a JSON string, which YAML reads as a double-quoted scalar."""
    return f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n{body}"


def write_skill(root: Path, name: str, description: str, body: str,
                scripts: Mapping[str, str] | None = None) -> Path:
    """Write root/NAME/SKILL.md and root/NAME/scripts/*; return the folder."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(skill_md_text(name, description, body), encoding="utf-8")
    for file_name, text in sorted((scripts or {}).items()):
        path = folder / "scripts" / file_name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return folder
