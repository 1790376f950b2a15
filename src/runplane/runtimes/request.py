"""From a function and a call to a :class:`RunRequest`: the one place a run is prepared.

Every runtime executes what this builds, so a run here and a run on a cluster get the same
code, the same converted parameters and the same rendered resources. Everything a user can
get wrong about the call is refused here, before anything is recorded or started.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from typing import Any

from runplane.bootstrap import Invocation
from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.rendering import RunRef, effective_resources, render
from runplane.runtimes.contract import RunRequest
from runplane.spec.bounds import MAX_PARAMS_BYTES, check_json
from runplane.spec.function import Function, FunctionKind
from runplane.spec.handler import bind_parameters, read_signature


def build_request(
    fn: Function,
    settings: Settings,
    *,
    uid: str,
    params: Mapping[str, Any] | None = None,
    inputs: Mapping[str, str] | None = None,
    role: str | None = None,
    source_dir: str = "",
    attempt: int = 1,
) -> RunRequest:
    """Everything a runtime needs for one attempt of ``fn``, checked; nothing is started."""
    if fn.kind is FunctionKind.SERVING:
        raise InvalidValueError(
            "kind",
            fn.kind.value,
            "serving functions are deployed, not run; use a job",
            "code_to_function(..., kind='job')",
        )
    code, filename = _code_of(fn)
    if not fn.spec.handler:
        raise InvalidValueError(
            "handler",
            "",
            "a run needs the handler to call",
            "code_to_function(..., handler='train')",
        )
    run_inputs = {str(key): str(value) for key, value in (inputs or {}).items()}
    check_json("params", {**(params or {}), **run_inputs}, MAX_PARAMS_BYTES, "{'epochs': 3}")
    signature = read_signature(code, fn.spec.handler, filename)
    bound = bind_parameters(signature, {**(params or {}), **run_inputs})
    invocation = Invocation(
        uid=uid,
        attempt=attempt,
        project=fn.metadata.project,
        function=fn.metadata.name,
        handler=fn.spec.handler,
        code=code,
        filename=filename,
        takes_context=signature.takes_context,
        params={k: v for k, v in bound.items() if k not in run_inputs},
        inputs=run_inputs,
        artifact_path=_per_run(fn.spec.artifact_path, uid, fn.metadata.project),
        checkpoint_path=_per_run(fn.spec.checkpoint_path, uid, fn.metadata.project),
    )
    rendered = render(fn, settings, run=RunRef(uid, attempt), role=role)
    manifests = rendered.manifests
    _carry(manifests[0], invocation)
    requests, limits, _ = effective_resources(fn, settings)
    priority_class = manifests[0]["spec"]["priorityClassName"]
    return RunRequest(
        invocation=invocation,
        manifests=manifests,
        priority=settings.priority_classes.value_of(priority_class),
        submitted=time.time(),
        source_dir=source_dir,
        requests={key: str(value) for key, value in requests.items()},
        limits={key: str(value) for key, value in limits.items()},
    )


def _per_run(path: str, uid: str, project: str) -> str:
    return path.replace("{{run.uid}}", uid).replace("{{run.project}}", project)


def _carry(pod: dict[str, Any], invocation: Invocation) -> None:
    """Put the invocation in the pod's environment, replacing what rendering wrote of it."""
    container = pod["spec"]["containers"][0]
    carried = invocation.to_env()
    env = [item for item in container.get("env", []) if item["name"] not in carried]
    container["env"] = [{"name": name, "value": value} for name, value in carried.items()] + env


def _code_of(fn: Function) -> tuple[str, str]:
    """The function's embedded code. Preparing a run never reads a file: a service would
    otherwise read its own machine's files for whoever names them (``spec.command`` is
    embedded on the caller's side, by :func:`runplane.spec.loaders.embed_command`)."""
    if fn.spec.build.source:
        code = base64.b64decode(fn.spec.build.source).decode("utf-8")
        return code, fn.spec.build.filename or f"{fn.metadata.name}.py"
    raise InvalidValueError(
        "spec.build.source",
        "",
        "a run needs its code embedded in the function"
        + (
            f" (spec.command {fn.spec.command!r} is a file of the caller's machine: fn.run() "
            "and runplane run embed it; a service never reads its own files for a request)"
            if fn.spec.command
            else ""
        ),
        "code_to_function('training', filename='train.py', handler='train')",
    )
