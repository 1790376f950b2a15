"""(Function, Settings) -> Kubernetes objects as plain dicts; pure and deterministic."""

from runplane.render.lints import Lint
from runplane.render.manifests import Rendered, RunRef, effective_resources, render

__all__ = ["Lint", "Rendered", "RunRef", "effective_resources", "render"]
