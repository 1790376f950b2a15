"""Which user a run's processes run as: one of their own per run, or runplane's own.

A run executed by ``runplane serve`` as root must not be root, nor share the service's uid: it
could read the service's environment (``/proc/<pid>/environ``, with every token), its database
and other runs' files. So each such run gets a uid of its own, leased from a range that no
account uses (``local.run_uids``) for as long as the run's processes live: a lease is an
exclusive ``flock`` on ``/run/runplane/uids/<uid>``, machine-wide, released by the kernel if its
holder dies; the file names the run's directory while the lease lasts, so that the next holder
of a uid whose runplane died takes that directory back first. The run's directory is its uid's;
everything else of the service stays 0700/0600 with the directories above the runs 0711
(passable, not listable). Supplementary groups are
dropped and the run's process sets ``PR_SET_NO_NEW_PRIVS``.

Without root there is no other uid to give: runs run as runplane's own user, as
:attr:`RunUsers.description` says.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.runtimes.local import secretvolumes

log = logging.getLogger(__name__)

#: Where leases are held: root's, on a tmpfs emptied at boot.
LEASES = Path("/run/runplane/uids")


@dataclass(frozen=True, slots=True)
class RunUser:
    """A uid (and the group of the same number) leased to one run."""

    uid: int
    #: The open lock file whose ``flock`` is the lease. It names the run's directory while the
    #: lease lasts, and is emptied when it ends.
    lock: int

    @property
    def gid(self) -> int:
        return self.uid


def uid_range(value: str) -> tuple[int, int]:
    """``local.run_uids`` as (first, last)."""
    first, _, last = value.partition("-")
    return int(first), int(last)


class RunUsers:
    """The user policy of one runtime: whether runs get uids of their own, and their leases."""

    def __init__(self, settings: Settings, serving: bool) -> None:
        local = settings.local
        root = os.geteuid() == 0
        wanted = local.run_users
        if wanted == "per-run" and not root:
            raise ConfigError(
                f"local.run_users: 'per-run' needs root (runplane runs as uid {os.geteuid()}); "
                "use 'same' or 'auto'"
            )
        self.wanted = wanted
        self.per_run = wanted == "per-run" or (wanted == "auto" and root and serving)
        self.first, self.last = uid_range(local.run_uids)
        self.home = local.home
        if self.per_run:
            self.description = (
                f"each run as a user of its own (uids {self.first}-{self.last}, no groups, "
                "no new privileges)"
            )
        elif root:
            self.description = (
                "runs as root, runplane's own user (local.run_users: same): a run can read "
                "what runplane can"
            )
        else:
            self.description = (
                f"runs as runplane's own user (uid {os.geteuid()}): a run can read what that "
                "user can, /proc/<runplane pid>/environ included; run runplane serve as a user "
                "of its own and mount /proc with hidepid=2 to keep runs from the service"
            )

    # -- leases ----------------------------------------------------------------------------

    def lease(self, key: str, run_dir: Path | None = None) -> RunUser | None:
        """A uid for the run ``key`` whose directory is ``run_dir`` (``None`` when runs keep
        runplane's user)."""
        if not self.per_run:
            return None
        LEASES.mkdir(mode=0o700, parents=True, exist_ok=True)
        count = self.last - self.first + 1
        start = zlib.crc32(key.encode()) % count
        for step in range(count):
            uid = self.first + (start + step) % count
            fd = os.open(LEASES / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            user = RunUser(uid, fd)
            self._take_back_left(user)
            if run_dir is not None:
                os.pwrite(fd, str(run_dir).encode(), 0)
            return user
        raise ConfigError(
            f"local.run_uids: all {count} uids of {self.first}-{self.last} are leased to "
            "running runs; widen the range"
        )

    def _take_back_left(self, user: RunUser) -> None:
        """A runplane that died holding this uid left its run's directory named in the lock
        file, and the run's: it is taken back (with the copies of its Secret volumes) before a
        run has the uid again, so no later run reads what that one was given."""
        left = os.pread(user.lock, 4096, 0).decode("utf-8", "replace")
        if left.startswith("/"):
            try:
                self.take_back(Path(left), user)
                secretvolumes.remove(Path(left))
            except OSError as error:
                log.warning("could not take back %s, left by uid %s: %s", left, user.uid, error)
        os.ftruncate(user.lock, 0)

    @staticmethod
    def release(user: RunUser | None) -> None:
        """End a lease, once none of the run's processes is left and its directory is taken
        back."""
        if user is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(user.lock, 0)
            with contextlib.suppress(OSError):
                os.close(user.lock)

    # -- directories -----------------------------------------------------------------------

    def seal_home(self) -> None:
        """Make the runplane home passable but not readable by runs' users: the home and its
        ``runs`` directory 0711, everything else in it readable by runplane only."""
        if not self.per_run:
            return
        runs = self.home / "runs"
        runs.mkdir(mode=0o711, parents=True, exist_ok=True)
        for directory in (self.home, runs):
            directory.chmod(0o711)
        for entry in self.home.iterdir():
            if entry.name != "runs" and not entry.is_symlink():
                with contextlib.suppress(OSError):
                    entry.chmod(entry.stat().st_mode & 0o700)

    @staticmethod
    def hand_over(run_dir: Path, user: RunUser | None, paths: list[Path]) -> None:
        """Give the run's user its directory and what it must read or write there."""
        if user is None:
            return
        for path in [run_dir, *paths]:
            os.chown(path, user.uid, user.gid, follow_symlinks=False)

    @staticmethod
    def take_back(run_dir: Path, user: RunUser | None) -> None:
        """Once the run is over its directory is runplane's again (0700), so a later run
        leased the same uid cannot enter it."""
        if user is not None:
            with contextlib.suppress(OSError):
                os.chown(run_dir, os.geteuid(), os.getegid())
                run_dir.chmod(0o700)

    def check(self, python: str, child: Path) -> None:
        """Start a run's interpreter as a run's user and have it reach the runs directory, so a
        machine where runs' users cannot (a home or an interpreter under a 0700 directory)
        is refused at startup with the fix, not at every run."""
        if not self.per_run:
            return
        user = self.lease("check")
        assert user is not None
        try:
            done = subprocess.run(
                [python, str(child), "--check", str(self.home / "runs")],
                user=user.uid,
                group=user.gid,
                extra_groups=[],
                cwd="/",
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                capture_output=True,
                text=True,
                timeout=60,
            )
            problem = done.stderr.strip() if done.returncode else ""
        except OSError as error:
            problem = f"{python}: {error.strerror}"
        finally:
            self.release(user)
        if not problem:
            return
        fix = (
            "give those users a Python they can run (local.python, for example "
            "/usr/bin/python3) and a runplane home they can pass through (local.home under "
            "directories with o+x, for example /var/lib/runplane)"
        )
        if self.wanted == "per-run":
            raise ConfigError(
                "runs run as users of their own (runplane is root, local.run_users is "
                f"'per-run'), and uid {user.uid} cannot run one here: {problem}. {fix[0].upper()}"
                f"{fix[1:]}, or set local.run_users: same to run runs as root (they can then "
                "read the service's files)"
            )
        # 'auto' takes the best this machine allows, and says what that is and how to do better.
        self.per_run = False
        self.description = (
            f"runs as root, runplane's own user: a run can read what runplane can, because uid "
            f"{user.uid} cannot run one here ({problem}); to give each run a user of its own, "
            f"{fix}, or set local.run_users: per-run to refuse to start without it"
        )
        log.warning("local.run_users: auto: %s", self.description)
