"""A function in MLRun's dict form: ``new_function(runtime=dict)`` reads it, and the
function's ``to_dict()`` writes it back in the same layout.

MLRun's keys that are runplane fields are read into them (its empty forms, ``""`` for a node
selector, ``None`` for tolerations, read as empty); the others (``metadata.hash``,
``metadata.credentials``, ``spec.mode``, ``verbose``...) are kept with the function as given.
Writing back puts every key of the original in its place, a field's current value where it
has one and the original (empty) form where it is still empty, so a dict MLRun wrote comes
back as MLRun wrote it, with what runplane fills in (``spec.preemption_mode``) added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.spec.function_spec import FunctionSpec
from runplane.spec.metadata import Metadata

_SECTIONS = ("metadata", "spec")
_MODELS: dict[str, Any] = {"metadata": Metadata, "spec": FunctionSpec}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def read(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """runplane's dict form of MLRun's ``data``, and the layout to write it back in."""
    ours: dict[str, Any] = {"kind": data.get("kind") or "job"}
    for section in _SECTIONS:
        given = data.get(section) or {}
        fields = _MODELS[section].model_fields
        ours[section] = {k: v for k, v in given.items() if k in fields and not _empty(v)}
    layout = {key: value for key, value in data.items() if key not in ("status",)}
    return ours, layout


def write(
    layout: Mapping[str, Any], full: Mapping[str, Any], changed: Mapping[str, Any]
) -> dict[str, Any]:
    """The function in ``layout``'s shape: ``full`` is its whole dump, ``changed`` the part
    that differs from the defaults (keys the layout lacks come from there)."""
    out: dict[str, Any] = {}
    for key, original in layout.items():
        if key in _SECTIONS:
            out[key] = _section(original or {}, full.get(key, {}), changed.get(key, {}))
        elif key == "kind":
            out[key] = full.get("kind", original)
        else:
            out[key] = original
    for key in _SECTIONS:
        if key not in out and changed.get(key):
            out[key] = dict(changed[key])
    return out


def _section(
    original: Mapping[str, Any], full: Mapping[str, Any], changed: Mapping[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in original.items():
        if key not in full or (_empty(full[key]) and _empty(value)):
            out[key] = value
        elif key == "state_thresholds" and isinstance(value, dict) and "executing" in value:
            out[key] = {("executing" if k == "running" else k): v for k, v in full[key].items()}
        else:
            out[key] = full[key]
    for key, value in changed.items():
        out.setdefault(key, value)
    return out
