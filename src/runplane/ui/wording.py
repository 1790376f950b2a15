"""Refusals worded for the form: the field as its label says it, the value typed, and what to
type instead; never the SDK call the form made (``with_requests(mem=...)``) nor the bounds of
an int64.

The SDK's messages are written for code (they name the call and its argument). A form applies
each field with that call (:meth:`~runplane.ui.jobform.JobForm.apply`) and rewords what it
refuses here, by the field it belongs to; a refusal this module does not know keeps the SDK's
reason, behind the field's label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runplane.errors import InvalidValueError, RunplaneError, shown


@dataclass(frozen=True, slots=True)
class Wording:
    label: str
    #: What a valid value is, after "is not".
    noun: str
    #: What to type instead.
    hint: str


_MEMORY_HINT = "use 512Mi, 1G or 2Gi (Mi and Gi are binary units, M and G decimal)"
_CPU_HINT = "use cores, as 500m, 1 or 2.5"
_DURATION_HINT = "use 1h, 30 minutes, 1 minute and 30s, or -1 for never"

FIELDS: dict[str, Wording] = {
    "name": Wording("Name", "a name", "use lower-case letters, digits and '-', as train-model"),
    "handler": Wording("Handler", "a function of the code", "pick one of the file's functions"),
    "mem_request": Wording("Memory request", "a quantity", _MEMORY_HINT),
    "mem_limit": Wording("Memory limit", "a quantity", _MEMORY_HINT),
    "cpu_request": Wording("CPU request", "a quantity", _CPU_HINT),
    "cpu_limit": Wording("CPU limit", "a quantity", _CPU_HINT),
    "gpu_limit": Wording("GPU limit", "a whole number of GPUs", "use 0 to 4096, as 1"),
    "gpu_type": Wording("GPU type", "a resource name", "use nvidia.com/gpu"),
    "node_selector": Wording(
        "Node Selector",
        "a node label",
        "keys as app.iguazio.com/lifecycle, values of at most 63 letters, digits, '-', '_' and '.'",
    ),
    "preemption_mode": Wording(
        "Run on Spot nodes", "a mode", "choose Prevent, Allow, Constrain or None"
    ),
    "priority": Wording("Pods Priority", "a class you may use", "choose one of the list"),
    "volumes_mode": Wording("Volumes", "a mode", "choose Auto, Manual or None"),
    "cron": Wording("Cron schedule", "a schedule", "use five fields, as 0 3 * * *"),
    "function": Wording("Function", "a function", "pick a stored function or upload a file"),
}
_LABEL_OF_THRESHOLD = "{state} threshold"
#: A refusal that says a value is out of a 64-bit range: shown as what the user can act on.
_INT64 = re.compile(r",? ?at most 9223372036854775807( \(64 characters\))?")
#: What the SDK calls the columns of a volume or variable row, as the row's labels say them.
_ROW_COLUMNS = {
    "pvc_name": "Claim, ConfigMap or Secret",
    "configmap_name": "Claim, ConfigMap or Secret",
    "secret_name": "Claim, ConfigMap or Secret",
    "secret": "Claim, ConfigMap or Secret",
    "volume_name": "Volume name",
    "name": "Volume name",
    "volume_mount_path": "Mount path",
    "mount_path": "Mount path",
    "volume type": "Volume type",
}


def label_of(where: str) -> str:
    """The label of the form field ``where`` (a field name, ``threshold.STATE``, ``vol-N``,
    ``env-N``)."""
    if where in FIELDS:
        return FIELDS[where].label
    if where.startswith("threshold."):
        return _LABEL_OF_THRESHOLD.format(state=where.removeprefix("threshold."))
    if where.startswith("vol-"):
        return f"Volume row {int(where.removeprefix('vol-')) + 1}"
    if where.startswith("env-"):
        return f"Variable row {int(where.removeprefix('env-')) + 1}"
    if where.startswith("param."):
        return f"Parameter {where.removeprefix('param.')}"
    return "" if where == "form" else where


def _reason(error: RunplaneError) -> str:
    """The message without the leading name of the SDK argument it refused."""
    message = str(error)
    field = str(getattr(error, "field", "") or "")
    if field and message.startswith(f"{field}: "):
        message = message[len(field) + 2 :]
    return _INT64.sub("", message)


def worded(where: str, value: str | None, error: RunplaneError) -> str:
    """``error``, raised applying ``value`` to the form field ``where`` (``None``: raised by a
    later check of the whole form), as the form says it."""
    label = label_of(where)
    message = str(error)
    if "is above the limit" in message:  # a request against its limit
        return request_above_limit(where, message)
    if value is None or not label:
        return f"{label}: {_reason(error)}" if label else _reason(error)
    if where.startswith("threshold.") and isinstance(error, InvalidValueError):
        return f"{label}: {shown(value)} is not a duration; {_DURATION_HINT}"
    wording = FIELDS.get(where)
    if (
        wording is not None
        and isinstance(error, InvalidValueError)
        and where not in ("priority", "node_selector")
        and str(error.value) == value
    ):
        return f"{label}: {shown(value)} is not {wording.noun}; {wording.hint}"
    if where.startswith(("vol-", "env-")) and isinstance(error, InvalidValueError):
        column = _ROW_COLUMNS.get(error.field, error.field)
        reason = _INT64.sub("", error.allowed)
        return f"{label}, {column}: {shown(error.value)} is not valid; {reason}"
    return f"{label}: {_reason(error)}" if label else _reason(error)


def request_above_limit(where: str, message: str) -> str:
    """A request above its limit, said of the two fields the user typed."""
    resource = "CPU" if where.startswith("cpu") or "requests.cpu" in message else "Memory"
    found = re.search(r"request '([^']*)' is above the limit '([^']*)'", message)
    request, limit = found.groups() if found else ("", "")
    return (
        f"{resource} limit: {limit!r} is below the {resource} request {request!r}; a request "
        "must be at most its limit: raise the limit or lower the request"
    )
