"""(Function, Settings) -> Kubernetes objects as plain dicts; pure and deterministic."""

from runplane.rendering.lints import Lint
from runplane.rendering.manifests import Rendered, RunRef, main_part, render
from runplane.rendering.resources import EffectiveResources, Quantities, effective_resources

__all__ = [
    "EffectiveResources",
    "Lint",
    "Quantities",
    "Rendered",
    "RunRef",
    "effective_resources",
    "main_part",
    "render",
]
