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
from runplane.rendering import RunRef, render
from runplane.rendering.reuse import JobRenders
from runplane.rendering.workloads import pod_specs
from runplane.runtimes.contract import RunRequest
from runplane.spec.bounds import MAX_PARAMS_BYTES, check_json
from runplane.spec.function import Function, FunctionKind
from runplane.spec.handler import bind_parameters, parse_code, read_signature

#: The kinds that are not run, each with why and what to do instead.
_NOT_RUN: dict[FunctionKind, tuple[str, str]] = {
    FunctionKind.SERVING: (
        "serving functions are deployed, not run; use a job",
        "code_to_function(..., kind='job')",
    ),
    FunctionKind.DASK: (
        "a dask function is a cluster used through its client, not run; use fn.client",
        "client = fn.client; client.submit(work, 1).result(); fn.close()",
    ),
}


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
    renders: JobRenders | None = None,
    kept_as: tuple[str, bytes] | None = None,
) -> RunRequest:
    """Everything a runtime needs for one attempt of ``fn``, checked; nothing is started.

    With ``renders``, a job's rendering is taken from those kept for the user and the
    function's JSON, ``kept_as`` (:mod:`runplane.rendering.reuse`)."""
    if fn.kind in _NOT_RUN:
        why, hint = _NOT_RUN[fn.kind]
        raise InvalidValueError("kind", fn.kind.value, why, hint)
    code, filename = _code_of(fn)
    run_inputs: dict[str, str] = {}
    hints: dict[str, str] = {}
    for key, value in (inputs or {}).items():  # "name: type" reads the input as that type
        name, _, hint = (part.strip() for part in str(key).partition(":"))
        run_inputs[name] = str(value)
        if hint:
            hints[name] = hint
    given = {**(params or {}), **run_inputs}
    check_json("params", given, MAX_PARAMS_BYTES, "{'epochs': 3}")
    if fn.spec.handler:
        signature = read_signature(code, fn.spec.handler, filename)
        bound = bind_parameters(signature, given)
        takes_context = signature.takes_context
        context_only = [name for name in given if not signature.accepts(name)]
    else:  # a script: it reads its parameters with get_or_create_ctx(...).get_param
        parse_code(code, filename)
        bound, takes_context, context_only = dict(given), True, list(given)
    # Converted from text, a parameter can become what its text was not: deep, or not JSON.
    check_json("params", bound, MAX_PARAMS_BYTES, "{'epochs': 3}")
    invocation = Invocation(
        uid=uid,
        attempt=attempt,
        project=fn.metadata.project,
        function=fn.metadata.name,
        handler=fn.spec.handler,
        code=code,
        filename=filename,
        takes_context=takes_context,
        params={k: v for k, v in bound.items() if k not in run_inputs},
        inputs=run_inputs,
        artifact_path=_per_run(fn.spec.artifact_path, uid, fn.metadata.project),
        checkpoint_path=_per_run(fn.spec.checkpoint_path, uid, fn.metadata.project),
        context_only=context_only,
        returns=list(fn.spec.returns),
        hints=hints,
        labels={**fn.metadata.labels, "kind": fn.kind.value},
    )
    run = RunRef(uid, attempt)
    if renders is None:
        rendered = render(fn, settings, run=run, role=role)
    else:
        rendered = renders.render(fn, settings, run, role, kept_as)
    manifests = rendered.manifests
    carried = invocation.to_env()
    for pod_spec in [*pod_specs(manifests[0]), *filter(None, [rendered.local_pod])]:
        _carry(pod_spec["containers"][0], carried)
    for part in ("driver", "executor"):  # a SparkApplication's roles hold their own env
        if part in manifests[0]["spec"]:
            role_spec = manifests[0]["spec"][part]
            _carry(role_spec, carried)
            if "template" in role_spec:  # and their pod templates, what spark-submit applies
                _carry(role_spec["template"]["spec"]["containers"][0], carried)
    return RunRequest(
        invocation=invocation,
        manifests=manifests,
        resources=rendered.resources,
        submitted=time.time(),
        source_dir=source_dir,
        local_pod=rendered.local_pod,
        local_resources=rendered.local_resources,
        replicas=rendered.replicas,
    )


def _per_run(path: str, uid: str, project: str) -> str:
    return path.replace("{{run.uid}}", uid).replace("{{run.project}}", project)


def _carry(container: dict[str, Any], carried: dict[str, str]) -> None:
    """Put the invocation in a container's environment, replacing what rendering wrote of it."""
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
