"""(Function, Settings) -> Kubernetes objects as plain dicts; pure and deterministic."""

from runplane.rendering.lints import Lint
from runplane.rendering.manifests import (
    Rendered,
    RunRef,
    effective_resources,
    main_part,
    render,
)

__all__ = ["Lint", "Rendered", "RunRef", "effective_resources", "main_part", "render"]
