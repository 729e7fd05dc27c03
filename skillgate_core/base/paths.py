"""The state directory: everything SkillGate writes lives under SKILLGATE_HOME.

Where it is never depends on the current directory (a `cd` must not make runs vanish): $SKILLGATE_HOME
when set, else `.skillgate/` in the source checkout the code runs from (the repository root that holds
pyproject.toml; what `make demo` and infra/*.sh use), else ~/.local/share/skillgate (an installed
package). `skillgate where` (and every `skillgate run`) prints it and says which rule chose it.

    SKILLGATE_HOME/
      warehouse.duckdb   the experiment warehouse (warehouse/ is its only writer)
      prefect/           PREFECT_HOME: the embedded Prefect server's database and settings
      experiments/       one folder per scientific experiment (segments, exports, evaluations)
      datasets/          content-addressed datasets (benchmarks, trajectories, RL parquet)
      skills/            frozen skill snapshots
      artifacts/         other stage outputs (models, reports), one folder per stage run
      cache/             caches other libraries would put in ~ (HF, torch extensions, matplotlib)
      tmp/               scratch space for atomic writes (same filesystem as the targets)

`apply_cache_env()` points those libraries' cache variables into cache/ (unless already set), so a
run writes nothing outside SKILLGATE_HOME and /tmp.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StateLayout", "apply_cache_env", "default_home", "state_layout"]

ENV_HOME = "SKILLGATE_HOME"
CHECKOUT_DIR_NAME = ".skillgate"
_CHECKOUT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class StateLayout:
    """Where each kind of state lives; build it with `state_layout()`."""

    home: Path
    """The state directory itself (absolute)."""

    @property
    def warehouse_file(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def prefect_home(self) -> Path:
        return self.home / "prefect"

    @property
    def experiments(self) -> Path:
        return self.home / "experiments"

    @property
    def datasets(self) -> Path:
        return self.home / "datasets"

    @property
    def skill_snapshots(self) -> Path:
        return self.home / "skills"

    @property
    def artifacts(self) -> Path:
        return self.home / "artifacts"

    @property
    def cache(self) -> Path:
        return self.home / "cache"

    @property
    def tmp(self) -> Path:
        return self.home / "tmp"

    def stage_dir(self, stage: str, key: str) -> Path:
        """Output folder of one stage run, keyed by its config + inputs digest."""
        return self.artifacts / stage / key

    def ensure(self) -> StateLayout:
        for path in (self.home, self.prefect_home, self.experiments, self.datasets,
                     self.skill_snapshots, self.artifacts, self.cache, self.tmp):
            path.mkdir(parents=True, exist_ok=True)
        return self


def default_home() -> tuple[Path, str]:
    """(state dir, the rule that chose it) when no explicit home is given; independent of the cwd."""
    if os.environ.get(ENV_HOME):
        return Path(os.environ[ENV_HOME]).expanduser().resolve(), f"${ENV_HOME}"
    if (_CHECKOUT_ROOT / "pyproject.toml").is_file() and (_CHECKOUT_ROOT / "skillgate_core").is_dir():
        return _CHECKOUT_ROOT / CHECKOUT_DIR_NAME, "source checkout"
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return (data / "skillgate").resolve(), "user data dir"


def state_layout(home: str | os.PathLike[str] | None = None) -> StateLayout:
    """The layout rooted at `home`, else `default_home()` ($SKILLGATE_HOME, the checkout, the user dir)."""
    root = Path(home).expanduser().resolve() if home else default_home()[0]
    return StateLayout(home=root)


# Library cache variables -> sub-folder of SKILLGATE_HOME/cache. Set before those libraries import.
_CACHE_VARS = {
    "HF_HOME": "huggingface",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TRITON_CACHE_DIR": "triton",
    "MPLCONFIGDIR": "matplotlib",
    "XDG_CACHE_HOME": "xdg",
}


def apply_cache_env(layout: StateLayout | None = None) -> dict[str, str]:
    """Point library caches into the state dir (values already in the environment win)."""
    layout = layout or state_layout()
    applied = {}
    for var, sub in _CACHE_VARS.items():
        if var not in os.environ:
            os.environ[var] = str(layout.cache / sub)
            applied[var] = os.environ[var]
    return applied
