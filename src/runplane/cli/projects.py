"""``runplane project retention NAME``: a project's retention policy, shown or changed by an
admin (docs/retention.md).

The policy goes where runs go (see :func:`runplane.client.backend`): with ``RUNPLANE_API`` the
service keeps it on the project's record (``PATCH /api/v1/projects/NAME``, admins only) and its
retention loop carries it out; without it, the embedded default's store keeps it, where a
``runplane serve`` on this machine's store finds it. A term given changes that term only: the
others stay as the record has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from runplane.cli.examples import example
from runplane.errors import InvalidValueError, NotFoundError
from runplane.spec.numbers import whole_number
from runplane.spec.retention import (
    MAX_COUNT,
    MIN_AGE_SECONDS,
    TERMS,
    check_age,
    check_count,
)

if TYPE_CHECKING:
    from runplane.client import Backend

EXAMPLE = "runplane project retention churn --runs-max-count 500 --logs-max-age 14d"
#: A term's value that keeps for ever, and the one that follows the service's policy again.
NEVER, DEFAULT = "never", "default"


def parse_term(term: str, value: str) -> Any:
    """A term as its flag gives it, checked: ``never`` keeps for ever (``None``), ``default``
    follows the service's policy (:data:`DEFAULT`); an age or a count otherwise."""
    flag = "--" + term.replace("_", "-")
    text = value.strip()
    if text.lower() in (NEVER, DEFAULT):
        return None if text.lower() == NEVER else DEFAULT
    if term == "runs_max_count":
        allowed = (
            f"a whole number of runs from 1 to {MAX_COUNT}, '{NEVER}' to keep all, or "
            f"'{DEFAULT}' for the service's policy"
        )
        try:
            return check_count(flag, whole_number(flag, text, -1, MAX_COUNT))
        except InvalidValueError:
            raise InvalidValueError(flag, value, allowed, f"{flag} 500") from None
    try:
        return check_age(flag, text)
    except InvalidValueError:
        raise InvalidValueError(
            flag,
            value,
            f"an age of at least {MIN_AGE_SECONDS} seconds as value+unit pairs (units s, m, "
            f"h, d, w: '30d', '2 weeks', '1 day 12h'), '{NEVER}' to keep for ever, or "
            f"'{DEFAULT}' for the service's policy",
            f"{flag} 30d",
        ) from None


def changed_terms(current: dict[str, Any], given: dict[str, str | None]) -> dict[str, Any]:
    """The project's overrides after the terms ``given`` (``None``: not given)."""
    terms = dict(current)
    for term, value in given.items():
        if value is None:
            continue
        parsed = parse_term(term, value)
        if parsed == DEFAULT:
            terms.pop(term, None)
        else:
            terms[term] = parsed
    return terms


@click.group("project", epilog=example(EXAMPLE))
def project_group() -> None:
    """A project's settings."""


@project_group.command("retention", epilog=example(EXAMPLE))
@click.argument("name")
@click.option(
    "--runs-max-age",
    metavar="AGE",
    help="Remove a finished run's record this long after it ended (30d, '2 weeks').",
)
@click.option(
    "--runs-max-count",
    metavar="N",
    help="Keep only the project's newest N finished runs.",
)
@click.option(
    "--logs-max-age",
    metavar="AGE",
    help="Remove a finished run's output and files this long after it ended; its record stays.",
)
@click.option("--reset", is_flag=True, help="Follow the service's policy in every term again.")
def retention_command(
    name: str,
    runs_max_age: str | None,
    runs_max_count: str | None,
    logs_max_age: str | None,
    reset: bool,
) -> None:
    """Show project NAME's retention policy, or change it (admins): a term set to 'never'
    keeps for ever, 'default' follows the service's policy again."""
    given = {
        "runs_max_age": runs_max_age,
        "runs_max_count": runs_max_count,
        "logs_max_age": logs_max_age,
    }
    changing = reset or any(value is not None for value in given.values())
    if reset and any(value is not None for value in given.values()):
        raise click.UsageError("--reset takes no terms: it drops them all")
    from runplane.client import backend

    service = backend()
    record = _record(service, name)
    if changing:
        terms = {} if reset else changed_terms(record.get("retention") or {}, given)
        if (record.get("retention") or {}) != terms:
            if record.get("recorded", True):
                record = service.update_project(name, {"retention": terms})
            else:  # known from its runs, functions or schedules only: a record holds it
                record = service.create_project(name, {"retention": terms})
    _show(name, record.get("retention") or {}, service)


def _record(service: Backend, name: str) -> dict[str, Any]:
    """The project's record; a name nothing uses is an error, not a new project."""
    try:
        record = service.get_project(name)
    except NotFoundError:
        record = {}
    except Exception as error:
        if getattr(error, "http_status", None) != 404:
            raise
        record = {}
    if not record:
        raise NotFoundError(
            f"project {name!r} does not exist: it has no record, runs, functions or "
            "schedules (runplane.new_project() makes one)"
        )
    return record


def _show(name: str, terms: dict[str, Any], service: Backend) -> None:
    """Each term as the project sets it, or the default it follows: the embedded default's own
    settings; a service's, which the API does not tell."""
    from runplane.client.remote import ApiBackend

    if isinstance(service, ApiBackend):
        defaults: dict[str, Any] | None = None
    else:
        from runplane.config import current

        defaults = current().retention.model_dump()
    click.echo(f"project {name}: retention")
    for term in TERMS:
        if term in terms:
            shown = _said(terms[term])
        elif defaults is None:
            shown = "the service's policy"
        else:
            shown = f"{_said(defaults[term])} (the default)"
        click.echo(f"  {term}: {shown}")
    if defaults is not None:
        click.echo("(the embedded default removes nothing: `runplane serve` on this store does)")


def _said(value: Any) -> str:
    return "kept for ever" if value is None else str(value)
