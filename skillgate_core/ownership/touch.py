"""Keep catalog.json current: ownership functions call `touch_catalog` after each change they make."""

from __future__ import annotations

from pathlib import Path

__all__ = ["touch_catalog"]


def touch_catalog(root: Path) -> None:
    """Rewrite root/catalog.json from the folders (catalog.refresh_catalog)."""
    from skillgate_core.ownership.catalog import refresh_catalog  # deferred: catalog imports our callers

    refresh_catalog(root)
