"""The `paper-tables` stage's Prefect artifact: report.md as a markdown artifact, figures linked.

The report links its figures relatively (`figures/SECTION/KEY.png`); the artifact links them by their
absolute file:// location in the stage's output folder, since the Prefect UI does not hold the files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact

__all__ = ["publish_paper_report", "report_artifact_markdown"]

_FIGURE = re.compile(r"!\[([^\]]*)\]\((figures/[^)]+\.png)\)")


def report_artifact_markdown(report_dir: Path) -> str:
    """report.md with each embedded figure turned into a link to the PNG's absolute path."""
    text = (report_dir / "report.md").read_text()
    return _FIGURE.sub(lambda m: f"[figure: {m.group(1)}]({(report_dir / m.group(2)).resolve().as_uri()})", text)


def publish_paper_report(record: dict[str, Any]) -> None:
    """Publish the report of a finished paper-tables run (a StageRecord as JSON)."""
    report = Path(record["outputs"]["report"])
    create_markdown_artifact(key="paper-report", markdown=report_artifact_markdown(report),
                             description=f"Paper tables and figures ({report})")
