"""What a run got, in words, from what it rendered to: placement, priority, resources, volumes,
variables (a Secret's values never), the node and each attempt's end; and the rendered YAML
with its long texts (the bootstrap's files, the function's code) set apart as references the
page expands on demand, so the YAML a user reads is the pod's settings, not 1,500 lines of
program.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane import names
from runplane.rendering.text import manifests_yaml
from runplane.runs import RunRecord

#: A text longer than this, or of more lines, is set apart from the YAML.
LONG_CHARS = 240
LONG_LINES = 6


@dataclass(frozen=True, slots=True)
class Elided:
    """A long text of the manifests: where it was and what it is."""

    path: str
    text: str

    @property
    def size(self) -> str:
        lines = self.text.count("\n") + 1
        return f"{len(self.text):,} characters, {lines:,} line{'' if lines == 1 else 's'}"


def elided_yaml(manifests: Iterable[Mapping[str, Any]]) -> tuple[str, list[Elided]]:
    """The manifests as YAML (Secrets redacted) with every long text replaced by a reference
    (``<set apart: [2] ...>``), and the texts set apart, in order."""
    apart: list[Elided] = []

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {key: walk(item, f"{path}.{key}") for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{path}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, str) and (len(value) > LONG_CHARS or value.count("\n") > LONG_LINES):
            apart.append(Elided(path.lstrip("."), value))
            return f"<set apart [{len(apart)}]: {apart[-1].size}>"
        return value

    documents = []
    for manifest in manifests:
        kind = str(manifest.get("kind", ""))
        name = str((manifest.get("metadata") or {}).get("name", ""))
        documents.append(walk(copy.deepcopy(dict(manifest)), f"{kind} {name}:"))
    return manifests_yaml(documents), apart


def _quantities(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {amount}" for name, amount in values.items()) or "none"


def _volume(volume: Mapping[str, Any]) -> str:
    for key, label, field in (
        ("persistentVolumeClaim", "PVC", "claimName"),
        ("configMap", "ConfigMap", "name"),
        ("secret", "Secret", "secretName"),
    ):
        if key in volume:
            return f"{label} {volume[key].get(field, '')}"
    if "flexVolume" in volume:
        return "V3IO"
    return next((key for key in volume if key != "name"), "volume")


def _variable(entry: Mapping[str, Any]) -> str:
    source = entry.get("valueFrom") or {}
    if "secretKeyRef" in source:
        ref = source["secretKeyRef"]
        return f"{entry['name']} from Secret {ref.get('name', '')} key {ref.get('key', '')}"
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        return f"{entry['name']} from ConfigMap {ref.get('name', '')} key {ref.get('key', '')}"
    if source:
        return f"{entry['name']} from the pod"
    return f"{entry['name']}={entry.get('value', '')}"


def summary(record: RunRecord, pod_spec: Mapping[str, Any], qos: str) -> list[tuple[str, str]]:
    """The run's settings as they reached its pod, as (what, in words) rows."""
    container = (pod_spec.get("containers") or [{}])[0]
    resources = container.get("resources") or {}
    spec = (record.function or {}).get("spec") or {}
    selector = pod_spec.get("nodeSelector") or {}
    affinity = pod_spec.get("affinity") or {}
    tolerations = pod_spec.get("tolerations") or []
    mode = spec.get("preemption_mode") or "the service default"
    placement = []
    if affinity:
        placement.append("affinity on " + ", ".join(sorted(affinity)))
    if tolerations:
        placement.append(
            "tolerates "
            + ", ".join(f"{t.get('key', '*')}={t.get('value', '')}" for t in tolerations)
        )
    volumes = {v["name"]: v for v in pod_spec.get("volumes") or []}
    mounts = [
        f"{_volume(volumes.get(m['name'], {}))} at {m.get('mountPath', '')}"
        + (f" (sub path {m['subPath']})" if m.get("subPath") else "")
        for m in container.get("volumeMounts") or []
        if not str(m.get("name", "")).startswith(names.OWN)
    ]
    variables = [
        _variable(entry)
        for entry in container.get("env") or []
        if not str(entry.get("name", "")).startswith("RUNPLANE_")
    ]
    attempts = [
        f"{a.number}: on {a.node or 'no node'}, "
        + (
            f"ended {a.reason or 'unknown'}"
            + (f" (exit code {a.exit_code})" if a.exit_code is not None else "")
            if a.ended_at
            else "running"
        )
        for a in record.attempts
    ]
    return [
        ("Node selector", ", ".join(f"{k}={v}" for k, v in selector.items()) or "none"),
        ("Run on Spot nodes", f"{mode}" + (f": {'; '.join(placement)}" if placement else "")),
        ("Priority class", str(pod_spec.get("priorityClassName") or "none")),
        ("Requests", _quantities(resources.get("requests") or {})),
        ("Limits", _quantities(resources.get("limits") or {})),
        ("QoS class", qos),
        ("Volumes", "; ".join(mounts) or "none"),
        ("Environment", "; ".join(variables) or "none (besides runplane's own)"),
        ("Node", record.attempts[-1].node if record.attempts else "not placed yet"),
        ("Attempts", "; ".join(attempts) or "none yet"),
    ]
