"""Figures inside Prefect markdown artifacts, as `data:image/png;base64,...` URIs.

A browser never loads a `file://` image from the Prefect UI's http page (it showed a broken image),
and the UI does not hold our files; a data URI travels inside the artifact, and the UI renders it
(checked in headless Chromium: tests/foundation/test_artifact_images_ui.py). An artifact lives in the
Prefect database, so the copy is small: scaled down to at most MAX_WIDTH x MAX_HEIGHT pixels and
reduced to a palette of PALETTE_COLORS (plots are few flat colours); the full-size PNG stays in the
stage's output folder.

    markdown = f"![training curves]({png_data_uri(curves_png)})"
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

__all__ = ["MAX_HEIGHT", "MAX_WIDTH", "PALETTE_COLORS", "png_data_uri"]

MAX_WIDTH = 720
"""Widest embedded figure, in pixels (about the width of the artifact pane)."""
MAX_HEIGHT = 900
"""Tallest embedded figure, in pixels."""
PALETTE_COLORS = 64
"""Colours kept in the embedded copy (adaptive palette)."""


def png_data_uri(path: Path) -> str:
    """The image at `path` as a small PNG data URI (module docstring)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB")
    small.thumbnail((MAX_WIDTH, MAX_HEIGHT), Image.Resampling.LANCZOS)
    small = small.quantize(colors=PALETTE_COLORS, method=Image.Quantize.MEDIANCUT)
    buffer = io.BytesIO()
    small.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
