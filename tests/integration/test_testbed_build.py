"""Fast checks of the testbed's own inputs; they need no cluster."""

from __future__ import annotations

import yaml

from testbed import build, cluster

GO_MOD = """module k8s.io/kubernetes

go 1.26.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/example/other => github.com/example/fork v1.0.0
)
"""


def test_staging_modules_come_from_the_release_go_mod() -> None:
    pins = build.staging_replacements(GO_MOD, build.staging_version("v1.36.3"))
    assert pins == [("k8s.io/api", "v0.36.3"), ("k8s.io/client-go", "v0.36.3")]


def test_cache_key_names_every_version() -> None:
    key = build.cache_key()
    for version in (build.K8S_VERSION, build.ETCD_VERSION, build.KWOK_VERSION):
        assert version in key


def test_stages_are_valid_and_uniquely_named() -> None:
    docs = list(yaml.safe_load_all(cluster.kwok_config(cluster.Settings())))
    stages = [d for d in docs if d["kind"] == "Stage"]
    names = [s["metadata"]["name"] for s in stages]
    assert len(names) == len(set(names)) == len(list(cluster.STAGES_DIR.glob("*.yaml")))
    assert {s["spec"]["resourceRef"]["kind"] for s in stages} == {"Node", "Pod"}
    assert docs[0]["kind"] == "KwokConfiguration"
