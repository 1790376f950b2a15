"""Service-level defaults and policies: one typed settings object.

Read, in increasing precedence, from built-in defaults, a YAML file (``RUNPLANE_CONFIG`` or
``~/.runplane/config.yaml``) and ``RUNPLANE_*`` environment variables with ``__`` for nesting,
e.g. ``RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE=allow``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from functools import cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from runplane import names
from runplane.errors import ConfigError, InvalidValueError, shown
from runplane.spec.base import checked
from runplane.spec.labels import check_labels
from runplane.spec.numbers import is_whole
from runplane.spec.resources import Resources, check_quantity_setting
from runplane.spec.retention import RetentionPolicy
from runplane.spec.retries import DEFAULT_POLICY, RetryLimits, RetryPolicy, overlay
from runplane.spec.scheduling import PreemptionMode, check_tolerations
from runplane.spec.thresholds import DEFAULT_THRESHOLDS, ThresholdValue, check_thresholds

log = logging.getLogger(__name__)

SPOT_LABEL = "app.iguazio.com/lifecycle"


def _spot_taint_toleration(key: str, value: str) -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}


class PreemptibleNodes(pydantic.BaseModel):
    """How spot nodes are recognised (labels) and what lets pods onto them (tolerations)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    #: The label value that marks on-demand nodes, where the cluster has one.
    on_demand_labels: dict[str, str] = pydantic.Field(default_factory=dict)

    _labels = checked(
        "node_selector", "on_demand_labels", by=check_labels, where="preemptible_nodes"
    )
    _tolerations = checked("tolerations", by=check_tolerations, where="preemptible_nodes")


#: Spot-node conventions of common clusters, selectable with ``preemptible_nodes_preset``.
PREEMPTIBLE_PRESETS: dict[str, PreemptibleNodes] = {
    "iguazio": PreemptibleNodes(
        node_selector={SPOT_LABEL: "preemptible"},
        tolerations=[_spot_taint_toleration(SPOT_LABEL, "preemptible")],
        on_demand_labels={SPOT_LABEL: "non-preemptible"},
    ),
    # EKS managed node groups label capacity; spot groups carry no taint unless one is added.
    "eks": PreemptibleNodes(
        node_selector={"eks.amazonaws.com/capacityType": "SPOT"},
        on_demand_labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"},
    ),
    # GKE marks Spot VMs and the older preemptible VMs with different labels; both are spot.
    "gke": PreemptibleNodes(
        node_selector={
            "cloud.google.com/gke-spot": "true",
            "cloud.google.com/gke-preemptible": "true",
        },
        tolerations=[
            _spot_taint_toleration("cloud.google.com/gke-spot", "true"),
            _spot_taint_toleration("cloud.google.com/gke-preemptible", "true"),
        ],
    ),
    # AKS taints spot pools with the same key it labels them with.
    "aks": PreemptibleNodes(
        node_selector={"kubernetes.azure.com/scalesetpriority": "spot"},
        tolerations=[_spot_taint_toleration("kubernetes.azure.com/scalesetpriority", "spot")],
    ),
    "karpenter": PreemptibleNodes(
        node_selector={"karpenter.sh/capacity-type": "spot"},
        on_demand_labels={"karpenter.sh/capacity-type": "on-demand"},
    ),
}


def _with_default_thresholds(field: str, value: object) -> dict[str, ThresholdValue]:
    """The documents' thresholds, overridden state by state by the configured ones."""
    return {**DEFAULT_THRESHOLDS, **check_thresholds(field, value)}


class FunctionDefaults(pydantic.BaseModel):
    """What a function gets for every key it leaves unset."""

    model_config = pydantic.ConfigDict(extra="forbid")

    preemption_mode: PreemptionMode = PreemptionMode.PREVENT
    priority_class: str = "medium"
    resources: Resources = pydantic.Field(default_factory=Resources)
    node_selector: dict[str, str] = pydantic.Field(default_factory=dict)
    #: Added to every function's own (a cluster whose worker nodes carry a taint of its own).
    tolerations: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    state_thresholds: dict[str, ThresholdValue] = pydantic.Field(
        default_factory=lambda: dict(DEFAULT_THRESHOLDS)
    )
    image: str = "python:3.11-slim"
    #: Which failed attempts are tried again, for functions that leave it unset
    #: (docs/resilience.md).
    retry: RetryPolicy = pydantic.Field(default_factory=lambda: DEFAULT_POLICY)

    @pydantic.field_validator("retry", mode="after")
    @classmethod
    def _retry(cls, value: RetryPolicy) -> RetryPolicy:
        return overlay(DEFAULT_POLICY, value)

    _tolerations = checked("tolerations", by=check_tolerations, where="function_defaults")
    _selector = checked("node_selector", by=check_labels, where="function_defaults")
    _thresholds = checked(
        "state_thresholds", by=_with_default_thresholds, where="function_defaults"
    )

    @pydantic.field_validator("preemption_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


class PriorityClasses(pydantic.BaseModel):
    """User classes order the queue and never evict; system classes are for core services."""

    model_config = pydantic.ConfigDict(extra="forbid")

    valid: list[str] = pydantic.Field(default_factory=lambda: ["low", "medium", "high"])
    #: Class -> roles that may use it; a class not listed here is open to every role.
    allowed_roles: dict[str, list[str]] = pydantic.Field(default_factory=dict)
    #: Classes reserved for core services; they may preempt user pods.
    system: list[str] = pydantic.Field(default_factory=lambda: ["runplane-system"])
    #: The value each class gets when runplane creates it on a cluster that lacks it, and
    #: the order runs are granted on this machine; see :meth:`value_of` for classes not here.
    values: dict[str, int] = pydantic.Field(
        default_factory=lambda: {
            "low": 1000,
            "medium": 2000,
            "high": 3000,
            "runplane-system": 1_000_000,
        }
    )

    def value_of(self, name: str) -> int:
        """A class's value: the configured one, else by its place among the user classes
        (1000 apart, in the order ``valid`` lists them), and 1,000,000 for system classes."""
        if name in self.values:
            return self.values[name]
        if name in self.system:
            return 1_000_000
        return (self.valid.index(name) + 1) * 1000 if name in self.valid else 0


class ReservedNodeGroup(pydantic.BaseModel):
    """A node group user functions may not target, recognised by its labels."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str
    node_selector: dict[str, str]
    reason: str = "reserved for core services"


class AutoMount(pydantic.BaseModel):
    """The volume mounted into every pod unless a function disables auto-mount."""

    model_config = pydantic.ConfigDict(extra="forbid")

    type: Literal["none", "pvc", "configmap", "secret"] = "none"
    name: str = "auto-mount"
    source: str = ""
    mount_path: str = "/mnt/auto"


class Serving(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    port: int = 8080
    service_port: int = 80
    target_cpu_percent: int = 75
    #: Deployments on this machine (docs/runtimes.md): the address their port binds, how often
    #: the autoscaler looks (the HorizontalPodAutoscaler's sync period), how long a step down
    #: waits for the load to stay low (its stabilisation window), and how long ``deploy()``
    #: waits for every replica to be ready, in seconds.
    local_host: str = "127.0.0.1"
    scale_interval: float = pydantic.Field(default=15.0, gt=0)
    scale_down_delay: float = pydantic.Field(default=300.0, ge=0)
    ready_timeout: float = pydantic.Field(default=120.0, gt=0)


class LocalVolume(pydantic.BaseModel):
    """Where a volume of the cluster lives on this machine."""

    model_config = pydantic.ConfigDict(extra="forbid")

    path: Path


class Local(pydantic.BaseModel):
    """The embedded default: this machine as one node."""

    model_config = pydantic.ConfigDict(extra="forbid")

    #: Where run records, logs and artifacts are kept.
    home: Path = pydantic.Field(default_factory=lambda: Path.home() / ".runplane")
    #: Allocatable capacity; detected from the machine when unset.
    cpu: str | None = None
    memory: str | None = None
    gpus: int | None = None
    #: Node labels; by default the on-demand labels of the spot preset, and the hostname.
    node_labels: dict[str, str] | None = None
    #: Claim, ConfigMap or Secret name -> local directory, for PVC/ConfigMap/Secret volumes.
    volumes: dict[str, LocalVolume] = pydantic.Field(default_factory=dict)
    #: How often limits, thresholds and other processes' changes are checked, in seconds.
    poll_interval: float = pydantic.Field(default=0.05, gt=0, le=5)
    #: Variables a run inherits from the process that starts it, beyond PATH, the locale and
    #: the time zone (e.g. ``["HTTPS_PROXY", "CUDA_HOME"]``). Nothing else of that process's
    #: environment reaches a run.
    inherit_env: list[str] = pydantic.Field(default_factory=list)
    #: How runs' limits are enforced and their processes held (docs/local.md): ``cgroup``, a
    #: cgroup per run (an error at start where none is writable); ``watchdog``, polling every
    #: ``poll_interval``; ``auto``, a cgroup where one is writable, else the watchdog.
    isolation: Literal["auto", "cgroup", "watchdog"] = "auto"
    #: The most processes and threads a run may have at once (its cgroup's ``pids.max``), so a
    #: fork bomb stops there; ``None`` for no limit.
    pids_limit: int | None = pydantic.Field(default=4096, ge=16)
    #: Which user runs run as: ``per-run``, a uid of its own for each run (root only);
    #: ``same``, runplane's own; ``auto``, per-run under ``runplane serve`` as root, else same.
    run_users: Literal["auto", "per-run", "same"] = "auto"
    #: How a run's process starts (docs/local.md): ``warm``, forked from a pre-imported
    #: interpreter (a few milliseconds); ``fresh``, a new interpreter per run (tens of them),
    #: for code that needs a pristine one.
    launcher: Literal["warm", "fresh"] = "warm"
    #: The uids leased to runs, one per running run, as ``FIRST-LAST``: a range no account uses.
    run_uids: str = "1000000000-1000065535"
    #: The Python interpreter that runs' processes use; runplane's own when unset. Runs under
    #: users of their own need one those users can execute.
    python: Path | None = None

    @pydantic.field_validator("run_uids")
    @classmethod
    def _uid_range(cls, value: str) -> str:
        first, dash, last = value.partition("-")
        whole = dash and is_whole(first) and is_whole(last) and len(value) <= 2 * 20 + 1
        if not (whole and 0 < int(first) <= int(last)):
            raise InvalidValueError(
                "local.run_uids", value, "a range FIRST-LAST of uids", "1000000000-1000065535"
            )
        if int(last) >= 2**32 - 1:
            raise InvalidValueError(
                "local.run_uids", value, "uids below 4294967295", "1000000000-1000065535"
            )
        return value

    _labels = checked("node_labels", by=check_labels, where="local", optional=True)
    _quantity = checked("cpu", "memory", by=check_quantity_setting, where="local", optional=True)


class Retention(RetentionPolicy):
    """The service's retention policy (docs/retention.md), which a project's record may
    override term by term, and how it is carried out."""

    #: A finished run's output and the files of its directory go after this; its record stays.
    logs_max_age: str | None = "90 days"
    #: The most output a run keeps: its first quarter, then its last three quarters behind a
    #: marker line saying how much was dropped between them.
    max_output_bytes: int = pydantic.Field(default=32 << 20, ge=64 << 10, le=1 << 40)
    #: Seconds between passes of the service's retention loop.
    interval: float = pydantic.Field(default=60.0, gt=0)
    #: Runs removed per transaction: each batch is short, so the API never waits on a pass.
    batch: int = pydantic.Field(default=200, ge=1, le=10_000)


#: The shortest bearer token the service accepts: a guessable token is an open door.
MIN_TOKEN_LENGTH = 16
#: Secret-name globs of a token's ``secrets``: a Secret name's characters, ``*`` and ``?``.
_SECRET_GLOB = re.compile(r"^[a-z0-9.*?-]{1,253}$")


def token_problem(token: str) -> str | None:
    """What keeps ``token`` from being a bearer token, in words that never repeat it; ``None``
    when it is one. A token travels in an HTTP header: printable ASCII without spaces."""
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        return (
            "a token is printable ASCII without spaces, NUL or other control characters "
            "(an HTTP header carries it)"
        )
    return None


class Token(pydantic.BaseModel):
    """A bearer token of the service API, who holds it, and what it grants."""

    model_config = pydantic.ConfigDict(extra="forbid")

    token: pydantic.SecretStr
    user: str = pydantic.Field(min_length=1, max_length=253)
    role: Literal["admin", "user"] = "user"
    #: Globs of the Kubernetes Secrets (and local secret-store entries) this token's runs may
    #: reference, e.g. ``["team-a-*", "shared-readonly"]``. Unset: none for a user, every
    #: Secret for an admin.
    secrets: list[str] | None = pydantic.Field(default=None, max_length=256)

    @pydantic.field_validator("token")
    @classmethod
    def _long_enough(cls, value: pydantic.SecretStr) -> pydantic.SecretStr:
        # The value itself is never repeated: configuration errors get printed.
        secret = value.get_secret_value()
        if len(secret.strip()) < MIN_TOKEN_LENGTH or secret != secret.strip():
            raise ValueError(
                f"a token is at least {MIN_TOKEN_LENGTH} characters, without surrounding "
                "spaces (generate one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )
        problem = token_problem(secret)
        if problem:
            raise ValueError(
                f"{problem}; generate one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'"
            )
        return value

    @pydantic.field_validator("secrets")
    @classmethod
    def _globs(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or []:
            if not isinstance(pattern, str) or not _SECRET_GLOB.match(pattern):
                raise ValueError(
                    f"{pattern!r} is not a Secret-name glob; a glob is a Secret name "
                    "(lowercase letters, digits, '-' and '.') with '*' and '?' wildcards "
                    '(example: ["team-a-*", "shared-config"])'
                )
        return value


class NodeGroupPrice(pydantic.BaseModel):
    """What a node of a group costs, for realised costs and spot savings (docs/resilience.md)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    hourly_price: float = pydantic.Field(ge=0)
    #: A node's allocatable CPU and memory: a run pays the larger share it requests of them;
    #: unset, a run pays the whole node.
    cpu: str | None = None
    memory: str | None = None

    _quantity = checked(
        "cpu", "memory", by=check_quantity_setting, where="node_groups", optional=True
    )


class LiveStreams(pydantic.BaseModel):
    """How many live streams (pages that follow runs as they change) the service holds open."""

    model_config = pydantic.ConfigDict(extra="forbid")

    #: The most one user may have open at once (a page following a run holds two).
    per_user: int = pydantic.Field(default=32, ge=1, le=100_000)
    #: The most open at once in all.
    total: int = pydantic.Field(default=512, ge=1, le=1_000_000)
    #: Seconds a refused stream is told to wait (``Retry-After``).
    retry_after: int = pydantic.Field(default=10, ge=1, le=3600)


class LeaderElection(pydantic.BaseModel):
    """Replicas of ``runplane serve`` sharing one database and one cluster: every replica
    serves the API and the UI; the one holding a ``coordination.k8s.io/v1`` Lease watches,
    launches, aborts, enforces thresholds, fires schedules and applies retention
    (docs/install.md, "Leader"). Off, one process does all of it, as without replicas."""

    model_config = pydantic.ConfigDict(extra="forbid")

    enabled: bool = False
    #: The Lease's name and namespace (default: ``namespace``, where the runs are).
    lease_name: str = "runplane-leader"
    namespace: str | None = None
    #: Who this replica is in the Lease's ``holderIdentity`` (default: the pod's name from the
    #: downward API's ``POD_NAME``, else the host name, with a random suffix either way, so a
    #: restarted process is never taken for its predecessor).
    identity: str | None = None
    #: Seconds a Lease not renewed stays another's (``leaseDurationSeconds``); the leader
    #: stops controlling when it could not renew for ``renew_deadline`` seconds; every replica
    #: tries to acquire or renew every ``retry_period`` seconds.
    lease_duration: int = pydantic.Field(default=8, ge=2, le=300)
    renew_deadline: float = pydantic.Field(default=5.0, gt=0, le=300)
    retry_period: float = pydantic.Field(default=1.0, gt=0, le=60)
    #: Seconds between the leader's reads of what followers recorded for it (runs submitted
    #: to them, aborts asked of them).
    pickup_interval: float = pydantic.Field(default=0.25, gt=0, le=10)

    @pydantic.model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError(
                "leader_election needs lease_duration > renew_deadline > retry_period, so a "
                "leader stops before another may start (given "
                f"{self.lease_duration}, {self.renew_deadline}, {self.retry_period}; example: "
                "8, 5, 1)"
            )
        return self


#: Which requests the service's access log names (runplane.service.access_log).
AccessLogMode = Literal["failures", "all", "off"]


class Service(pydantic.BaseModel):
    """The shared service (``runplane serve``)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    #: SQLAlchemy URL of the run database; SQLite under the runplane home when unset.
    database_url: str | None = None
    #: Where runs execute: this machine, or the Kubernetes cluster of ``kubeconfig``.
    runtime: Literal["local", "kubernetes"] = "local"
    #: Cluster access for ``runtime: kubernetes``: a kubeconfig (default: in-cluster, then
    #: ``~/.kube/config``) and optionally one of its contexts.
    kubeconfig: Path | None = None
    kube_context: str | None = None
    #: Labels this service's pods so several services can share a namespace.
    instance: str | None = None
    #: What to do with pods labelled as runs but unknown to the database: report them, and
    #: delete them when ``delete``.
    orphan_pods: Literal["report", "delete"] = "delete"
    tokens: list[Token] = pydantic.Field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8470
    #: Seconds between checks for due schedules.
    schedule_interval: float = pydantic.Field(default=1.0, gt=0)
    #: The largest request body the API reads; larger ones are refused unread (413).
    max_request_bytes: int = pydantic.Field(default=8 << 20, ge=1 << 16, le=1 << 30)
    #: Failed authentication (a wrong bearer token, a wrong token on the login page) allowed
    #: per client address: this many a second on average, after a burst of ``auth_failure_burst``;
    #: past it that address is answered 429 with ``Retry-After`` until its allowance refills.
    auth_failures_per_second: float = pydantic.Field(default=1.0, gt=0, le=1000)
    auth_failure_burst: int = pydantic.Field(default=20, ge=1, le=100_000)
    #: Reverse proxies (an Ingress controller, a load balancer) believed about the client:
    #: addresses or CIDR networks. From one of them, a request comes from the right-most
    #: ``X-Forwarded-For`` address not itself trusted; empty, forwarded headers are ignored
    #: and the client is the connection's peer (docs/service.md, "Behind a proxy").
    trusted_proxies: list[str] = pydantic.Field(default_factory=list, max_length=1000)
    #: Web UI sessions kept per user; a login past it ends that user's least recently used one.
    sessions_per_user: int = pydantic.Field(default=20, ge=1, le=1000)
    #: Serve the API's interactive pages (``/docs``, ``/redoc``), which load Swagger UI and
    #: ReDoc from a CDN; off, only ``/openapi.json`` describes the API.
    api_docs: bool = False
    #: Which requests the access log names: ``failures`` (4xx and 5xx answers, none at all,
    #: or one a second or more in coming), ``all``, or ``off`` (runplane.service.access_log).
    access_log: AccessLogMode = "failures"
    #: On SIGTERM: how long runs executing here may go on finishing before they are aborted.
    shutdown_grace: float = pydantic.Field(default=30.0, ge=0, le=3600)
    #: Limits on live streams; beyond them a new one is refused (429).
    live_streams: LiveStreams = pydantic.Field(default_factory=LiveStreams)
    #: Prices per node group (by ``runplane.io/node-group``), and the group whose price an
    #: on-demand run would have paid.
    node_groups: dict[str, NodeGroupPrice] = pydantic.Field(default_factory=dict)
    on_demand_group: str = "on-demand"
    #: One leader among replicas (off: this process leads alone).
    leader_election: LeaderElection = pydantic.Field(default_factory=LeaderElection)

    @pydantic.model_validator(mode="after")
    def _replicas_share(self) -> Service:
        if self.leader_election.enabled and (self.runtime != "kubernetes" or not self.database_url):
            raise ValueError(
                "service.leader_election is for replicas that share runs: it needs runtime "
                "'kubernetes' (runs outlive a replica) and a database_url every replica "
                "reaches (example: postgresql+psycopg://runplane@db:5432/runplane)"
            )
        return self

    @pydantic.field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: list[str]) -> list[str]:
        return [_network(given) for given in proxies]

    @pydantic.field_validator("tokens")
    @classmethod
    def _distinct(cls, tokens: list[Token]) -> list[Token]:
        secrets = [token.token.get_secret_value() for token in tokens]
        if len(set(secrets)) != len(secrets):
            holders = [t.user for t in tokens if secrets.count(t.token.get_secret_value()) > 1]
            raise ValueError(
                f"every token is distinct; users {sorted(set(holders))} share one (a token "
                "names who calls)"
            )
        return tokens


def _network(given: str) -> str:
    """One trusted proxy: an IP address or a CIDR network, as its network."""
    example = '(example: ["10.244.0.0/16", "192.0.2.10", "fd00::/64"])'
    if given.strip() == "*":
        raise ValueError(
            "'*' would believe every caller's X-Forwarded-For, so anyone could name the "
            f"address the throttle counts; list the proxies' addresses or networks {example}"
        )
    try:
        return str(ipaddress.ip_network(given.strip()))
    except ValueError as error:
        if "host bits set" in str(error):
            network = ipaddress.ip_network(given.strip(), strict=False)
            raise ValueError(
                f"{given!r} has bits set past its prefix: did you mean {network}? {example}"
            ) from None
        raise ValueError(
            f"{given!r} is not an IP address or a CIDR network (host names are not resolved) "
            f"{example}"
        ) from None


def check_api_url(url: str) -> str:
    """The base URL of a runplane service: ``http(s)://host[:port][/prefix]``, without the
    API's own ``/api/v1`` (which the clients add; given, it is dropped)."""
    example = "(example: RUNPLANE_API=http://127.0.0.1:8470)"
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ValueError(f"the port must be a number from 1 to 65535 {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f" (did you mean http://{url.strip()}?)" if "://" not in url else ""
        raise ValueError(
            f"a service URL starts with http:// or https:// and a host{hint} {example}"
        )
    if parts.username or parts.password:
        raise ValueError(f"credentials go in RUNPLANE_TOKEN, not in the URL {example}")
    if parts.query or parts.fragment:
        raise ValueError(f"a service URL has no query or fragment {example}")
    path = parts.path.rstrip("/")
    path = path.removesuffix("/api/v1").rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path}"


def _config_file() -> Path:
    home = Path(os.environ.get("RUNPLANE_LOCAL__HOME", Path.home() / ".runplane"))
    return Path(os.environ.get("RUNPLANE_CONFIG", home / "config.yaml"))


#: Where a value is a credential: configuration errors show that it is wrong, not what it is.
_SECRET_FIELDS = ("token", "tokens", "database_url")
#: ``RUNPLANE_*`` variables that are not settings: the configuration file, and what runplane
#: sets in a run's own environment (a handler may import runplane).
_OTHER_VARIABLES = frozenset({"RUNPLANE_CONFIG", *names.RESERVED_ENV})


#: The user and password part of a URL.
_URL_CREDENTIALS = re.compile(r"//[^/@]*@")


def _shown(path: tuple[Any, ...], value: Any) -> str:
    if any(part in _SECRET_FIELDS for part in path):
        return "<redacted>"
    if isinstance(value, str):
        value = _URL_CREDENTIALS.sub("//<redacted>@", value)
    return shown(value)


def _first_index(path: tuple[Any, ...]) -> int:
    """Where a path into the settings enters a list (its variable holds the whole list)."""
    return next((i for i, part in enumerate(path) if isinstance(part, int)), len(path))


def _warn_unknown_variables() -> None:
    """A misspelt ``RUNPLANE_*`` variable would silently change nothing; say so."""
    known = {f"RUNPLANE_{name.upper()}" for name in Settings.model_fields}
    for variable in os.environ:
        if not variable.startswith("RUNPLANE_") or variable in _OTHER_VARIABLES:
            continue
        if variable.split("__")[0] not in known and not variable.startswith("RUNPLANE_TEST"):
            log.warning(
                "%s is not a runplane setting and is ignored (settings: %s)",
                variable,
                ", ".join(sorted(known)),
            )


class Settings(BaseSettings):
    """All service defaults and policies, typed."""

    model_config = SettingsConfigDict(
        env_prefix="RUNPLANE_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    namespace: str = "runplane"
    function_defaults: FunctionDefaults = pydantic.Field(default_factory=FunctionDefaults)
    preemptible_nodes_preset: Literal["iguazio", "eks", "gke", "aks", "karpenter"] = "iguazio"
    #: Overrides the preset when given.
    preemptible_nodes: PreemptibleNodes | None = None
    priority_classes: PriorityClasses = pydantic.Field(default_factory=PriorityClasses)
    reserved_node_groups: list[ReservedNodeGroup] = pydantic.Field(
        default_factory=lambda: [
            ReservedNodeGroup(name="system", node_selector={names.NODE_GROUP: "system"})
        ]
    )
    auto_mount: AutoMount = pydantic.Field(default_factory=AutoMount)
    serving: Serving = pydantic.Field(default_factory=Serving)
    #: The MPIJob API an mpijob renders: the MPI Operator's current one, or the Training
    #: Operator's ``kubeflow.org/v1`` (what MLRun renders by default).
    mpijob_api_version: Literal["kubeflow.org/v2beta1", "kubeflow.org/v1"] = "kubeflow.org/v2beta1"
    #: Whether runs queue in Kueue on a cluster that runs it (docs/kubernetes-runtime.md):
    #: ``auto`` uses it where its CRDs are served, ``on`` refuses to start without it, ``off``
    #: leaves admission to runplane (``RUNPLANE_KUEUE``).
    kueue: Literal["auto", "on", "off"] = "auto"
    local: Local = pydantic.Field(default_factory=Local)
    service: Service = pydantic.Field(default_factory=Service)
    #: How long finished runs, their output and files are kept, and each run's output cap.
    retention: Retention = pydantic.Field(default_factory=Retention)
    #: An admin's caps on every function's retries (docs/resilience.md).
    retry_limits: RetryLimits = pydantic.Field(default_factory=RetryLimits)
    #: A runplane service to use instead of the embedded default (``RUNPLANE_API``).
    api: str | None = None
    #: The bearer token for ``api`` (``RUNPLANE_TOKEN``).
    token: pydantic.SecretStr | None = None

    @pydantic.field_validator("api")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        return None if value is None else check_api_url(value)

    @pydantic.field_validator("token")
    @classmethod
    def _token(cls, value: pydantic.SecretStr | None) -> pydantic.SecretStr | None:
        if value is None:
            return None
        secret = value.get_secret_value().strip()  # a line read from a file keeps its newline
        problem = token_problem(secret)
        if problem:
            raise ValueError(f"{problem}; copy the token the service's admin gave you")
        return pydantic.SecretStr(secret)

    @property
    def spot(self) -> PreemptibleNodes:
        """The effective spot-node description: explicit settings, else the preset."""
        return self.preemptible_nodes or PREEMPTIBLE_PRESETS[self.preemptible_nodes_preset]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file()
        if "RUNPLANE_CONFIG" in os.environ and not path.exists():
            raise ConfigError(
                f"RUNPLANE_CONFIG names {str(path)!r}, which does not exist; point it at a "
                "YAML file, or unset it to use ~/.runplane/config.yaml when there is one"
            )
        if path.is_file():  # a named /dev/null reads as no file
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)


def load_settings(**overrides: Any) -> Settings:
    """Settings from defaults, file and environment, with config errors in runplane's words.

    Errors name the setting and where to set it, never a credential's value.
    """
    import yaml

    _warn_unknown_variables()
    try:
        return Settings(**overrides)
    except InvalidValueError as error:
        raise ConfigError(
            f"configuration {error} (set in {_config_file()} or RUNPLANE_*)"
        ) from None
    except SettingsError as error:  # a JSON value in a variable that does not parse
        raise ConfigError(
            f"configuration: {error}; lists and objects in RUNPLANE_* variables are JSON "
            """(example: RUNPLANE_SERVICE__TOKENS='[{"token": "...", "user": "me"}]')"""
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(
            f"configuration file {_config_file()} is not valid YAML: {error}"
        ) from None
    except pydantic.ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = tuple(first["loc"])
        path = ".".join(str(part) for part in where)
        named = [str(part).upper() for part in where[: _first_index(where)]]
        variable = "RUNPLANE_" + "__".join(named)
        raise ConfigError(
            f"configuration {path}: {first['msg']} (got {_shown(where, first.get('input'))}); "
            f"set it in {_config_file()} or {variable}"
        ) from None


@cache
def current() -> Settings:
    """The process-wide settings, loaded once."""
    return load_settings()


def __getattr__(name: str) -> Any:
    """``runplane.config.config``: these settings under the names MLRun code reads."""
    if name == "config":
        from runplane.settings_view import SettingsView

        return SettingsView(current)
    raise AttributeError(f"module 'runplane.config' has no attribute {name!r}")
