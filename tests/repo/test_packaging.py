"""Setting the project up prints no setuptools deprecation banner.

`project.license` as a TOML table ({ text = "Apache-2.0" }) made setuptools print the same
SetuptoolsDeprecationWarning banner three times per `pip install -e .` (egg_info, metadata, editable
wheel). The SPDX string form needs setuptools >= 77, so the build requirement says so.
"""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_configures_setuptools_without_a_deprecation_warning(monkeypatch) -> None:
    setuptools = pytest.importorskip("setuptools")
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} predates the SPDX license string")
    monkeypatch.chdir(ROOT)  # package discovery reads the tree
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), ROOT / "pyproject.toml")
    deprecations = [str(w.message).splitlines()[0] for w in caught if issubclass(w.category, DeprecationWarning)]
    assert deprecations == []


def test_the_build_requires_a_setuptools_that_reads_the_spdx_license() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["license"] == "Apache-2.0"
    pins = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    assert len(pins) == 1 and (m := re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", pins[0])) and int(m.group(1)) >= 77
