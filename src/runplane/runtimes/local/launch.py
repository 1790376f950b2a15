"""A rendered pod as a process on this machine: what it needs, and how it is started.

:func:`plan` reads the pod spec as the kubelet would (resources, environment, volumes) and maps
each part to this machine: secrets to the local secret store, volumes to configured
directories. It raises the user errors a run can hit before it starts. :func:`spawn` starts the
run's own process (``runplane.runtimes.local.child``) with what the plan and the grant give it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runplane import names
from runplane.config import Settings
from runplane.errors import InvalidValueError, NotFoundError
from runplane.placement import PodRequirements
from runplane.placement.model import resource_amount
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.local.ledger import Claim, Grant
from runplane.runtimes.output import OUTPUT, private_dir, run_dir

#: Resources this machine offers runs.
OFFERED = ("cpu", "memory", names.GPU)


@dataclass(slots=True)
class LocalRun:
    """One run on this machine, from its plan to its end."""

    request: RunRequest
    requirements: PodRequirements
    env: dict[str, str]
    mounts: dict[str, str]
    memory_limit: int | None
    cores: int
    gpus: int
    run_dir: Path
    #: Why it waits, as last reported.
    message: str = ""
    never_fits: bool = False
    #: (reason, message) once an abort is asked for.
    abort: tuple[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    #: The highest memory use seen so far, in bytes.
    peak_memory: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    #: What starts the run's process(es) when not the single child (an mpijob's mpirun and
    #: its rank program: runtimes/local/gang.py); the run directory is its last argument.
    launcher: list[str] = field(default_factory=list)

    @property
    def uid(self) -> str:
        return self.request.uid

    @property
    def claim(self) -> Claim:
        return Claim(
            self.uid,
            self.request.priority,
            self.request.submitted,
            self.requirements.requests,
            self.cores,
            self.gpus,
        )


def plan(request: RunRequest, settings: Settings, node_name: str) -> LocalRun:
    """What ``request`` needs on this machine; raises what would keep it from starting."""
    spec = request.pod_spec
    container = spec["containers"][0]
    requirements = PodRequirements.from_pod_spec(spec)
    unknown = [r for r in requirements.requests if r not in OFFERED]
    if unknown:
        raise InvalidValueError(
            "resources",
            unknown[0],
            f"this machine offers cpu, memory and {names.GPU}",
            "with_limits(gpus=1)",
        )
    limits = container.get("resources", {}).get("limits", {})
    memory_limit = resource_amount("memory", limits["memory"]) if "memory" in limits else None
    cores = math.ceil(resource_amount("cpu", limits["cpu"]) / 1000) if "cpu" in limits else 0
    return LocalRun(
        request=request,
        requirements=requirements,
        env=_environment(settings, container.get("env", []), request, node_name),
        mounts=_mounts(settings, spec),
        memory_limit=memory_limit,
        cores=cores,
        gpus=requirements.requests.get(names.GPU, 0),
        run_dir=run_dir(settings, request.uid),
    )


def _volume_source(settings: Settings, volume: dict[str, Any]) -> tuple[str, Path]:
    volumes = settings.local.volumes
    if "persistentVolumeClaim" in volume:
        name = volume["persistentVolumeClaim"]["claimName"]
    elif "configMap" in volume:
        name = volume["configMap"]["name"]
    elif "secret" in volume:
        name = volume["secret"]["secretName"]
        if name not in volumes:
            return name, settings.local.home / "secrets" / name
    else:
        name = volume["name"]
    if name not in volumes:
        raise NotFoundError(
            f"volume {volume['name']!r}: {name!r} has no local directory; map it in the "
            f"configuration (local.volumes: {{{name}: {{path: /some/dir}}}}, or "
            f'RUNPLANE_LOCAL__VOLUMES=\'{{"{name}": {{"path": "/some/dir"}}}}\')'
        )
    return name, volumes[name].path


def _mounts(settings: Settings, spec: dict[str, Any]) -> dict[str, str]:
    """The function's volumes as local directories. runplane's own volumes (the bootstrap and
    the run directory of a pod) are how a pod runs a handler; here the run's process does."""
    sources = {
        v["name"]: _volume_source(settings, v)
        for v in spec.get("volumes", [])
        if not v["name"].startswith(names.OWN)
    }
    mounts = {}
    for mount in spec["containers"][0].get("volumeMounts", []):
        if mount["name"].startswith(names.OWN):
            continue
        name, path = sources[mount["name"]]
        if not path.is_dir():
            raise NotFoundError(
                f"volume {mount['name']!r}: the local directory {str(path)!r} for {name!r} "
                "does not exist"
            )
        mounts[mount["mountPath"]] = str(path / mount.get("subPath", ""))
    return mounts


def _secret(settings: Settings, name: str, key: str) -> str:
    store = settings.local.home / "secrets"
    path = store / name / key
    if not path.is_file():
        raise NotFoundError(
            f"secret {name!r} key {key!r} is not in the local secret store; create "
            f"{path} (the store is {store}/<secret>/<key>)"
        )
    return path.read_text(encoding="utf-8")


def _environment(
    settings: Settings, env: list[dict[str, Any]], request: RunRequest, node_name: str
) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in env:
        if "value" in item:
            values[item["name"]] = item["value"]
            continue
        source = item["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            values[item["name"]] = _secret(settings, ref["name"], ref["key"])
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            directory = settings.local.volumes.get(ref["name"])
            if directory is None or not (directory.path / ref["key"]).is_file():
                raise NotFoundError(
                    f"env {item['name']}: ConfigMap {ref['name']!r} key {ref['key']!r} has "
                    "no local file; map the ConfigMap in local.volumes"
                )
            values[item["name"]] = (directory.path / ref["key"]).read_text(encoding="utf-8")
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
            values[item["name"]] = request.pod["metadata"]["name"]
        elif source.get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            values[item["name"]] = node_name
        else:
            raise InvalidValueError(
                f"env {item['name']}",
                source,
                "locally, valueFrom supports secretKeyRef, "
                "configMapKeyRef, and fieldRef metadata.name/spec.nodeName",
            )
    return values


#: What a run inherits of the environment of the process that starts it: enough to find
#: programs and speak the user's language. The rest of that environment (a service's tokens
#: and database URL, a user's cloud credentials) is not the run's unless its spec grants it.
INHERITED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM")


def environment(run: LocalRun, grant: Grant, settings: Settings) -> dict[str, str]:
    """The run's whole environment: the allow-listed inherited variables, a home and temporary
    directory of its own, the devices it was granted, and what its spec sets."""
    inherited = (*INHERITED, *settings.local.inherit_env)
    return {
        **{name: os.environ[name] for name in inherited if name in os.environ},
        "HOME": str(run.run_dir / "home"),
        "TMPDIR": str(run.run_dir / "tmp"),
        "PYTHONUNBUFFERED": "1",
        names.ENV_MOUNTS: json.dumps(run.mounts),
        "CUDA_VISIBLE_DEVICES": ",".join(grant.gpu_ids),
        "NVIDIA_VISIBLE_DEVICES": ",".join(grant.gpu_ids) or "void",
        **run.env,
    }


def _private_file(path: Path, append: bool = True) -> int:
    """A descriptor of ``path`` for writing, created readable by its owner only."""
    mode = os.O_APPEND if append else os.O_TRUNC
    return os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o600)


def spawn(run: LocalRun, grant: Grant, settings: Settings) -> subprocess.Popen[bytes]:
    """Start the run's process in its own session, output to ``output.log`` in its directory.

    The run's directory and what runplane writes there are its owner's only (0700, 0600),
    and the run's process starts with umask 077 so that its own files are too.
    """
    request = run.request
    private_dir(run.run_dir.parent)
    private_dir(run.run_dir)
    work = private_dir(run.run_dir / "work")
    private_dir(run.run_dir / "home")
    private_dir(run.run_dir / "tmp")
    spec = {
        "invocation": request.invocation.to_json(),
        "mounts": run.mounts,
        "source_dir": request.source_dir,
        "cpu_ids": list(grant.cpu_ids) if run.cores else [],
        "executor_pid": os.getpid(),
    }
    with os.fdopen(_private_file(run.run_dir / "spec.json", append=False), "w") as file:
        file.write(json.dumps(spec))
    for mount_path, local in run.mounts.items():
        link = work / mount_path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(local)
    log = _private_file(run.run_dir / OUTPUT)
    try:
        return subprocess.Popen(
            [
                *(run.launcher or [sys.executable, "-m", "runplane.runtimes.local.child"]),
                str(run.run_dir),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment(run, grant, settings),
            cwd=work,
            start_new_session=True,
        )
    finally:
        os.close(log)
