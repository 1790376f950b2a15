"""Container images for the testbed's real node, built offline: no registry, no Docker.

Two images are enough for the real node: the pod sandbox (Kubernetes' own ``pause.c``, which
ships inside the ``k8s.io/kubernetes`` module zip, compiled statically) and a Python image (a
Debian root filesystem from ``mmdebstrap``). A third, Debian's dask (``python3-distributed``),
is built with them but imported only by the tests that run a dask cluster
(``RealNode.import_image``): every node start would otherwise pay for its size. Each becomes
one uncompressed layer wrapped into an OCI image-layout tarball that
``ctr -n k8s.io images import`` loads; the image name travels in the
``io.containerd.image.name`` annotation of ``index.json``.

Only the standard library is used: ``python -m testbed build`` runs before any Python
dependency is installed. Archives are deterministic (fixed timestamps, sorted JSON), so the
same inputs give the same image digest.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PAUSE_IMAGE = "runplane.local/pause:3.10.2"
PYTHON_IMAGE = "runplane.local/python:3.11-bookworm"
PAUSE_ARCHIVE = "pause.oci.tar"
PYTHON_ARCHIVE = "python.oci.tar"
#: Debian 12's dask and distributed (2022.12.1): ``dask scheduler`` / ``dask worker`` exist.
DASK_IMAGE = "runplane.local/dask:2022.12-bookworm"
DASK_ARCHIVE = "dask.oci.tar"
#: Debian 12's Open MPI (4.1) with mpi4py and OpenSSH: what the MPI Operator's launcher and
#: workers run (``mpirun`` over ssh into each worker's ``sshd``). Built and cached apart from
#: the node's images (``build.build_mpi_image``), imported by the tests that run an MPIJob.
MPI_IMAGE = "runplane.local/mpi:4.1-bookworm"
MPI_ARCHIVE = "mpi.oci.tar"
MPI_PACKAGES = ("python3", "python3-mpi4py", "openmpi-bin", "openssh-server", "openssh-client")
#: The image's setup, as the operator's own base images make theirs: the ssh client trusts
#: any worker (the keys come from the operator's Secret, mounted read-only, so nothing is
#: written to known_hosts); sshd (its config reads ``sshd_config.d`` first) accepts the
#: Secret's files as mounted (StrictModes) and runs without PAM (no login session in a
#: container). Debian's Open MPI already leaves out the transports a pod lacks (UCX, verbs);
#: ranks sharing a pod use shared memory without a single-copy mechanism (a container may not
#: ptrace its neighbours). (sshd's ``/run/sshd`` is made by the workers' command: mmdebstrap
#: empties ``/run``.)
MPI_SETUP = (
    'printf "StrictHostKeyChecking no\\nUserKnownHostsFile /dev/null\\nLogLevel ERROR\\n"'
    ' > "$1/etc/ssh/ssh_config.d/runplane.conf"',
    'printf "StrictModes no\\nUsePAM no\\n" > "$1/etc/ssh/sshd_config.d/runplane.conf"',
    'printf "\\nbtl_vader_single_copy_mechanism = none\\n"'
    ' >> "$1/etc/openmpi/openmpi-mca-params.conf"',
)
#: mpirun refuses root unless told twice; pods run as root.
MPI_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "OMPI_ALLOW_RUN_AS_ROOT=1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
)
ARCHIVES = {PAUSE_IMAGE: PAUSE_ARCHIVE, PYTHON_IMAGE: PYTHON_ARCHIVE, DASK_IMAGE: DASK_ARCHIVE}
#: What ``RealNode.start`` imports; the others are imported on demand.
NODE_IMAGES = (PAUSE_IMAGE, PYTHON_IMAGE)

DEBIAN_SUITE = "bookworm"
PYTHON_PACKAGES = ("python3",)
#: Recommends are left out (pandas, bokeh and their own trees): the scheduler and workers run
#: without them, and the image stays a fraction of the size.
DASK_PACKAGES = ("python3", "python3-distributed")
#: Documentation, manuals and translations are most of a minimal rootfs' size and unused.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*")
#: Bump when the way an image is assembled changes, so cached archives are rebuilt.
FORMAT_REVISION = 1

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: A fixed timestamp for every tar entry and the image config: reproducible digests.
EPOCH = 0
_EPOCH_TEXT = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an OCI image config a pod's container inherits when it sets nothing."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = (DEFAULT_PATH,)
    user: str = ""
    working_dir: str = ""
    #: Ports the image listens on (``8470/tcp``): documentation for whoever runs it.
    exposed_ports: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    #: The signal that stops the container (the runtime's default: SIGTERM).
    stop_signal: str = ""

    def as_oci(self) -> dict[str, object]:
        config: dict[str, object] = {"Env": list(self.env)}
        if self.entrypoint:
            config["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            config["Cmd"] = list(self.cmd)
        if self.user:
            config["User"] = self.user
        if self.working_dir:
            config["WorkingDir"] = self.working_dir
        if self.exposed_ports:
            config["ExposedPorts"] = {port: {} for port in self.exposed_ports}
        if self.labels:
            config["Labels"] = dict(self.labels)
        if self.stop_signal:
            config["StopSignal"] = self.stop_signal
        return config


def inputs_key(k8s_version: str, arch: str) -> str:
    """A short hash of everything the two images are made from (the pause source comes from
    the Kubernetes module, so its version is an input)."""
    inputs = {
        "k8s": k8s_version,
        "arch": arch,
        "pause": PAUSE_IMAGE,
        "python": PYTHON_IMAGE,
        "suite": DEBIAN_SUITE,
        "packages": PYTHON_PACKAGES,
        "dask": DASK_IMAGE,
        "dask_packages": DASK_PACKAGES,
        "excludes": DPKG_EXCLUDES,
        "format": FORMAT_REVISION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def mpi_inputs_key(arch: str) -> str:
    """A short hash of what the MPI image is made from."""
    inputs = {
        "arch": arch,
        "image": MPI_IMAGE,
        "suite": DEBIAN_SUITE,
        "packages": MPI_PACKAGES,
        "setup": MPI_SETUP,
        "env": MPI_ENV,
        "excludes": DPKG_EXCLUDES,
        "format": FORMAT_REVISION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def missing_archives(directory: Path) -> list[str]:
    return [name for name, archive in ARCHIVES.items() if not (directory / archive).is_file()]


def _sha256_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return "sha256:" + digest.hexdigest(), size


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = EPOCH
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_layer(out: Path, files: Mapping[str, Path], mode: int = 0o755) -> Path:
    """A layer tar of a few root-owned files, for images with no filesystem of their own."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for arcname, source in sorted(files.items()):
            info = tar.gettarinfo(str(source), arcname=arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = mode
            info.mtime = EPOCH
            with source.open("rb") as handle:
                tar.addfile(info, handle)
    return out


def oci_archive(
    name: str, layer: Path | Sequence[Path], out: Path, config: ImageConfig, arch: str
) -> str:
    """Wrap uncompressed layer tars (one, or several from the bottom up) into an OCI
    image-layout tarball; returns the manifest digest. The archive is written next to ``out``
    and renamed, so a reader never sees half of one."""
    layers = [layer] if isinstance(layer, Path) else list(layer)
    digests = [_sha256_file(path) for path in layers]
    history = {"created": _EPOCH_TEXT, "created_by": "runplane testbed/images.py"}
    image_config = {
        "architecture": arch,
        "os": "linux",
        "created": _EPOCH_TEXT,
        "config": config.as_oci(),
        "rootfs": {"type": "layers", "diff_ids": [digest for digest, _ in digests]},
        "history": [history for _ in layers],
    }
    config_bytes = _json_bytes(image_config)
    config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_bytes),
        },
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest, "size": size}
            for digest, size in digests
        ],
    }
    manifest_bytes = _json_bytes(manifest)
    manifest_digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    last = name.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": arch, "os": "linux"},
                "annotations": {
                    # ctr names the imported image after this annotation
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "oci-layout", _json_bytes({"imageLayoutVersion": "1.0.0"}))
        _add_bytes(tar, "index.json", _json_bytes(index))
        _add_bytes(tar, f"blobs/sha256/{config_digest[7:]}", config_bytes)
        _add_bytes(tar, f"blobs/sha256/{manifest_digest[7:]}", manifest_bytes)
        for path, (digest, _) in zip(layers, digests, strict=True):
            info = tar.gettarinfo(str(path), arcname=f"blobs/sha256/{digest[7:]}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            info.mtime = EPOCH
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    os.replace(partial, out)
    return manifest_digest


def _run(argv: Sequence[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"command failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout}{proc.stderr}"
        )


def _need(tool: str) -> str:
    found = shutil.which(tool)
    if not found:
        raise RuntimeError(
            f"{tool} not found; the real node's images need it (run scripts/testbed-deps.sh)"
        )
    return found


def build_pause(pause_c: Path, workdir: Path, out: Path, arch: str) -> str:
    """Kubernetes' pause, static, so the image needs no libc: a 0.7 MB single-file image."""
    workdir.mkdir(parents=True, exist_ok=True)
    binary = workdir / "pause"
    version = PAUSE_IMAGE.rsplit(":", 1)[1]
    _run(
        [
            _need("gcc"),
            "-Os",
            "-Wall",
            "-Werror",
            "-static",
            f"-DVERSION=v{version}-runplane",
            "-o",
            str(binary),
            str(pause_c),
        ]
    )
    _run([_need("strip"), str(binary)])
    layer = write_layer(workdir / "pause-layer.tar", {"pause": binary})
    config = ImageConfig(entrypoint=("/pause",), user="65535:65535")
    return oci_archive(PAUSE_IMAGE, layer, out, config, arch)


def build_python(workdir: Path, out: Path, arch: str, mirror: str | None = None) -> str:
    """A minimal Debian with python3: ``essential`` is the smallest variant apt can extend.

    mmdebstrap picks root mode when run as root and writes the rootfs tar directly; it reads
    the Debian mirror (``mirror`` or deb.debian.org), the only network access of the build.
    """
    return build_debian(PYTHON_IMAGE, PYTHON_PACKAGES, workdir, out, arch, mirror)


def build_dask(workdir: Path, out: Path, arch: str, mirror: str | None = None) -> str:
    """The Python image plus Debian's dask and distributed, without their Recommends."""
    return build_debian(DASK_IMAGE, DASK_PACKAGES, workdir, out, arch, mirror, recommends=False)


def build_mpi(workdir: Path, out: Path, arch: str, mirror: str | None = None) -> str:
    """Debian's Open MPI, mpi4py and OpenSSH without their Recommends, set up for the MPI
    Operator (:data:`MPI_SETUP`); sshd's host keys are made by its package's install."""
    return build_debian(
        MPI_IMAGE,
        MPI_PACKAGES,
        workdir,
        out,
        arch,
        mirror,
        recommends=False,
        hooks=MPI_SETUP,
        env=MPI_ENV,
    )


def build_debian(
    name: str,
    packages: Sequence[str],
    workdir: Path,
    out: Path,
    arch: str,
    mirror: str | None = None,
    *,
    recommends: bool = True,
    hooks: Sequence[str] = (),
    env: Sequence[str] = (DEFAULT_PATH,),
) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    rootfs = workdir / "rootfs.tar"
    argv = [
        _need("mmdebstrap"),
        "--quiet",
        "--variant=essential",
        f"--architectures={arch}",
        f"--include={','.join(packages)}",
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in DPKG_EXCLUDES),
        *([] if recommends else ["--aptopt=APT::Install-Recommends false"]),
        *(f"--customize-hook={hook}" for hook in hooks),
        DEBIAN_SUITE,
        str(rootfs),
    ]
    if mirror:
        argv.append(mirror)
    _run(argv)
    try:
        config = ImageConfig(cmd=("python3",), env=tuple(env))
        return oci_archive(name, rootfs, out, config, arch)
    finally:
        rootfs.unlink(missing_ok=True)
