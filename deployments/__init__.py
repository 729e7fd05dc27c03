"""The recipe catalog (deployments/recipes/*.toml) shared by prefect.yaml and the CLI, and the CLI itself."""

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"

__all__ = ["RECIPES_DIR"]
