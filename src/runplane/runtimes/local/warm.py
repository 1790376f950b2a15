"""The warm launcher: runs' processes forked from a pre-imported server instead of started anew.

Starting an interpreter and importing runplane's bootstrap costs tens of milliseconds, more than
a small handler. The server (:mod:`runplane.runtimes.local.forkserver`) pays it once and forks a
child per run; this side asks it for children and learns of their exits over one socket, in a
thread of its own that also starts the server (the server dies with that thread's process, and
Linux ties a parent-death signal to the thread that started a child). A child's exit is pushed
to whoever waits for it through an ``eventfd``: nothing is polled.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runplane.runtimes.local.process import Exit, wait_readable

log = logging.getLogger(__name__)

SERVER = Path(__file__).resolve().parent / "forkserver.py"


@dataclass(slots=True)
class WarmProcess:
    """A run's first process, a child of the server."""

    pid: int = 0
    exit: Exit | None = None
    _started: threading.Event = field(default_factory=threading.Event)
    _error: str = ""
    _fd: int = field(default_factory=lambda: os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK))
    #: Guards ``_fd``: an exit reported after :meth:`close` must not write to a reused number.
    _fd_lock: threading.Lock = field(default_factory=threading.Lock)

    def fileno(self) -> int:
        """Readable once the process has exited."""
        return self._fd

    def poll(self) -> Exit | None:
        return self.exit

    def wait(self) -> Exit:
        while self.exit is None:
            wait_readable(self._fd)
        return self.exit

    def terminate(self) -> None:
        self._send(signal.SIGTERM)

    def kill(self) -> None:
        self._send(signal.SIGKILL)

    def _send(self, signum: int) -> None:
        if self.exit is None:  # not reaped yet: the pid is still this process's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def ended(self, exit: Exit) -> None:
        self.exit = exit
        with self._fd_lock:
            if self._fd >= 0:
                os.eventfd_write(self._fd, 1)

    def close(self) -> None:
        with self._fd_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class LauncherUnavailable(Exception):
    """The server could not be started or died; the run is started fresh instead."""


class WarmLauncher:
    """One fork server for one runtime, started on first use and restarted if it dies."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        #: The server's interpreter and environment.
        self.python = python
        self.env = env
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.server_pid = 0
        self._ids = itertools.count(1)
        self._requested: dict[int, WarmProcess] = {}
        self._running: dict[int, WarmProcess] = {}
        self._closed = False

    def start(self, request: dict[str, Any]) -> WarmProcess:
        """Fork the run's process from ``request`` (see ``forkserver.run``) and return it with
        its pid; raises :class:`LauncherUnavailable` when the server cannot fork it."""
        process = WarmProcess()
        with self._lock:
            connection = self._connect()
            number = next(self._ids)
            self._requested[number] = process
            try:
                connection.sendall(json.dumps({**request, "id": number}).encode() + b"\n")
            except OSError as error:
                self._requested.pop(number, None)
                process.close()
                raise LauncherUnavailable(f"the fork server is gone: {error}") from None
        process._started.wait()
        if process._error:
            process.close()
            raise LauncherUnavailable(process._error)
        return process

    def _connect(self) -> socket.socket:
        """The socket to a running server, starting one (in its reader thread) if needed."""
        if self._closed:
            raise LauncherUnavailable("the runtime is closing")
        if self._socket is not None:
            return self._socket
        ready = threading.Event()
        problem: list[str] = []
        threading.Thread(
            target=self._serve, args=(ready, problem), name="runplane-forkserver", daemon=True
        ).start()
        ready.wait()
        if problem or self._socket is None:
            raise LauncherUnavailable(problem[0] if problem else "the fork server did not start")
        return self._socket

    def _serve(self, ready: threading.Event, problem: list[str]) -> None:
        """Start the server and relay what it says until it exits."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server = subprocess.Popen(
                [self.python, str(SERVER), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                cwd="/",
            )
        except OSError as error:
            problem.append(f"{self.python}: {error.strerror}")
            ready.set()
            return
        finally:
            theirs.close()
        reader = ours.makefile("rb")
        try:
            hello = json.loads(reader.readline() or b"{}")
            if "ready" not in hello:
                problem.append(f"the fork server exited ({server.wait()}) before it was ready")
                ready.set()
                return
            self.server_pid = hello["ready"]
            self._socket = ours
            ready.set()
            for line in reader:
                self._relay(json.loads(line))
        except ConnectionResetError:  # the server died: its runs are ended below, as at EOF
            pass
        finally:
            with self._lock:
                self._socket = None
                requested = list(self._requested.values())
                running = list(self._running.values())
                self._requested.clear()
                self._running.clear()
            for process in requested:
                process._error = "the fork server exited before it forked the run's process"
                process._started.set()
            for process in running:  # its children die with it (their parent-death signal)
                process.ended(Exit(-signal.SIGKILL))
            reader.close()
            ours.close()
            with contextlib.suppress(ProcessLookupError):
                server.kill()
            server.wait()

    def _relay(self, message: dict[str, Any]) -> None:
        if "id" in message:
            with self._lock:
                process = self._requested.pop(message["id"])
                if "error" in message:
                    process._error = (
                        f"the fork server could not start the run's process: "
                        f"it could not {message['error']}"
                    )
                else:
                    process.pid = message["pid"]
                    self._running[process.pid] = process
            process._started.set()
            return
        with self._lock:
            ended = self._running.pop(message["exited"], None)
        if ended is not None:
            ended.ended(
                Exit(
                    os.waitstatus_to_exitcode(message["status"]),
                    message["cpu"],
                    message["rss"],
                    message.get("group"),
                )
            )

    def close(self) -> None:
        """Stop the server: hung up on, it exits, and any child left dies with it."""
        with self._lock:
            self._closed = True
            connection = self._socket
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
