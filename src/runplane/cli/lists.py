"""``runplane get functions|schedules|projects|deployments|nodes`` and ``get node NAME``: the
objects runs go with, where runs go (see :func:`runplane.client.backend`), each list with
``-o table|wide|json|yaml`` (json and yaml: the API's objects) and its filters."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import click

from runplane.cli.examples import example
from runplane.cli.filters import (
    Wanted,
    name_option,
    owner_option,
    selector_option,
    since_option,
)
from runplane.cli.output import (
    FORMATS,
    Column,
    amount,
    dumped,
    emit,
    output_option,
    pairs,
    size,
)


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else ""


def _function_labels(item: dict[str, Any]) -> dict[str, str]:
    metadata = (item.get("function") or {}).get("metadata") or {}
    return dict(metadata.get("labels") or {})


def _filters(what: str, whose: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--name``, ``--owner`` (``whose`` says whose), ``--since`` and ``-l``, given to the
    command as one ``wanted``."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def with_wanted(
            *,
            name: str | None,
            owner: str | None,
            since: float | None,
            selector: tuple[tuple[str, str], ...],
            **rest: Any,
        ) -> Any:
            return command(wanted=Wanted(name, owner, since, dict(selector)), **rest)

        wrapped: Callable[..., Any] = with_wanted
        wrapped = selector_option(f"Only {what} with this label, KEY=VALUE (repeatable: all).")(
            wrapped
        )
        wrapped = since_option(f"Only {what} created since then: 2h, '1 day', ISO 8601.")(wrapped)
        wrapped = owner_option(f"Only {what} {whose} this user.")(wrapped)
        return name_option(f"Only {what} of this name (the whole name).")(wrapped)

    return decorate


FUNCTION_COLUMNS = [
    Column("PROJECT", lambda f: str(f["project"])),
    Column("NAME", lambda f: str(f["name"])),
    Column("KIND", lambda f: str((f.get("function") or {}).get("kind") or "")),
    Column("TAG", lambda f: str(f["tag"])),
    Column("HASH", lambda f: str(f["hash"])[:12]),
    Column("CREATED", lambda f: _when(f["created_at"])),
    Column("OWNER", lambda f: str(f["created_by"]), wide=True),
    Column("LABELS", lambda f: pairs(_function_labels(f)), wide=True),
]


def get_functions_command(group: click.Group) -> None:
    """Add ``get functions`` to ``group`` (``get function NAME`` is sizing's)."""

    @group.command("functions", epilog=example("runplane get functions --project default -o yaml"))
    @click.option("--project", help="Only this project's functions (default: every project's).")
    @output_option
    @_filters("functions", "stored by")
    def get_functions(
        project: str | None,
        output: str,
        wanted: Wanted,
    ) -> None:
        """List stored functions (fn.save()), the latest version of each."""
        from runplane.client import backend

        service = backend()
        projects = [project] if project else [p["name"] for p in service.list_projects()]
        found = [item for name in projects for item in service.list_functions(name)]
        kept = wanted.keep(found, owner="created_by", labels=_function_labels)
        emit(kept, FUNCTION_COLUMNS, output)


SCHEDULE_COLUMNS = [
    Column("ID", lambda s: str(s["id"])),
    Column("PROJECT", lambda s: str(s["project"])),
    Column("NAME", lambda s: str(s["name"])),
    Column("CRON", lambda s: str(s["cron"])),
    Column("LAST-DUE", lambda s: _when(s["last_fired_at"])),
    Column("OWNER", lambda s: str(s["created_by"]), wide=True),
    Column("CREATED", lambda s: _when(s["created_at"]), wide=True),
    Column("PARAMS", lambda s: pairs(s.get("params")), wide=True),
]


def get_schedules_command(group: click.Group) -> None:
    @group.command("schedules", epilog=example("runplane get schedules --name nightly -o json"))
    @click.option("--project", help="Only this project's schedules.")
    @output_option
    @_filters("schedules", "created by")
    def get_schedules(
        project: str | None,
        output: str,
        wanted: Wanted,
    ) -> None:
        """List cron schedules (the service's: needs RUNPLANE_API)."""
        from runplane.client import api_backend

        found = api_backend("listing schedules").schedules()
        if project:
            found = [item for item in found if item["project"] == project]
        emit(
            wanted.keep(found, owner="created_by", labels=_function_labels),
            SCHEDULE_COLUMNS,
            output,
        )


PROJECT_COLUMNS = [
    Column("NAME", lambda p: str(p["name"])),
    Column("OWNER", lambda p: str(p.get("owner") or "")),
    Column("CREATED", lambda p: _when(p.get("created_at"))),
    Column("DESCRIPTION", lambda p: str(p.get("description") or "")),
    Column("LABELS", lambda p: pairs(p.get("labels")), wide=True),
    Column("RECORDED", lambda p: "yes" if p.get("recorded") else "no", wide=True),
    Column("RETENTION", lambda p: pairs(p.get("retention")), wide=True),
]


def get_projects_command(group: click.Group) -> None:
    @group.command("projects", epilog=example("runplane get projects -l team=vision -o wide"))
    @output_option
    @_filters("projects", "owned by")
    def get_projects(output: str, wanted: Wanted) -> None:
        """List projects: those with a record, and those known from their runs, functions or
        schedules."""
        from runplane.client import backend

        found = backend().list_projects()
        emit(wanted.keep(found, labels=lambda p: p.get("labels") or {}), PROJECT_COLUMNS, output)


def _ready(status: dict[str, Any]) -> str:
    replicas = status.get("replicas") or []
    ready = status.get("ready", sum(1 for r in replicas if r["state"] == "ready"))
    return f"{ready}/{status['desired']}"


def _replicas(status: dict[str, Any]) -> str:
    bounds = (
        f" ({status['min_replicas']}-{status['max_replicas']})"
        if status.get("max_replicas")
        else ""
    )
    workers = f" x {status['workers']} worker(s)" if status.get("workers") else ""
    return f"{status['desired']}{bounds}{workers}"


def _restarts(status: dict[str, Any]) -> str:
    replicas = status.get("replicas") or []
    return str(sum(replica["restarts"] for replica in replicas)) if replicas else ""


DEPLOYMENT_COLUMNS = [
    Column("PROJECT", lambda d: str(d["project"])),
    Column("NAME", lambda d: str(d["name"])),
    Column("STATE", lambda d: str(d["state"])),
    Column("READY", _ready),
    Column("REPLICAS", _replicas),
    Column("RESTARTS", _restarts),
    Column("URL", lambda d: str(d["url"])),
    Column("OWNER", lambda d: str(d.get("owner") or ""), wide=True),
    Column("SCALING", lambda d: str(d.get("scaling") or ""), wide=True),
]


def get_deployments_command(group: click.Group) -> None:
    @group.command(
        "deployments", epilog=example("runplane get deployments --project default -o json")
    )
    @click.option("--project", help="Only this project's deployments.")
    @output_option
    @click.option("--json", "as_json", is_flag=True, hidden=True, help="The same as -o json.")
    @name_option("Only deployments of this name (the whole name).")
    @owner_option("Only deployments made by this user.")
    def get_deployments(
        project: str | None, output: str, as_json: bool, name: str | None, owner: str | None
    ) -> None:
        """List serving functions deployed here, or through the service (RUNPLANE_API):
        replicas, restarts, scaling."""
        from runplane.client import backend

        found = Wanted(name, owner).keep(backend().deployments(project))
        emit(found, DEPLOYMENT_COLUMNS, "json" if as_json else output)


def _resources(node: dict[str, Any], part: str) -> str:
    """``cpu=2,memory=7.6Gi,...``: a node's capacity, requests or what is free."""
    values = node[part]
    order = sorted(values, key=lambda k: (k not in ("cpu", "memory", "pods"), k))
    return ",".join(f"{key}={amount(key, values[key])}" for key in order)


def _taints(node: dict[str, Any]) -> str:
    return ",".join(
        f"{t['key']}" + (f"={t['value']}" if t.get("value") else "") + f":{t['effect']}"
        for t in node["taints"]
    )


def _share(resource: str) -> Callable[[dict[str, Any]], str]:
    """``1500m/2`` for cpu: requested of capacity."""

    def cell(node: dict[str, Any]) -> str:
        capacity = node["capacity"].get(resource)
        if capacity is None:
            return ""
        requested = node["requested"].get(resource, 0)
        return f"{amount(resource, requested)}/{amount(resource, capacity)}"

    return cell


NODE_COLUMNS = [
    Column("NAME", lambda n: str(n["name"])),
    Column("READY", lambda n: "yes" if n["ready"] else f"no: {n['condition']}"),
    Column("GROUP", lambda n: str(n["group"])),
    Column("CAPACITY-TYPE", lambda n: "spot" if n["spot"] else "on-demand"),
    Column("CPU-REQ/CAP", _share("cpu")),
    Column("MEM-REQ/CAP", _share("memory")),
    Column("FREE-CPU", lambda n: amount("cpu", n["free"].get("cpu"))),
    Column("FREE-MEM", lambda n: size(n["free"].get("memory"))),
    Column("GPUS-FREE", lambda n: _gpus(n)),
    Column("TAINTS", _taints),
    Column("PODS", _share("pods"), wide=True),
    Column("CAPACITY", lambda n: _resources(n, "capacity"), wide=True),
    Column("FREE", lambda n: _resources(n, "free"), wide=True),
    Column("LABELS", lambda n: pairs(n["labels"]), wide=True),
]


def _gpus(node: dict[str, Any]) -> str:
    """Free GPUs of each kind the node has, ``0`` where it has none."""
    kinds = [key for key in node["capacity"] if key.endswith("/gpu")]
    return ",".join(f"{node['free'].get(key, 0)}" for key in kinds) or "0"


def get_nodes_commands(group: click.Group) -> None:
    @group.command("nodes", epilog=example("runplane get nodes -o wide"))
    @output_option
    @name_option("Only the node of this name.")
    @selector_option("Only nodes with this label, KEY=VALUE (repeatable: all).")
    def get_nodes(output: str, name: str | None, selector: tuple[tuple[str, str], ...]) -> None:
        """List the nodes runs go to: each one's group, spot or on-demand, what it can hold,
        what is requested and free, its taints, and whether it takes new pods and why not.
        On the embedded default, this machine is the one node."""
        from runplane.client import backend

        wanted = Wanted(name, labels=dict(selector))
        emit(wanted.keep(backend().nodes(), labels=lambda n: n["labels"]), NODE_COLUMNS, output)

    @group.command("node", epilog=example("runplane get node worker-1 -o yaml"))
    @click.argument("name")
    @click.option(
        "-o",
        "--output",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table or wide: the node described; json or yaml: the API's object.",
    )
    def get_node(name: str, output: str) -> None:
        """Show node NAME: group, spot or on-demand, capacity, requested, free, taints, labels,
        and whether it takes new pods and why not."""
        from runplane.client import backend
        from runplane.errors import NotFoundError

        nodes = backend().nodes()
        found = [node for node in nodes if node["name"] == name]
        if not found:
            known = ", ".join(node["name"] for node in nodes) or "none"
            raise NotFoundError(f"node {name!r} does not exist (the nodes: {known})")
        if output in ("json", "yaml"):
            click.echo(dumped(found[0], output), nl=output == "json")
            return
        node = found[0]
        for key, value in (
            ("name", node["name"]),
            ("ready", "yes" if node["ready"] else f"no: {node['condition']}"),
            ("group", node["group"] or "-"),
            ("capacity type", "spot" if node["spot"] else "on-demand"),
            ("capacity", _resources(node, "capacity")),
            ("requested", _resources(node, "requested")),
            ("free", _resources(node, "free")),
            ("taints", _taints(node) or "-"),
            ("labels", pairs(node["labels"]) or "-"),
        ):
            click.echo(f"{key + ':':<15}{value}")
