"""A rendered pod as a process on this machine: what it needs, and how it is started.

:func:`plan` reads the pod spec as the kubelet would (requests, environment, volumes), takes
the limits rendering decided from the request, and maps each part to this machine: secrets to
the local secret store, volumes to configured directories. It raises the user errors a run can
hit before it starts. :func:`spawn` starts the run's own process (``runplane.runtimes.local.child``)
with what the plan and the grant give it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runplane import names
from runplane.config import Settings
from runplane.errors import InvalidValueError, NotFoundError
from runplane.placement import PodRequirements
from runplane.runs import Usage
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.local import secretvolumes
from runplane.runtimes.local.cgroups import RunGroup
from runplane.runtimes.local.ledger import Claim, Grant
from runplane.runtimes.local.outpipe import OutputPipe, output_target
from runplane.runtimes.local.process import FreshProcess, RunProcess
from runplane.runtimes.local.secretvolumes import SecretVolume
from runplane.runtimes.local.stopping import DEFAULT_GRACE_SECONDS, Stop
from runplane.runtimes.local.users import RunUser, RunUsers
from runplane.runtimes.local.warm import LauncherUnavailable, WarmLauncher
from runplane.runtimes.output import private_dir, run_dir
from runplane.runtimes.resizing import Sizes
from runplane.spec.bounds import MAX_ENV_VALUE_BYTES
from runplane.spec.quantity import whole_cores

log = logging.getLogger(__name__)

#: Resources this machine offers runs.
OFFERED = ("cpu", "memory", names.GPU)


@dataclass(slots=True)
class LocalRun:
    """One run on this machine, from its plan to its end."""

    request: RunRequest
    requirements: PodRequirements
    env: dict[str, str]
    mounts: dict[str, str]
    #: The Secret volumes of the local store its mounts point at, copied as it starts.
    secrets: tuple[SecretVolume, ...]
    memory_limit: int | None
    cores: int
    gpus: int
    run_dir: Path
    #: Why it waits, as last reported.
    message: str = ""
    never_fits: bool = False
    #: (reason, message) once an abort is asked for.
    abort: tuple[str, str] | None = None
    #: How the run is stopped once an abort is asked for: SIGTERM, its grace, SIGKILL.
    stop: Stop = field(default_factory=Stop)
    process: RunProcess | None = None
    #: Why the warm launcher did not start the run's process ("": it did, or none was asked).
    fresh: str = ""
    #: The highest memory use seen so far, in bytes (by the watchdog; a cgroup counts its own).
    peak_memory: int = 0
    #: The memory a fresh interpreter is charged that the run's process inherited uncharged
    #: from the warm launcher's server (:mod:`.footprint`); counted as the run's (0: fresh).
    inherited: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    #: The CPU limit and request, in millicores.
    cpu_limit: int | None = None
    cpu_request: int = 0
    #: The run's cgroup while it runs (``None`` under the watchdog), and what it had counted
    #: when it was removed.
    group: RunGroup | None = None
    usage_so_far: Usage | None = None
    #: How the run is held, as its record shows it (``cgroup v1, uid 1000000007``).
    isolation: str = ""
    #: The pipe its output comes through, while its supervisor holds it.
    output: OutputPipe | None = None
    #: Its limits as they are now, once it runs: what a resize in place changes
    #: (:mod:`.resize`).
    sizes: Sizes | None = None
    _wake: int | None = None
    _wake_lock: threading.Lock = field(default_factory=threading.Lock)
    #: What starts the run's process(es) when not the single child (an mpijob's mpirun and
    #: its rank program: runtimes/local/gang.py); the run directory is its last argument.
    launcher: list[str] = field(default_factory=list)

    @property
    def uid(self) -> str:
        return self.request.uid

    def open_wake(self) -> int:
        """An eventfd its supervisor sleeps on, written when an abort is asked for."""
        with self._wake_lock:
            if self._wake is None:
                self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            return self._wake

    def request_abort(self, reason: str, message: str, grace: float | None = None) -> bool:
        """Ask the supervisor to stop the run: SIGTERM, then SIGKILL ``grace`` seconds later
        (``None``: the run's own grace period). ``False`` if a stop was asked for already: the
        first one's reason stands and its grace is only ever shortened, so repeating an abort
        changes nothing and a shutdown's immediate stop still kills at once."""
        with self._wake_lock:
            first = self.abort is None
            if first:
                self.abort = (reason, message)
            if not self.stop.ask(grace) and not first:
                return False
            if self._wake is not None:
                os.eventfd_write(self._wake, 1)
        return first

    def close_wake(self) -> None:
        with self._wake_lock:
            if self._wake is not None:
                os.close(self._wake)
                self._wake = None

    @property
    def claim(self) -> Claim:
        return Claim(
            self.uid,
            self.request.priority,
            self.request.submitted,
            self.requirements.requests,
            self.cores,
            self.gpus,
            project=self.request.invocation.project,
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
    limits = request.process_resources.limits
    memory_limit, cpu_limit = limits.memory, limits.cpu
    cores = whole_cores(cpu_limit) if cpu_limit is not None else 0
    directory = run_dir(settings, request.uid)
    mounts, secrets = _mounts(settings, spec, directory)
    return LocalRun(
        request=request,
        requirements=requirements,
        env=_environment(settings, container.get("env", []), request, node_name),
        mounts=mounts,
        secrets=secrets,
        memory_limit=memory_limit,
        cores=cores,
        gpus=requirements.requests.get(names.GPU, 0),
        run_dir=directory,
        cpu_limit=cpu_limit,
        cpu_request=requirements.requests.get("cpu", 0),
        stop=Stop(float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))),
    )


def _volume_source(settings: Settings, volume: dict[str, Any]) -> tuple[str, Path]:
    volumes = settings.local.volumes
    if "persistentVolumeClaim" in volume:
        name = volume["persistentVolumeClaim"]["claimName"]
    elif "configMap" in volume:
        name = volume["configMap"]["name"]
    elif "secret" in volume:
        name = volume["secret"]["secretName"]
    else:
        name = volume["name"]
    if name not in volumes:
        raise NotFoundError(
            f"volume {volume['name']!r}: {name!r} has no local directory; map it in the "
            f"configuration (local.volumes: {{{name}: {{path: /some/dir}}}}, or "
            f'RUNPLANE_LOCAL__VOLUMES=\'{{"{name}": {{"path": "/some/dir"}}}}\')'
        )
    return name, volumes[name].path


def _mounts(
    settings: Settings, spec: dict[str, Any], run_dir: Path
) -> tuple[dict[str, str], tuple[SecretVolume, ...]]:
    """The function's volumes as local directories, and the Secret volumes of the local store
    whose copies they point at (:mod:`.secretvolumes`). runplane's own volumes (the bootstrap
    and the run directory of a pod) are how a pod runs a handler; here the run's process does."""
    sources: dict[str, tuple[str, Path]] = {}
    secrets: dict[str, SecretVolume] = {}
    for volume in spec.get("volumes", []):
        if volume["name"].startswith(names.OWN):
            continue
        if "secret" in volume and volume["secret"]["secretName"] not in settings.local.volumes:
            secrets[volume["name"]] = secretvolumes.planned(volume, settings.local.home / "secrets")
            copied = secretvolumes.directory(run_dir, volume["name"])
            sources[volume["name"]] = volume["secret"]["secretName"], copied
        else:
            sources[volume["name"]] = _volume_source(settings, volume)
    mounts = {}
    mounted: set[str] = set()
    for mount in spec["containers"][0].get("volumeMounts", []):
        if mount["name"].startswith(names.OWN):
            continue
        name, path = sources[mount["name"]]
        if mount["name"] not in secrets and not path.is_dir():
            raise NotFoundError(
                f"volume {mount['name']!r}: the local directory {str(path)!r} for {name!r} "
                "does not exist"
            )
        mounts[mount["mountPath"]] = str(path / mount.get("subPath", ""))
        mounted.add(mount["name"])
    return mounts, tuple(secret for name, secret in secrets.items() if name in mounted)


def _stored_text(variable: str, what: str, path: Path) -> str:
    """A Secret's or ConfigMap's value for an environment variable: UTF-8 text without NUL,
    as any environment value. The value itself is never repeated in the error."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        problem = "is not UTF-8 text"
    else:
        if "\x00" not in text and len(data) <= MAX_ENV_VALUE_BYTES:
            return text
        problem = f"holds a NUL character or is over {MAX_ENV_VALUE_BYTES} bytes"
    raise InvalidValueError(
        f"env {variable}",
        _Named(what),
        f"its value here {problem}, and an environment variable holds text (for bytes, mount "
        "the Secret or ConfigMap as a volume and read the file)",
    )


class _Named:
    """What a value came from, shown in an error instead of the value."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return self.what


def _secret(settings: Settings, variable: str, name: str, key: str) -> str:
    store = settings.local.home / "secrets"
    path = store / name / key
    if not path.is_file():
        raise NotFoundError(
            f"secret {name!r} key {key!r} is not in the local secret store; create "
            f"{path} (the store is {store}/<secret>/<key>)"
        )
    return _stored_text(variable, f"secret {name!r} key {key!r}", path)


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
            values[item["name"]] = _secret(settings, item["name"], ref["name"], ref["key"])
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            directory = settings.local.volumes.get(ref["name"])
            if directory is None or not (directory.path / ref["key"]).is_file():
                raise NotFoundError(
                    f"env {item['name']}: ConfigMap {ref['name']!r} key {ref['key']!r} has "
                    "no local file; map the ConfigMap in local.volumes"
                )
            values[item["name"]] = _stored_text(
                item["name"],
                f"ConfigMap {ref['name']!r} key {ref['key']!r}",
                directory.path / ref["key"],
            )
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


def server_environment(settings: Settings) -> dict[str, str]:
    """The warm launcher's server's environment: only what every run inherits anyway, so no
    secret of runplane's sits in the memory its children start with."""
    inherited = (*INHERITED, *settings.local.inherit_env)
    return {
        **{name: os.environ[name] for name in inherited if name in os.environ},
        "PYTHONUNBUFFERED": "1",
    }


def _own_dir(path: Path) -> Path:
    """A directory of the run's own (0700) in its directory, made by its first attempt."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    return path


def _private_file(path: Path, append: bool = True) -> int:
    """A descriptor of ``path`` for writing, created readable by its owner only."""
    mode = os.O_APPEND if append else os.O_TRUNC
    return os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o600)


#: The run's first process waits on its standard input for this line before it runs anything
#: (runplane places it in its cgroup meanwhile), then becomes the run's interpreter.
_GATE = 'read -r go; [ "$go" = go ] || exit 125; exec "$0" "$@" </dev/null'
CHILD = Path(__file__).resolve().parent / "child.py"


def needs_fresh(run: LocalRun, env: Mapping[str, str]) -> str:
    """Why the run must start in a fresh interpreter ("" when a warm one serves): another
    program starts it (an mpijob's ``mpirun``), or its environment sets what only an
    interpreter's start reads (``PYTHON*`` options, the locale)."""
    if run.launcher:
        return "its processes are started by " + Path(run.launcher[0]).name
    for name in env:
        if name.startswith("PYTHON") and name not in ("PYTHONPATH", "PYTHONUNBUFFERED"):
            return f"its environment sets {name}, which Python reads only as it starts"
        if name in ("LANG", "LC_ALL", "LC_CTYPE") and env[name] != os.environ.get(name):
            return f"its environment sets {name}, which Python reads only as it starts"
    return ""


def spawn(
    run: LocalRun,
    grant: Grant,
    settings: Settings,
    *,
    pin: bool,
    user: RunUser | None,
    group: Callable[[int], RunGroup] | None,
    warm: WarmLauncher | None,
    inherited: Callable[[], int] = lambda: 0,
) -> RunProcess:
    """Start the run's process, in ``group`` (when given) before it runs anything, in its own
    session, as ``user`` (runplane's own when ``None``), output to ``output.log`` in its
    directory: forked by ``warm``'s server when given and the run allows it, else a fresh
    interpreter held at a gate until it is in its group. The group is made by whichever
    starts the process: the server, from the group's steps, or here. ``group`` gives the group
    for the bytes the process inherits uncharged: ``inherited()`` (:mod:`.footprint`) for a
    warm one, whose :attr:`LocalRun.inherited` they become, 0 for a fresh one.

    The run's directory and what runplane writes there are its owner's only (0700, 0600),
    and the run's process starts with umask 077 so that its own files are too. ``pin``
    confines it to the cores of its grant (the watchdog's CPU limit; a cgroup has a quota).
    """
    request = run.request
    private_dir(run.run_dir)
    own = [_own_dir(run.run_dir / name) for name in ("work", "home", "tmp")]
    work = own[0]
    invocation = request.invocation.to_json()
    spec = {
        # MLRun's ``kind`` label says where a run ran: here, ``local``.
        "invocation": {**invocation, "labels": {**invocation["labels"], "kind": "local"}},
        "mounts": run.mounts,
        "source_dir": request.source_dir,
        "cpu_ids": list(grant.cpu_ids) if pin and run.cores else [],
        "executor_pid": os.getpid(),
        "no_new_privileges": user is not None,
    }
    for mount_path, local in run.mounts.items():
        link = work / mount_path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(local)
    RunUsers.hand_over(run.run_dir, user, [*own, *secretvolumes.copy(run.run_dir, run.secrets)])
    env = environment(run, grant, settings)
    why_fresh = needs_fresh(run, env)
    if warm is not None and not why_fresh:
        footprint = inherited()
        steps = group(footprint).steps if group is not None else None
        try:  # the spec travels with the request: a forked process needs no file to read
            run.inherited = footprint
            return warm.start(
                {
                    "run_dir": str(run.run_dir),
                    "spec": spec,
                    "group": steps,
                    "env": env,
                    "uid": None if user is None else user.uid,
                    "gid": None if user is None else user.gid,
                }
            )
        except LauncherUnavailable as error:
            run.inherited = 0
            log.warning("run %s starts fresh: %s", run.uid, error)
            why_fresh = str(error)
    with os.fdopen(_private_file(run.run_dir / "spec.json", append=False), "w") as file:
        file.write(json.dumps(spec))
    RunUsers.hand_over(run.run_dir, user, [run.run_dir / "spec.json"])
    run.fresh = why_fresh if warm is not None else ""  # what kept the warm launcher from it
    made = group(0) if group is not None else None
    if made is not None:
        made.make()
    python = str(settings.local.python or sys.executable)
    log_fd = _private_file(output_target(run.run_dir))
    try:
        popen = subprocess.Popen(
            [
                "/bin/sh",
                "-c",
                _GATE,
                *(run.launcher or [python, str(CHILD)]),
                str(run.run_dir),
            ],
            stdin=subprocess.PIPE,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
            start_new_session=True,
            user=None if user is None else user.uid,
            group=None if user is None else user.gid,
            extra_groups=None if user is None else [],
        )
    finally:
        os.close(log_fd)
    process = FreshProcess(popen)
    if made is not None:
        try:
            made.add(popen.pid)  # before it runs anything: all it starts is inside
        except BaseException:
            process.kill()
            process.wait()
            process.close()
            raise
    open_gate(popen)
    return process


def open_gate(process: subprocess.Popen[bytes]) -> None:
    """Let the run's process go on to run the handler."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write(b"go\n")
        process.stdin.close()
