"""The one exit-code convention of every ``runplane`` command, for scripts to branch on
(docs/cli.md lists it, from :data:`MEANING`)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a command's exit status says (:data:`MEANING` in words)."""

    DONE = 0
    RUN_FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    REFUSED = 4
    UNREACHABLE = 5
    CONFLICT = 6
    INTERRUPTED = 130


MEANING = {
    ExitCode.DONE: "done: the command did what it was asked (a run it followed completed)",
    ExitCode.RUN_FAILED: "the run the command followed failed or was aborted (`runplane run`)",
    ExitCode.USAGE: (
        "usage: the command line or a value in it is wrong (a flag, a quantity, a cron), or "
        "the configuration is; the message names it and gives an example"
    ),
    ExitCode.NOT_FOUND: (
        "not found: what the command names (a run, a node, a project, a deployment, a file) "
        "does not exist, or is not the caller's"
    ),
    ExitCode.REFUSED: (
        "refused by the service's policy or the caller's permissions (a system priority "
        "class, an admin's action, a wrong token)"
    ),
    ExitCode.UNREACHABLE: (
        "the service cannot be reached, failed, or did not answer as runplane's API does"
    ),
    ExitCode.CONFLICT: (
        "conflict: the object's state refuses the action (aborting a finished run, a uid "
        "prefix that names several runs)"
    ),
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C) where that does not end the command normally",
}


#: An HTTP status the service answered with, as an exit code (the API's errors through
#: ``RUNPLANE_API`` keep their meaning on the command line).
BY_HTTP_STATUS = {
    400: ExitCode.USAGE,
    401: ExitCode.REFUSED,
    403: ExitCode.REFUSED,
    404: ExitCode.NOT_FOUND,
    409: ExitCode.CONFLICT,
    422: ExitCode.USAGE,
    502: ExitCode.UNREACHABLE,
    503: ExitCode.UNREACHABLE,
    504: ExitCode.UNREACHABLE,
}
