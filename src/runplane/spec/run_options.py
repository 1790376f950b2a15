"""What a run is given besides its function, declared once for every surface that starts one.

:class:`RunOptions` is what reaches the service: the SDK's ``fn.run`` prepares it, the CLI maps
its flags to it, the API's request body is it plus the function, and the run service submits
from it. A new option of a run is a field here; each surface maps from this class rather than
repeating the list.

:class:`RunArguments` is ``fn.run``'s arguments as runplane reads them, before the client turns
them into a function copy and :class:`RunOptions` (a task, a handler, hyperparameters, where the
run goes). ``Function.run`` keeps MLRun's keyword signature and builds one of these, so the
layers between it and the client pass one object instead of the list again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from runplane.spec.bounds import check_unicode


class RunOptions(pydantic.BaseModel):
    """A run's own arguments: ``params`` for the handler (converted to its annotated types),
    ``inputs`` as paths by name, and ``state_thresholds`` over the function's for this run.
    Checked where they are used (the handler's signature, the threshold parser), so every
    surface refuses the same values in the same words."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    params: dict[str, Any] = pydantic.Field(default_factory=dict)
    inputs: dict[str, str] = pydantic.Field(default_factory=dict)
    state_thresholds: dict[str, Any] = pydantic.Field(default_factory=dict)

    @pydantic.model_validator(mode="after")
    def _unicode(self) -> RunOptions:
        """Text only: a lone surrogate in any value (from the SDK, a flag or a body) is
        refused here, naming where, before it could be recorded."""
        for field in ("params", "inputs", "state_thresholds"):
            check_unicode(field, getattr(self, field))
        return self


@dataclass(frozen=True, kw_only=True)
class RunArguments:
    """``fn.run``'s arguments, as given (see ``Function.run`` for what each means); ``None``
    or empty where the caller gave nothing."""

    runspec: Any = None
    handler: Any = None
    name: str = ""
    project: str = ""
    params: Mapping[str, Any] | None = None
    inputs: Mapping[str, Any] | None = None
    state_thresholds: Mapping[str, Any] | None = None
    watch: bool = True
    schedule: str | None = None
    local: bool | None = None
    artifact_path: str | None = None
    workdir: str = ""
    hyperparams: Mapping[str, Any] | None = None
    hyper_param_options: Any = None
    returns: Sequence[str] | None = None
    labels: Mapping[str, str] | None = None
    selector: str | None = None
    #: Accepted, as MLRun's ``run`` takes it; nothing here reads it.
    param_file_secrets: Mapping[str, str] | None = None
    retry: Any = None
