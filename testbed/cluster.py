"""Start and stop a real Kubernetes control plane (etcd, apiserver, controller-manager,
scheduler) with kwok playing every kubelet, on 127.0.0.1 and free ports (the apiserver also on
the pod bridge's address, for pods of a real node).

Each component runs in its own process group, is stopped by pid (never by name) and logs into
the run directory, which outlives the cluster so a failed test's logs can be read afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed import build, pki

STAGES_DIR = Path(__file__).resolve().parent / "stages"
STATE_FILE = "state.json"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"
#: The kwok nodes' InternalIP (and their pods' hostIP): loopback, where no kubelet serves.
KWOK_NODE_IP = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
#: The real node's pod network (testbed/realnode.py) and the host's address on its bridge.
POD_CIDR = "10.244.0.0/24"
POD_GATEWAY = "10.244.0.1"
#: Where the ``kubernetes`` Service's endpoint points: the host's side of the pod bridge, the
#: one host address pods reach without forwarding. kube-proxy sends 10.96.0.1:443 there. It is
#: in the serving certificate; host-side clients keep using 127.0.0.1.
ADVERTISE_ADDRESS = POD_GATEWAY


def runs_root() -> Path:
    default = Path(os.environ.get("TMPDIR", "/tmp")) / "runplane-testbed"
    return Path(os.environ.get("RUNPLANE_TESTBED_RUNS", str(default)))


def free_port() -> int:
    """Ask the kernel for a free port; the tiny reuse race is acceptable for a test cluster."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Settings:
    """Knobs a test or benchmark may turn; defaults favour fast, deterministic tests."""

    node_lease_seconds: int = 20
    node_monitor_grace: str = "30s"
    terminated_pod_gc_threshold: int = 1000
    client_qps: int = 1000
    verbosity: int = 1
    keep_etcd_data: bool = False
    # False for `up --detach`, whose components must outlive the command that started them.
    die_with_parent: bool = True
    extra_args: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Process:
    name: str
    pid: int
    binary: str
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_runs(self.pid, self.binary)


def _pid_runs(pid: int, binary: str) -> bool:
    """A pid only counts as ours if it still runs our binary: pids get reused."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return cmdline == binary


def _stop_group(proc: Process, timeout: float = 10.0) -> None:
    if not proc.alive():
        return
    # start_new_session made each component the leader of its own group, so pgid == pid.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen is not None:
            try:
                proc.popen.wait(timeout=0.1)
                return
            except subprocess.TimeoutExpired:
                continue
        if not proc.alive():
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.popen is not None:
        proc.popen.wait(timeout=5)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Cluster:
    run_dir: Path
    kubeconfig: Path
    server: str
    processes: list[Process]
    bin_dir: Path
    ports: dict[str, int]
    keep_etcd_data: bool = False
    startup_seconds: float = 0.0

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.run_dir / "pki" / "ca.crt"))
        ctx.load_cert_chain(self.run_dir / "pki" / "admin.crt", self.run_dir / "pki" / "admin.key")
        return ctx

    def scheduler_metrics(self) -> str:
        """The scheduler's Prometheus metrics, as text (its queues, its attempts)."""
        url = f"https://127.0.0.1:{self.ports['scheduler']}/metrics"
        with urllib.request.urlopen(url, timeout=5, context=_insecure()) as resp:
            return str(resp.read().decode())

    def healthy(self) -> dict[str, bool]:
        return {p.name: p.alive() for p in self.processes}

    def stop(self) -> None:
        """Stop components newest first so nothing logs errors about a vanished dependency."""
        for proc in reversed(self.processes):
            _stop_group(proc)
        if not self.keep_etcd_data:
            shutil.rmtree(self.run_dir / "etcd-data", ignore_errors=True)
        self.save_state(stopped=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def save_state(self, stopped: bool = False) -> None:
        data = {
            "run_dir": str(self.run_dir),
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "bin_dir": str(self.bin_dir),
            "ports": self.ports,
            "startup_seconds": self.startup_seconds,
            "stopped": stopped,
            "processes": [
                {"name": p.name, "pid": p.pid, "binary": p.binary, "log": str(p.log)}
                for p in self.processes
            ],
        }
        (self.run_dir / STATE_FILE).write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, run_dir: Path) -> Cluster:
        """Reattach to a cluster another process started (CLI ``down``/``status``)."""
        data = json.loads((run_dir / STATE_FILE).read_text())
        procs = [
            Process(p["name"], p["pid"], p["binary"], Path(p["log"])) for p in data["processes"]
        ]
        return cls(
            run_dir=Path(data["run_dir"]),
            kubeconfig=Path(data["kubeconfig"]),
            server=data["server"],
            processes=procs,
            bin_dir=Path(data["bin_dir"]),
            ports={k: int(v) for k, v in data["ports"].items()},
            startup_seconds=float(data.get("startup_seconds", 0.0)),
        )


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "testbed", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": user}}],
        "current-context": "testbed",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def kwok_config(settings: Settings) -> str:
    """Our stages plus kwok options in one multi-document file for ``kwok --config``."""
    docs = [
        {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            "options": {
                "podPlayStageParallelism": 16,
                "nodePlayStageParallelism": 8,
                "nodeLeaseParallelism": 16,
            },
        }
    ]
    text = yaml.safe_dump_all(docs, sort_keys=False)
    for stage in sorted(STAGES_DIR.glob("*.yaml")):
        text += "---\n" + stage.read_text()
    return text


def _wait(what: str, check: Callable[[], bool], procs: list[Process], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for proc in procs:
            if not proc.alive():
                tail = _tail(proc.log)
                error = PortTaken if "address already in use" in tail else RuntimeError
                raise error(f"{proc.name} exited while waiting for {what}; log {proc.log}:\n{tail}")
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ssl.SSLError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def _http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
        return bool(resp.status == 200)


def _insecure() -> ssl.SSLContext:
    """Component health ports use self-signed certs made at their start; only liveness matters."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _die_with_parent() -> None:
    """Runs in the child before exec: if the test process is killed outright (no finally, no
    atexit), the kernel still kills every component instead of leaking them. SIGKILL, because
    all components would get the signal at once and kube-apiserver's graceful shutdown hangs
    once etcd is gone; the data is throwaway. The signal follows the *thread* that started the
    cluster, so start it from a long-lived one."""
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _spawn(
    name: str,
    argv: list[str],
    run_dir: Path,
    env: dict[str, str] | None = None,
    die_with_parent: bool = True,
    pass_fds: tuple[int, ...] = (),
) -> Process:
    log = run_dir / "logs" / f"{name}.log"
    (run_dir / "logs" / f"{name}.cmdline").write_text(" \\\n  ".join(argv) + "\n")
    linux = sys.platform.startswith("linux")
    with log.open("ab") as out:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=run_dir,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent and linux else None,
            pass_fds=pass_fds,
        )
    return Process(name, popen.pid, argv[0], log, popen)


KEEP_RUNS = 10


def prune_runs(root: Path, keep: int = KEEP_RUNS) -> None:
    """Old run directories are only worth their logs for a while; keep the newest few, and
    never touch one whose components may still be running."""
    runs = sorted(root.glob("run-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in runs[keep:]:
        state = old / STATE_FILE
        try:
            stopped = bool(json.loads(state.read_text()).get("stopped"))
        except (OSError, ValueError):
            stopped = False
        if stopped:
            shutil.rmtree(old, ignore_errors=True)


def new_run_dir() -> Path:
    root = runs_root()
    root.mkdir(parents=True, exist_ok=True)
    prune_runs(root)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(tempfile.mkdtemp(prefix=f"run-{stamp}-", dir=root))
    latest = root / "latest"
    with contextlib.suppress(OSError):
        latest.unlink(missing_ok=True)
        latest.symlink_to(path.name)
    return path


def ensure_binaries(allow_build: bool = True) -> Path:
    missing = build.missing_binaries()
    if missing:
        if not allow_build:
            raise RuntimeError(
                f"testbed binaries missing in {build.bin_dir()}: {missing}; "
                "run `python -m testbed build` (or testbed/ci.sh)"
            )
        # The real node's images need root and mmdebstrap; a control plane alone does not.
        build.build(with_images=False, tools=False)
    return build.bin_dir()


@dataclass(frozen=True)
class Layout:
    """Where one run keeps its files and which ports its components listen on."""

    run_dir: Path
    bin_dir: Path
    certs: pki.Pki
    ports: dict[str, int]

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def bin(self, name: str) -> str:
        return str(self.bin_dir / name)


def etcd_argv(lay: Layout) -> list[str]:
    peer = f"http://127.0.0.1:{lay.ports['etcd-peer']}"
    return [
        lay.bin("etcd"),
        "--name=testbed",
        f"--data-dir={lay.run_dir / 'etcd-data'}",
        f"--listen-client-urls={lay.etcd_url}",
        f"--advertise-client-urls={lay.etcd_url}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=testbed={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
        "--quota-backend-bytes=8589934592",
    ]


def apiserver_argv(lay: Layout, settings: Settings) -> list[str]:
    c = lay.certs
    return [
        lay.bin("kube-apiserver"),
        f"--etcd-servers={lay.etcd_url}",
        # Every address, as in a cluster: the pod bridge's address (the advertised one) only
        # exists once a real node runs, and then pods reach the API there through kube-proxy.
        "--bind-address=0.0.0.0",
        f"--advertise-address={ADVERTISE_ADDRESS}",
        f"--secure-port={lay.ports['apiserver']}",
        f"--cert-dir={lay.run_dir / 'pki'}",
        f"--tls-cert-file={c.serving.cert}",
        f"--tls-private-key-file={c.serving.key}",
        f"--client-ca-file={c.ca.cert}",
        f"--service-account-key-file={c.service_account_pub}",
        f"--service-account-signing-key-file={c.service_account_key}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Node authorization and NodeRestriction let a real kubelet join with its own
        # system:node:<name> identity (testbed/realnode.py); they only ever concern requests
        # from that group, so kwok (admin credentials) and the tests are unaffected.
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        # A node's InternalIP: the real node's kubelet listens on its routable own address
        # (testbed/realnode.py), which logs, exec and the node proxy (kubelet stats) reach;
        # the kwok nodes' is loopback, which nothing serves and the node proxy refuses. The
        # kubelet's serving certificate is from the run's CA and names that address.
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-certificate-authority={c.ca.cert}",
        "--allow-privileged=true",
        *aggregation_args(c),
        "--max-requests-inflight=2000",
        "--max-mutating-requests-inflight=1000",
        "--profiling=false",
        f"--v={settings.verbosity}",
    ]


def aggregation_args(certs: pki.Pki) -> list[str]:
    """What lets the apiserver serve aggregated APIs (metrics-server's ``metrics.k8s.io``, for
    the autoscaler): the identity it proxies with, which the extension trusts to name the user
    in headers, and routing to the APIService's endpoint rather than its ClusterIP, so the
    apiserver reaches an extension running on the host without kube-proxy."""
    return [
        f"--requestheader-client-ca-file={certs.ca.cert}",
        f"--requestheader-allowed-names={pki.FRONT_PROXY_NAME}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={certs.front_proxy.cert}",
        f"--proxy-client-key-file={certs.front_proxy.key}",
        "--enable-aggregator-routing=true",
    ]


def controller_manager_argv(lay: Layout, settings: Settings, kubeconfig: Path) -> list[str]:
    c = lay.certs
    return [
        lay.bin("kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={lay.ports['controller-manager']}",
        f"--cert-dir={lay.run_dir / 'pki' / 'controller-manager'}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={c.service_account_key}",
        f"--root-ca-file={c.ca.cert}",
        f"--cluster-signing-cert-file={c.ca.cert}",
        f"--cluster-signing-key-file={c.ca.key}",
        # Notice a dead kwok within seconds, not minutes.
        "--node-monitor-period=2s",
        f"--node-monitor-grace-period={settings.node_monitor_grace}",
        # Keep finished pods for inspection, but bounded for long benchmark runs.
        f"--terminated-pod-gc-threshold={settings.terminated_pod_gc_threshold}",
        f"--kube-api-qps={settings.client_qps}",
        f"--kube-api-burst={settings.client_qps * 2}",
        f"--v={settings.verbosity}",
    ]


#: The longest a pod waits before the scheduler retries it (after failed attempts).
SCHEDULER_MAX_BACKOFF_SECONDS = 5


def scheduler_config(settings: Settings, kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(kubeconfig),
            "qps": settings.client_qps,
            "burst": settings.client_qps * 2,
        },
        "leaderElection": {"leaderElect": False},
        # Short backoff keeps "pending until capacity frees" tests quick.
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": SCHEDULER_MAX_BACKOFF_SECONDS,
    }


def scheduler_argv(lay: Layout, settings: Settings, config: Path, kubeconfig: Path) -> list[str]:
    return [
        lay.bin("kube-scheduler"),
        f"--config={config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={lay.ports['scheduler']}",
        f"--cert-dir={lay.run_dir / 'pki' / 'scheduler'}",
        # Its queues' sizes and attempts, read by tests that must know when it is idle.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        f"--v={settings.verbosity}",
    ]


def _kwok_level(verbosity: int) -> str:
    """kwok logs every status patch at info; at benchmark scale that is megabytes a minute."""
    return "debug" if verbosity >= 4 else "info" if verbosity >= 1 else "warn"


def kwok_argv(lay: Layout, settings: Settings, config: Path, kubeconfig: Path) -> list[str]:
    return [
        lay.bin("kwok"),
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_VALUE}",
        f"--node-lease-duration-seconds={settings.node_lease_seconds}",
        f"--server-address=127.0.0.1:{lay.ports['kwok']}",
        "--cidr=10.0.0.1/16",
        # no kubelet serves there: a log request for a kwok pod is refused at once (on any
        # machine, unlike an address that some network might route) and the node proxy
        # refuses a loopback address outright
        f"--node-ip={KWOK_NODE_IP}",
        f"--v={_kwok_level(settings.verbosity)}",
    ]


class PortTaken(RuntimeError):
    """A component lost the race for a port picked by ``free_port``."""


def start(
    run_dir: Path | None = None,
    settings: Settings | None = None,
    allow_build: bool = True,
    timeout: float = 90.0,
    attempts: int = 3,
) -> Cluster:
    """Bring the whole control plane up and return once every component reports healthy.

    Ports are picked before the components bind them, so another process can take one in
    between; that case is retried with fresh ports and a fresh run directory.
    """
    for attempt in range(1, attempts + 1):
        try:
            return _start(run_dir if attempt == 1 else None, settings, allow_build, timeout)
        except PortTaken:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start(
    run_dir: Path | None, settings: Settings | None, allow_build: bool, timeout: float
) -> Cluster:
    settings = settings or Settings()
    bin_dir = ensure_binaries(allow_build)
    began = time.monotonic()
    run_dir = run_dir or new_run_dir()
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok")
    lay = Layout(
        run_dir,
        bin_dir,
        pki.generate(run_dir / "pki", SERVICE_IP, ADVERTISE_ADDRESS),
        {name: free_port() for name in names},
    )
    procs: list[Process] = []
    cluster = Cluster(
        run_dir,
        run_dir / "kubeconfig",
        lay.server,
        procs,
        bin_dir,
        lay.ports,
        settings.keep_etcd_data,
    )

    def spawn(name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        argv = argv + settings.extra_args.get(name, [])
        procs.append(_spawn(name, argv, run_dir, env, settings.die_with_parent))

    try:
        spawn("etcd", etcd_argv(lay))
        _wait("etcd", lambda: _http_ok(f"{lay.etcd_url}/health"), procs, timeout)
        spawn("kube-apiserver", apiserver_argv(lay, settings))
        ctx = cluster.ssl_context()
        _wait(
            "kube-apiserver /readyz", lambda: _http_ok(f"{lay.server}/readyz", ctx), procs, timeout
        )

        c = lay.certs
        write_kubeconfig(
            cluster.kubeconfig, lay.server, c.ca.cert, c.admin.cert, c.admin.key, "admin"
        )
        kcm_kc = run_dir / "controller-manager.kubeconfig"
        write_kubeconfig(
            kcm_kc,
            lay.server,
            c.ca.cert,
            c.controller_manager.cert,
            c.controller_manager.key,
            "kube-controller-manager",
        )
        sched_kc = run_dir / "scheduler.kubeconfig"
        write_kubeconfig(
            sched_kc, lay.server, c.ca.cert, c.scheduler.cert, c.scheduler.key, "kube-scheduler"
        )
        sched_cfg = run_dir / "scheduler-config.yaml"
        sched_cfg.write_text(yaml.safe_dump(scheduler_config(settings, sched_kc), sort_keys=False))
        kwok_cfg = run_dir / "kwok.yaml"
        kwok_cfg.write_text(kwok_config(settings))

        spawn("kube-controller-manager", controller_manager_argv(lay, settings, kcm_kc))
        spawn("kube-scheduler", scheduler_argv(lay, settings, sched_cfg, sched_kc))
        # kwok reads ~/.kwok/kwok.yaml when present; a private HOME keeps a developer's
        # personal kwok config out of the testbed.
        kwok_env = dict(os.environ, HOME=str(run_dir))
        spawn("kwok", kwok_argv(lay, settings, kwok_cfg, cluster.kubeconfig), kwok_env)

        insecure = _insecure()
        for name in ("controller-manager", "scheduler"):
            url = f"https://127.0.0.1:{lay.ports[name]}/healthz"
            _wait(f"{name} /healthz", functools.partial(_http_ok, url, insecure), procs, timeout)
        kwok_url = f"http://127.0.0.1:{lay.ports['kwok']}/healthz"
        _wait("kwok /healthz", lambda: _http_ok(kwok_url), procs, timeout)
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_seconds = round(time.monotonic() - began, 2)
    cluster.save_state()
    return cluster


@contextlib.contextmanager
def running(settings: Settings | None = None, allow_build: bool = True) -> Iterator[Cluster]:
    cluster = start(settings=settings, allow_build=allow_build)
    try:
        yield cluster
    finally:
        cluster.stop()
