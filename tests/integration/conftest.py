"""Integration tests run against the real control-plane testbed (see docs/testing.md)."""

from __future__ import annotations

import sys
from pathlib import Path

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
