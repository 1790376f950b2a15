"""Integration tests run against the real control-plane testbed (see docs/testing.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The testbed package lives at the repository root, next to src/; pytest does not put the root
# on sys.path when invoked as `pytest`, only as `python -m pytest`.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from testbed.pytest_plugin import (  # noqa: E402
    make_pod,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
    pytest_terminal_summary,
    real_node,
    testbed_cluster,
)

__all__ = [
    "make_pod",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
    "real_node",
    "testbed_cluster",
]


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """helm's caches and configuration in a directory of the tests, not the user's home."""
    home = tmp_path_factory.mktemp("helm-home")
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
