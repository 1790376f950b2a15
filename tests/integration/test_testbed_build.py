"""Fast checks of the testbed's own inputs; they need no cluster."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import pytest
import yaml
from kubernetes import client

from testbed import build, cluster, images, podns

ROOT = Path(__file__).resolve().parents[2]

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


def test_pod_dns_answers_for_service_names_of_its_domain_only() -> None:
    resolver = podns.Resolver(client.ApiClient(), "cluster.local")
    assert resolver.service("web.team.svc.cluster.local.") == ("web", "team")
    assert resolver.service("WEB.Team.svc.cluster.local") == ("web", "team")
    for other in (
        "web.team.svc.other.local.",
        "web.svc.cluster.local.",
        "a.web.team.svc.cluster.local.",
        "10-244-0-3.team.pod.cluster.local.",
        "example.com.",
    ):
        assert resolver.service(other) is None, other
    # a pod's hostname in its headless Service, as the MPI Operator's hostfile names workers
    assert resolver.named("job-worker-0.job.team.svc.cluster.local.") == (
        "job",
        "team",
        "job-worker-0",
    )
    assert resolver.named("web.team.svc.cluster.local.") == ("web", "team", "")
    assert resolver.named("a.b.job.team.svc.cluster.local.") is None
    server = podns.serve(resolver, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        query = dns.message.make_query("example.com.", "A")
        reply = dns.query.udp(query, "127.0.0.1", port=port, timeout=5)
        assert reply.rcode() == dns.rcode.NXDOMAIN
        assert reply.id == query.id
    finally:
        server.shutdown()
        server.server_close()


def test_the_dask_image_is_part_of_the_images_key() -> None:
    assert images.DASK_IMAGE in images.ARCHIVES
    assert set(images.NODE_IMAGES) < set(images.ARCHIVES)
    assert build.image_archives()[images.DASK_IMAGE].parent == build.images_dir()


def test_the_tests_that_need_a_tool_run_last_in_the_order_the_tools_are_built() -> None:
    """CI starts the cluster's tests while the tools build (scripts/test.sh): a module that
    uses a tool must say so, and the collected order must put it after every one that does not."""
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT / "tests" / "integration",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    modules = list(
        dict.fromkeys(line.split("::")[0] for line in listed.splitlines() if "::" in line)
    )
    names = list(build.TOOLS)
    needs: dict[str, int] = {}
    for module in modules:
        if Path(module).name == Path(__file__).name:  # names the calls, makes none
            needs[module] = 0
            continue
        source = (ROOT / "tests" / "integration" / Path(module).name).read_text()
        marked = re.findall(r'testbed_tool\("([^"]+)"\)', source)
        used = {name for name, call in TOOL_CALLS.items() if re.search(call, source)}
        assert used <= set(marked), f"{module} uses {sorted(used - set(marked))} unmarked"
        needs[module] = max((names.index(name) + 1 for name in marked), default=0)
    order = [needs[module] for module in modules]
    assert order == sorted(order), list(zip(modules, order, strict=True))
    assert order[0] == 0
    assert order[-1] == len(names)


#: How a test module reaches each tool (its build, or the testbed's helper that starts it).
TOOL_CALLS = {
    "helm": r"build_helm\(|helm_env",
    "spark-operator": r"spark_operator\.(running|install_crds)",
    "mpi-operator": r"mpi_operator\.(running|install_crd)|build_mpi_operator\(",
    "metrics-server": r"metrics_server\.start",
    "kueue": r"tb_kueue\.(running|start)",
}


def test_a_step_records_the_cpu_its_go_commands_took(tmp_path: Path) -> None:
    timings: dict[str, float] = {}
    builder = build.Builder(workdir=tmp_path, out=tmp_path, timings=timings)

    def list_std() -> None:
        assert "fmt" in builder.go("list", "std").split()

    builder.step("list std", list_std)
    assert timings["list std"] > 0
    assert 0 < builder.cpu["list std"] < 600
    builder.go("env", "GOVERSION")  # outside a step: counted nowhere
    assert list(builder.cpu) == ["list std"]


def test_a_failing_go_command_says_which_and_why(tmp_path: Path, capsys: Any) -> None:
    builder = build.Builder(workdir=tmp_path, out=tmp_path, timings={})
    with pytest.raises(RuntimeError, match="command failed"):
        builder.go("list", "runplane.invalid/no/such/package")
    assert "runplane.invalid/no/such/package" in capsys.readouterr().err
