"""Every list of the command line (``runs``, ``get functions|schedules|projects|deployments|
nodes``) in each format, with its filters, on the embedded default and through a ``runplane
serve``: ``-o json`` is the API's objects, checked against the API's own schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import TypeAdapter

import runplane
from runplane.client import backend
from runplane.runtimes.local.node import NODE_NAME
from tests.service.cli_service import (  # noqa: F401 (fixtures)
    api_schema,
    both_backends,
    invoke,
    module_service,
    response_model,
)

TRAIN = "def train(context, epochs: int = 1):\n    return {'epochs': epochs}\n"


def seed(tmp_path: Path, project: str) -> None:
    """Two completed runs (``train`` labelled team=vision, ``other``), ``train`` stored, and a
    project record labelled team=vision."""
    (tmp_path / "train.py").write_text(TRAIN)
    for name, labels in (("train", {"team": "vision"}), ("other", {})):
        fn = runplane.code_to_function(
            name, filename=str(tmp_path / "train.py"), handler="train", project=project
        ).set_labels(labels)
        assert fn.run(params={"epochs": 2}).state() == "completed"
        if labels:
            fn.save()
    backend().create_project(project, {"labels": {"team": "vision"}, "description": "seen"})


LISTS = {
    ("runs",): "/api/v1/runs",
    ("get", "functions"): "/api/v1/projects/{project}/functions",
    ("get", "projects"): "/api/v1/projects",
    ("get", "deployments"): "/api/v1/deployments",
    ("get", "nodes"): "/api/v1/cluster/nodes",
    ("get", "schedules"): "/api/v1/schedules",
}


def check_against_the_api(items: list[Any], path: str) -> None:
    """``items`` is what the API answers at ``path``: it validates against the OpenAPI schema
    of the route, and reads back unchanged through the route's model (no field more or less)."""
    document = api_schema()
    answer = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
    schema = {**answer["schema"], "components": document["components"]}
    jsonschema.Draft202012Validator(schema).validate(items)
    model = TypeAdapter(response_model(path))
    assert model.dump_python(model.validate_python(items), mode="json") == items


def test_every_list_prints_the_apis_objects(where: str, tmp_path: Path) -> None:
    seed(tmp_path, "lists")
    if where == "service":
        done = invoke(
            "schedule",
            "create",
            str(tmp_path / "train.py"),
            "--handler",
            "train",
            "--cron",
            "0 3 * * *",
            "--name",
            "nightly",
        )
        assert done.code == 0, done.stderr
    for command, path in LISTS.items():
        if command == ("get", "schedules") and where == "embedded":
            refused = invoke(*command)
            assert refused.code == 2
            assert "listing schedules needs the runplane service" in refused.stderr
            continue
        as_json = invoke(*command, "-o", "json")
        assert as_json.code == 0, (command, as_json.stderr)
        items = json.loads(as_json.stdout)
        assert items or command == ("get", "deployments"), command
        check_against_the_api(items, path)
        as_yaml = invoke(*command, "-o", "yaml")
        assert yaml.safe_load(as_yaml.stdout) == items, command
        table = invoke(*command).stdout.splitlines()
        wide = invoke(*command, "-o", "wide").stdout.splitlines()
        assert len(table) == len(wide) == len(items) + 1, command  # a header, a line each
        assert len(wide[0]) > len(table[0]), command  # more columns
    runs = invoke("runs").stdout
    assert runs.splitlines()[0].split()[:4] == ["UID", "PROJECT", "NAME", "STATE"]
    assert "completed" in runs
    (node,) = json.loads(invoke("get", "nodes", "-o", "json").stdout)
    assert (node["name"], node["spot"], node["ready"]) == (NODE_NAME, False, True)
    assert node["capacity"]["cpu"] == 2000
    assert node["requested"]["cpu"] + node["free"]["cpu"] == 2000


def test_lists_filter_by_name_label_owner_and_time(where: str, tmp_path: Path) -> None:
    seed(tmp_path, "filters")

    def names(*args: str) -> list[str]:
        done = invoke(*args, "-o", "json")
        assert done.code == 0, done.stderr
        return sorted(item["name"] for item in json.loads(done.stdout))

    runs = ("runs", "--project", "filters")  # the service's runs are the module's
    assert names(*runs) == ["other", "train"]
    assert names(*runs, "--name", "train") == ["train"]
    assert names(*runs, "-l", "team=vision") == ["train"]
    assert names(*runs, "--selector", "team=vision", "--name", "other") == []
    assert names(*runs, "--since", "1h") == ["other", "train"]
    assert names(*runs, "--since", "2999-01-01") == []
    me = json.loads(invoke(*runs, "-o", "json").stdout)[0]["owner"]
    assert names(*runs, "--owner", me) == ["other", "train"]
    assert names("get", "functions", "--project", "filters", "-l", "team=vision") == ["train"]
    assert names("get", "functions", "--name", "other") == []
    assert names("get", "functions", "--owner", "nobody") == []
    assert "filters" in names("get", "projects", "-l", "team=vision")
    assert names("get", "projects", "--name", "filters") == ["filters"]
    assert names("get", "projects", "--name", "filters", "-l", "team=other") == []
    assert names("get", "projects", "--since", "2999-01-01") == []
    assert names("get", "nodes", "-l", f"kubernetes.io/hostname={NODE_NAME}") == [NODE_NAME]
    assert names("get", "nodes", "-l", "runplane.io/pool=none") == []
    for flags, said in (
        (["--since", "soon"], "'soon' is neither an ISO 8601 time nor a duration ago"),
        (["-l", "team"], "'team' is not KEY=VALUE (example: -l team=vision)"),
        (["-o", "csv"], "'csv' is not one of 'table', 'wide', 'json', 'yaml'"),
    ):
        refused = invoke("runs", *flags)
        assert refused.code == 2, flags
        assert said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
