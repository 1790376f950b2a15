"""A job's rendering made once for many runs of one function, and copied for each.

A sweep, a schedule or a pipeline's step submits one function many times, under the same
settings and by the same user: every one of those renders came out the same but for the run's
name and its two labels (its uid and attempt). Rendering a job was a sixth of the submission
threads' CPU (docs/benchmarks.md, "Scale"); a copy of the kept rendering, with the run's name
and labels written in, costs a third of a render.

What names a rendering is what it is made from: the function as its JSON (the text a run's
record holds: two functions of the same JSON render alike), the settings (the same object: a
change of settings makes a new one) and the user's role (priority-class policy); and the user,
so that how fast a submission is answered says nothing about what another user sent (as for
the functions read, ``routes.submissions.FunctionsRead``). A function given as an object alone
is rendered each time: an SDK caller may change it between runs. Only jobs are kept; every
other kind (a serving function, an MPIJob, a SparkApplication) is rendered each time.
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from runplane import names
from runplane.config import Settings
from runplane.rendering.manifests import Rendered, RunRef, render, run_name
from runplane.spec.function import Function, FunctionKind

#: Renderings kept, the least recently used dropped first: as many as the functions read are
#: (``FUNCTIONS_KEPT``), each named by a function's JSON of at most 64 Ki characters, which its
#: pod carries too: a few MiB at most.
KEPT = 32


@dataclass(frozen=True, slots=True)
class _Kept:
    settings: Settings
    rendered: Rendered
    #: Its manifests pickled, but for the bootstrap ConfigMap's data: a run's copy is read
    #: from these bytes, the 70 KB of that ConfigMap's text shared.
    pickled: bytes

    @classmethod
    def of(cls, settings: Settings, rendered: Rendered) -> _Kept:
        hollow = [{**m, "data": None} if _bootstrap(m) else m for m in rendered.manifests]
        return cls(settings, rendered, pickle.dumps(hollow, pickle.HIGHEST_PROTOCOL))


class JobRenders:
    """Renderings of jobs kept by user, function JSON, settings and role, stamped per run."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._renders: OrderedDict[tuple[str, bytes, str | None], _Kept] = OrderedDict()

    def render(
        self,
        function: Function,
        settings: Settings,
        run: RunRef,
        role: str | None,
        kept_as: tuple[str, bytes] | None,
    ) -> Rendered:
        """What :func:`render` makes of ``function`` for ``run``. ``kept_as``: the user
        submitting it and the function's JSON (``orjson.dumps(function.to_dict())``); ``None``
        renders it anew."""
        if kept_as is None or function.kind is not FunctionKind.JOB:
            return render(function, settings, run, role)
        key = (*kept_as, role)
        with self._lock:
            kept = self._renders.get(key)
            if kept is not None and kept.settings is settings:
                self._renders.move_to_end(key)
            else:
                kept = None
        if kept is None:
            # Rendered without a run: a policy that refuses it raises here, as it would.
            kept = _Kept.of(settings, render(function, settings, None, role))
            with self._lock:
                self._renders[key] = kept
                self._renders.move_to_end(key)
                if len(self._renders) > self._kept:
                    self._renders.popitem(last=False)
        return _stamped(kept, function, run)

    def kept(self) -> int:
        """How many renderings are kept."""
        with self._lock:
            return len(self._renders)


def _stamped(kept: _Kept, function: Function, run: RunRef) -> Rendered:
    """A copy of a job's rendering made without a run, as :func:`render` makes it for ``run``:
    the pod named for the run, and the pod and its Secrets labelled with its uid and attempt.
    Its manifests and lints are its own, whoever gets them may change them; its resources,
    frozen, are the kept rendering's."""
    template = kept.rendered
    manifests: list[dict[str, Any]] = pickle.loads(kept.pickled)
    for manifest, kept_manifest in zip(manifests, template.manifests, strict=True):
        if _bootstrap(manifest):
            manifest["data"] = dict(kept_manifest["data"])
            continue
        labels = manifest["metadata"]["labels"]
        labels[names.RUN_UID] = run.uid
        labels[names.ATTEMPT] = str(run.attempt)
        if manifest["kind"] == "Pod":
            manifest["metadata"]["name"] = run_name(function, run)
    return Rendered(  # not dataclasses.replace, which looks up the fields on every call
        manifests=manifests,
        qos=template.qos,
        resources=template.resources,
        lints=list(template.lints),
        local_pod=template.local_pod,
        local_resources=template.local_resources,
        replicas=template.replicas,
    )


def _bootstrap(manifest: dict[str, Any]) -> bool:
    """Whether ``manifest`` is runplane's bootstrap ConfigMap, the one a job's rendering has."""
    return bool(manifest["kind"] == "ConfigMap")
