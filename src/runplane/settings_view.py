"""runplane's settings under the names MLRun code reads (``mlrun.mlconf``,
``mlrun.config.config``).

Reads come from the current :class:`runplane.config.Settings`; the few settings MLRun code
assigns (``mlconf.dbpath = url``) are written as the ``RUNPLANE_*`` variable that holds them,
so the next run sees them. The view is handed the function that loads the settings
(``runplane.config.current``), so this module imports nothing of the configuration's and
``runplane.config`` can offer the view as ``runplane.config.config``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runplane.errors import InvalidValueError

if TYPE_CHECKING:
    from runplane.config import Settings


class Section:
    """One section of MLRun's configuration (``mlconf.function.spec``): its keys read as
    attributes, nested sections as sections, ``to_dict()`` gives it as plain data, and an
    assignment keeps the value in the section (MLRun code sets defaults this way)."""

    def __init__(self, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        values: dict[str, Any] = object.__getattribute__(self, "_values")
        if name.startswith("__") or name not in values:
            raise AttributeError(f"mlconf section has no {name!r}; it has {sorted(values)}")
        value = values[name]
        return Section(value) if isinstance(value, dict) else value

    def __setattr__(self, name: str, value: Any) -> None:
        self._values[name] = value

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        return sorted(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Section):
            return bool(self._values == other._values)
        return bool(self._values == other)

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"Section({self._values!r})"

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._values)


#: Settings MLRun code assigns that have no runplane variable, kept for this process as
#: MLRun keeps them in its config object: ``default_function_pod_resources`` (filled into a
#: ``KubeResourceSpec`` as MLRun fills it; functions are completed from runplane's
#: ``function_defaults.resources`` when they render) and
#: ``function.spec.image_pull_secret.default`` (filled into ``new_function(runtime=...)``).
_KEPT: dict[str, Any] = {
    "function": {"spec": {"image_pull_secret": {"default": None}}},
}


def kept_image_pull_secret() -> str | None:
    """``mlconf.function.spec.image_pull_secret.default``, as MLRun code set it."""
    value = _KEPT["function"]["spec"]["image_pull_secret"]["default"]
    return str(value) if value else None


def _resources(part: dict[str, Any]) -> dict[str, Any]:
    gpus = sum(int(v) for k, v in part.items() if k not in ("cpu", "memory"))
    return {"cpu": part.get("cpu"), "memory": part.get("memory"), "gpu": gpus or None}


def pod_resources(settings: Settings | None = None) -> dict[str, dict[str, Any]]:
    """``mlconf.default_function_pod_resources`` as set by MLRun code, else from runplane's
    function defaults (``settings``), as ``{"requests": {...}, "limits": {...}}``."""
    kept = _KEPT.get("default_function_pod_resources")
    if kept is not None or settings is None:
        return copy.deepcopy(kept or {"requests": {}, "limits": {}})
    return {
        "requests": _resources(settings.function_defaults.resources.requests),
        "limits": _resources(settings.function_defaults.resources.limits),
    }


def _function(settings: Settings) -> Section:
    values: dict[str, Any] = dict(settings.function_defaults.state_thresholds)
    values["executing"] = values.pop("running", None)
    spec = _KEPT["function"]["spec"]
    spec["state_thresholds"] = {"default": values}
    return Section(_KEPT["function"])


#: MLRun's name -> how to read it from runplane's settings.
_READ: dict[str, Any] = {
    "default_function_priority_class_name": lambda s: s.function_defaults.priority_class,
    "valid_function_priority_class_names": lambda s: ",".join(s.priority_classes.valid),
    "function_defaults": lambda s: Section(
        {
            "preemption_mode": s.function_defaults.preemption_mode.value,
            "image": s.function_defaults.image,
        }
    ),
    "preemptible_nodes": lambda s: Section(
        {"node_selector": dict(s.spot.node_selector), "tolerations": list(s.spot.tolerations)}
    ),
    "default_function_node_selector": lambda s: dict(s.function_defaults.node_selector),
    "default_function_pod_resources": lambda s: Section(pod_resources(s)),
    "function": _function,
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


def _pod_resources_given(value: Any) -> dict[str, dict[str, Any]]:
    """An assigned ``default_function_pod_resources``: MLRun's layout, ``None`` values and its
    ``gpu`` key (a GPU count MLRun does not fill into functions either) left out."""
    if not isinstance(value, dict) or not set(value) <= {"requests", "limits"}:
        raise InvalidValueError(
            "mlconf.default_function_pod_resources",
            value,
            "a dict of 'requests' and 'limits', each a dict of quantities",
            "{'requests': {'cpu': '25m', 'memory': '1M'}, 'limits': {'cpu': '2', 'memory': '1G'}}",
        )
    return {
        part: {k: v for k, v in (value.get(part) or {}).items() if v is not None and k != "gpu"}
        for part in ("requests", "limits")
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
        if name == "default_function_pod_resources":
            _KEPT[name] = _pod_resources_given(value)
            return
        if name == "valid_function_priority_class_names":
            names = [n.strip() for n in str(value or "").split(",") if n.strip()]
            os.environ["RUNPLANE_PRIORITY_CLASSES__VALID"] = json.dumps(names)
            self.reload()
            return
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
