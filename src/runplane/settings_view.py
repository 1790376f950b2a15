"""runplane's settings under the names MLRun code reads (``mlrun.mlconf``,
``mlrun.config.config``).

Reads come from the current :class:`runplane.config.Settings`; the few settings MLRun code
assigns (``mlconf.dbpath = url``) are written as the ``RUNPLANE_*`` variable that holds them,
so the next run sees them. The view is handed the function that loads the settings
(``runplane.config.current``), so this module imports nothing of the configuration's and
``runplane.config`` can offer the view as ``runplane.config.config``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from runplane.errors import InvalidValueError

if TYPE_CHECKING:
    from runplane.config import Settings


def _resources(part: dict[str, Any]) -> dict[str, Any]:
    gpus = sum(int(v) for k, v in part.items() if k not in ("cpu", "memory"))
    return {"cpu": part.get("cpu"), "memory": part.get("memory"), "gpu": gpus or None}


def _thresholds(settings: Settings) -> SimpleNamespace:
    values: dict[str, Any] = dict(settings.function_defaults.state_thresholds)
    values["executing"] = values.get("running")
    return SimpleNamespace(default=SimpleNamespace(**values))


#: MLRun's name -> how to read it from runplane's settings.
_READ: dict[str, Any] = {
    "default_function_priority_class_name": lambda s: s.function_defaults.priority_class,
    "valid_function_priority_class_names": lambda s: ",".join(s.priority_classes.valid),
    "function_defaults": lambda s: SimpleNamespace(
        preemption_mode=s.function_defaults.preemption_mode.value,
        image=s.function_defaults.image,
    ),
    "preemptible_nodes": lambda s: SimpleNamespace(
        node_selector=dict(s.spot.node_selector), tolerations=list(s.spot.tolerations)
    ),
    "default_function_node_selector": lambda s: dict(s.function_defaults.node_selector),
    "default_function_pod_resources": lambda s: SimpleNamespace(
        requests=_resources(s.function_defaults.resources.requests),
        limits=_resources(s.function_defaults.resources.limits),
    ),
    "function": lambda s: SimpleNamespace(spec=SimpleNamespace(state_thresholds=_thresholds(s))),
    "default_image": lambda s: s.function_defaults.image,
    "namespace": lambda s: s.namespace,
    "dbpath": lambda s: s.api or "",
    "default_project": lambda s: os.environ.get("RUNPLANE_DEFAULT_PROJECT", "default"),
    "artifact_path": lambda s: os.environ.get("RUNPLANE_ARTIFACT_PATH_DEFAULT", ""),
    "igz_version": lambda s: "",
    "version": lambda s: __import__("runplane").__version__,
}

#: MLRun's name -> the ``RUNPLANE_*`` variable an assignment sets.
_WRITE = {
    "dbpath": "RUNPLANE_API",
    "namespace": "RUNPLANE_NAMESPACE",
    "default_function_priority_class_name": "RUNPLANE_FUNCTION_DEFAULTS__PRIORITY_CLASS",
    "default_image": "RUNPLANE_FUNCTION_DEFAULTS__IMAGE",
    "default_project": "RUNPLANE_DEFAULT_PROJECT",
    "artifact_path": "RUNPLANE_ARTIFACT_PATH_DEFAULT",
}


class SettingsView:
    """MLRun's configuration object, read from runplane's settings."""

    def __init__(self, current: Callable[[], Settings]) -> None:
        """``current`` loads the settings (cached; ``current.cache_clear()`` reloads)."""
        object.__setattr__(self, "_current", current)

    def _settings(self) -> Settings:
        settings: Settings = self._current()
        return settings

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        reader = _READ.get(name)
        if reader is None:
            raise AttributeError(
                f"mlconf.{name} has no runplane counterpart; runplane's settings are "
                "runplane.config.current() (RUNPLANE_* variables, ~/.runplane/config.yaml); "
                "mlconf answers " + ", ".join(sorted(_READ))
            )
        return reader(self._settings())

    def __setattr__(self, name: str, value: Any) -> None:
        variable = _WRITE.get(name)
        if variable is None:
            raise InvalidValueError(
                f"mlconf.{name}",
                value,
                "mlconf sets " + ", ".join(sorted(_WRITE)) + "; set other runplane settings "
                "with RUNPLANE_* variables",
                "mlconf.dbpath = 'http://127.0.0.1:8470'",
            )
        os.environ[variable] = str(value)
        self.reload()

    def __dir__(self) -> list[str]:
        return sorted(_READ)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in sorted(_READ)}

    def get_preemptible_node_selector(self) -> dict[str, str]:
        return dict(self._settings().spot.node_selector)

    def get_preemptible_tolerations(self) -> list[dict[str, Any]]:
        return list(self._settings().spot.tolerations)

    def get_default_function_node_selector(self) -> dict[str, str]:
        return dict(self._settings().function_defaults.node_selector)

    def is_running_on_iguazio(self) -> bool:
        return False

    def reload(self) -> None:
        """Read the settings again (after ``RUNPLANE_*`` variables changed)."""
        clear = getattr(self._current, "cache_clear", None)
        if callable(clear):
            clear()


def apply_environment(
    mlconf: SettingsView,
    api_path: str | None,
    artifact_path: str,
    access_key: str | None,
    env_file: str | None,
) -> tuple[str, str]:
    """What ``set_environment`` does to the settings once its URL is checked: the variables
    of ``env_file``, the service's URL and token, the artifact path; returns the default
    project and artifact path that result."""
    if env_file:
        from dotenv import load_dotenv

        load_dotenv(env_file, override=True)
    if api_path:
        mlconf.dbpath = api_path
    if access_key:
        os.environ["RUNPLANE_TOKEN"] = access_key
        mlconf.reload()
    if artifact_path:
        mlconf.artifact_path = artifact_path
    return mlconf.default_project, mlconf.artifact_path
