"""What runplane does not provide of MLRun, said when it is touched.

The modules named after MLRun's (``runplane.feature_store``, ``runplane.model_monitoring``...)
import, so code that merely imports them loads; using anything in them raises
:class:`~runplane.errors.OutOfScopeError` naming the feature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from runplane.errors import OutOfScopeError

ADVICE = "see docs/mlrun-compatibility.md for what runplane covers and the alternatives"


def out_of_scope(module: str, feature: str) -> Callable[[str], NoReturn]:
    """A module ``__getattr__`` that refuses every name with the feature's name."""

    def refuse(name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        raise OutOfScopeError(f"{module}.{name} ({feature})", ADVICE)

    return refuse
