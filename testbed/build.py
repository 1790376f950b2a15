"""Build the testbed's control-plane binaries from Go modules, cached outside the repo.

Why from source: the machine may only reach the Go module proxy (no release downloads, no
Docker), so every binary is compiled from its published module. Kubernetes staging modules
are pinned by replacing each ``k8s.io/<name>`` with its published ``v0.X.Y`` tag; the list is
read from the release's own ``go.mod`` so a version bump never needs a hand-edited list.

The real node's runtime is built the same way: kubelet and kube-proxy from the same wrapper
module as the control plane, containerd and the CNI plugins with ``go install`` (neither has replace
directives). Its images are built offline by ``testbed/images.py`` and cached by a hash of
their inputs; the OCI runtime (runc) comes from Debian (``scripts/testbed-deps.sh``).
The helm CLI that installs runplane's chart is a ``go install`` too, cached under a key of its
own and built beside the rest; so are the Kubeflow Spark Operator (``testbed/spark_build.py``),
the Kubeflow MPI Operator, whose module refuses ``go install`` and builds through a wrapper
module, with its CRD copied out of the module beside the binary (its MPI image, Open MPI, sshd
and mpi4py, has a key of its own too), and metrics-server, which the real node's autoscalers
read.

Only the standard library is used so CI can call this before installing anything.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import images

K8S_VERSION = os.environ.get("RUNPLANE_TESTBED_K8S_VERSION", "v1.36.3")
ETCD_VERSION = os.environ.get("RUNPLANE_TESTBED_ETCD_VERSION", "v3.6.16")
KWOK_VERSION = os.environ.get("RUNPLANE_TESTBED_KWOK_VERSION", "v0.8.0")
CONTAINERD_VERSION = os.environ.get("RUNPLANE_TESTBED_CONTAINERD_VERSION", "v2.4.2")
CNI_PLUGINS_VERSION = os.environ.get("RUNPLANE_TESTBED_CNI_VERSION", "v1.9.1")
HELM_VERSION = os.environ.get("RUNPLANE_TESTBED_HELM_VERSION", "v3.22.0")
HELM_MODULE = "helm.sh/helm/v3"
MPI_OPERATOR_VERSION = os.environ.get("RUNPLANE_TESTBED_MPI_OPERATOR_VERSION", "v0.8.0")
MPI_OPERATOR_MODULE = "github.com/kubeflow/mpi-operator"
#: The MPIJob CRD as the operator's release installs it (its kustomize base).
MPI_OPERATOR_CRD = "manifests/base/kubeflow.org_mpijobs.yaml"
METRICS_SERVER_VERSION = os.environ.get("RUNPLANE_TESTBED_METRICS_SERVER_VERSION", "v0.9.0")
METRICS_SERVER_MODULE = "sigs.k8s.io/metrics-server"
KUEUE_VERSION = os.environ.get("RUNPLANE_TESTBED_KUEUE_VERSION", "v0.17.0")
KUEUE_MODULE = "sigs.k8s.io/kueue"
#: Kueue's CRDs and admission webhooks as its release installs them (its kustomize bases).
KUEUE_CRD_DIR = "config/components/crd/bases"
KUEUE_WEBHOOKS = "config/components/webhook/manifests.yaml"

K8S_COMMANDS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CONTAINERD_COMMANDS = ("containerd", "containerd-shim-runc-v2", "ctr")
CNI_MODULE = "github.com/containernetworking/plugins"
#: Plugin binary name -> package in the plugins module; the real node's network needs no more.
CNI_PLUGINS = {
    "bridge": "plugins/main/bridge",
    "host-local": "plugins/ipam/host-local",
    "loopback": "plugins/main/loopback",
}
BINARIES = ("etcd", *K8S_COMMANDS, "kwok", *CONTAINERD_COMMANDS, *CNI_PLUGINS)
#: Every ``go build`` and ``go install``: no build paths in the binaries, and no DWARF compiled
#: (the linker's ``-w`` drops it anyway; not making it saves about a tenth of a cold build's CPU).
COMPILE_FLAGS = ("-trimpath", "-gcflags=all=-dwarf=false")
TIMINGS_FILE = "build-timings.json"

_STAGING_LINE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/src/\1\s*$")


def go_binary() -> str:
    """Prefer an explicit override, then PATH, then the conventional install location."""
    explicit = os.environ.get("RUNPLANE_TESTBED_GO")
    if explicit:
        return explicit
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    if fallback.exists():
        return str(fallback)
    raise SystemExit("testbed build: no Go toolchain found (set RUNPLANE_TESTBED_GO)")


def go_version() -> str:
    """The toolchain is part of the cache key: a new Go may change the binaries."""
    out = subprocess.run(
        [go_binary(), "env", "GOVERSION"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def cache_root() -> Path:
    default = Path.home() / ".cache" / "runplane-testbed"
    return Path(os.environ.get("RUNPLANE_TESTBED_CACHE", str(default))).expanduser()


def go_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def cache_key() -> str:
    """Every input that changes the output is in the key, so stale binaries are never reused."""
    return (
        f"k8s-{K8S_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}"
        f"_containerd-{CONTAINERD_VERSION}_cni-{CNI_PLUGINS_VERSION}"
        f"_{go_version()}_{sys.platform}-{go_arch()}"
    )


def key_dir() -> Path:
    return cache_root() / cache_key()


def bin_dir() -> Path:
    return key_dir() / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    where = directory or bin_dir()
    return [name for name in BINARIES if not os.access(where / name, os.X_OK)]


def images_dir() -> Path:
    """Images do not depend on the Go toolchain or most versions, so they have their own key:
    a toolchain bump rebuilds binaries but not the 25 s Debian bootstrap."""
    return cache_root() / f"images-{images.inputs_key(K8S_VERSION, go_arch())}"


def image_archives(directory: Path | None = None) -> dict[str, Path]:
    """Image name -> its OCI archive, for ``ctr images import``."""
    where = directory or images_dir()
    return {name: where / archive for name, archive in images.ARCHIVES.items()}


def tool_dir(name: str, version: str) -> Path:
    """A Go tool's own key directory: its version and the toolchain, so bumping Kubernetes
    leaves it be and bumping the tool rebuilds it alone."""
    return cache_root() / f"{name}-{version}_{go_version()}_{sys.platform}-{go_arch()}"


def helm_dir() -> Path:
    """The helm CLI has a key of its own (its version and the toolchain): bumping it rebuilds
    helm alone, and bumping Kubernetes leaves it be."""
    return tool_dir("helm", HELM_VERSION)


def helm_binary() -> Path:
    return helm_dir() / "bin" / "helm"


def mpi_operator_dir() -> Path:
    """The MPI Operator has a key of its own (its version and the toolchain), like helm."""
    return tool_dir("mpi-operator", MPI_OPERATOR_VERSION)


def mpi_operator_binary() -> Path:
    return mpi_operator_dir() / "bin" / "mpi-operator"


def mpi_operator_crd() -> Path:
    """The MPIJob CRD of the operator's own module, copied beside its binary at build time."""
    return mpi_operator_dir() / "kubeflow.org_mpijobs.yaml"


def mpi_image_archive() -> Path:
    """The MPI image is keyed by its own inputs: adding it rebuilt none of the node's images,
    and the node's images changing leaves it be."""
    return cache_root() / f"mpi-image-{images.mpi_inputs_key(go_arch())}" / images.MPI_ARCHIVE


def missing_images(directory: Path | None = None) -> list[str]:
    return images.missing_archives(directory or images_dir())


def staging_replacements(gomod: str, staging_version: str) -> list[tuple[str, str]]:
    """Turn the release's ``k8s.io/x => ./staging/src/k8s.io/x`` lines into version pins."""
    pins = []
    for line in gomod.splitlines():
        match = _STAGING_LINE.match(line)
        if match:
            pins.append((match.group(1), staging_version))
    if not pins:
        raise RuntimeError("no staging replace directives found in k8s.io/kubernetes go.mod")
    return pins


def staging_version(k8s_version: str) -> str:
    """Staging modules are tagged v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>."""
    major, rest = k8s_version.lstrip("v").split(".", 1)
    if major != "1":
        raise ValueError(f"unexpected Kubernetes version {k8s_version}")
    return f"v0.{rest}"


@dataclass
class Builder:
    """Runs the Go commands with a controlled environment and records how long each step took,
    in wall-clock seconds (``timings``) and in CPU seconds of its commands (``cpu``): beside
    other work the two differ, and a cold CI run is bounded by the CPU it needs."""

    workdir: Path
    out: Path
    timings: dict[str, float]
    cpu: dict[str, float] = field(default_factory=dict)
    _step: threading.local = field(default_factory=threading.local, repr=False)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # A toolchain switch would download Go itself; we build with the one installed.
        env.setdefault("GOTOOLCHAIN", "local")
        env["CGO_ENABLED"] = "0"
        env.pop("GOFLAGS", None)
        return env

    def go(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
        cmd = [go_binary(), *args]
        print("+ " + " ".join(cmd), flush=True)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                cmd, cwd=cwd, env={**self.env(), **(env or {})}, stdout=out, stderr=err
            )
            # wait4 gives the command's CPU with that of the compilers it waited for
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            step = getattr(self._step, "name", None)
            if step is not None:
                self.cpu[step] = self.cpu.get(step, 0.0) + usage.ru_utime + usage.ru_stime
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        if proc.returncode != 0:
            sys.stderr.write(stdout + stderr)
            raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}")
        return stdout

    def step(self, name: str, func: Callable[[], None]) -> None:
        print(f"==> building {name}", flush=True)
        start = time.monotonic()
        self._step.name = name
        try:
            func()
        finally:
            self._step.name = None
        took = time.monotonic() - start
        self.timings[name] = round(took, 1)
        if name in self.cpu:
            self.cpu[name] = round(self.cpu[name], 1)
            print(f"==> {name} built in {took:.1f}s ({self.cpu[name]:.0f} s of CPU)", flush=True)
        else:
            print(f"==> {name} built in {took:.1f}s", flush=True)

    def module(self, name: str, gomod: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        (path / "go.mod").write_text(gomod)
        (path / "go.sum").unlink(missing_ok=True)
        return path

    def kubernetes(self, commands: tuple[str, ...] = K8S_COMMANDS) -> None:
        """Only ``commands`` are built: a cache that lacks one new command (kube-proxy after an
        upgrade) links that one instead of all five."""
        info = json.loads(self.go("list", "-m", "-json", f"k8s.io/kubernetes@{K8S_VERSION}"))
        upstream = Path(info["GoMod"]).read_text()
        version = staging_version(K8S_VERSION)
        pins = staging_replacements(upstream, version)
        go_line = re.search(r"^go\s+(\S+)", upstream, re.M)
        lines = [
            "module runplane.local/testbed/kubernetes",
            "",
            f"go {go_line.group(1) if go_line else '1.26.0'}",
            "",
            f"require k8s.io/kubernetes {K8S_VERSION}",
            "",
            "replace (",
            *(f"\t{mod} => {mod} {ver}" for mod, ver in pins),
            ")",
            "",
        ]
        # k8s.io/kubernetes sets godebug defaults for its own binaries; keep them.
        godebug = re.search(r"^godebug\s+.*$", upstream, re.M)
        if godebug:
            lines.insert(4, godebug.group(0) + "\n")
        mod = self.module("kubernetes", "\n".join(lines))
        print(f"    pinned {len(pins)} staging modules at {version}", flush=True)
        pkgs = [f"k8s.io/kubernetes/cmd/{cmd}" for cmd in commands]
        self.go("get", *(f"{p}@{K8S_VERSION}" for p in pkgs), cwd=mod)
        minor = K8S_VERSION.lstrip("v").split(".")[1]
        base = "k8s.io/component-base/version"
        ldflags = " ".join(
            [
                "-s -w",
                f"-X {base}.gitVersion={K8S_VERSION}",
                f"-X {base}.gitMajor=1",
                f"-X {base}.gitMinor={minor}",
                f"-X {base}.gitTreeState=clean",
                f"-X {base}.buildDate={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
            ]
        )
        self.go(
            "build",
            "-mod=mod",
            *COMPILE_FLAGS,
            f"-ldflags={ldflags}",
            "-o",
            str(self.out) + "/",
            *pkgs,
            cwd=mod,
        )

    def etcd(self) -> None:
        gomod = "\n".join(
            [
                "module runplane.local/testbed/etcd",
                "",
                "go 1.26.0",
                "",
                f"require go.etcd.io/etcd/server/v3 {ETCD_VERSION}",
                "",
            ]
        )
        mod = self.module("etcd", gomod)
        pkg = "go.etcd.io/etcd/server/v3"
        self.go("get", f"{pkg}@{ETCD_VERSION}", cwd=mod)
        ldflags = f"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA={ETCD_VERSION}"
        self.go(
            "build",
            "-mod=mod",
            *COMPILE_FLAGS,
            f"-ldflags={ldflags}",
            "-o",
            str(self.out / "etcd"),
            pkg,
            cwd=mod,
        )

    def kwok(self) -> None:
        self.go(
            "install",
            *COMPILE_FLAGS,
            "-ldflags=-s -w",
            f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
            env={"GOBIN": str(self.out)},
        )

    def containerd(self) -> None:
        """CGO off gives static binaries; ``no_btrfs`` drops the one snapshotter that needs C
        headers (the real node uses overlayfs)."""
        self.go(
            "install",
            *COMPILE_FLAGS,
            "-tags=no_btrfs",
            f"-ldflags=-s -w -X {CONTAINERD_MODULE}/version.Version={CONTAINERD_VERSION}",
            *(f"{CONTAINERD_MODULE}/cmd/{cmd}@{CONTAINERD_VERSION}" for cmd in CONTAINERD_COMMANDS),
            env={"GOBIN": str(self.out)},
        )

    def cni_plugins(self) -> None:
        version_var = f"{CNI_MODULE}/pkg/utils/buildversion.BuildVersion"
        self.go(
            "install",
            *COMPILE_FLAGS,
            f"-ldflags=-s -w -X {version_var}={CNI_PLUGINS_VERSION}",
            *(f"{CNI_MODULE}/{pkg}@{CNI_PLUGINS_VERSION}" for pkg in CNI_PLUGINS.values()),
            env={"GOBIN": str(self.out)},
        )

    def helm(self) -> None:
        """The version variables are set as helm's own release build (its Makefile) sets
        them: ``helm version`` names the release, and the Kubernetes version ``helm template``
        and ``helm lint`` assume is the one of the client-go helm is built with (1.20
        otherwise, older than any chart's ``kubeVersion``)."""
        info = json.loads(self.go("mod", "download", "-json", f"{HELM_MODULE}@{HELM_VERSION}"))
        client_go = re.search(
            r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.", Path(info["GoMod"]).read_text(), re.M
        )
        if client_go is None:
            raise RuntimeError(f"no k8s.io/client-go requirement in helm {HELM_VERSION}'s go.mod")
        version_var = f"{HELM_MODULE}/internal/version"
        flags = ["-s -w", f"-X {version_var}.version={HELM_VERSION}"]
        flags.append(f"-X {version_var}.gitTreeState=clean")
        for package in ("pkg/lint/rules", "pkg/chartutil"):
            flags.append(f"-X {HELM_MODULE}/{package}.k8sVersionMajor=1")
            flags.append(f"-X {HELM_MODULE}/{package}.k8sVersionMinor={client_go.group(1)}")
        self.go(
            "install",
            *COMPILE_FLAGS,
            f"-ldflags={' '.join(flags)}",
            f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}",
            env={"GOBIN": str(self.out)},
        )

    def mpi_operator(self) -> None:
        """``go install`` of the module is refused (its go.mod has replace directives), so a
        wrapper module requires it; the version variables are set as its Makefile sets them."""
        gomod = "\n".join(["module runplane.local/testbed/mpi-operator", "", "go 1.26.0", ""])
        mod = self.module("mpi-operator", gomod)
        self.go("get", f"{MPI_OPERATOR_MODULE}@{MPI_OPERATOR_VERSION}", cwd=mod)
        version = f"{MPI_OPERATOR_MODULE}/pkg/version"
        flags = ["-s -w", f"-X {version}.Version={MPI_OPERATOR_VERSION}"]
        self.go(
            "build",
            "-mod=mod",
            *COMPILE_FLAGS,
            f"-ldflags={' '.join(flags)}",
            "-o",
            str(self.out / "mpi-operator"),
            f"{MPI_OPERATOR_MODULE}/cmd/mpi-operator",
            cwd=mod,
        )
        source = self.module_dir(MPI_OPERATOR_MODULE, MPI_OPERATOR_VERSION) / MPI_OPERATOR_CRD
        shutil.copyfile(source, self.out / "kubeflow.org_mpijobs.yaml")

    def metrics_server(self) -> None:
        """Its module has no replace directives, so ``go install`` builds it as released; the
        version variables are the ones its Makefile sets (client-go's)."""
        version_var = "k8s.io/client-go/pkg/version"
        flags = f"-s -w -X {version_var}.gitVersion={METRICS_SERVER_VERSION}"
        self.go(
            "install",
            *COMPILE_FLAGS,
            f"-ldflags={flags} -X {version_var}.gitTreeState=clean",
            f"{METRICS_SERVER_MODULE}/cmd/metrics-server@{METRICS_SERVER_VERSION}",
            env={"GOBIN": str(self.out)},
        )

    def kueue(self) -> None:
        """Its module has no replace directives, so ``go install`` builds it as released; its
        CRDs are joined into one file and its webhook manifests copied beside the binary, so a
        cluster is set up from the very version that was built."""
        version_var = f"{KUEUE_MODULE}/pkg/version"
        self.go(
            "install",
            *COMPILE_FLAGS,
            f"-ldflags=-s -w -X {version_var}.GitVersion={KUEUE_VERSION}",
            f"{KUEUE_MODULE}/cmd/kueue@{KUEUE_VERSION}",
            env={"GOBIN": str(self.out)},
        )
        source = self.module_dir(KUEUE_MODULE, KUEUE_VERSION)
        crds = sorted((source / KUEUE_CRD_DIR).glob("*.yaml"))
        if not crds:
            raise RuntimeError(f"no CRDs under {KUEUE_CRD_DIR} in kueue {KUEUE_VERSION}")
        joined = "".join("---\n" + crd.read_text() for crd in crds)
        (self.out / KUEUE_CRDS_FILE).write_text(joined)
        shutil.copyfile(source / KUEUE_WEBHOOKS, self.out / KUEUE_WEBHOOKS_FILE)

    def module_dir(self, module: str, version: str) -> Path:
        """Where the module cache unpacked a module (downloading it if needed)."""
        info = json.loads(self.go("mod", "download", "-json", f"{module}@{version}"))
        return Path(info["Dir"])


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build(force: bool = False, with_images: bool = True, tools: bool = True) -> Path:
    """Build whatever is missing for the current key; a complete cache costs one ``go env``.

    The control plane's binaries (and, ``with_images``, the real node's images) come first, the
    tools after them (``TOOLS``: the operators, helm, Kueue, metrics-server): on a cold cache
    the CPU is the limit, and a cluster can start, and its tests run, on the first part while
    the second builds (``scripts/test.sh``). ``tools=False`` stops after the first part.

    An exclusive lock per part serialises concurrent callers (parallel CI jobs, a test that
    needs a tool while CI builds it): the second waits, then finds the part complete.
    ``with_images=False`` leaves out the real node's images, which need root and mmdebstrap,
    and what only the real node uses; a kwok-only cluster does not use them.
    """
    target = bin_dir()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="testbed-beside") as beside:
        # The images wait on Debian's mirror more than on the CPU: they start at once.
        node_images = beside.submit(build_images, force) if with_images else None
        mpi_image = beside.submit(build_mpi_image, force) if with_images and tools else None
        if not force and not missing_binaries(target):
            print(f"testbed binaries up to date in {target}", flush=True)
        else:
            key_dir().mkdir(parents=True, exist_ok=True)
            with (key_dir() / ".lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                _build_locked(target, force)
        if node_images is not None:
            node_images.result()
        if tools:
            needed = [name for name in TOOLS if with_images or name not in REAL_NODE_TOOLS]
            # two at a time: one Go build leaves a core idle while it links
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="testbed-tool") as pool:
                for done in [pool.submit(TOOLS[name], force) for name in needed]:
                    done.result()
        if mpi_image is not None:
            mpi_image.result()
    return target


def build_spark_operator(force: bool = False) -> Path:
    """The Kubeflow Spark Operator (``testbed/spark_build.py``), keyed by its own version."""
    from testbed import spark_build

    return spark_build.build_operator(force)


def build_helm(force: bool = False) -> Path:
    """Build the helm CLI if missing, under its own lock; its path."""
    return build_cached_binary(helm_dir(), helm_binary(), HELM_VERSION, Builder.helm, force)


def build_mpi_operator(force: bool = False) -> Path:
    """Build the MPI Operator (and copy out its CRD) if missing, under its own lock; the
    binary's path."""
    return build_cached_binary(
        mpi_operator_dir(),
        mpi_operator_binary(),
        MPI_OPERATOR_VERSION,
        Builder.mpi_operator,
        force,
        extra_files=(mpi_operator_crd(),),
    )


def build_cached_binary(
    root: Path,
    binary: Path,
    version: str,
    compile_into: Callable[[Builder], None],
    force: bool = False,
    extra_files: tuple[Path, ...] = (),
) -> Path:
    """Build one tool kept under a key directory of its own, unless its binary (and every one of
    ``extra_files``) is there; ``binary``.

    The exclusive lock on ``root`` lets concurrent callers wait and then find the build done.
    ``compile_into`` writes into ``builder.out`` (``root/bin.partial``): files named like one of
    ``extra_files`` are moved there, and the binary is moved last, because its presence is what
    says the build is whole. A rename is atomic, so no reader ever sees half a binary.
    """
    what = binary.name

    def complete() -> bool:
        return os.access(binary, os.X_OK) and all(extra.is_file() for extra in extra_files)

    if not force and complete():
        print(f"testbed {what} up to date in {binary.parent}", flush=True)
        return binary
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and complete():
            return binary
        partial = root / "bin.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        timings: dict[str, float] = {}
        builder = Builder(workdir=root / "src", out=partial, timings=timings)
        builder.step(f"{what} {version}", lambda: compile_into(builder))
        binary.parent.mkdir(exist_ok=True)
        for extra in extra_files:
            if (partial / extra.name).exists():
                os.replace(partial / extra.name, extra)
        os.replace(partial / what, binary)
        partial.rmdir()
        _record(root, {"built": [what], "steps_s": timings, "cpu_s": builder.cpu})
    return binary


def build_mpi_image(force: bool = False) -> Path:
    """Build the MPI image's archive if missing, under its own lock; its path."""
    archive = mpi_image_archive()
    if not force and archive.is_file():
        print(f"testbed mpi image up to date in {archive}", flush=True)
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with (archive.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and archive.is_file():
            return archive
        work = archive.parent / "work"
        shutil.rmtree(work, ignore_errors=True)
        mirror = os.environ.get("RUNPLANE_TESTBED_DEBIAN_MIRROR") or None
        timings: dict[str, float] = {}
        builder = Builder(workdir=work, out=archive.parent, timings=timings)

        def mpi() -> None:
            images.build_mpi(work, archive, go_arch(), mirror)

        builder.step(images.MPI_IMAGE, mpi)
        shutil.rmtree(work, ignore_errors=True)
        _record(archive.parent, {"built": [images.MPI_IMAGE], "steps_s": timings})
    return archive


KUEUE_CRDS_FILE = "kueue-crds.yaml"
KUEUE_WEBHOOKS_FILE = "kueue-webhooks.yaml"


def kueue_dir() -> Path:
    """Kueue has a key of its own (its version and the toolchain), as helm has."""
    return tool_dir("kueue", KUEUE_VERSION)


def kueue_binary() -> Path:
    return kueue_dir() / "bin" / "kueue"


def kueue_crds() -> Path:
    """Kueue's CRDs from its own module, joined into one file at build time."""
    return kueue_dir() / KUEUE_CRDS_FILE


def kueue_webhooks() -> Path:
    """Kueue's admission webhook configurations from its module, still pointing at its
    in-cluster Service (the testbed rewrites them to its out-of-cluster address)."""
    return kueue_dir() / KUEUE_WEBHOOKS_FILE


def build_kueue(force: bool = False) -> Path:
    """Build Kueue (and copy out its CRDs and webhooks) if missing, under its own lock; the
    binary's path. The longest of the tools (~10 min of CPU cold), so it is built last."""
    return build_cached_binary(
        kueue_dir(),
        kueue_binary(),
        KUEUE_VERSION,
        Builder.kueue,
        force,
        extra_files=(kueue_crds(), kueue_webhooks()),
    )


def metrics_server_dir() -> Path:
    """metrics-server has a key of its own (its version and the toolchain), as helm has."""
    return tool_dir("metrics-server", METRICS_SERVER_VERSION)


def metrics_server_binary() -> Path:
    return metrics_server_dir() / "bin" / "metrics-server"


def build_metrics_server(force: bool = False) -> Path:
    """Build metrics-server if missing, under its own lock; its path."""
    return build_cached_binary(
        metrics_server_dir(),
        metrics_server_binary(),
        METRICS_SERVER_VERSION,
        Builder.metrics_server,
        force,
    )


#: The tools some of the cluster's tests use, each under a key of its own, in the order they are
#: built after the control plane (the least CPU first, so the first is ready soonest). A test
#: module that needs one says so (``pytest.mark.testbed_tool``): it runs after those that need
#: none, in this order, so CI runs the cluster's tests while the tools build.
TOOLS: dict[str, Callable[[bool], Path]] = {
    "helm": build_helm,
    "spark-operator": build_spark_operator,
    "mpi-operator": build_mpi_operator,
    "metrics-server": build_metrics_server,
    "kueue": build_kueue,
}
#: What only the real node uses: left out with its images.
REAL_NODE_TOOLS = frozenset({"metrics-server"})


def _record(root: Path, record: dict[str, Any]) -> None:
    """Append one build's timings and sizes to ``root``'s history."""
    made = [p for p in (*root.iterdir(), *root.glob("bin/*")) if p.is_file()]
    record = {
        **record,
        "bytes": {
            p.name: p.stat().st_size
            for p in made
            if p.suffix in (".tar", ".yaml") or p.parent.name == "bin"
        },
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    append_history(root, record)


def append_history(root: Path, record: dict[str, Any]) -> None:
    """Append one build's record to ``root``'s history, so cold and warm costs stay visible."""
    history_path = root / TIMINGS_FILE
    history = json.loads(history_path.read_text()) if history_path.exists() else []
    history.append(record)
    history_path.write_text(json.dumps(history, indent=2) + "\n")


def build_images(force: bool = False) -> Path:
    """Build the real node's image archives if missing, under their own lock."""
    target = images_dir()
    if not force and not missing_images(target):
        print(f"testbed images up to date in {target}", flush=True)
        return target
    target.mkdir(parents=True, exist_ok=True)
    with (target / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        todo = list(images.ARCHIVES) if force else missing_images(target)
        if todo:
            _build_images_locked(target, todo)
        else:
            print(f"testbed images up to date in {target}", flush=True)
    return target


def _build_images_locked(target: Path, todo: list[str]) -> None:
    timings: dict[str, float] = {}
    work = target / "work"
    shutil.rmtree(work, ignore_errors=True)
    builder = Builder(workdir=work, out=target, timings=timings)
    archives = image_archives(target)
    arch = go_arch()
    print(f"testbed images: {', '.join(todo)} -> {target}", flush=True)
    start = time.monotonic()
    if images.PAUSE_IMAGE in todo:

        def pause() -> None:
            source = builder.module_dir("k8s.io/kubernetes", K8S_VERSION)
            pause_c = source / "build" / "pause" / "linux" / "pause.c"
            images.build_pause(pause_c, work / "pause", archives[images.PAUSE_IMAGE], arch)

        builder.step(images.PAUSE_IMAGE, pause)
    if images.PYTHON_IMAGE in todo:
        mirror = os.environ.get("RUNPLANE_TESTBED_DEBIAN_MIRROR") or None

        def python() -> None:
            images.build_python(work / "python", archives[images.PYTHON_IMAGE], arch, mirror)

        builder.step(images.PYTHON_IMAGE, python)
    if images.DASK_IMAGE in todo:
        mirror = os.environ.get("RUNPLANE_TESTBED_DEBIAN_MIRROR") or None

        def dask() -> None:
            images.build_dask(work / "dask", archives[images.DASK_IMAGE], arch, mirror)

        builder.step(images.DASK_IMAGE, dask)
    shutil.rmtree(work, ignore_errors=True)
    total = round(time.monotonic() - start, 1)
    record: dict[str, Any] = {
        "built": todo,
        "steps_s": timings,
        "total_s": total,
        "archive_bytes": {name: path.stat().st_size for name, path in archives.items()},
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    append_history(target, record)
    print(f"testbed images: done in {total:.1f}s", flush=True)


def _build_locked(target: Path, force: bool) -> Path:
    todo = BINARIES if force else tuple(missing_binaries(target))
    if not todo:
        print(f"testbed binaries up to date in {target}", flush=True)
        return target
    root = key_dir()
    partial = root / "bin.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    target.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    builder = Builder(workdir=root / "src", out=partial, timings=timings)
    print(f"testbed build: {', '.join(todo)} -> {target}", flush=True)
    start = time.monotonic()
    steps: list[tuple[str, Callable[[], None]]] = []
    commands = tuple(cmd for cmd in K8S_COMMANDS if cmd in todo)
    if commands:
        steps.append(
            (
                f"kubernetes {K8S_VERSION} ({', '.join(commands)})",
                lambda: builder.kubernetes(commands),
            )
        )
    if "etcd" in todo:
        steps.append((f"etcd {ETCD_VERSION}", builder.etcd))
    if "kwok" in todo:
        steps.append((f"kwok {KWOK_VERSION}", builder.kwok))
    if any(cmd in todo for cmd in CONTAINERD_COMMANDS):
        steps.append((f"containerd {CONTAINERD_VERSION}", builder.containerd))
    if any(plugin in todo for plugin in CNI_PLUGINS):
        steps.append((f"cni plugins {CNI_PLUGINS_VERSION}", builder.cni_plugins))
    # Two at a time, the longest (Kubernetes) first and the rest one after another beside it:
    # one Go build leaves a core idle while it links.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="testbed-core") as pool:
        for done in [pool.submit(builder.step, name, func) for name, func in steps]:
            done.result()
    for produced in partial.iterdir():
        # rename is atomic, so a concurrent reader never sees a half-written binary
        os.replace(produced, target / produced.name)
    partial.rmdir()
    total = round(time.monotonic() - start, 1)
    record: dict[str, Any] = {
        "key": cache_key(),
        "built": list(todo),
        "steps_s": timings,
        "cpu_s": builder.cpu,
        "total_s": total,
        "bin_bytes": du(target),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    append_history(root, record)
    print(f"testbed build: done in {total:.1f}s ({record['bin_bytes'] / 1e6:.0f} MB of binaries)")
    still = missing_binaries(target)
    if still:
        raise RuntimeError(f"build finished but binaries are missing: {still}")
    return target


#: ``--print-<what>``: where a build puts it, for scripts that call a binary themselves.
_PRINTS: dict[str, Callable[[], Path]] = {
    "--print-bin-dir": bin_dir,
    "--print-images-dir": images_dir,
    "--print-helm": helm_binary,
    "--print-mpi-operator": mpi_operator_binary,
    "--print-metrics-server": metrics_server_binary,
    "--print-kueue": kueue_binary,
}


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    for flag, where in _PRINTS.items():
        if flag in args:
            print(where())
            return 0
    build(
        force="--force" in args,
        with_images="--no-images" not in args,
        tools="--no-tools" not in args,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
