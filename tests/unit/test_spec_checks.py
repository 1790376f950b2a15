"""What a user is told when a function's placement, handler, code file or volumes are wrong:
each mistake is refused at the call that makes it, naming the field, what is allowed and an
example, and leaves the function as it was."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import runplane
from runplane.errors import InvalidValueError, NotFoundError
from runplane.spec.bounds import load_json
from runplane.spec.function import Function
from runplane.spec.handler import bind_parameters, read_signature
from runplane.spec.loaders import embed_command, import_function, new_function
from runplane.spec.scheduling import check_preemption_mode, in_requirements, required_node_terms
from runplane.spec.secret_refs import secret_references, volume_secret_refs
from runplane.spec.volumes import check_volume_mounts, check_volumes, mount_configmap

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
TERMS = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"


def required(*expressions: object, fields: object = None) -> dict:
    term: dict = {"matchExpressions": list(expressions)}
    if fields is not None:
        term = {"matchFields": fields}
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}


@pytest.fixture
def fn() -> Function:
    return new_function("placed", command="train.py")


# -- placement ----------------------------------------------------------------------------

AFFINITIES = [
    ("not a mapping", "spec.affinity", "an affinity has nodeAffinity, podAffinity"),
    ({"nodeaffinity": {}}, "spec.affinity", "(camelCase, as in Kubernetes)"),
    ({"podAffinity": [1]}, "spec.affinity.podAffinity", "podAffinity is a mapping"),
    ({"nodeAffinity": {"required": 1}}, "spec.affinity.nodeAffinity", f"has {REQUIRED}"),
    ({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": {}}}}, TERMS, "terms are a list"),
    ({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [[]]}}}, f"{TERMS}[0]", "a term has"),
    (
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": {}}]}}},
        f"{TERMS}[0].matchExpressions",
        "matchExpressions is a list",
    ),
    (required("zone"), f"{TERMS}[0].matchExpressions[0]", "a requirement has key, operator"),
    (
        required({"key": "zone", "operator": "Near", "values": ["a"]}),
        f"{TERMS}[0].matchExpressions[0].operator",
        "allowed operators are In, NotIn, Exists, DoesNotExist, Gt, Lt",
    ),
    (
        required({"key": "zone", "operator": "In", "values": "a"}),
        f"{TERMS}[0].matchExpressions[0].values",
        "values are a list of strings",
    ),
    (
        required({"key": "zone", "operator": "In", "values": []}),
        f"{TERMS}[0].matchExpressions[0].values",
        "operator In needs at least one value",
    ),
    (
        required({"key": "zone", "operator": "Exists", "values": ["a"]}),
        f"{TERMS}[0].matchExpressions[0].values",
        "operator Exists takes no values",
    ),
    (
        required({"key": "gpus", "operator": "Gt", "values": ["many"]}),
        f"{TERMS}[0].matchExpressions[0].values",
        "operator Gt takes one integer value",
    ),
    (
        required(fields=[{"key": "metadata.labels", "operator": "In", "values": ["a"]}]),
        f"{TERMS}[0].matchFields[0]",
        "matchFields supports the key metadata.name",
    ),
    (
        {"nodeAffinity": {PREFERRED: {"weight": 1}}},
        f"spec.affinity.nodeAffinity.{PREFERRED}",
        "a list of {weight, preference}",
    ),
    (
        {"nodeAffinity": {PREFERRED: [{"weight": 1}]}},
        f"spec.affinity.nodeAffinity.{PREFERRED}[0]",
        "a preferred term has a weight (1-100) and a preference",
    ),
]


@pytest.mark.parametrize(("affinity", "field", "said"), AFFINITIES)
def test_affinities_of_the_wrong_shape(fn, affinity, field, said):
    with pytest.raises(InvalidValueError) as caught:
        fn.with_node_selection(affinity=affinity)
    assert caught.value.field == field
    assert said in str(caught.value)
    assert fn.spec.affinity is None  # refused whole


def test_well_formed_affinities_are_kept_in_kubernetes_shape(fn):
    affinity = {
        "nodeAffinity": {
            REQUIRED: {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["a"]},
                            {"key": "gpus", "operator": "Gt", "values": ["-1"]},
                        ],
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                        ],
                    }
                ]
            },
            PREFERRED: [
                {
                    "weight": 5,
                    "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]},
                }
            ],
        }
    }
    fn.with_node_selection(affinity=affinity)
    assert fn.spec.affinity == affinity


TOLERATIONS = [
    ("everything", "spec.tolerations[0]", "a toleration has key, operator, value, effect"),
    ({"key": "a", "operator": "Is"}, "spec.tolerations[0].operator", "Equal and Exists"),
    ({"operator": "Equal", "value": "x"}, "spec.tolerations[0].key", "an empty key needs"),
    (
        {"key": "a", "operator": "Exists", "value": "x"},
        "spec.tolerations[0].value",
        "operator Exists takes no value",
    ),
    ({"key": "a", "effect": "Evict"}, "spec.tolerations[0].effect", "allowed effects are"),
    (
        {"key": "a", "effect": "NoExecute", "tolerationSeconds": "300"},
        "spec.tolerations[0].tolerationSeconds",
        "tolerationSeconds is a whole number",
    ),
    (
        {"key": "a", "effect": "NoExecute", "tolerationSeconds": True},
        "spec.tolerations[0].tolerationSeconds",
        "tolerationSeconds is a whole number",
    ),
]


@pytest.mark.parametrize(("toleration", "field", "said"), TOLERATIONS)
def test_tolerations_of_the_wrong_shape(fn, toleration, field, said):
    with pytest.raises(InvalidValueError) as caught:
        fn.with_node_selection(tolerations=[toleration])
    assert caught.value.field == field
    assert said in str(caught.value)
    assert fn.spec.tolerations == []


def test_one_toleration_or_none(fn):
    fn.with_node_selection(tolerations={"operator": "Exists"})  # tolerates every taint
    assert fn.spec.tolerations == [{"operator": "Exists"}]
    fn.with_node_selection(tolerations=[])
    assert fn.spec.tolerations == []


@pytest.mark.parametrize("mode", ["sometimes", 3, None])
def test_preemption_modes_are_named(mode):
    with pytest.raises(InvalidValueError) as caught:
        check_preemption_mode("spec.preemption_mode", mode)
    assert "allowed modes are none, prevent, constrain, allow" in str(caught.value)


def test_preemption_mode_is_case_blind(fn):
    assert fn.with_preemption_mode("ALLOW").spec.preemption_mode == "allow"


def test_required_terms_are_read_once_for_render_placement_and_runtimes():
    zone = {"key": "zone", "operator": "In", "values": ["a", "b"]}
    gpu = {"key": "gpu", "operator": "Exists"}
    assert required_node_terms(required(zone, gpu)) == [{"matchExpressions": [zone, gpu]}]
    assert list(in_requirements({"matchExpressions": [zone, gpu]})) == [("zone", ["a", "b"])]
    # No required affinity differs from one that requires no term: placement tells them apart.
    assert required_node_terms(None) is None
    assert required_node_terms({"nodeAffinity": {PREFERRED: []}}) is None
    assert required_node_terms({"nodeAffinity": {REQUIRED: {}}}) == []


# -- the handler's signature ----------------------------------------------------------------

CODE = """
def train(context, epochs: int, rate: "float" = 0.1, *, deep: bool = False,
          layers: list = None, options: "dict[str, int]" = None, name: "not python(" = "x",
          raw=None, where: Path = None):
    pass

async def serve(event, **extra):
    pass
"""


def test_a_signature_is_read_without_running_the_code():
    signature = read_signature(CODE, "train", "train.py")
    assert signature.takes_context
    assert {p.name: p.annotation for p in signature.parameters} == {
        "epochs": "int",
        "rate": "float",
        "deep": "bool",
        "layers": "list",
        "options": "dict",
        "name": None,  # a string annotation that is no expression converts nothing
        "raw": None,
        "where": None,  # a type runplane does not convert: the value is passed as given
    }
    assert [p.name for p in signature.parameters if p.required] == ["epochs"]
    assert read_signature(CODE, "serve").takes_any


@pytest.mark.parametrize(
    ("params", "field", "said"),
    [
        ({"epochs": "three"}, "params['epochs']", "the handler expects int (example: 3)"),
        ({"epochs": True}, "params['epochs']", "the handler expects int"),
        ({"epochs": 1, "rate": "fast"}, "params['rate']", "expects float (example: 0.1)"),
        ({"epochs": 1, "deep": "maybe"}, "params['deep']", "expects bool (example: true)"),
        ({"epochs": 1, "layers": '{"a": 1}'}, "params['layers']", "expects list"),
        ({"epochs": 1, "options": "[1]"}, "params['options']", "expects dict"),
        ({"epochs": 1, "options": "{"}, "params['options']", "expects dict"),
        ({"epochs": 1, "rate": "inf"}, "params['rate']", "expects float (example: 0.1)"),
        (
            {"epochs": 1, "layers": "[1, NaN]"},
            "params['layers']",
            "expects list as JSON; at [1]: NaN and Infinity are not JSON numbers",
        ),
        ({"epochs": 1, "colour": "red"}, "params", "train takes epochs, rate, deep"),
        ({"rate": "0.5"}, "params", "train needs epochs"),
    ],
)
def test_parameters_that_do_not_fit_the_handler(params, field, said):
    with pytest.raises(InvalidValueError) as caught:
        bind_parameters(read_signature(CODE, "train"), params)
    assert caught.value.field == field
    assert said in str(caught.value)


def test_parameters_are_converted_as_annotated():
    bound = bind_parameters(
        read_signature(CODE, "train"),
        {
            "epochs": "3",
            "rate": 1,
            "deep": "Yes",
            "layers": "[64, 32]",
            "options": '{"a": 1}',
            "raw": "kept",
        },
    )
    assert bound == {
        "epochs": 3,
        "rate": 1.0,
        "deep": True,
        "layers": [64, 32],
        "options": {"a": 1},
        "raw": "kept",
    }
    assert (
        bind_parameters(read_signature(CODE, "train"), {"epochs": 1, "deep": "off"})["deep"]
        is False
    )
    assert bind_parameters(read_signature(CODE, "serve"), {"event": 1, "anything": "goes"}) == {
        "event": 1,
        "anything": "goes",
    }


@pytest.mark.parametrize(
    ("code", "handler", "said"),
    [
        ("def train(:\n", "train", "the file must be valid Python (invalid syntax at line 1)"),
        ("x = 1\x00\n", "train", "the file must be valid Python"),
        ("x = 1\n", "train", "it defines: no functions (example: def train(context): ...)"),
        ("def fit(): pass\n", "train", "it defines: fit (example: handler='fit')"),
        ("class Train:\n    def train(self): pass\n", "train", "at the top of job.py"),
    ],
)
def test_a_handler_that_cannot_be_found(code, handler, said):
    with pytest.raises(InvalidValueError) as caught:
        read_signature(code, handler, "job.py")
    assert said in str(caught.value)


def test_a_handler_without_parameters_takes_none():
    with pytest.raises(InvalidValueError, match="train takes no parameters"):
        bind_parameters(read_signature("def train(): pass\n", "train"), {"x": 1})


# -- code files and exported functions ----------------------------------------------------


def test_a_code_file_must_be_utf8_text(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# caf\xe9\ndef train(context):\n    pass\n")
    with pytest.raises(InvalidValueError) as caught:
        runplane.code_to_function("latin", filename=str(path), handler="train")
    assert caught.value.field == "filename"
    assert "the file must be UTF-8 text (byte 5 is not)" in str(caught.value)


def test_code_from_a_file_that_is_not_embedded(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("def train(context):\n    return {'ok': 1}\n")
    fn = runplane.code_to_function(filename=str(path), embed_code=False)
    assert fn.metadata.name == "train"
    assert fn.spec.command == str(path)
    assert not fn.spec.build.source
    embedded = embed_command(fn)
    assert base64.b64decode(embedded.spec.build.source).decode() == path.read_text()
    assert embedded.spec.build.filename == "train.py"
    assert not fn.spec.build.source  # a copy was embedded; the caller's function is as it was
    assert embed_command(embedded) is embedded  # already embedded
    missing = new_function("gone", command=str(tmp_path / "gone.py"))
    assert embed_command(missing) is missing  # not on this machine: the service refuses it


def test_notebooks_give_their_code_cells(tmp_path):
    notebook = tmp_path / "explore.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "source": ["# notes"]},
                    {"cell_type": "code", "source": ["%pip install x\n", "!ls\n"]},
                    {"cell_type": "code", "source": ["def train(context):\n", "    pass\n"]},
                ]
            }
        )
    )
    fn = runplane.code_to_function("explore", filename=str(notebook), handler="train")
    code = base64.b64decode(fn.spec.build.source).decode()
    assert code == "def train(context):\n    pass\n"
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{}")
    with pytest.raises(InvalidValueError, match="a .ipynb file must be a Jupyter notebook"):
        runplane.code_to_function("broken", filename=str(broken), handler="train")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("kind: [unclosed\n", "the file must be YAML or JSON"),
        ("- a\n- b\n", "the file must hold one function (a mapping)"),
    ],
)
def test_exported_functions_that_do_not_read(tmp_path, content, said):
    path = tmp_path / "function.yaml"
    path.write_text(content)
    with pytest.raises(InvalidValueError) as caught:
        import_function(str(path))
    assert caught.value.field == "url"
    assert said in str(caught.value)


def test_exported_functions_are_local_files(tmp_path):
    with pytest.raises(NotFoundError, match="the function hub is not available"):
        import_function("hub://trainer")
    with pytest.raises(NotFoundError, match="does not exist"):
        import_function(str(tmp_path / "nope.yaml"))
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"metadata: {name: caf\xe9}\n")
    with pytest.raises(InvalidValueError, match="UTF-8"):
        import_function(str(latin))


def test_a_function_without_a_name_takes_its_files_or_its_runs():
    # As MLRun allows: a nameless function is named by its file, else by its run's handler.
    assert new_function(command="/src/my_job.py").metadata.name == "my-job"
    assert new_function().metadata.name == ""


# -- volumes ------------------------------------------------------------------------------

VOLUMES = [
    ({"name": "d"}, "spec.volumes", "volumes are a list (at most 256)"),
    ([{"name": "d"}], "spec.volumes[0]", "a volume has a name and one source"),
    (
        [{"name": "d", "emptyDir": {}, "secret": {"secretName": "s"}}],
        "spec.volumes[0]",
        "one source",
    ),
    ([{"name": "d", "emptyDir": []}], "spec.volumes[0].emptyDir", "emptyDir has medium"),
    (
        [{"name": "d", "persistentVolumeClaim": {"claimName": "c", "size": 1}}],
        "spec.volumes[0].persistentVolumeClaim",
        "persistentVolumeClaim has claimName, readOnly",
    ),
    (
        [{"name": "runplane-own", "emptyDir": {}}],
        "spec.volumes[0].name",
        "volume names starting 'runplane-' are runplane's own",
    ),
    (
        [{"name": "v", "flexVolume": {"driver": "v3io/fuse", "secretRef": {"name": "A/b"}}}],
        "spec.volumes[0].flexVolume.secretRef.name",
        "",
    ),
    (
        [{"name": "c", "configMap": {"name": "cfg", "items": ["a"]}}],
        "spec.volumes[0].configMap.items[0]",
        "an item maps a key to a path",
    ),
    (
        [{"name": "c", "configMap": {"name": "cfg", "items": [{"key": "..", "path": "x"}]}}],
        "spec.volumes[0].configMap.items[0].key",
        "a key is letters, digits, '-', '_' and '.'",
    ),
]


@pytest.mark.parametrize(("volumes", "field", "said"), VOLUMES)
def test_volumes_of_the_wrong_shape(volumes, field, said):
    with pytest.raises(InvalidValueError) as caught:
        check_volumes("spec.volumes", volumes)
    assert caught.value.field == field
    assert said in str(caught.value)


MOUNTS = [
    ({"name": "d"}, "spec.volume_mounts", "mounts are a list"),
    ([{"name": "d", "mountPath": "/d", "mode": "rw"}], "spec.volume_mounts[0]", "a mount has"),
    ([{"name": "d", "mountPath": "/runplane/x"}], "spec.volume_mounts[0].mountPath", "own"),
    ([{"name": "d", "mountPath": "/d:rw"}], "spec.volume_mounts[0].mountPath", "no ':'"),
    ([{"name": "d", "mountPath": "d"}], "spec.volume_mounts[0].mountPath", "absolute"),
]


@pytest.mark.parametrize(("mounts", "field", "said"), MOUNTS)
def test_mounts_of_the_wrong_shape(mounts, field, said):
    with pytest.raises(InvalidValueError) as caught:
        check_volume_mounts("spec.volume_mounts", mounts)
    assert caught.value.field == field
    assert said in str(caught.value)


def test_configmap_items_as_a_mapping_or_list(fn):
    fn.apply(mount_configmap("cfg", "/etc/app", items={"config.yaml": "app.yaml"}))
    assert fn.spec.volumes[0]["configMap"]["items"] == [{"key": "config.yaml", "path": "app.yaml"}]
    for items, said in (
        ("config.yaml", "items map keys to file paths"),
        ([{"key": "a"}], "items map keys to file paths"),
        ({"a": "../x"}, "a relative path with no '..' element"),
    ):
        with pytest.raises(InvalidValueError, match=said.replace("(", r"\(")):
            mount_configmap("cfg", "/etc/other", volume_name="other", items=items)


def test_every_secret_reference_is_found(fn):
    fn.set_env_from_secret("TOKEN", "db-credentials", "token")
    fn.set_env("PLAIN", "value")
    fn.spec.volumes = [
        {"name": "s", "secret": {"secretName": "tls"}},
        {"name": "v", "flexVolume": {"driver": "v3io/fuse", "secretRef": {"name": "v3io-access"}}},
        {"name": "e", "emptyDir": {}},
    ]
    assert secret_references(fn) == [
        ("spec.env[0].valueFrom.secretKeyRef.name", "db-credentials"),
        ("spec.volumes[0].secret.secretName", "tls"),
        ("spec.volumes[1].flexVolume.secretRef.name", "v3io-access"),
    ]


def test_secret_references_in_shapes_a_function_cannot_carry_yet():
    """Validation refuses these volumes today; the walk finds their Secrets all the same, so a
    shape accepted later cannot slip past the grant check."""
    volumes = [
        {
            "name": "p",
            "projected": {"sources": [{"configMap": {"name": "c"}}, {"secret": {"name": "ca"}}]},
        },
        {"name": "csi", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-creds"}}},
        {"name": "az", "azureFile": {"secretName": "azure", "shareName": "s"}},
        "not a volume",
    ]
    assert list(volume_secret_refs("spec.volumes", volumes)) == [
        ("spec.volumes[0].projected.sources[1].secret.name", "ca"),
        ("spec.volumes[1].csi.nodePublishSecretRef.name", "csi-creds"),
        ("spec.volumes[2].azureFile.secretName", "azure"),
    ]


# -- request bodies ------------------------------------------------------------------------


def test_bodies_nested_deep_are_refused_where_they_nest():
    for levels in (41, 500, 200_000):
        text = '{"params": {"x": ' + "[" * levels + "]" * levels + "}}"
        with pytest.raises(InvalidValueError) as caught:
            load_json(text)
        assert caught.value.field == "params.x[0][0][0][0]..."
        assert "JSON nests at most 40 levels deep here" in str(caught.value)
    assert load_json('{"a": ' + "[" * 38 + "]" * 38 + "}")  # 39 levels: allowed
    escaped = '{"k\\"ey": {"a": [1, {"b": ' + "[" * 2000 + "]" * 2000 + "}]}}"
    with pytest.raises(InvalidValueError) as caught:
        load_json(escaped)
    assert caught.value.field == 'k"ey.a[1].b[0][0]...'


def test_the_path_to_a_deep_value_skips_what_came_before():
    deep = "[" * 3000 + "]" * 3000
    text = '{"a": [1, [2, 3], {"x": "]"}], "b": {"c": 1, "d": [4, ' + deep + "]}}"
    with pytest.raises(InvalidValueError) as caught:
        load_json(text)
    assert caught.value.field == "b.d[1][0][0][0]..."  # the first six parts


@pytest.mark.parametrize(
    ("number", "said"),
    [
        ("1" + "0" * 4300, "<an integer of 4301 digits> is not valid; integers have at most 4300"),
        ("2e308", "2e308 is not valid; numbers are finite"),
        ("-Infinity", "-Infinity is not valid; NaN and Infinity are not JSON numbers"),
        ("1" * 30 + "e999", "<a number of 34 characters> is not valid; numbers are finite"),
    ],
)
def test_numbers_no_field_may_hold(number, said):
    with pytest.raises(InvalidValueError) as caught:
        load_json('{"params": {"x": [0, ' + number + "]}}")
    assert caught.value.field == "params.x[1]"
    assert said in str(caught.value)
    assert load_json('{"x": ' + "9" * 4300 + "}")["x"] > 0  # as many digits as Python shows


@pytest.mark.parametrize(
    "raw",
    [
        b'{"params": {"epochs": 3, "rate": 0.001, "on": true, "none": null, "s": "caf\\u00e9"}}',
        b'{"big": 123456789012345678901234567890, "neg": -9223372036854775809}',
        b'{"u64": 18446744073709551615, "i64": -9223372036854775808, "x": 1234567890123456789}',
        b'{"float": 0.1234567890123456789012, "e": 1.5E2, "tiny": 5e-324, "max": 1.7e308}',
        b'{"a": 1, "a": 2, "pair": "\\ud83d\\ude00", "raw": "\xf0\x9f\x98\x80", "nul": "\\u0000"}',
        b'\xef\xbb\xbf{"bom": 1}',
        '{"utf16": 1}'.encode("utf-16"),
        b' \t\r\n [1, [2, [3, {"k": []}]]] \n',
    ],
)
def test_a_body_reads_as_the_standard_librarys_json_reads_it(raw):
    # orjson reads most bodies; what it would read otherwise (an integer beyond 64 bits as a
    # float) or not at all is read by the standard library, so every body comes out the same.
    read = load_json(raw)
    expected = json.loads(raw)
    assert read == expected
    assert json.dumps(read) == json.dumps(expected)  # the same types: 1 is not 1.0


def test_bodies_that_are_no_json():
    for raw, said in ((b"\xff\xfe\x00", "JSON in UTF-8"), (b"{", "JSON is expected \\(Expecting")):
        with pytest.raises(InvalidValueError, match=said):
            load_json(raw)


def test_only_local_paths_reach_the_code(tmp_path: Path):
    with pytest.raises(NotFoundError, match="does not exist"):
        runplane.code_to_function("x", filename=str(tmp_path / "missing.py"))
