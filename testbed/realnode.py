"""One real worker node beside the testbed's control plane: containerd and kubelet, as root.

kwok plays every other node; this one runs containers for real (runc, a CNI bridge, cgroup
memory limits, the kernel's OOM killer), so tests can check what a simulated kubelet cannot.
Everything comes from the testbed build: kubelet from the same ``k8s.io/kubernetes`` module as
the control plane, containerd and the CNI plugins from the Go module proxy, images built
offline (``testbed/images.py``); only runc is Debian's (``scripts/testbed-deps.sh``).

Design points, each learnt the hard way (docs/testing.md, "Real node"):

* kubelet listens on the node's own address only, ``NODE_ADDRESS`` on a port-less link of its
  own (``NODE_LINK``), which is also its InternalIP (``--node-ip``) and in its serving
  certificate (from the run's CA, which the apiserver verifies it by). The apiserver dials a
  node's InternalIP, for logs, exec and its node proxy; the proxy refuses loopback addresses,
  so a loopback address would serve logs but not ``/api/v1/nodes/<node>/proxy/stats/summary``.
  Pods cannot reach that address (their only routes are the bridge and the Service range).
  kubelet accepts anonymous requests (AlwaysAllow: the apiserver has no kubelet client
  certificate), so what can reach the address can drive the kubelet: the host, no pod.
* kubelet joins as ``system:node:<name>`` (group ``system:nodes``) with a certificate from the
  run's CA; the apiserver runs the Node authorizer and NodeRestriction for it.
* State lives in one dedicated work directory; logs go to the run directory's ``logs/`` so they
  outlive the node. containerd, kubelet and the CNI plugins still create a few host paths and
  a bridge, change kernel tunables and make ``kubepods`` cgroups; teardown undoes each of these
  in an order that leaves nothing behind, and also runs before a start to clear a crash.
* Pods reach Services as in a cluster: kube-proxy (nftables mode, its own tables) routes the
  ClusterIPs, the ``kubernetes`` Service's among them, whose endpoint is the apiserver on the
  bridge's host address; the pods' only route off the bridge is the Service range.
* One real node per machine (fixed kubelet ports, cgroup names, device-plugin socket): an
  exclusive lock on ``LOCK_FILE`` is held by the starter and inherited by kubelet, so it is held
  while the node runs, even detached.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import build, images, kube, pki, podns, topology
from testbed import topology as tb_topology
from testbed.cluster import (
    POD_CIDR,
    POD_GATEWAY,
    SERVICE_CIDR,
    Cluster,
    Process,
    _http_ok,
    _spawn,
    _stop_group,
    _tail,
    write_kubeconfig,
)

WORK_DIR_ENV = "RUNPLANE_TESTBED_REALNODE_DIR"
DEFAULT_WORK_DIR = Path("/var/lib/runplane-testbed-realnode")
LOCK_FILE = Path("/run/runplane-testbed-realnode.lock")
STATE_FILE = "realnode.json"
BRIDGE = "rnbr0"
POD_SUBNET = POD_CIDR
#: The bridge's own address, the subnet's first (host-local never hands it to a pod): the
#: host's side of the pod network, where kubelet's probes come from, the pods' DNS listens,
#: and the apiserver's advertised endpoint is (``cluster.ADVERTISE_ADDRESS``).
BRIDGE_ADDRESS = POD_GATEWAY
#: The node's own address, where kubelet listens and the apiserver reaches it: routable (the
#: apiserver's node proxy refuses loopback and link-local addresses), on this machine only, out
#: of the pods' reach (outside the pod network and the Service range, which are all their
#: routes lead to). It sits on a link of its own with no ports, a bridge because that is what
#: every kernel the testbed runs on can make (some have no ``dummy`` links).
NODE_LINK = "rnnode0"
NODE_ADDRESS = "10.250.0.1"
CLUSTER_DOMAIN = podns.DOMAIN
#: The responder's command line names its module, so teardown can find it after a crash.
PODNS_MODULE = "testbed.podns"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_HEALTHZ_PORT = 10256
KUBE_PROXY_METRICS_PORT = 10249
#: The identity kube-proxy's client certificate names; the apiserver's bootstrap RBAC binds it
#: to the ``system:node-proxier`` ClusterRole (watch Services, EndpointSlices, Nodes; events).
KUBE_PROXY_USER = "system:kube-proxy"
#: kube-proxy's nftables mode keeps all its rules in tables of this name (families ip, ip6),
#: apart from anything else on the host; teardown deletes them.
KUBE_PROXY_TABLE = "kube-proxy"
#: Paths containerd, kubelet and the CNI plugins create whatever their configured roots are
#: (shim sockets, the libcni result cache, kubelet's device-plugin socket and container-log
#: symlinks, pod network namespaces). Teardown removes those that did not exist before.
HOST_DIRS = (
    "/run/containerd",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/containers",
    "/run/netns",
)
NETNS_PREFIX = "/run/netns/cni-"
#: kubelet sets these at start (``protectKernelDefaults: false`` means "modify"): panic on
#: oops, always overcommit, bigger key quotas. The old values are restored on stop.
KERNEL_TUNABLES = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    # set by the node itself: a pod reaching another pod through a ClusterIP is routed by the
    # host (kube-proxy's DNAT happens there), as on any node
    "net/ipv4/ip_forward",
)
RUNC_ENV = "RUNPLANE_TESTBED_RUNC"
_MNT_DETACH = 2
_API_TIMEOUT = 5


def work_dir() -> Path:
    return Path(os.environ.get(WORK_DIR_ENV, str(DEFAULT_WORK_DIR)))


@dataclass(frozen=True)
class Paths:
    """Where the node keeps its state; everything but the logs is under ``work``."""

    work: Path

    @property
    def etc(self) -> Path:
        return self.work / "etc"

    @property
    def socket(self) -> Path:
        return self.work / "run" / "containerd.sock"

    @property
    def cni_conf(self) -> Path:
        return self.work / "cni-conf"

    @property
    def kubelet_root(self) -> Path:
        return self.work / "kubelet"

    @property
    def state(self) -> Path:
        return self.work / STATE_FILE

    def make(self) -> None:
        for sub in ("etc", "run", "cni-conf", "cni-state", "containerd", "kubelet", "pod-logs"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)


# --- preconditions -------------------------------------------------------------------------


def _hosts_addresses(name: str, hosts: Path = Path("/etc/hosts")) -> list[str]:
    """The addresses ``/etc/hosts`` gives ``name``; Go's resolver (the apiserver's) reads this
    file before DNS."""
    found: list[str] = []
    try:
        lines = hosts.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and name.lower() in (f.lower() for f in fields[1:]):
            found.append(fields[0])
    return found


def _maps_to_loopback(name: str, hosts: Path = Path("/etc/hosts")) -> bool:
    addresses = _hosts_addresses(name, hosts)
    try:
        return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
    except ValueError:
        return False


def node_name(requested: str | None = None, hosts: Path = Path("/etc/hosts")) -> str:
    """The machine's hostname if it maps to loopback, else ``localhost``; an explicit name must
    map to loopback itself, so that whatever looks the node's name up finds this machine (the
    apiserver itself dials ``NODE_ADDRESS``, the node's InternalIP)."""
    if requested:
        if not _maps_to_loopback(requested, hosts):
            raise RuntimeError(
                f"real node name {requested!r} must resolve to a loopback address in {hosts} "
                f"(found {_hosts_addresses(requested, hosts) or 'no entry'}): the node is this "
                f"machine; add `127.0.1.1 {requested}` or pick another name"
            )
        return requested
    for candidate in (socket.gethostname().lower(), "localhost"):
        if candidate and _maps_to_loopback(candidate, hosts):
            return candidate
    raise RuntimeError(f"neither this machine's hostname nor localhost maps to loopback in {hosts}")


def runc_binary() -> str:
    explicit = os.environ.get(RUNC_ENV)
    found = explicit or shutil.which("runc") or "/usr/sbin/runc"
    if not os.access(found, os.X_OK):
        raise RuntimeError(f"runc not found ({found}); run scripts/testbed-deps.sh")
    return found


def nft_binary() -> str:
    """kube-proxy's nftables mode drives the kernel through the ``nft`` command."""
    found = shutil.which("nft") or "/usr/sbin/nft"
    if not os.access(found, os.X_OK):
        raise RuntimeError(f"nft not found ({found}); run scripts/testbed-deps.sh")
    return found


def _check_inputs(bin_dir: Path, images_dir: Path) -> None:
    if os.geteuid() != 0:
        raise RuntimeError("the real node needs root (containerd, kubelet, mounts, cgroups)")
    nft_binary()
    missing = build.missing_binaries(bin_dir)
    missing_images = build.missing_images(images_dir)
    if missing or missing_images:
        raise RuntimeError(
            f"real node inputs missing: binaries {missing} in {bin_dir}, images "
            f"{missing_images} in {images_dir}; run `python -m testbed build`"
        )


# --- configuration -------------------------------------------------------------------------


def _toml(value: str) -> str:
    """A TOML basic string; JSON's escaping is a subset TOML accepts."""
    return json.dumps(value)


def containerd_config(paths: Paths, runc: str, bin_dir: Path) -> str:
    """containerd 2.x with every path under the work dir and the pause image pinned, so the CRI
    plugin never pulls it. ``restrict_oom_score_adj``: kubelet asks for negative OOM scores,
    which fail without CAP_SYS_RESOURCE (sandboxes then die with "can't get final child's PID
    from pipe"); clamping to containerd's own score avoids that. NRI is off (it would create
    /run/nri)."""
    work = paths.work
    cri_runtime = 'plugins."io.containerd.cri.v1.runtime"'
    runc_section = f"{cri_runtime}.containerd.runtimes.runc"
    return "\n".join(
        [
            "version = 3",
            f"root = {_toml(str(work / 'containerd' / 'root'))}",
            f"state = {_toml(str(work / 'containerd' / 'state'))}",
            "[grpc]",
            f"  address = {_toml(str(paths.socket))}",
            "[ttrpc]",
            f"  address = {_toml(str(paths.socket) + '.ttrpc')}",
            '[plugins."io.containerd.cri.v1.images"]',
            '  snapshotter = "overlayfs"',
            '[plugins."io.containerd.cri.v1.images".pinned_images]',
            f"  sandbox = {_toml(images.PAUSE_IMAGE)}",
            f"[{cri_runtime}]",
            "  enable_selinux = false",
            "  restrict_oom_score_adj = true",
            f"[{cri_runtime}.containerd]",
            '  default_runtime_name = "runc"',
            f"[{runc_section}]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{runc_section}.options]",
            f"  BinaryName = {_toml(runc)}",
            f"  Root = {_toml(str(work / 'runc'))}",
            "  SystemdCgroup = false",
            f"[{cri_runtime}.cni]",
            f"  bin_dirs = [{_toml(str(bin_dir))}]",  # the CNI plugins are built there too
            f"  conf_dir = {_toml(str(paths.cni_conf))}",
            "  max_conf_num = 1",
            '[plugins."io.containerd.nri.v1.nri"]',
            "  disable = true",
            # default /opt/containerd/{bin,lib}, made at start and put on the shims' PATH
            '[plugins."io.containerd.internal.v1.opt"]',
            f"  path = {_toml(str(work / 'opt'))}",
            '[plugins."io.containerd.grpc.v1.cri"]',
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            "",
        ]
    )


def cni_config(paths: Paths) -> dict[str, Any]:
    """A bridge with no default route and no masquerade: pods reach each other, the host's
    bridge address (``BRIDGE_ADDRESS``, made by ``_create_bridge`` before any pod: probes, DNS,
    the apiserver) and the Service range, routed through that address to the host where
    kube-proxy translates it; nothing else. Hairpin lets a pod reach itself via its Service."""
    return {
        "cniVersion": "1.0.0",
        "name": "runplane",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": BRIDGE_ADDRESS}]],
                    "routes": [{"dst": SERVICE_CIDR, "gw": BRIDGE_ADDRESS}],
                    "dataDir": str(paths.work / "cni-state"),
                },
            }
        ],
    }


def kubelet_config(paths: Paths, ca: Path, serving: pki.KeyPair) -> dict[str, Any]:
    """Only what differs from kubelet's defaults, and why: it serves on the node's address with
    a certificate of the run's CA (``serving``) naming it; cgroup v1 hosts need
    ``failCgroupV1: false``; there is no systemd, hence cgroupfs; ``makeIPTablesUtilChains``
    would add KUBE-* chains to the host's iptables; the host's resolv.conf is not the pods':
    their only nameserver is the testbed's (``testbed.podns``) on the bridge."""
    sock = f"unix://{paths.socket}"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": sock,
        "imageServiceEndpoint": sock,
        "address": NODE_ADDRESS,
        "port": KUBELET_PORT,
        "tlsCertFile": str(serving.cert),
        "tlsPrivateKeyFile": str(serving.key),
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "podLogsDir": str(paths.work / "pod-logs"),
        "failSwapOn": False,
        "resolvConf": "",
        "clusterDNS": [BRIDGE_ADDRESS],
        "clusterDomain": CLUSTER_DOMAIN,
        "makeIPTablesUtilChains": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "maxPods": 50,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        # The images cannot be pulled again, so image GC must never remove them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "registerWithTaints": [dict(tb_topology.REAL_NODE_TAINT)],
    }


def kube_proxy_config(paths: Paths, kubeconfig: Path, name: str) -> dict[str, Any]:
    """kube-proxy in nftables mode for this node. Only what differs from its defaults, and
    why: ``clusterCIDR`` is the pod network, so traffic from pods keeps its source and anything
    else reaching a Service is masqueraded; the conntrack settings of 0 and ``oomScoreAdj: 0``
    leave the host's kernel settings as they are (kube-proxy would otherwise raise
    ``nf_conntrack_max`` and timeouts machine-wide, and a negative OOM score needs a capability
    this machine lacks); health and metrics listen on loopback only."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": name,
        "mode": "nftables",
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{KUBE_PROXY_METRICS_PORT}",
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        # a Service's rules follow its endpoints at once, not batched over the default 1 s
        "nftables": {"minSyncPeriod": "0s"},
    }


def kube_proxy_argv(bin_dir: Path, paths: Paths) -> list[str]:
    return [str(bin_dir / "kube-proxy"), f"--config={paths.etc / 'kube-proxy.yaml'}", "--v=1"]


def kubelet_argv(bin_dir: Path, paths: Paths, kubeconfig: Path, name: str) -> list[str]:
    labels = ",".join(f"{k}={v}" for k, v in tb_topology.REAL_NODE_LABELS.items())
    return [
        str(bin_dir / "kubelet"),
        f"--config={paths.etc / 'kubelet.yaml'}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={paths.kubelet_root}",
        # without it kubelet writes its self-signed serving cert to /var/lib/kubelet/pki
        f"--cert-dir={paths.kubelet_root / 'pki'}",
        f"--hostname-override={name}",
        # its InternalIP, the address the apiserver dials (kubelet refuses a loopback one)
        f"--node-ip={NODE_ADDRESS}",
        f"--node-labels={labels}",
        "--v=1",
    ]


# --- host state ----------------------------------------------------------------------------


def _read_sysctls(names: Iterable[str]) -> dict[str, str]:
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = (Path("/proc/sys") / name).read_text().strip()
    return values


def _restore_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        path = Path("/proc/sys") / name
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value + "\n")


def _mountinfo() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of every mount, octal escapes decoded."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        point = left.split()[4].encode().decode("unicode_escape")
        mounts.append((point, right.split()[0] if right else ""))
    return mounts


def _ours(point: str, work: Path) -> bool:
    return point == str(work) or point.startswith(f"{work}/") or point.startswith(NETNS_PREFIX)


def _our_mounts(work: Path) -> list[str]:
    return [point for point, _ in _mountinfo() if _ours(point, work)]


def _unmount(work: Path) -> None:
    """Lazy-unmount kubelet's self bind-mount of its root dir, volume tmpfs, overlay rootfs
    and shm mounts under the work dir, and pod network namespaces; deepest first, a few passes
    because a lazy unmount can uncover a mount stacked beneath."""
    libc = ctypes.CDLL(None, use_errno=True)
    netns: set[str] = set()
    for _ in range(5):
        points = sorted(set(_our_mounts(work)), key=lambda p: p.count("/"), reverse=True)
        if not points:
            break
        for point in points:
            libc.umount2(point.encode(), _MNT_DETACH)
            if point.startswith(NETNS_PREFIX):
                netns.add(point)
    for path in netns:
        with contextlib.suppress(OSError):
            Path(path).unlink()


def _cgroup_trees() -> list[Path]:
    """kubelet's ``kubepods`` tree in every cgroup hierarchy: one per controller on v1, one in
    all on v2."""
    trees = []
    for point, fstype in _mountinfo():
        if fstype in ("cgroup", "cgroup2"):
            tree = Path(point) / "kubepods"
            if tree.is_dir():
                trees.append(tree)
    return trees


def _cgroup_pids(trees: Iterable[Path]) -> set[int]:
    pids: set[int] = set()
    for tree in trees:
        for procs in tree.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def _remove_cgroups(timeout: float = 10.0) -> None:
    """Kill container processes a crash left in the pod cgroups (they are ours: nothing else
    runs under kubepods), then rmdir the trees depth-first."""
    deadline = time.monotonic() + timeout
    while (pids := _cgroup_pids(_cgroup_trees())) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    while True:
        busy = False
        for tree in _cgroup_trees():
            for directory, _, _ in sorted(os.walk(tree, topdown=False), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(directory)
                except FileNotFoundError:
                    pass
                except OSError:
                    busy = True
        if not busy or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def _bridge_exists() -> bool:
    return Path("/sys/class/net", BRIDGE).exists()


def _create_bridge() -> None:
    """The CNI bridge, made before kubelet so it has an address on the host: the CNI plugin
    adopts an existing bridge and, without ``isGateway``, would give it none."""
    prefix = POD_SUBNET.split("/")[1]
    for argv in (
        ["ip", "link", "add", BRIDGE, "type", "bridge"],
        ["ip", "addr", "add", f"{BRIDGE_ADDRESS}/{prefix}", "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def _delete_bridge() -> None:
    if _bridge_exists():
        subprocess.run(["ip", "link", "del", BRIDGE], check=False, capture_output=True)


def _node_link_exists() -> bool:
    return Path("/sys/class/net", NODE_LINK).exists()


def _create_node_link() -> None:
    """The link that holds ``NODE_ADDRESS`` (a /32: it routes nothing but itself)."""
    for argv in (
        ["ip", "link", "add", NODE_LINK, "type", "bridge"],
        ["ip", "addr", "add", f"{NODE_ADDRESS}/32", "dev", NODE_LINK],
        ["ip", "link", "set", NODE_LINK, "up"],
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def _delete_node_link() -> None:
    if _node_link_exists():
        subprocess.run(["ip", "link", "del", NODE_LINK], check=False, capture_output=True)


def _kube_proxy_tables() -> list[str]:
    """kube-proxy's nftables tables on the host, as ``family name``; none without ``nft``."""
    nft = shutil.which("nft")
    if nft is None:
        return []
    proc = subprocess.run([nft, "list", "tables"], capture_output=True, text=True, check=False)
    found = []
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == "table" and fields[2] == KUBE_PROXY_TABLE:
            found.append(f"{fields[1]} {fields[2]}")
    return found


def _delete_kube_proxy_tables() -> None:
    """What ``kube-proxy --cleanup`` does for nftables mode, without its attempts at iptables
    (which this host need not have)."""
    nft = shutil.which("nft")
    for table in _kube_proxy_tables():
        if nft is not None:
            subprocess.run([nft, "delete", "table", *table.split()], check=False)


#: The programs a node runs; a process counts as the node's only if it is one of these *and*
#: its command line names the node's work dir.
_PROGRAMS = frozenset(
    {"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "runc", "ctr"}
)


def _our_processes(work: Path) -> list[tuple[int, str]]:
    """(pid, argv[0]) of kubelet, containerd, the runc shims
    (``-address <work>/run/containerd.sock``) and runc of this node. The dedicated work dir
    makes this exact: no process is matched by its name alone."""
    found = []
    marker = str(work)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        ours = Path(argv[0]).name in _PROGRAMS or PODNS_MODULE in argv
        if ours and any(marker in arg for arg in argv[1:]):
            found.append((int(entry.name), argv[0]))
    return found


def _foreign_kubelets(work: Path) -> list[int]:
    """kubelets that are not this node's: their pods share the ``kubepods`` cgroup names, so
    while one runs, teardown leaves those cgroups alone (``leftovers`` still reports them)."""
    ours = {pid for pid, _ in _our_processes(work)}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        with contextlib.suppress(OSError):
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            if Path(argv0).name == "kubelet":
                found.append(int(entry.name))
    return found


def _terminate(pids: Iterable[int], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL whatever is left after ``timeout``."""
    remaining = set(pids)
    for pid in remaining:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while remaining and time.monotonic() < deadline:
        remaining = {pid for pid in remaining if _running(pid)}
        time.sleep(0.05)
    for pid in remaining:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """True unless the process is gone or a zombie (exited, waiting for its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _ctr(bin_dir: Path, paths: Paths, *args: str, timeout: float = 30) -> str:
    proc = subprocess.run(
        [str(bin_dir / "ctr"), "-a", str(paths.socket), "-n", "k8s.io", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _kill_tasks(bin_dir: Path, paths: Paths, timeout: float = 10.0) -> None:
    """Tasks still running after kubelet stopped (a crash, a pod deleted too late) keep their
    shims alive past containerd; kill and delete them while containerd can still do it."""
    try:
        listing = _ctr(bin_dir, paths, "tasks", "ls", timeout=5)
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return
    tasks = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    for task in tasks:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            _ctr(bin_dir, paths, "tasks", "kill", "-a", "-s", "SIGKILL", task, timeout=5)
    deadline = time.monotonic() + timeout
    pending = list(tasks)
    while pending and time.monotonic() < deadline:
        still = []
        for task in pending:
            try:
                _ctr(bin_dir, paths, "tasks", "delete", task, timeout=5)
            except RuntimeError as err:
                if "not found" not in str(err):
                    still.append(task)
            except subprocess.TimeoutExpired:
                still.append(task)
        pending = still
        if pending:
            time.sleep(0.1)


def _read_state(paths: Paths) -> dict[str, Any]:
    try:
        data = json.loads(paths.state.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def teardown(work: Path | None = None, processes: Iterable[Process] = ()) -> None:
    """Undo everything a node start did, in the order that leaves a clean machine; safe to run
    at any point of a start, after a crash, or twice. The caller deletes the node's pods through
    the API first (``RealNode.stop``), so kubelet takes their sandboxes down itself.

    Order: kube-proxy and its nftables tables; kubelet; leftover tasks; containerd; leftover
    shims and container processes; mounts; cgroups; the bridge and the node's link; kernel
    tunables; host dirs that
    did not exist before; the work dir."""
    paths = Paths(work or work_dir())
    state = _read_state(paths)
    known = {p.name: p for p in processes}
    bin_dir = Path(state.get("bin_dir") or build.bin_dir())

    def stop(component: str) -> None:
        proc = known.get(component)
        if proc is not None:
            _stop_group(proc)
        pids = [pid for pid, argv0 in _our_processes(paths.work) if Path(argv0).name == component]
        _terminate(pids)

    stop("kube-proxy")
    _delete_kube_proxy_tables()
    stop("kubelet")
    stop("podns")
    if any(Path(argv0).name == "containerd" for _, argv0 in _our_processes(paths.work)):
        _kill_tasks(bin_dir, paths)
    stop("containerd")
    _terminate((pid for pid, _ in _our_processes(paths.work)), timeout=2.0)
    _unmount(paths.work)
    if not _foreign_kubelets(paths.work):
        _remove_cgroups()
    _delete_bridge()
    _delete_node_link()
    _restore_sysctls(state.get("kernel_tunables") or {})
    for directory in state.get("created_host_dirs") or ():
        if directory in HOST_DIRS:  # never trust a state file with other paths
            shutil.rmtree(directory, ignore_errors=True)
    shutil.rmtree(paths.work, ignore_errors=True)


def leftovers(work: Path | None = None) -> list[str]:
    """What a clean stop must not leave: processes, mounts, cgroups, the links, the work dir."""
    paths = Paths(work or work_dir())
    found = [f"process {pid} {argv0}" for pid, argv0 in _our_processes(paths.work)]
    found += [f"mount {point}" for point in _our_mounts(paths.work)]
    found += [f"cgroup {tree}" for tree in _cgroup_trees()]
    if _bridge_exists():
        found.append(f"link {BRIDGE}")
    if _node_link_exists():
        found.append(f"link {NODE_LINK}")
    found += [f"nftables table {table}" for table in _kube_proxy_tables()]
    if paths.work.exists():
        found.append(f"directory {paths.work}")
    return found


# --- the node ------------------------------------------------------------------------------


def _acquire_lock() -> IO[str]:
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    handle = LOCK_FILE.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RuntimeError(
            f"a real node already runs on this machine ({LOCK_FILE} is locked); "
            "stop it with `python -m testbed down`"
        ) from None
    return handle


def _pod_dns_answers() -> bool:
    """True once the pod DNS answers the API server's Service name."""
    name = f"kubernetes.default.svc.{CLUSTER_DOMAIN}."
    try:
        reply = dns.query.udp(dns.message.make_query(name, "A"), BRIDGE_ADDRESS, timeout=1)
    except (OSError, dns.exception.DNSException):
        return False
    return bool(reply.rcode() == dns.rcode.NOERROR and reply.answer)


def _probe(url: str) -> bool:
    """True once ``url`` answers 200; False while it refuses, fails or answers otherwise."""
    try:
        return _http_ok(url)
    except OSError:  # refused, reset, timed out; urllib's HTTPError (503) is one too
        return False


def _quietly(func: Any, *args: Any, **kwargs: Any) -> Any:
    """An API call whose failure must not stop a teardown or a readiness poll: the object may
    be gone (404) or the control plane itself (connection refused). None on any failure."""
    try:
        return func(*args, _request_timeout=_API_TIMEOUT, **kwargs)
    except ApiException:
        return None
    except Exception:  # urllib3 connection errors and timeouts have no common base
        return None


@dataclass
class RealNode:
    """A running real node. ``name``, ``image``, ``pause_image``, ``toleration`` and
    ``node_selector`` are what a pod needs to land on it and run."""

    name: str
    run_dir: Path
    kubeconfig: Path
    bin_dir: Path
    work: Path
    processes: list[Process] = field(default_factory=list)
    created_host_dirs: list[str] = field(default_factory=list)
    kernel_tunables: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    stopped: bool = False
    image: str = images.PYTHON_IMAGE
    pause_image: str = images.PAUSE_IMAGE
    _lock: IO[str] | None = field(default=None, repr=False)
    _api: client.ApiClient | None = field(default=None, repr=False)
    #: The archives imported so far (path, size, mtime): each is imported once per node.
    _imported: set[tuple[str, int, int]] = field(default_factory=set, repr=False)

    @property
    def toleration(self) -> dict[str, str]:
        return dict(tb_topology.REAL_NODE_TOLERATION)

    @property
    def node_selector(self) -> dict[str, str]:
        return {tb_topology.HOSTNAME_LABEL: self.name}

    @property
    def paths(self) -> Paths:
        return Paths(self.work)

    @property
    def logs(self) -> dict[str, Path]:
        names = ("containerd", "kubelet", "kube-proxy")
        return {name: self.run_dir / "logs" / f"{name}.log" for name in names}

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- {log} (last {lines} lines)\n{_tail(log, lines)}" for log in self.logs.values()
        )

    def healthy(self) -> dict[str, bool]:
        return {p.name: p.alive() for p in self.processes}

    def api(self) -> client.ApiClient:
        if self._api is None:
            self._api = kube.api_client(self.kubeconfig, pool=4)
        return self._api

    def container_pid(self, container_id: str) -> int:
        """The host PID of a container's first process, from containerd's tasks
        (``container_id`` as a pod's status gives it, ``containerd://<id>``): what to signal
        to end a container's process as a crash or the OOM killer would, with no stop by the
        kubelet (no preStop, no SIGTERM, no grace)."""
        wanted = container_id.removeprefix("containerd://")
        for line in _ctr(self.bin_dir, self.paths, "tasks", "ls", timeout=10).splitlines()[1:]:
            task, pid, *_ = line.split()
            if task == wanted:
                return int(pid)
        raise LookupError(f"containerd runs no task of container {container_id}")

    def ready(self) -> bool:
        """Ready and schedulable according to the apiserver (False if it cannot be asked)."""
        node = _quietly(client.CoreV1Api(self.api()).read_node, self.name)
        return isinstance(node, client.V1Node) and tb_topology.node_ready(node)

    # -- persistence: the CLI's `down` and `status` run in another process

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "run_dir": str(self.run_dir),
            "kubeconfig": str(self.kubeconfig),
            "bin_dir": str(self.bin_dir),
            "work": str(self.work),
            "processes": [
                {"name": p.name, "pid": p.pid, "binary": p.binary, "log": str(p.log)}
                for p in self.processes
            ],
            "created_host_dirs": self.created_host_dirs,
            "kernel_tunables": self.kernel_tunables,
            "timings": self.timings,
            "stopped": self.stopped,
        }

    def save(self) -> None:
        text = json.dumps(self.to_json(), indent=2)
        if self.paths.work.exists():
            self.paths.state.write_text(text)
        (self.run_dir / STATE_FILE).write_text(text)

    @classmethod
    def load(cls, run_dir: Path) -> RealNode | None:
        """The node a run started, or None if it never had one."""
        try:
            data = json.loads((run_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(
            name=data["name"],
            run_dir=Path(data["run_dir"]),
            kubeconfig=Path(data["kubeconfig"]),
            bin_dir=Path(data["bin_dir"]),
            work=Path(data["work"]),
            processes=[
                Process(p["name"], int(p["pid"]), p["binary"], Path(p["log"]))
                for p in data["processes"]
            ],
            created_host_dirs=list(data["created_host_dirs"]),
            kernel_tunables=dict(data["kernel_tunables"]),
            timings=dict(data.get("timings", {})),
            stopped=bool(data.get("stopped")),
        )

    # -- lifecycle

    @classmethod
    def start(
        cls,
        cluster: Cluster,
        name: str | None = None,
        *,
        die_with_parent: bool = True,
        timeout: float = 120.0,
    ) -> RealNode:
        """Start containerd, import the images, start kubelet, and return once the Node is
        Ready and untainted by the lifecycle controller. On failure everything is torn down
        and the error carries the tails of both logs."""
        began = time.monotonic()
        bin_dir = build.bin_dir()
        _check_inputs(bin_dir, build.images_dir())
        runc = runc_binary()
        name = node_name(name)
        lock = _acquire_lock()
        work = work_dir()
        try:
            teardown(work)  # a previous crash's leftovers
            node = cls(name, cluster.run_dir, cluster.kubeconfig, bin_dir, work, _lock=lock)
        except BaseException:
            lock.close()
            raise
        try:
            node._start(cluster, runc, die_with_parent, timeout)
        except BaseException as err:
            tails = node.log_tails()
            try:
                node.stop(delete_pods=False)
            except Exception as stop_error:  # the start's error matters more; keep both
                tails += f"\n--- and stopping it failed: {stop_error}"
            if isinstance(err, Exception):
                raise RuntimeError(f"real node {name} did not start: {err}\n{tails}") from err
            raise
        node.timings["start_s"] = round(time.monotonic() - began, 2)
        node.save()
        return node

    def _start(self, cluster: Cluster, runc: str, die_with_parent: bool, timeout: float) -> None:
        paths = self.paths
        # Recorded before anything runs, so even a crash in the next lines can be undone.
        self.created_host_dirs = [d for d in HOST_DIRS if not os.path.lexists(d)]
        self.kernel_tunables = _read_sysctls(KERNEL_TUNABLES)
        paths.make()
        self.save()

        certs = pki.issue_client(
            self.run_dir / "pki", f"node-{self.name}", f"system:node:{self.name}", "system:nodes"
        )
        serving = pki.issue_server(
            self.run_dir / "pki",
            f"kubelet-{self.name}",
            f"system:node:{self.name}",
            (self.name,),
            (NODE_ADDRESS,),
        )
        ca = self.run_dir / "pki" / "ca.crt"
        kubelet_kc = self.run_dir / "kubelet.kubeconfig"
        write_kubeconfig(kubelet_kc, cluster.server, ca, certs.cert, certs.key, self.name)
        (paths.etc / "containerd.toml").write_text(containerd_config(paths, runc, self.bin_dir))
        (paths.cni_conf / "10-runplane.conflist").write_text(json.dumps(cni_config(paths)))
        (paths.etc / "kubelet.yaml").write_text(
            yaml.safe_dump(kubelet_config(paths, ca, serving), sort_keys=False)
        )

        # containerd finds containerd-shim-runc-v2 on PATH
        env = dict(os.environ, PATH=f"{self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        argv = [str(self.bin_dir / "containerd"), "--config", str(paths.etc / "containerd.toml")]
        self.processes.append(_spawn("containerd", argv, self.run_dir, env, die_with_parent))
        self.save()
        self._wait("containerd", self._containerd_up, timeout)
        began = time.monotonic()
        for image in images.NODE_IMAGES:
            self.import_image(image, timeout)
        self.timings["images_import_s"] = round(time.monotonic() - began, 2)

        _create_bridge()
        _create_node_link()
        argv = [
            sys.executable,
            "-m",
            PODNS_MODULE,
            f"--kubeconfig={self.kubeconfig}",
            f"--listen={BRIDGE_ADDRESS}",
            f"--domain={CLUSTER_DOMAIN}",
            f"--work={self.work}",
        ]
        # the testbed is not an installed package: the responder imports it from the checkout
        root = str(Path(__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, PYTHONPATH=path)
        self.processes.append(_spawn("podns", argv, self.run_dir, env, die_with_parent))
        self.save()

        assert self._lock is not None
        argv = kubelet_argv(self.bin_dir, paths, kubelet_kc, self.name)
        # kubelet inherits the lock, so the lock is held as long as kubelet runs, even when
        # the process that started it is gone (`up --detach`)
        self.processes.append(
            _spawn(
                "kubelet",
                argv,
                self.run_dir,
                None,
                die_with_parent,
                pass_fds=(self._lock.fileno(),),
            )
        )
        self.save()
        began = time.monotonic()
        self._wait(f"node {self.name} Ready", self.ready, timeout)
        self.timings["kubelet_to_ready_s"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        self._start_kube_proxy(cluster, die_with_parent, timeout)
        self.timings["kube_proxy_ready_s"] = round(time.monotonic() - began, 2)
        # the pods' DNS started before kubelet; a pod must not find it still importing
        began = time.monotonic()
        self._wait("the pod DNS", _pod_dns_answers, timeout)
        self.timings["pod_dns_wait_s"] = round(time.monotonic() - began, 2)

    def _start_kube_proxy(self, cluster: Cluster, die_with_parent: bool, timeout: float) -> None:
        """kube-proxy for this node, as a cluster runs it: its own identity, watching the
        Services and routing their ClusterIPs. Started once the Node exists (it reads its
        addresses from it); ready when its health check says the rules are synced."""
        paths = self.paths
        certs = pki.issue_client(self.run_dir / "pki", "kube-proxy", KUBE_PROXY_USER)
        kubeconfig = self.run_dir / "kube-proxy.kubeconfig"
        ca = self.run_dir / "pki" / "ca.crt"
        write_kubeconfig(kubeconfig, cluster.server, ca, certs.cert, certs.key, KUBE_PROXY_USER)
        (paths.etc / "kube-proxy.yaml").write_text(
            yaml.safe_dump(kube_proxy_config(paths, kubeconfig, self.name), sort_keys=False)
        )
        # Pods reaching pods through a ClusterIP are forwarded by the host; the old value is
        # recorded in ``kernel_tunables`` and restored on stop.
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        argv = kube_proxy_argv(self.bin_dir, paths)
        self.processes.append(_spawn("kube-proxy", argv, self.run_dir, None, die_with_parent))
        self.save()
        url = f"http://127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}/healthz"
        self._wait("kube-proxy /healthz", lambda: _probe(url), timeout)

    def import_image(self, name: str, timeout: float = 120.0) -> None:
        """Load one of the testbed's image archives into the node's containerd; the node
        starts with ``images.NODE_IMAGES``, tests import what else they run."""
        self.import_archive(build.image_archives()[name], timeout)

    def import_archive(self, archive: Path, timeout: float = 120.0) -> None:
        """Load an OCI archive built elsewhere (the runplane image) into the node's containerd;
        its image is named by the archive's own annotation. An archive this node imported
        already (the same file, unchanged) is not imported again: ``up`` and every test module
        that needs an image may ask for it."""
        stat = archive.stat()
        key = (str(archive.resolve()), stat.st_size, stat.st_mtime_ns)
        if key in self._imported:
            return
        _ctr(self.bin_dir, self.paths, "images", "import", str(archive), timeout=timeout)
        self._imported.add(key)

    def _containerd_up(self) -> bool:
        if not self.paths.socket.exists():
            return False
        try:
            _ctr(self.bin_dir, self.paths, "version", timeout=5)
        except (RuntimeError, subprocess.TimeoutExpired):
            return False
        return True

    def _wait(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for proc in self.processes:
                if not proc.alive():
                    raise RuntimeError(f"{proc.name} exited while waiting for {what}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.1)

    def _delete_pods(self, timeout: float = 30.0) -> None:
        """Delete the node's pods through the API and wait until kubelet has taken them down
        (sandboxes, network namespaces, IP leases); force-delete what is left after that."""
        core = client.CoreV1Api(self.api())
        selector = f"spec.nodeName={self.name}"

        def pods() -> list[client.V1Pod]:
            listed = _quietly(core.list_pod_for_all_namespaces, field_selector=selector)
            return list(listed.items) if isinstance(listed, client.V1PodList) else []

        def delete(listed: list[client.V1Pod], grace: int) -> None:
            for pod in listed:
                meta = pod.metadata
                if meta and meta.name and meta.namespace:
                    _quietly(
                        core.delete_namespaced_pod,
                        meta.name,
                        meta.namespace,
                        grace_period_seconds=grace,
                    )

        delete(pods(), grace=1)
        deadline = time.monotonic() + timeout
        while (left := pods()) and time.monotonic() < deadline:
            time.sleep(0.2)
        delete(left, grace=0)

    def stop(self, delete_pods: bool = True) -> None:
        """Tear the node down (``teardown``), delete its Node object, and check that nothing
        is left; raises with the list of leftovers if something is."""
        began = time.monotonic()
        if delete_pods:
            self._delete_pods()
        try:
            teardown(self.work, self.processes)
            core = client.CoreV1Api(self.api())
            _quietly(core.delete_node, self.name)
        finally:
            self.stopped = True
            self.timings["stop_s"] = round(time.monotonic() - began, 2)
            with contextlib.suppress(OSError):
                self.save()
            if self._lock is not None:
                self._lock.close()
                self._lock = None
        remaining = leftovers(self.work)
        if remaining:
            raise RuntimeError(f"real node {self.name} left behind: {remaining}")


def host_path_volume(name: str, path: Path, node: str | None = None) -> dict[str, Any]:
    """A PersistentVolume on a directory of this machine, which the real node sees as its own;
    with ``node``, pinned to that node by its node affinity (the directory exists there only)."""
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "hostPath": {"path": str(path), "type": "Directory"},
    }
    if node is not None:
        on_node = {"key": topology.HOSTNAME_LABEL, "operator": "In", "values": [node]}
        terms = [{"matchExpressions": [on_node]}]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {"metadata": {"name": name}, "spec": spec}
