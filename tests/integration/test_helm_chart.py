"""The Helm chart (deploy/helm/runplane): linted, rendered with several value combinations,
its objects checked, and each rendering validated by the testbed's Kubernetes 1.36 API server.

No schema file can be downloaded here, so the API server itself is the schema: ``helm install
--dry-run=server`` (helm validates against the server's OpenAPI) and every object applied with
``dryRun=All`` and strict field validation. The Role's rules are held equal to the table of
docs/install.md, and the service account's rights are asked of the API server's authorizer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ApiException as DynamicApiException

from runplane.config import Settings
from runplane.runtimes.kubernetes.api.rest import APPLY_PATCH, RestApi
from testbed import build, kube
from testbed.pytest_plugin import TestbedCluster

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "runplane"
INSTALL_DOC = ROOT / "docs" / "install.md"
EXTERNAL_URL = "postgresql+psycopg://runplane:not-a-real-password@db.example:5432/runplane"

pytestmark = pytest.mark.testbed_tool("helm")

#: Value combinations (helm --set arguments) the chart must render to valid objects.
COMBINATIONS: dict[str, list[str]] = {
    "default": [],
    "external-postgresql": ["postgresql.enabled=false", f"externalDatabase.url={EXTERNAL_URL}"],
    "external-secret": ["postgresql.enabled=false", "externalDatabase.existingSecret=db-url"],
    "nodes-clusterrole": ["rbac.nodes.enabled=true"],
    "nodeport": ["service.type=NodePort", "service.nodePort=30470"],
    "one-replica-ingress": [
        "replicas=1",
        "leaderElection.enabled=false",
        "ingress.enabled=true",
        "ingress.tlsSecret=runplane-tls",
        "trustedProxies={10.244.0.0/16,fd00::/64}",
        "priorityClasses.create=false",
        "spot.preset=gke",
        "tokens.list[0].token=a-token-of-the-tests-0123456789",
        "tokens.list[0].user=alice",
        "tokens.list[0].role=admin",
    ],
}


@pytest.fixture(scope="module")
def helm() -> Path:
    """The testbed's helm CLI (testbed/ci.sh builds it; built here if it is missing)."""
    return build.build_helm()


def run_helm(helm: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(helm), *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def set_args(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def render(
    helm: Path, env: dict[str, str], values: list[str], namespace: str = "runplane"
) -> list[dict[str, Any]]:
    out = run_helm(
        helm, env, "template", "rp", str(CHART), "--namespace", namespace, *set_args(values)
    )
    return [doc for doc in yaml.safe_load_all(out) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def documented_rules() -> dict[str, set[tuple[str, str, frozenset[str]]]]:
    """The rules docs/install.md's "RBAC, verb by verb" table lists, by scope."""
    text = INSTALL_DOC.read_text()
    found = re.search(r"^## RBAC,? verb by verb\n(.*?)(?=^## )", text, re.M | re.S)
    assert found, f"{INSTALL_DOC} has no section RBAC, verb by verb"
    section = found.group(1)
    rules: dict[str, set[tuple[str, str, frozenset[str]]]] = {"Role": set(), "ClusterRole": set()}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] not in rules:
            continue
        group = "" if cells[1] == "core" else cells[1].strip("`")
        verbs = frozenset(re.findall(r"`([a-z]+)`", cells[3]))
        rules[cells[0]].add((group, cells[2].strip("`"), verbs))
    return rules


def rendered_rules(role: dict[str, Any]) -> set[tuple[str, str, frozenset[str]]]:
    found = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found.add((group, resource, frozenset(rule["verbs"])))
    return found


# -- lint and render (no cluster) -----------------------------------------------------------


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_chart_lints_strictly(helm: Path, helm_env: dict[str, str], combination: str) -> None:
    out = run_helm(
        helm, helm_env, "lint", "--strict", str(CHART), *set_args(COMBINATIONS[combination])
    )
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_every_pod_is_guaranteed_non_root_and_read_only(
    helm: Path, helm_env: dict[str, str], combination: str
) -> None:
    objects = render(helm, helm_env, COMBINATIONS[combination])
    workloads = by_kind(objects, "Deployment") + by_kind(objects, "StatefulSet")
    assert workloads
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            resources = container["resources"]
            # Guaranteed QoS: every container's requests equal its limits, for CPU and memory.
            assert resources["requests"] == resources["limits"]
            assert set(resources["limits"]) == {"cpu", "memory"}
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"] == {"drop": ["ALL"]}
            mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
            assert "/tmp" in mounts
    (service,) = by_kind(objects, "Deployment")
    pod = service["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        10001,
        10001,
    )
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/api/v1/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/api/v1/ready"
    assert container["startupProbe"]["httpGet"]["path"] == "/api/v1/health"
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    for path in ("/tmp", "/var/lib/runplane"):  # what the service writes: emptyDir
        assert "emptyDir" in volumes[mounts[path]]
    env = {item["name"]: item for item in container["env"]}
    for secret in ("RUNPLANE_SERVICE__TOKENS", "RUNPLANE_SERVICE__DATABASE_URL"):
        assert "secretKeyRef" in env[secret]["valueFrom"]
    assert env["RUNPLANE_CONFIG"]["value"] == "/etc/runplane/config.yaml"


def test_the_default_install(helm: Path, helm_env: dict[str, str]) -> None:
    objects = render(helm, helm_env, [])
    (deployment,) = by_kind(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == f"runplane.local/runplane:{chart_app_version()}"
    assert pod["priorityClassName"] == "runplane-system"
    # A stopping replica serves on while it leaves the endpoints, within its grace.
    assert pod["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert pod["terminationGracePeriodSeconds"] == 45
    (service,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "rp-runplane"]
    assert service["spec"]["type"] == "ClusterIP"
    assert by_kind(objects, "ClusterRole") == []
    assert by_kind(objects, "ClusterRoleBinding") == []
    assert [s["metadata"]["name"] for s in by_kind(objects, "StatefulSet")] == [
        "rp-runplane-postgresql"
    ]
    assert len(by_kind(objects, "PodDisruptionBudget")) == 1
    classes = {c["metadata"]["name"]: c for c in by_kind(objects, "PriorityClass")}
    assert {name: (c["value"], c["preemptionPolicy"]) for name, c in classes.items()} == {
        "low": (1000, "Never"),
        "medium": (2000, "Never"),
        "high": (3000, "Never"),
        "runplane-system": (1_000_000, "PreemptLowerPriority"),
    }
    config = service_config(objects)
    assert config["service"]["leader_election"] == {
        "enabled": True,
        "lease_name": "runplane-leader",
    }
    assert config["namespace"] == "runplane"
    tokens = json.loads(secret_value(objects, "rp-runplane-tokens", "tokens"))
    assert [(t["user"], t["role"]) for t in tokens] == [("admin", "admin")]
    assert tokens[0]["token"] == secret_value(objects, "rp-runplane-tokens", "admin-token")
    url = secret_value(objects, "rp-runplane-database", "url")
    password = secret_value(objects, "rp-runplane-database", "password")
    assert url == (
        f"postgresql+psycopg://runplane:{password}@rp-runplane-postgresql.runplane.svc:5432/runplane"
    )


def test_the_role_grants_exactly_the_documented_verbs(helm: Path, helm_env: dict[str, str]) -> None:
    documented = documented_rules()
    assert len(documented["Role"]) >= 10
    assert documented["ClusterRole"]
    objects = render(helm, helm_env, COMBINATIONS["nodes-clusterrole"])
    (role,) = by_kind(objects, "Role")
    assert rendered_rules(role) == documented["Role"]
    (cluster_role,) = by_kind(objects, "ClusterRole")
    assert rendered_rules(cluster_role) == documented["ClusterRole"]
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    # Without leader election, no Lease.
    single = render(helm, helm_env, COMBINATIONS["one-replica-ingress"])
    (role,) = by_kind(single, "Role")
    leases = ("coordination.k8s.io", "leases", frozenset({"get", "create", "update"}))
    assert rendered_rules(role) == documented["Role"] - {leases}


def test_the_runs_may_go_to_another_namespace(helm: Path, helm_env: dict[str, str]) -> None:
    objects = render(helm, helm_env, ["runs.namespace=team-runs"])
    (role,) = by_kind(objects, "Role")
    (binding,) = by_kind(objects, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "team-runs"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rp-runplane", "namespace": "runplane"}
    ]
    assert service_config(objects)["namespace"] == "team-runs"


def test_nodeport_and_external_database(helm: Path, helm_env: dict[str, str]) -> None:
    objects = render(helm, helm_env, COMBINATIONS["nodeport"])
    (service,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "rp-runplane"]
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0]["nodePort"] == 30470
    external = render(helm, helm_env, COMBINATIONS["external-postgresql"])
    assert by_kind(external, "StatefulSet") == []
    assert secret_value(external, "rp-runplane-database", "url") == EXTERNAL_URL
    existing = render(helm, helm_env, COMBINATIONS["external-secret"])
    assert [s["metadata"]["name"] for s in by_kind(existing, "Secret")] == ["rp-runplane-tokens"]
    (deployment,) = by_kind(existing, "Deployment")
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RUNPLANE_SERVICE__DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "db-url",
        "key": "url",
    }


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (["leaderElection.enabled=false"], "need leaderElection.enabled=true"),
        ([f"externalDatabase.url={EXTERNAL_URL}"], "set postgresql.enabled=false"),
        (["postgresql.enabled=false"], "needs externalDatabase.url"),
        (["tokens.generatedAdmin.enabled=false"], "nobody could use the API"),
        (["tokens.list[0].token=short", "tokens.list[0].user=a"], "minLength: got 5, want 16"),
        (["replica=3"], "additional properties 'replica' not allowed"),  # a misspelt value
        (["service.type=ExternalName"], "value must be one of 'ClusterIP', 'NodePort'"),
        (["trustedProxies={*}"], "'*' does not match pattern"),  # every caller believed
        (["preStopSleepSeconds=45"], "leaves nothing of terminationGracePeriodSeconds (45)"),
    ],
)
def test_values_that_cannot_work_are_refused_saying_what_to_change(
    helm: Path, helm_env: dict[str, str], values: list[str], words: str
) -> None:
    done = subprocess.run(
        [str(helm), "template", "rp", str(CHART), *set_args(values)],
        env=helm_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert words in done.stderr


@pytest.mark.parametrize("combination", ["default", "nodes-clusterrole", "one-replica-ingress"])
def test_the_configuration_file_is_valid_runplane_settings(
    helm: Path, helm_env: dict[str, str], combination: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in os.environ if name.startswith("RUNPLANE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)  # only what the chart wrote
    # The database's URL comes from its Secret, as the Deployment's environment has it.
    monkeypatch.setenv("RUNPLANE_SERVICE__DATABASE_URL", "postgresql+psycopg://runplane@db/rp")
    config = service_config(render(helm, helm_env, COMBINATIONS[combination]))
    settings = Settings(**config)
    assert settings.service.runtime == "kubernetes"
    assert settings.service.leader_election.enabled == (combination != "one-replica-ingress")
    assert settings.service.instance == "rp"
    assert settings.priority_classes.value_of("runplane-system") == 1_000_000
    behind_ingress = ["10.244.0.0/16", "fd00::/64"] if combination == "one-replica-ingress" else []
    assert settings.service.trusted_proxies == behind_ingress


def chart_app_version() -> str:
    found = re.search(r'^appVersion:\s*"?([^"\n]+)"?', (CHART / "Chart.yaml").read_text(), re.M)
    assert found
    return found.group(1)


def service_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (configmap,) = by_kind(objects, "ConfigMap")
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
    return config


def secret_value(objects: list[dict[str, Any]], name: str, key: str) -> str:
    import base64

    (secret,) = [s for s in by_kind(objects, "Secret") if s["metadata"]["name"] == name]
    return base64.b64decode(secret["data"][key]).decode()


# -- against the testbed's API server ---------------------------------------------------------


@pytest.fixture
def namespace(testbed_cluster: TestbedCluster) -> Iterator[str]:
    name = f"chart-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(testbed_cluster.api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name)


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_each_rendering_is_valid_for_kubernetes_1_36(
    testbed_cluster: TestbedCluster,
    helm: Path,
    helm_env: dict[str, str],
    namespace: str,
    combination: str,
) -> None:
    values = COMBINATIONS[combination]
    kubeconfig = str(testbed_cluster.kubeconfig)
    # helm builds every object against the API server's OpenAPI schema and stops short of
    # creating them. The testbed has runplane's PriorityClasses already (made outside helm, as
    # on a cluster where runplane ran before), which an install must then not make: the
    # objects themselves are validated below.
    run_helm(
        helm,
        helm_env,
        "install",
        "rp",
        str(CHART),
        "--namespace",
        namespace,
        "--kubeconfig",
        kubeconfig,
        "--dry-run=server",
        *set_args([*values, "priorityClasses.create=false"]),
    )
    # Then the API server's own validation and admission, each object applied as a dry run
    # with unknown or duplicate fields refused.
    dynamic = DynamicClient(testbed_cluster.api)
    for obj in render(helm, helm_env, values, namespace=namespace):
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            dynamic.server_side_apply(
                resource,
                body=obj,
                namespace=obj["metadata"].get("namespace"),
                field_manager="runplane-chart-test",
                force_conflicts=True,
                dry_run="All",
                query_params=[("fieldValidation", "Strict")],
            )
        except DynamicApiException as error:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']} ({combination}): {error.body}")


def test_the_service_account_may_do_what_the_table_says_and_no_more(
    testbed_cluster: TestbedCluster, helm: Path, helm_env: dict[str, str], namespace: str
) -> None:
    """The rendered RBAC objects created for real, then the API server's authorizer asked,
    as the service account, for every documented verb and for some it must not have."""
    objects = render(helm, helm_env, [], namespace=namespace)
    dynamic = DynamicClient(testbed_cluster.api)
    for obj in objects:
        if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            dynamic.create(resource, body=obj, namespace=namespace)
    account = f"system:serviceaccount:{namespace}:rp-runplane"

    def allowed(group: str, resource: str, verb: str, where: str | None = namespace) -> bool:
        resource, _, subresource = resource.partition("/")
        review = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=account,
                groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                resource_attributes=client.V1ResourceAttributes(
                    group=group,
                    resource=resource,
                    subresource=subresource or None,
                    verb=verb,
                    namespace=where,
                    name=namespace if resource == "namespaces" else None,
                ),
            )
        )
        answer = client.AuthorizationV1Api(testbed_cluster.api).create_subject_access_review(review)
        return bool(answer.status.allowed)

    for group, resource, verbs in documented_rules()["Role"]:
        for verb in verbs:
            assert allowed(group, resource, verb), (group, resource, verb)
    for group, resource, verb in [
        ("", "secrets", "list"),
        ("", "secrets", "watch"),
        ("", "pods", "deletecollection"),
        ("", "pods/exec", "create"),
        ("", "events", "list"),
        ("", "namespaces", "create"),
        ("rbac.authorization.k8s.io", "roles", "create"),
    ]:
        assert not allowed(group, resource, verb), (group, resource, verb)
    # Nothing outside the runs' namespace, and no nodes without the ClusterRole.
    assert not allowed("", "pods", "create", where="default")
    assert not allowed("", "pods", "list", where=None)
    assert not allowed("", "nodes", "list", where=None)
    # Two requests as the runtime sends them, as the account: its namespace read at start
    # (another's refused), and a serving function's object created by server-side apply,
    # which takes `create` besides `patch`.
    as_account = kube.api_client(testbed_cluster.kubeconfig)
    as_account.set_default_header("Impersonate-User", account)
    rest = RestApi(as_account)
    assert rest.json("GET", f"/api/v1/namespaces/{namespace}")["metadata"]["name"] == namespace
    with pytest.raises(ApiException) as refused:
        rest.json("GET", "/api/v1/namespaces/default")
    assert refused.value.status == 403
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}}
    applied = rest.json(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/configmaps/applied",
        {"fieldManager": "runplane", "dryRun": "All"},
        body=json.dumps(configmap),
        content_type=APPLY_PATCH,
    )
    assert applied["metadata"]["name"] == "applied"
