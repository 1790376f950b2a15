"""The one exit-code convention of every ``runplane`` command, for scripts to branch on
(docs/cli.md lists it)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a command's exit status says."""

    #: Done: the command did what it was asked (a run it followed completed).
    DONE = 0
    #: The run the command followed failed or was aborted (``runplane run``), or a command
    #: stopped for a reason none of the codes below names.
    RUN_FAILED = 1
    #: The command line or a value in it is wrong (a flag, a quantity, a cron), or the
    #: configuration is: the message says which and gives an example.
    USAGE = 2
    #: What the command names (a run, a node, a project, a deployment) does not exist, or is
    #: not the caller's.
    NOT_FOUND = 3
    #: Refused by the service's policy or by the caller's permissions (a reserved node
    #: group, an admin's action, a wrong token).
    REFUSED = 4
    #: The service cannot be reached, or did not answer as runplane's API does.
    UNREACHABLE = 5
    #: The object's state refuses the action (a finished run aborted, a uid prefix that names
    #: several runs).
    CONFLICT = 6
    #: Interrupted (Ctrl-C) where the command does not treat it as its end.
    INTERRUPTED = 130


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
