"""What every test of the suite must leave as it found: runplane's variables.

The suite runs in one process, and runplane reads its settings from ``RUNPLANE_*`` variables:
a test that leaves one changed (``mlconf`` writes them itself) changes every later test's
settings, which then fail far from the cause. A test that does is an error here, named, and the
variables are put back so that the rest of the suite runs as it would have.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def _runplane_variables() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name.startswith("RUNPLANE_")}


@pytest.fixture(autouse=True)
def runplane_variables_left_as_found() -> Iterator[None]:
    before = _runplane_variables()
    yield
    after = _runplane_variables()
    if after == before:
        return
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    for name in changed:
        if name in before:
            os.environ[name] = before[name]
        else:
            os.environ.pop(name, None)
    from runplane.config import current

    current.cache_clear()
    pytest.fail(f"the test left runplane's variables changed: {', '.join(changed)}", pytrace=False)
