"""The one exception hierarchy of runplane.

Every user error says which field was wrong, the value it got, what is allowed and an example,
so the CLI can print it without a traceback and the API can answer it with a 4xx status.

These classes deliberately do not derive from ``ValueError``: pydantic wraps ``ValueError``
raised inside validators into its own error type, and we want ours to reach the user as is.
"""

from __future__ import annotations

from typing import Any


class RunplaneError(Exception):
    """Base of every error runplane raises on purpose."""

    #: HTTP status the API answers with; the CLI exits with code 2 for any user error.
    http_status = 400


#: The most of a refused value an error message repeats.
SHOWN = 160


#: Integers with more digits than this are described, not written out.
SHOWN_DIGITS = 20


def shown(value: Any) -> str:
    """``repr(value)``, shortened when long: an error names the value, it does not echo a
    megabyte back (or a stack-deep structure, or an integer of thousands of digits, whose repr
    could not even be computed)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**SHOWN_DIGITS:
        digits = int(abs(value).bit_length() * 0.30103) + 1  # log10(2): no conversion to text
        return f"<an integer of about {digits} digits>"
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        return f"<{type(value).__name__} too large or deep to show>"
    if len(text) <= SHOWN:
        return text
    return f"{text[:SHOWN]}... ({len(text)} characters)"


class ArgumentError(RunplaneError):
    """A value, or a combination of values, the user gave is refused (MLRun's
    ``MLRunInvalidArgumentError``: ``except`` clauses catch both kinds below)."""

    http_status = 422


class InvalidValueError(ArgumentError):
    """A value the user gave is not valid for its field."""

    http_status = 422

    def __init__(self, field: str, value: Any, allowed: str, example: str | None = None) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.example = example
        message = f"{field}: {shown(value)} is not valid; {allowed}"
        if example:
            message += f" (example: {example})"
        super().__init__(message)


class MissingValueError(InvalidValueError, ValueError):
    """None of the arguments a call needs one of was given (MLRun raises ``ValueError`` there,
    so ``except ValueError`` catches this too)."""


class MalformedNameError(InvalidValueError, ValueError):
    """A name that breaks the pattern names must match (MLRun raises ``ValueError`` saying the
    field is malformed, so ``except ValueError`` catches this too)."""


class ConflictError(ArgumentError):
    """Two settings, each valid, that cannot hold together (a spot selector with `prevent`)."""

    http_status = 422

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class PolicyError(RunplaneError):
    """A valid setting that the service's policy refuses (reserved node groups, priority roles)."""

    http_status = 403

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class ConfigError(RunplaneError):
    """The service configuration itself (file or ``RUNPLANE_*`` variables) is invalid."""


class NotFoundError(RunplaneError):
    """A named thing (file, function, run) does not exist."""

    http_status = 404


class AmbiguousError(RunplaneError):
    """A prefix (of a run uid, of a function version's hash) that names more than one thing."""

    http_status = 409

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class RunExistsError(RunplaneError):
    """A run with this uid is already recorded."""

    http_status = 409


class RunFinishedError(RunplaneError):
    """An action that needs a live run was asked of a finished one."""

    http_status = 409


class ResizeRefusedError(RunplaneError):
    """A running run's limits cannot be changed in place as asked (its kind, its state, or
    its node cannot); the message says why."""

    http_status = 409


class RunFailedError(RunplaneError):
    """A run waited for ended in ``error`` or ``aborted`` (``wait_for_completion``)."""

    http_status = 409


class LeadLostError(RunplaneError):
    """A replica of ``runplane serve`` lost its Lease: it stopped controlling and stops, to
    start again as a follower (exit status 5, as a service that failed)."""

    http_status = 503


class OutOfScopeError(RunplaneError):
    """An MLRun feature runplane does not provide (the feature store, model monitoring,
    alerts, data stores other than local files and V3IO mounts): the message names it."""

    def __init__(self, feature: str, advice: str = "") -> None:
        self.feature = feature
        super().__init__(f"{feature} is not part of runplane" + (f": {advice}" if advice else ""))


# MLRun's names for the same errors, so code written for MLRun keeps its ``except`` clauses
# (``except mlrun.errors.MLRunNotFoundError``) and its ``raise`` statements.
MLRunBaseError = RunplaneError
MLRunInvalidArgumentError = ArgumentError
MLRunInvalidArgumentTypeError = ArgumentError
MLRunBadRequestError = ArgumentError
MLRunNotFoundError = NotFoundError
MLRunConflictError = RunExistsError
MLRunAccessDeniedError = PolicyError
MLRunUnauthorizedError = PolicyError
MLRunRuntimeError = RunFailedError
MLRunPreconditionFailedError = RunFinishedError
MLRunMissingDependencyError = OutOfScopeError
