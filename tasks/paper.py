"""The `paper-tables` stage's Prefect artifact: report.md as a markdown artifact, figures shown.

The report links its figures relatively (`figures/SECTION/KEY.png`); the Prefect UI holds no files
and a browser never loads a file:// image from it, so the artifact carries each figure inside it, a
small data-URI copy (tasks/artifact_images.py), with the full-size file named under the report folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact

from tasks.artifact_images import png_data_uri
from tasks.home_paths import shown_path

__all__ = ["publish_paper_report", "report_artifact_markdown"]

_FIGURE = re.compile(r"!\[([^\]]*)\]\((figures/[^)]+\.png)\)")


def report_artifact_markdown(report_dir: Path) -> str:
    """report.md with each figure embedded as a small data-URI PNG, its full-size file named below it."""
    text = (report_dir / "report.md").read_text()
    return _FIGURE.sub(lambda m: f"![{m.group(1)}]({png_data_uri(report_dir / m.group(2))})\n\n"
                                 f"*{m.group(1)}* (full size: `{m.group(2)}` in the report folder)", text)


def publish_paper_report(record: dict[str, Any]) -> None:
    """Publish the report of a finished paper-tables run (a StageRecord as JSON)."""
    report = Path(record["outputs"]["report"])
    create_markdown_artifact(key="paper-report", markdown=report_artifact_markdown(report),
                             description=f"Paper tables and figures ({shown_path(report / 'report.md')})")
