"""The warm launcher's server: a pre-imported interpreter that forks one process per run.

Started by runplane (:mod:`runplane.runtimes.local.warm`) as
``python .../runtimes/local/forkserver.py FD`` with a clean environment, it imports what every
run needs (``child.py`` and :mod:`runplane.bootstrap`) once and then waits on the socket ``FD``
for requests, one JSON line each. For each it forks; the parent answers the child's pid and
goes back to waiting, and reports each child's exit (its wait status and resource use) as soon
as ``SIGCHLD`` says so. The child is held until the server has moved it into the run's cgroup;
then it leaves the serving loop and, before the handler's module is imported, opens its log,
takes the run's environment and drops to the run's user (no groups, no new privileges). It ends
as a fresh interpreter does: non-daemon threads are joined, ``atexit`` runs, output is flushed
(but the interpreter is not torn down object by object: see :func:`_end`).

The server never runs a handler's code itself, so what one run does to its interpreter (a crash,
``os._exit``, a thread left running, a changed global) stays in that run's process. Like
``child.py`` it needs only the standard library.

``multiprocessing``'s forkserver is not used: it starts its server with the caller's whole
environment (a service's tokens would sit in every run's memory), is one per process shared with
the caller's own code, and its children import the caller's ``__main__`` again.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

_HERE = Path(__file__).resolve().parent
_PR_SET_DUMPABLE = 4


def _load(name: str, path: Path) -> ModuleType:
    """A module of runplane's by its path: this program runs as a script in any Python 3.9+."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load_child() -> ModuleType:
    return _load("runplane_local_child", _HERE / "child.py")


#: How a run's cgroup is made, joined, counted and removed (``cgroups/steps.py``).
_steps = _load("runplane_local_cgroup_steps", _HERE / "cgroups" / "steps.py")


def _send(connection: socket.socket, message: dict[str, Any]) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n")


def _reap(connection: socket.socket, groups: dict[int, Any]) -> None:
    """Report every child that has exited: pid, wait status, CPU seconds and peak RSS, and,
    when nothing is left running in its run's cgroup, the group's counters, the group removed
    (what is left running, runplane kills)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        steps = groups.pop(pid, None)
        _send(
            connection,
            {
                "exited": pid,
                "status": status,
                "cpu": usage.ru_utime + usage.ru_stime,
                "rss": usage.ru_maxrss * 1024,
                "group": None if steps is None else _steps.finish(steps),
            },
        )


def serve(connection: socket.socket) -> dict[str, Any] | None:
    """Fork a child per request until runplane hangs up (then ``None``); in a child, return
    the request it is to run."""
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = bytearray()
    groups: dict[int, Any] = {}  # each running child's group steps, by pid
    while True:
        ready, _, _ = select.select([connection.fileno(), wake_read], [], [])
        if wake_read in ready:
            while True:
                try:
                    if not os.read(wake_read, 512):
                        break
                except BlockingIOError:
                    break
            _reap(connection, groups)
        if connection.fileno() not in ready:
            continue
        data = connection.recv(1 << 16)
        if not data:
            return None
        pending += data
        if b"\n" not in data:
            continue  # the rest of a long request is on its way
        *lines, rest = pending.split(b"\n")
        pending = bytearray(rest)
        for line in lines:
            request = json.loads(line)
            steps = request.get("group")
            if steps is not None:
                try:
                    _steps.make(steps)
                except OSError as error:
                    _send(connection, {"id": request["id"], "error": f"make its cgroup: {error}"})
                    continue
            gate_read, gate_write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(gate_write)
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_read)
                os.close(wake_write)
                connection.close()
                go = os.read(gate_read, 1)  # held until it is in the run's cgroup
                os.close(gate_read)
                if go != b"g":
                    os._exit(125)
                return dict(request)
            os.close(gate_read)
            try:
                if steps is not None:
                    _steps.join(steps, pid)
            except OSError as error:
                os.kill(pid, signal.SIGKILL)
                error_text = f"move it into its cgroup: {error}"
                _send(connection, {"id": request["id"], "error": error_text})
            else:
                if steps is not None:
                    groups[pid] = steps
                os.write(gate_write, b"g")
                _send(connection, {"id": request["id"], "pid": pid})
            finally:
                os.close(gate_write)


def _output(run_dir: Path) -> None:
    """Standard output and error to the run's output pipe, which its supervisor empties into
    its log (``outpipe.py``), or to the log itself when it has none; standard input from
    nowhere."""
    pipe = run_dir / "output.pipe"
    log = os.open(
        pipe if os.path.lexists(pipe) else run_dir / "output.log",
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)


def _become(uid: int | None, gid: int | None, child: ModuleType) -> None:
    """Drop to the run's user: no supplementary groups, no new privileges. The process stays
    dumpable (as one started by ``exec`` is), so it can read its own ``/proc/self``."""
    if uid is None or gid is None:
        return
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    child._prctl(child._PR_SET_NO_NEW_PRIVS, 1)
    child._prctl(_PR_SET_DUMPABLE, 1)


def run(request: dict[str, Any], child: ModuleType, server: int) -> int:
    """In the forked child of ``server``: become the run's process, then run its handler as
    ``child.py`` would."""
    try:
        os.setsid()
        run_dir = Path(request["run_dir"])
        _output(run_dir)
    except OSError as error:
        sys.stderr.write(f"runplane: the run's process could not be prepared: {error}\n")
        return 125
    env: dict[str, str] = request["env"]
    zone = os.environ.get("TZ")
    # The server's environment is what every run inherits: only what differs is changed.
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    if hasattr(time, "tzset") and os.environ.get("TZ") != zone:
        time.tzset()
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = extra
    _become(request.get("uid"), request.get("gid"), child)
    sys.argv = [str(_HERE / "child.py"), str(run_dir)]
    code: int = child.main(run_dir, parent=server, spec=request["spec"])
    return code


def _practise(bootstrap: ModuleType) -> None:
    """Call a no-op handler here once, as a run's process would, before serving. The code every
    run goes through is then specialised and its caches filled in the server, where the pages
    are the server's own, so each forked child writes to (and the kernel copies) fewer of the
    pages it shares: measured over 500 queued runs, the children's CPU went from 4.3 to 3.2 ms
    a run. The handler is runplane's, never a user's; what the call changed in this process is
    put back. It only saves time: if it cannot run (no writable temporary directory), the
    server serves without it."""
    with contextlib.suppress(Exception):
        _call_noop(bootstrap)


def _call_noop(bootstrap: ModuleType) -> None:
    code = "def handler(context, x: int = 1):\n    return x\n"
    invocation = bootstrap.Invocation("practice", "", "practice", "handler", code, "practice.py")
    # Through JSON and back, as a request's spec travels: the decoder is warmed up too.
    sent = json.loads(json.dumps({"spec": {"invocation": invocation.to_json()}}))
    invocation = bootstrap.Invocation.from_json(sent["spec"]["invocation"])
    terminate = signal.getsignal(signal.SIGTERM)
    with tempfile.TemporaryDirectory() as scratch:
        context = bootstrap.Context(invocation, Path(scratch), {})
        try:
            bootstrap.call_handler(context, invocation)
        finally:
            if context._events is not None:
                context._events.close()
            signal.signal(signal.SIGTERM, terminate)
            bootstrap.become_current(None)
            sys.modules.pop(invocation.module_name, None)


def fork_probe(child: ModuleType, run_dir: Path) -> int:
    """The second half of ``child.py --footprint`` (:mod:`.footprint`): become a server as
    :func:`main` does and fork one run's process as :func:`serve` does, which runs the run of
    ``run_dir`` once ``go`` comes on its standard input; its pid is written on standard output.
    Returns the child's exit code."""
    _practise(child._bootstrap())
    gc.freeze()
    server = os.getpid()
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    pid = os.fork()
    if pid == 0:
        if os.read(0, 3) != b"go\n":
            os._exit(125)
        _end(
            lambda: run(
                {"run_dir": str(run_dir), "spec": spec, "env": {**os.environ}}, child, server
            )
        )
    sys.stdout.write(f"{pid}\n")
    sys.stdout.flush()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main() -> int:
    """Serve runplane (0 when it hangs up); in a forked child, run the request and exit."""
    if sys.path and Path(sys.path[0]).resolve() == _HERE:
        del sys.path[0]  # as for child.py: this directory's modules are not the handler's
    child = _load_child()
    child._prctl(child._PR_SET_PDEATHSIG, signal.SIGKILL)  # runplane gone: so is the server
    _practise(child._bootstrap())  # what every run imports, once
    connection = socket.socket(fileno=int(sys.argv[1]))
    server = os.getpid()
    _send(connection, {"ready": server})
    gc.freeze()  # what is imported stays shared: a child's collector never touches (copies) it
    request = serve(connection)
    if request is None:
        return 0
    _end(lambda: run(request, child, server))


def _end(body: Callable[[], int]) -> NoReturn:
    """Run ``body`` and exit as an interpreter does (an uncaught exception printed, non-daemon
    threads joined, ``atexit`` handlers run, output flushed), without tearing the interpreter
    down object by object: in a forked child that would touch, and so copy, every page of
    the server's heap, for nothing the run can observe but objects' ``__del__`` at exit."""
    try:
        code = body()
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's exit does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(code: object) -> int:
    """``sys.exit(code)``'s status, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
