"""The runplane image (service, web UI, CLI, bootstrap), built offline into an OCI archive.

What a platform team loads into its registry, and what the testbed's real node runs: Debian's
Python (``mmdebstrap``, no Docker daemon, no base image from a registry) with runplane and its
dependencies installed from wheels into a virtual environment at ``/opt/runplane``. Every wheel
is pinned with its sha256 in ``deploy/image/wheels.lock`` (``--lock`` writes it, resolving
runplane's own requirements), so two builds from the same checkout install the same Python
packages; the Debian packages are whatever the suite and its updates have that day. Both sets
are recorded in the image (``PACKAGES_FILE``), next to the archive, and printed by the build.

Two layers, each cached outside the repository under a hash of its inputs: the base (Debian and
the locked dependencies: the lock, the suite and its sources, the package list, the
architecture, this module's format), and runplane over it (its source too). A change to
runplane's source rebuilds only the top layer; a warm build hashes the source tree and returns.
Only the standard library is used, like ``testbed/build.py``, so the build needs nothing
installed but Python, pip and mmdebstrap.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import build as tb_build
from testbed import images

ROOT = Path(__file__).resolve().parents[1]
LOCK_FILE = ROOT / "deploy" / "image" / "wheels.lock"
REPOSITORY = "runplane.local/runplane"
#: The PostgreSQL driver: the service's database in a cluster is PostgreSQL.
EXTRAS = ("postgresql",)
#: Debian 12's CPython; wheels are chosen for it and for its glibc (manylinux_2_36 and older).
PYTHON_VERSION = "3.11"
GLIBC_MINOR = 36
DEBIAN_PACKAGES = ("python3",)
#: Documentation, manuals, translations, and glibc's iconv modules (8 MB: Python and libpq
#: convert text themselves): unused in a service image.
DPKG_EXCLUDES = (
    *images.DPKG_EXCLUDES,
    "/usr/share/info/*",
    "/usr/share/lintian/*",
    "/usr/lib/*/gconv/*",
)
#: Debian's mirror with its security and stable updates: a service image ships the fixes
#: Debian has published, not only those of the last point release.
DEBIAN_SOURCES = (
    f"deb http://deb.debian.org/debian {images.DEBIAN_SUITE} main",
    f"deb http://deb.debian.org/debian {images.DEBIAN_SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {images.DEBIAN_SUITE}-security main",
)
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
VENV = "/opt/runplane"
SITE_PACKAGES = f"{VENV}/lib/python{PYTHON_VERSION}/site-packages"
#: Parts of installed packages that runplane never imports, removed after the install: the
#: kubernetes client's asyncio copy (``kubernetes.aio``) is 40 MB of sources and as much again
#: of bytecode beside the synchronous client runplane uses.
UNUSED = ("kubernetes/aio",)
USER_ID = 10001
USER = "runplane"
DATA_DIR = "/var/lib/runplane"
PORT = 8470
PACKAGES_FILE = "/usr/share/runplane/packages.txt"
#: Bump when the way the image is assembled changes, so cached archives are rebuilt.
FORMAT_REVISION = 1
BUILD_FILE = "build.json"
BASE_FILE = "base.json"
CACHE_PREFIX = "runplane-image-"
BASE_PREFIX = "runplane-base-"

_ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}
_VERSION_LINE = re.compile(r'^__version__\s*=\s*"([^"]+)"', re.M)
#: What a compiler toolchain would bring: none of it belongs in a service image.
_TOOLCHAIN = re.compile(r"^(gcc|g\+\+|cpp|clang|binutils|make|libc6-dev)(-[0-9.]+)?$|-dev$")


@dataclass(frozen=True)
class Built:
    """An image archive in the cache, with what it holds."""

    name: str
    archive: Path
    size: int
    seconds: float
    cached: bool
    #: The image's package list, where its build records one.
    packages: Path | None = None

    def summary(self) -> str:
        how = "reused from the cache" if self.cached else f"built in {self.seconds:.1f}s"
        return f"{self.name}: {self.archive} ({self.size / 1e6:.0f} MB, {how})"


# --- pure parts: names, versions, the lock, the record ---------------------------------------


def version(root: Path = ROOT) -> str:
    """runplane's version, read from its source rather than imported: the build needs no
    runplane installed."""
    text = (root / "src" / "runplane" / "__init__.py").read_text()
    match = _VERSION_LINE.search(text)
    if not match:
        raise RuntimeError(f"no __version__ in {root / 'src' / 'runplane' / '__init__.py'}")
    return match.group(1)


def image_name(runplane_version: str) -> str:
    return f"{REPOSITORY}:{runplane_version}"


def normalize(name: str) -> str:
    """A distribution name as the index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name_version(filename: str) -> tuple[str, str]:
    """The distribution and version a wheel file is of (PEP 427 file names)."""
    parts = filename.removesuffix(".whl").split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise ValueError(f"{filename!r} is not a wheel file name (name-version-py-abi-plat.whl)")
    return normalize(parts[0]), parts[1]


def platforms(arch: str) -> list[str]:
    """pip's ``--platform`` values for wheels that run on the image's glibc: pip does not widen
    a manylinux tag to older ones by itself, so every accepted one is named."""
    machine = _ARCHES[arch]
    oldest = 5 if machine == "x86_64" else 17
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR, oldest - 1, -1)]
    legacy = ("manylinux2014", "manylinux2010", "manylinux1") if machine == "x86_64" else ()
    return tags + [f"{tag}_{machine}" for tag in legacy]


def pip_target_options(arch: str) -> list[str]:
    """Wheels for the image's Python, not this machine's: binary only, CPython 3.11 ABI, the
    stable ABI (psutil ships only abi3) and pure wheels."""
    options = ["--only-binary=:all:", f"--python-version={PYTHON_VERSION}"]
    options += ["--implementation=cp", "--abi=cp311", "--abi=abi3", "--abi=none"]
    return options + [f"--platform={tag}" for tag in platforms(arch)]


def lock_text(wheels: Mapping[str, Iterable[Path]]) -> str:
    """The lock of the wheels resolved per architecture: ``name==version`` with the sha256 of
    every architecture's wheel (pip accepts any of a requirement's hashes). runplane itself is
    built from the checkout, so it is left out."""
    pins: dict[str, tuple[str, set[str]]] = {}
    for arch, files in sorted(wheels.items()):
        for path in files:
            name, found = wheel_name_version(path.name)
            if name == "runplane":
                continue
            pinned, hashes = pins.setdefault(name, (found, set()))
            if pinned != found:
                raise RuntimeError(
                    f"{name} resolves to {pinned} on one architecture and {found} on {arch}; "
                    "pin it in pyproject.toml so both agree"
                )
            hashes.add(sha256(path))
    lines = [
        "# The wheels of the runplane image (testbed/service_image.py), each with the sha256 of",
        f"# its wheel for {', '.join(sorted(wheels))}, CPython {PYTHON_VERSION} (Debian "
        f"{images.DEBIAN_SUITE}). Regenerate after a",
        "# dependency change:  python3 -m testbed image --lock",
    ]
    for name, (pinned, hashes) in sorted(pins.items()):
        lines.append(f"{name}=={pinned} \\")
        ordered = sorted(hashes)
        lines += [f"    --hash=sha256:{h} \\" for h in ordered[:-1]]
        lines.append(f"    --hash=sha256:{ordered[-1]}")
    return "\n".join(lines) + "\n"


def locked(text: str) -> dict[str, str]:
    """Distribution -> version of a lock (a pip requirements file of ``name==version`` lines)."""
    pins: dict[str, str] = {}
    for line in text.replace("\\\n", " ").splitlines():
        requirement = line.split("#", 1)[0].split("--hash", 1)[0].strip()
        if not requirement:
            continue
        name, sep, pinned = requirement.partition("==")
        if not sep or not pinned.strip():
            raise ValueError(f"lock line {requirement!r} is not name==version")
        pins[normalize(name.strip())] = pinned.strip()
    return pins


def debian_packages(status: str) -> list[tuple[str, str, str]]:
    """(package, version, architecture) of what dpkg's status file says is installed."""
    found = []
    for stanza in status.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1].isspace() or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            found.append((fields["Package"], fields["Version"], fields.get("Architecture", "")))
    return sorted(found)


def toolchain(packages: Iterable[tuple[str, str, str]]) -> list[str]:
    """The packages of a compiler toolchain among ``packages`` (headers included)."""
    return [name for name, _, _ in packages if _TOOLCHAIN.search(name)]


def packages_record(
    name: str,
    arch: str,
    debian: Sequence[tuple[str, str, str]],
    wheels: Sequence[tuple[str, str, str]],
) -> str:
    """What the image holds, one package a line: ``debian NAME VERSION ARCH`` and
    ``wheel NAME VERSION sha256:HASH`` (the hash of the wheel file installed)."""
    lines = [
        f"# {name} ({arch}, Debian {images.DEBIAN_SUITE}): its Debian packages and, in {VENV}, "
        "the wheels installed, with their sha256",
    ]
    lines += [f"debian\t{pkg}\t{ver}\t{pkg_arch}" for pkg, ver, pkg_arch in debian]
    lines += [f"wheel\t{dist}\t{ver}\tsha256:{digest}" for dist, ver, digest in wheels]
    return "\n".join(lines) + "\n"


def source_files(root: Path = ROOT) -> list[Path]:
    """What the runplane wheel is made of: the package, its metadata and its readme."""
    package = root / "src" / "runplane"
    files = [
        path
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    return sorted([*files, root / "pyproject.toml", root / "README.md"])


def source_digest(root: Path = ROOT) -> str:
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def base_key(lock: str, arch: str) -> str:
    """A short hash of what the bottom layer is made from: Debian's inputs and the lock."""
    inputs = {
        "lock": hashlib.sha256(lock.encode()).hexdigest(),
        "arch": arch,
        "suite": images.DEBIAN_SUITE,
        "sources": DEBIAN_SOURCES,
        "packages": DEBIAN_PACKAGES,
        "excludes": DPKG_EXCLUDES,
        "unused": UNUSED,
        "user": USER_ID,
        "format": FORMAT_REVISION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def inputs_key(source: str, lock: str, arch: str) -> str:
    """A short hash of everything the image is made from: a change to any of them is a new
    cache entry, never a stale archive."""
    inputs = {
        "source": source,
        "base": base_key(lock, arch),
        "repository": REPOSITORY,
        "extras": EXTRAS,
        "format": FORMAT_REVISION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def image_config(runplane_version: str) -> images.ImageConfig:
    """``runplane serve`` on every address as the unprivileged user; settings come from
    ``RUNPLANE_*`` variables and the file ``RUNPLANE_CONFIG`` names (docs/install.md)."""
    return images.ImageConfig(
        entrypoint=(f"{VENV}/bin/runplane",),
        cmd=("serve", "--host", "0.0.0.0"),
        env=(
            f"PATH={VENV}/bin:" + images.DEFAULT_PATH.removeprefix("PATH="),
            f"HOME={DATA_DIR}",
            f"RUNPLANE_LOCAL__HOME={DATA_DIR}",
            "LANG=C.UTF-8",
            # the root filesystem may be read-only: bytecode was compiled at build time
            "PYTHONDONTWRITEBYTECODE=1",
            "PYTHONUNBUFFERED=1",
        ),
        user=f"{USER_ID}:{USER_ID}",
        working_dir=DATA_DIR,
        exposed_ports=(f"{PORT}/tcp",),
        labels=(
            ("org.opencontainers.image.title", "runplane"),
            ("org.opencontainers.image.version", runplane_version),
        ),
    )


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --- the build -------------------------------------------------------------------------------


def read_lock() -> str:
    if not LOCK_FILE.is_file():
        raise RuntimeError(f"{LOCK_FILE} is missing; write it: python3 -m testbed image --lock")
    return LOCK_FILE.read_text()


def image_dir(arch: str | None = None, root: Path = ROOT) -> Path:
    arch = arch or tb_build.go_arch()
    key = inputs_key(source_digest(root), read_lock(), arch)
    return tb_build.cache_root() / f"{CACHE_PREFIX}{key}"


def base_dir(arch: str) -> Path:
    return tb_build.cache_root() / f"{BASE_PREFIX}{base_key(read_lock(), arch)}"


def archive_name(runplane_version: str) -> str:
    return f"runplane-{runplane_version}.oci.tar"


def _run(argv: Sequence[str], what: str) -> str:
    print("+ " + shlex.join(argv), flush=True)
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def _pip() -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]


class _Steps:
    """How long each step took, printed as it ends and kept in the cache entry's record."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._began = time.monotonic()

    @contextlib.contextmanager
    def step(self, label: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.seconds[label] = round(time.monotonic() - started, 1)
        print(f"==> {label}: {self.seconds[label]:.1f}s", flush=True)

    def total(self) -> float:
        return round(time.monotonic() - self._began, 1)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on a cache entry: a concurrent build (CI's, a test fixture's) waits,
    then finds the entry complete. The entry's work directory goes with the lock, also when
    the build failed: a root filesystem left behind would be 300 MB."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            shutil.rmtree(directory / "work", ignore_errors=True)


def _cached(directory: Path, name: str) -> Built | None:
    try:
        record = json.loads((directory / BUILD_FILE).read_text())
    except (OSError, ValueError):
        return None
    archive = directory / record["archive"]
    if not archive.is_file():
        return None
    size = archive.stat().st_size
    return Built(name, archive, size, record["total_s"], True, directory / "packages.txt")


def build(
    force: bool = False, arch: str | None = None, mirror: str | None = None, root: Path = ROOT
) -> Built:
    """The image archive for this checkout, built if the cache has none for its inputs.

    Two layers, cached apart: Debian and runplane's dependencies (keyed by the lock and the
    Debian inputs: a cold build's two minutes, paid again only when they change), and runplane
    itself (keyed by its source too: seconds). A registry stores the first layer once for every
    runplane version built on it. ``root`` is the source tree runplane's layer is built from
    (another checkout of the same lock: a test's newer version).
    """
    began = time.monotonic()
    arch = arch or tb_build.go_arch()
    if arch not in _ARCHES:
        raise RuntimeError(f"the image is built for {sorted(_ARCHES)}, not {arch!r}")
    name = image_name(version(root))
    target = image_dir(arch, root)
    if not force and (found := _cached(target, name)):
        return found
    with _locked(target):
        if not force and (found := _cached(target, name)):
            return found
        if os.geteuid() != 0:
            raise RuntimeError("the image build needs root (mmdebstrap's root mode, chroot)")
        mirror = mirror or os.environ.get("RUNPLANE_TESTBED_DEBIAN_MIRROR") or None
        base = _base(arch, mirror, force)
        built = _image(target, base, name, arch, root)
    _prune(CACHE_PREFIX, keep=target)
    _prune(BASE_PREFIX, keep=base.parent)
    return dataclasses.replace(built, seconds=round(time.monotonic() - began, 1))


def _base(arch: str, mirror: str | None, force: bool) -> Path:
    """The bottom layer: Debian's python3 and runplane's locked dependencies in a virtual
    environment, the user and its data directory; returns the layer tar."""
    directory = base_dir(arch)
    layer = directory / "layer.tar"
    with _locked(directory):
        if layer.is_file() and (directory / BASE_FILE).is_file() and not force:
            return layer
        mmdebstrap = shutil.which("mmdebstrap")
        if not mmdebstrap:
            raise RuntimeError("mmdebstrap not found; install it (scripts/testbed-deps.sh)")
        print(f"runplane image base (Debian {images.DEBIAN_SUITE}, the locked wheels)", flush=True)
        work = directory / "work"
        shutil.rmtree(work, ignore_errors=True)
        wheels, rootfs = work / "wheels", work / "rootfs"
        steps = _Steps()
        with steps.step("wheels"):
            _run(
                [
                    *_pip(),
                    "download",
                    "-q",
                    "--no-deps",
                    "--require-hashes",
                    *pip_target_options(arch),
                    *("-r", str(LOCK_FILE), "-d", str(wheels)),
                ],
                "downloading the locked wheels",
            )
        with steps.step("debian and dependencies"):
            _run(_mmdebstrap_argv(mmdebstrap, wheels, rootfs, arch, mirror), "mmdebstrap")
        with steps.step("base layer"):
            record = _finish_base(rootfs, wheels)
            partial = directory / "layer.tar.partial"
            _tar(rootfs, partial)
            os.replace(partial, layer)
        shutil.rmtree(work)
        record["steps_s"] = steps.seconds
        record["total_s"] = steps.total()
        (directory / BASE_FILE).write_text(json.dumps(record, indent=2) + "\n")
        return layer


def _image(target: Path, base: Path, name: str, arch: str, root: Path) -> Built:
    """The top layer: runplane's wheel installed over the base, in a copy of it; only the files
    the install added become the layer."""
    print(f"{name}: installing runplane over the base layer", flush=True)
    work = target / "work"
    shutil.rmtree(work, ignore_errors=True)
    wheels, rootfs = work / "wheels", work / "rootfs"
    base_record = json.loads((base.parent / BASE_FILE).read_text())
    steps = _Steps()
    with steps.step("runplane wheel"):
        _run([*_pip(), "wheel", "--no-deps", "-q", "-w", str(wheels), str(root)], "the wheel")
    with steps.step("runplane layer"):
        rootfs.mkdir(parents=True)
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-xf", str(base)], "unpacking")
        before = _tree(rootfs / VENV.lstrip("/"))
        inside = rootfs / "tmp" / "wheels"
        shutil.copytree(wheels, inside)
        pip_wheel = base.parent / base_record["pip"]
        shutil.copy(pip_wheel, inside)
        requirement = f"runplane[{','.join(EXTRAS)}]=={version(root)}"
        # its dependencies must already be in the base: offline, only runplane's wheel is
        # offered, so a dependency missing from the lock fails here, by name
        _run(
            [
                "chroot",
                str(rootfs),
                f"{VENV}/bin/python",
                f"/tmp/wheels/{pip_wheel.name}/pip",
                "install",
                "--no-index",
                "--find-links=/tmp/wheels",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--no-warn-script-location",
                requirement,
            ],
            f"installing runplane (a dependency missing from {LOCK_FILE.name}? run --lock)",
        )
        shutil.rmtree(inside)
        (runplane_wheel,) = wheels.glob("runplane-*.whl")
        installed = [(str(n), str(v), str(h)) for n, v, h in base_record["wheels"]]
        installed.append(("runplane", version(root), sha256(runplane_wheel)))
        debian = [(str(n), str(v), str(a)) for n, v, a in base_record["debian"]]
        record = packages_record(name, arch, debian, sorted(installed))
        packages = rootfs / PACKAGES_FILE.lstrip("/")
        packages.parent.mkdir(parents=True, exist_ok=True)
        packages.write_text(record)
        added = _added(rootfs, before) + _new_paths(rootfs, packages)
        top = work / "top.tar"
        _tar(rootfs, top, added)
        shutil.rmtree(rootfs)
    with steps.step("archive"):
        archive = target / archive_name(version(root))
        images.oci_archive(name, [base, top], archive, image_config(version(root)), arch)
        (target / "packages.txt").write_text(record)
    layers_bytes = [base.stat().st_size, top.stat().st_size]
    shutil.rmtree(work)
    size = archive.stat().st_size
    total = steps.total()
    built = {
        "name": name,
        "archive": archive.name,
        "bytes": size,
        "layers_bytes": layers_bytes,
        "base": base.parent.name,
        "steps_s": steps.seconds,
        "total_s": total,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (target / BUILD_FILE).write_text(json.dumps(built, indent=2) + "\n")
    return Built(name, archive, size, total, False, target / "packages.txt")


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Path -> (size, mtime) of every file and directory under ``root``."""
    found = {}
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        found[str(path)] = (info.st_size, info.st_mtime_ns)
    return found


def _added(rootfs: Path, before: Mapping[str, tuple[int, int]]) -> list[str]:
    """What the install added or changed under the virtual environment, as paths in the
    rootfs; it removes nothing (a layer would need whiteouts)."""
    after = _tree(rootfs / VENV.lstrip("/"))
    if gone := sorted(set(before) - set(after)):
        raise RuntimeError(f"installing runplane removed files of the base: {gone[:5]}")
    changed = [path for path, seen in after.items() if before.get(path) != seen]
    return [str(Path(path).relative_to(rootfs)) for path in sorted(changed)]


def _new_paths(rootfs: Path, path: Path) -> list[str]:
    """``path`` and its parent directories that the base does not have."""
    relative = path.relative_to(rootfs)
    return [str(p) for p in reversed(relative.parents) if str(p) != "."] + [str(relative)]


def _tar(rootfs: Path, out: Path, only: Sequence[str] | None = None) -> None:
    """A layer tar of the rootfs (numeric owners, sorted), or of the ``only`` paths in it."""
    argv = ["tar", "--numeric-owner", "--sort=name", "-C", str(rootfs), "-cf", str(out)]
    if only is None:
        _run([*argv, "."], "packing the root filesystem")
        return
    listing = out.with_suffix(".list")
    listing.write_text("".join(f"./{path}\n" for path in only))
    _run([*argv, "--no-recursion", "-T", str(listing)], "packing the layer")


def _prune(prefix: str, keep: Path, newest: int = 3) -> None:
    """Keep the ``newest`` cache entries of a kind (``keep`` among them); remove older ones no
    build holds, so a cache that sees a new source tree every day does not grow with it."""
    entries = sorted(
        (p for p in tb_build.cache_root().glob(f"{prefix}*") if p != keep and p.is_dir()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in entries[newest - 1 :]:
        with (old / ".lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(old, ignore_errors=True)


def _mmdebstrap_argv(
    mmdebstrap: str, wheels: Path, rootfs: Path, arch: str, mirror: str | None
) -> list[str]:
    """A minimal Debian with its python3, and runplane's dependencies installed into a virtual
    environment by pip run from its own wheel (so neither pip nor a compiler is ever
    installed), offline: ``--no-index`` from the downloaded wheels, none of their own
    dependencies resolved again (the lock is the whole set)."""
    pip_wheel = _pip_wheel(wheels)
    inside = "/tmp/wheels"
    pins = [f"{name}=={pinned}" for name, pinned in locked(read_lock()).items() if name != "pip"]
    install = [
        f"{VENV}/bin/python",
        f"{inside}/{pip_wheel.name}/pip",
        "install",
        "--no-index",
        f"--find-links={inside}",
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        *pins,
    ]
    hooks = [
        f"copy-in {shlex.quote(str(wheels))} /tmp",
        f'chroot "$1" python3 -m venv --without-pip {VENV}',
        'chroot "$1" ' + shlex.join(install),
        f'rm -rf "$1"{inside}',
    ]
    argv = [
        mmdebstrap,
        "--quiet",
        "--mode=root",
        "--variant=essential",
        # merged /usr by symlinks and usr-is-merged, not the usrmerge package, which would
        # bring perl (47 MB) into the image
        f"--hook-dir={MERGED_USR_HOOKS}",
        f"--architectures={arch}",
        f"--include={','.join(DEBIAN_PACKAGES)}",
        "--aptopt=APT::Install-Recommends false",
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in DPKG_EXCLUDES),
        *(f"--customize-hook={hook}" for hook in hooks),
        images.DEBIAN_SUITE,
        str(rootfs),
    ]
    return [*argv, mirror] if mirror else [*argv, *DEBIAN_SOURCES]


def _pip_wheel(wheels: Path) -> Path:
    found = next(wheels.glob("pip-*.whl"), None)
    if found is None:
        raise RuntimeError(f"no pip wheel in {LOCK_FILE}; rewrite it with --lock")
    return found


def _finish_base(rootfs: Path, wheels: Path) -> dict[str, Any]:
    """Remove what runplane never uses, add its user and data directory, check that no
    toolchain came in; returns what the base holds (and keeps the pip wheel beside it, for
    installing runplane over it)."""
    site = rootfs / SITE_PACKAGES.lstrip("/")
    for unused in UNUSED:
        path = site / unused
        if not path.is_dir():
            raise RuntimeError(f"{path} is not in the image any more; update UNUSED")
        shutil.rmtree(path)
    for tests in site.glob("*/tests"):  # packages' own test suites, with their bytecode
        if tests.is_dir():
            shutil.rmtree(tests)
    with (rootfs / "etc" / "passwd").open("a") as passwd:
        passwd.write(f"{USER}:x:{USER_ID}:{USER_ID}:runplane:{DATA_DIR}:/usr/sbin/nologin\n")
    with (rootfs / "etc" / "group").open("a") as group:
        group.write(f"{USER}:x:{USER_ID}:\n")
    data = rootfs / DATA_DIR.lstrip("/")
    data.mkdir(parents=True)
    os.chown(data, USER_ID, USER_ID)

    debian = debian_packages((rootfs / "var" / "lib" / "dpkg" / "status").read_text())
    if found := toolchain(debian):
        raise RuntimeError(f"the image must hold no compiler or headers, but has {found}")
    by_wheel = {wheel_name_version(p.name): sha256(p) for p in wheels.glob("*.whl")}
    installed = []
    for meta in sorted(site.glob("*.dist-info")):
        dist, dist_version = meta.name.removesuffix(".dist-info").rsplit("-", 1)
        key = (normalize(dist), dist_version)
        if key not in by_wheel:
            raise RuntimeError(f"{dist} {dist_version} is installed but came from no wheel")
        installed.append((*key, by_wheel[key]))
    pip_wheel = _pip_wheel(wheels)
    shutil.copy(pip_wheel, rootfs.parent.parent / pip_wheel.name)
    return {"debian": debian, "wheels": installed, "pip": pip_wheel.name}


def write_lock(arches: Sequence[str] = tuple(_ARCHES)) -> Path:
    """Resolve runplane's requirements (with ``EXTRAS``) and pip, the installer, for each
    architecture, and write every wheel's version and sha256 to ``LOCK_FILE``."""
    scratch = tb_build.cache_root() / "runplane-lock-work"
    shutil.rmtree(scratch, ignore_errors=True)
    built = scratch / "runplane"
    _run([*_pip(), "wheel", "--no-deps", "-q", "-w", str(built), str(ROOT)], "runplane's wheel")
    (wheel,) = built.glob("*.whl")
    resolved: dict[str, list[Path]] = {}
    for arch in arches:
        into = scratch / arch
        # pip too: the build runs it from its wheel to install into the image
        wanted = (f"{wheel}[{','.join(EXTRAS)}]", "pip")
        _run(
            [*_pip(), "download", "-q", *pip_target_options(arch), "-d", str(into), *wanted],
            f"resolving the wheels for {arch}",
        )
        resolved[arch] = sorted(into.glob("*.whl"))
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    LOCK_FILE.write_text(lock_text(resolved))
    shutil.rmtree(scratch)
    return LOCK_FILE


def shown(built: Built, out: Path | None, archive_only: bool) -> int:
    """What an image command prints once its archive is ready, and the copy into ``out``."""
    if archive_only:
        print(built.archive)
        return 0
    if built.packages is not None:
        print(built.packages.read_text(), end="")
    print(built.summary())
    if out:
        out.mkdir(parents=True, exist_ok=True)
        copy = out / built.archive.name
        shutil.copyfile(built.archive, copy)
        print(f"copied to {copy}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m testbed image",
        description="Build the runplane image into an OCI archive (docs/install.md, Image).",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.add_argument("--out", type=Path, help="also copy the archive into this directory")
    parser.add_argument(
        "--lock", action="store_true", help=f"resolve and write {LOCK_FILE.relative_to(ROOT)}"
    )
    parser.add_argument(
        "--print-archive", action="store_true", help="print the cached archive's path only"
    )
    args = parser.parse_args(argv)
    try:
        if args.lock:
            print(f"wrote {write_lock()}")
            return 0
        built = build(force=args.force)
    except RuntimeError as error:  # a missing tool, root, a stale lock: said, not traced
        print(f"runplane image: {error}", file=sys.stderr)
        return 1
    return shown(built, args.out, args.print_archive)
