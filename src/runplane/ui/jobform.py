"""The New Job form and the Resources pane: form fields to a Function through the SDK's calls.

Each field is applied with the SDK call a user would write (``with_requests``, ``with_limits``,
``with_node_selection``, ``with_preemption_mode``, ``with_priority_class``, ``mount_pvc`` ...),
one at a time, so an invalid value is refused with the SDK's own message and shown at the field
that holds it. What the form cannot show of a function (image, tolerations, affinity, an
environment variable from a ConfigMap) is kept as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from starlette.datastructures import FormData

from runplane import names
from runplane.errors import InvalidValueError, RunplaneError
from runplane.spec.function import Function
from runplane.spec.handler import Signature, read_signature
from runplane.spec.resources import COMPUTE, Resources, check_gpu_count
from runplane.spec.scheduling import PreemptionMode
from runplane.spec.thresholds import DEFAULT_THRESHOLDS
from runplane.spec.volumes import (
    VolumeMount,
    mount_configmap,
    mount_pvc,
    mount_secret,
    mount_v3io,
)
from runplane.ui.wording import worded

#: Field -> message, for the fields that were refused.
Errors = dict[str, str]

THRESHOLD_STATES = tuple(DEFAULT_THRESHOLDS)
VOLUME_TYPES = {"pvc": "PVC", "configmap": "ConfigMap", "secret": "Secret", "v3io": "V3IO"}
VOLUMES_MODES = {"auto": "Auto", "manual": "Manual", "none": "None"}
PREEMPTION_MODES = {
    PreemptionMode.PREVENT.value: "Prevent: never on spot nodes",
    PreemptionMode.ALLOW.value: "Allow: on spot nodes when available",
    PreemptionMode.CONSTRAIN.value: "Constrain: only on spot nodes",
    PreemptionMode.NONE.value: "None: no spot handling",
}
#: The largest code file the form takes, as the API does (embedded code, base64 included).
MAX_CODE_BYTES = 512 << 10


@dataclass
class VolumeRow:
    type: str = "pvc"
    name: str = ""
    source: str = ""
    path: str = ""
    sub_path: str = ""


@dataclass
class EnvRow:
    name: str = ""
    value: str = ""
    secret: str = ""
    key: str = ""


@dataclass
class JobForm:
    """What the form shows and sends; ``base`` is the function it starts from (JSON)."""

    name: str = ""
    function: str = ""
    version: str = ""
    base: str = ""
    handler: str = ""
    params: dict[str, str] = field(default_factory=dict)
    mem_request: str = ""
    mem_limit: str = ""
    cpu_request: str = ""
    cpu_limit: str = ""
    gpu_limit: str = ""
    gpu_type: str = names.GPU
    node_selector: list[tuple[str, str]] = field(default_factory=list)
    preemption_mode: str = ""
    priority: str = ""
    volumes_mode: str = "auto"
    volumes: list[VolumeRow] = field(default_factory=list)
    env: list[EnvRow] = field(default_factory=list)
    thresholds: dict[str, str] = field(default_factory=dict)
    cron: str = ""
    confirm_unplaceable: bool = False

    # -- from a function ------------------------------------------------------------------

    @classmethod
    def of(cls, fn: Function, function: str = "", version: str = "") -> JobForm:
        """The form prefilled from ``fn``; a stored function is named, others carried whole."""
        spec = fn.spec
        requests, limits = spec.resources.requests, spec.resources.limits
        gpus = {k: v for k, v in limits.items() if k not in COMPUTE}
        gpu_type, gpu_count = next(iter(gpus.items()), (names.GPU, ""))
        form = cls(
            name=fn.metadata.name,
            function=function,
            version=version,
            base="" if function else json.dumps(fn.to_dict()),
            handler=spec.handler,
            mem_request=str(requests.get("memory", "")),
            mem_limit=str(limits.get("memory", "")),
            cpu_request=str(requests.get("cpu", "")),
            cpu_limit=str(limits.get("cpu", "")),
            gpu_limit=str(gpu_count),
            gpu_type=gpu_type,
            node_selector=list(spec.node_selector.items()),
            preemption_mode=spec.preemption_mode.value if spec.preemption_mode else "",
            priority=spec.priority_class_name or "",
            thresholds={k: str(v) for k, v in spec.state_thresholds.items()},
        )
        form.volumes_mode, form.volumes = _volume_rows(spec.volumes, spec.volume_mounts)
        if spec.disable_auto_mount and not form.volumes:
            form.volumes_mode = "none"
        form.env = [row for row in map(_env_row, spec.env) if row is not None]
        return form

    # -- from a submitted form ----------------------------------------------------------------

    @classmethod
    def parse(cls, data: FormData) -> JobForm:
        def text(key: str) -> str:
            value = data.get(key)
            return value.strip() if isinstance(value, str) else ""

        def column(key: str) -> list[str]:
            return [v.strip() if isinstance(v, str) else "" for v in data.getlist(key)]

        form = cls(
            name=text("name"),
            function=text("function"),
            version=text("version"),
            base=text("base"),
            handler=text("handler"),
            params={
                key.removeprefix("param."): value.strip()
                for key, value in data.multi_items()
                if key.startswith("param.") and isinstance(value, str)
            },
            mem_request=text("mem_request"),
            mem_limit=text("mem_limit"),
            cpu_request=text("cpu_request"),
            cpu_limit=text("cpu_limit"),
            gpu_limit=text("gpu_limit"),
            gpu_type=text("gpu_type") or names.GPU,
            node_selector=list(zip(column("ns_key"), column("ns_value"), strict=False)),
            preemption_mode=text("preemption_mode"),
            priority=text("priority"),
            volumes_mode=text("volumes_mode") or "auto",
            volumes=[
                VolumeRow(*row)
                for row in zip(
                    column("vol_type"),
                    column("vol_name"),
                    column("vol_source"),
                    column("vol_path"),
                    column("vol_sub_path"),
                    strict=False,
                )
            ],
            env=[
                EnvRow(*row)
                for row in zip(
                    column("env_name"),
                    column("env_value"),
                    column("env_secret"),
                    column("env_key"),
                    strict=False,
                )
            ],
            thresholds={state: text(f"threshold.{state}") for state in THRESHOLD_STATES},
            cron=text("cron"),
            confirm_unplaceable=bool(text("confirm_unplaceable")),
        )
        form.node_selector = [(k, v) for k, v in form.node_selector if k or v]
        form.volumes = [row for row in form.volumes if row.name or row.source or row.path]
        form.env = [row for row in form.env if row.name or row.value or row.secret]
        return form

    @property
    def run_params(self) -> dict[str, str]:
        """Parameters the user filled in (an empty field leaves the handler's default)."""
        return {key: value for key, value in self.params.items() if value != ""}

    # -- to a function --------------------------------------------------------------------

    def apply(self, base: Function) -> tuple[Function, Errors]:
        """``base`` with this form's values, each applied by its SDK call; refused fields are
        left as they were and reported."""
        fn = base.model_copy(deep=True)
        errors: Errors = {}

        def attempt(where: str, call: Callable[[], object]) -> None:
            try:
                call()
            except RunplaneError as error:
                errors.setdefault(where, worded(where, self.typed(where), error))

        if self.name:
            attempt("name", lambda: setattr(fn.metadata, "name", self.name))
        if self.handler:
            attempt("handler", lambda: setattr(fn.spec, "handler", self.handler))
        self._resources(fn, attempt)
        keys = [key for key, _ in self.node_selector]
        twice = sorted({key for key in keys if keys.count(key) > 1})
        if twice:
            errors["node_selector"] = (
                f"node selector keys must be unique; {', '.join(map(repr, twice))} appears "
                "more than once"
            )
        else:
            attempt(
                "node_selector",
                lambda: fn.with_node_selection(node_selector=dict(self.node_selector)),
            )
        if self.preemption_mode:
            attempt("preemption_mode", lambda: fn.with_preemption_mode(self.preemption_mode))
        else:
            fn.spec.preemption_mode = None
        attempt("priority", lambda: fn.with_priority_class(self.priority or None))
        self._volumes(fn, attempt)
        self._env(fn, attempt)
        fn.spec.state_thresholds = {}
        for state, value in self.thresholds.items():
            if value:
                attempt(
                    f"threshold.{state}",
                    lambda s=state, v=value: fn.set_state_thresholds({s: v}),  # type: ignore[misc]
                )
        return fn, errors

    def _resources(
        self, fn: Function, attempt: Callable[[str, Callable[[], object]], None]
    ) -> None:
        fn.spec.resources = Resources()
        if self.mem_request:
            attempt("mem_request", lambda: fn.with_requests(mem=self.mem_request, patch=True))
        if self.cpu_request:
            attempt("cpu_request", lambda: fn.with_requests(cpu=self.cpu_request, patch=True))
        if self.mem_limit:
            attempt("mem_limit", lambda: fn.with_limits(mem=self.mem_limit, patch=True))
        if self.cpu_limit:
            attempt("cpu_limit", lambda: fn.with_limits(cpu=self.cpu_limit, patch=True))
        if self.gpu_limit:
            attempt(
                "gpu_limit",
                lambda: fn.with_limits(
                    gpus=check_gpu_count("gpu_limit", self.gpu_limit),
                    gpu_type=self.gpu_type,
                    patch=True,
                ),
            )

    def _volumes(self, fn: Function, attempt: Callable[[str, Callable[[], object]], None]) -> None:
        fn.spec.volume_mounts = []
        fn.spec.volumes = []
        fn.spec.disable_auto_mount = self.volumes_mode != "auto"
        if self.volumes_mode != "manual":
            return
        for index, row in enumerate(self.volumes):
            attempt(f"vol-{index}", lambda row=row: _mount(fn, row))  # type: ignore[misc]

    def _env(self, fn: Function, attempt: Callable[[str, Callable[[], object]], None]) -> None:
        fn.spec.env = [entry for entry in fn.spec.env if _env_row(entry) is None]
        for index, row in enumerate(self.env):
            attempt(f"env-{index}", lambda row=row: _set_env(fn, row))  # type: ignore[misc]

    def typed(self, where: str) -> str:
        """What the user typed into the field ``where`` ("" for a row)."""
        if where.startswith("threshold."):
            return self.thresholds.get(where.removeprefix("threshold."), "")
        value = getattr(self, where, "")
        return value if isinstance(value, str) else ""

    def unknown_priority(self, usable: Iterable[str]) -> bool:
        """Whether the chosen class is not one this user may pick (a rerun of someone
        else's run, say): it is shown, and refused at the field."""
        return bool(self.priority) and self.priority not in usable


def _set_env(fn: Function, row: EnvRow) -> None:
    if row.secret or row.key:
        fn.set_env_from_secret(row.name, row.secret, row.key or None)
    else:
        fn.set_env(row.name, row.value)


def _mount(fn: Function, row: VolumeRow) -> None:
    """One volume row through the SDK's own mount call."""
    if row.type not in VOLUME_TYPES:
        raise InvalidValueError("volume type", row.type, "one of " + ", ".join(VOLUME_TYPES))
    if row.type == "v3io":
        fn.apply(
            mount_v3io(
                name=row.name,
                secret=row.source or None,
                volume_mounts=[VolumeMount(row.path, row.sub_path)],
            )
        )
        return
    if row.type == "pvc":
        modifier = mount_pvc(pvc_name=row.source, volume_name=row.name, volume_mount_path=row.path)
    elif row.type == "configmap":
        modifier = mount_configmap(
            configmap_name=row.source, mount_path=row.path, volume_name=row.name
        )
    else:
        modifier = mount_secret(secret_name=row.source, mount_path=row.path, volume_name=row.name)
    fn.apply(modifier)
    if row.sub_path:
        fn.spec.volume_mounts = [
            {**mount, "subPath": row.sub_path} if mount["name"] == row.name else mount
            for mount in fn.spec.volume_mounts
        ]


def _volume_rows(
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]
) -> tuple[str, list[VolumeRow]]:
    rows = []
    for volume in volumes:
        name = volume["name"]
        if "persistentVolumeClaim" in volume:
            kind, source = "pvc", volume["persistentVolumeClaim"].get("claimName", "")
        elif "configMap" in volume:
            kind, source = "configmap", volume["configMap"].get("name", "")
        elif "secret" in volume:
            kind, source = "secret", volume["secret"].get("secretName", "")
        elif "flexVolume" in volume:
            kind = "v3io"
            source = (volume["flexVolume"].get("secretRef") or {}).get("name", "")
        else:
            continue
        for mount in (m for m in mounts if m.get("name") == name):
            rows.append(
                VolumeRow(kind, name, source, mount.get("mountPath", ""), mount.get("subPath", ""))
            )
    return ("manual" if volumes else "auto"), rows


def _env_row(entry: Mapping[str, Any]) -> EnvRow | None:
    """The row showing ``entry``, or ``None`` when the form cannot show it (kept as is)."""
    if "value" in entry:
        return EnvRow(entry["name"], str(entry["value"]))
    secret = (entry.get("valueFrom") or {}).get("secretKeyRef")
    if secret and set(entry["valueFrom"]) == {"secretKeyRef"}:
        return EnvRow(entry["name"], "", secret.get("name", ""), secret.get("key", ""))
    return None


def function_from_code(project: str, filename: str, code: bytes) -> Function:
    """A job function from an uploaded ``.py`` file, its code embedded, calling the file's
    first function until the user picks another."""
    import base64

    if not filename.endswith(".py"):
        raise InvalidValueError("file", filename, "a Python file (.py)", "train.py")
    if len(code) > MAX_CODE_BYTES:
        raise InvalidValueError(
            "file", filename, f"code files are at most {MAX_CODE_BYTES // 1024} KiB", "train.py"
        )
    try:
        text = code.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidValueError("file", filename, "UTF-8 text", "train.py") from None
    from runplane.spec.handler import defined_functions

    name = PurePosixPath(filename).name
    handlers = list(defined_functions(text, name))
    stem = PurePosixPath(name).stem.lower().replace("_", "-")
    return Function.from_dict(
        {
            "kind": "job",
            "metadata": {"name": stem, "project": project},
            "spec": {
                "handler": handlers[0] if handlers else "",
                "build": {"source": base64.b64encode(code).decode(), "filename": name},
            },
        }
    )


@dataclass(frozen=True, slots=True)
class Code:
    """A function's embedded code: its handlers, and the chosen one's parameters."""

    handlers: list[str]
    signature: Signature | None
    error: str = ""


def code_of(fn: Function) -> Code:
    import base64

    from runplane.spec.handler import defined_functions

    source = fn.spec.build.source
    if not source:
        return Code([], None, "this function has no embedded code; upload a .py file")
    try:
        text = base64.b64decode(source).decode("utf-8")
        filename = fn.spec.build.filename or "code.py"
        handlers = list(defined_functions(text, filename))
        signature = read_signature(text, fn.spec.handler, filename) if fn.spec.handler else None
    except (RunplaneError, ValueError) as error:
        return Code([], None, str(error))
    return Code(handlers, signature)
