"""The Spark image the real node runs a spark function's driver and executors in, built offline.

Two layers, as ``testbed/images.py`` writes them: a Debian root filesystem (``mmdebstrap``:
Python, the Java 17 runtime Spark 4 needs, and ``procps``, whose ``ps`` Spark's scripts call),
and over it PyPI's pyspark and py4j wheels unpacked into Debian's ``/usr/local`` site folder
with runplane's entrypoint (``testbed/spark_entrypoint.py``: pyspark ships ``spark-submit`` and
the Kubernetes jars but not the container script Spark's own images start with). ``SPARK_HOME``
is pyspark's folder. The wheels come from pip's cache when ``scripts/runtime-deps.sh`` has
installed pyspark (its sdist is built once into a wheel), from PyPI otherwise.

Cached outside the repository under a hash of its inputs (suite, packages, wheel versions, the
entrypoint's text, this module's format); a warm build is one ``stat``. Standard library only.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

from testbed import build, images

SPARK_VERSION = "4.3.0"
PY4J_VERSION = "0.10.9.9"
SPARK_IMAGE = f"runplane.local/spark:{SPARK_VERSION}-bookworm"
ARCHIVE = "spark.oci.tar"
PACKAGES = ("python3", "openjdk-17-jre-headless", "procps")
SITE = "usr/local/lib/python3.11/dist-packages"
SPARK_HOME = f"/{SITE}/pyspark"
ENTRYPOINT = Path(__file__).with_name("spark_entrypoint.py")
ENTRYPOINT_IN_IMAGE = "opt/runplane/spark-entrypoint.py"
#: Bump when the way the image is assembled changes.
FORMAT_REVISION = 1


def inputs_key(arch: str) -> str:
    inputs = {
        "arch": arch,
        "suite": images.DEBIAN_SUITE,
        "packages": PACKAGES,
        "excludes": images.DPKG_EXCLUDES,
        "spark": SPARK_VERSION,
        "py4j": PY4J_VERSION,
        "entrypoint": hashlib.sha256(ENTRYPOINT.read_bytes()).hexdigest(),
        "format": FORMAT_REVISION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def image_dir() -> Path:
    return build.cache_root() / f"spark-image-{inputs_key(build.go_arch())}"


def archive() -> Path:
    return image_dir() / ARCHIVE


def config(arch: str) -> images.ImageConfig:
    java_home = f"/usr/lib/jvm/java-17-openjdk-{arch}"
    return images.ImageConfig(
        entrypoint=("python3", f"/{ENTRYPOINT_IN_IMAGE}"),
        env=(
            images.DEFAULT_PATH,
            f"SPARK_HOME={SPARK_HOME}",
            f"JAVA_HOME={java_home}",
            "PYSPARK_PYTHON=python3",
        ),
        working_dir="/",
    )


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"command failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout}{proc.stderr}"
        )


def debian_layer(out: Path, arch: str, mirror: str | None) -> None:
    """Excluding manuals breaks openjdk's install script (it links into ``man1``) unless the
    folder exists before packages are unpacked: the setup hook makes it."""
    mmdebstrap = shutil.which("mmdebstrap")
    if not mmdebstrap:
        raise RuntimeError("mmdebstrap not found; run scripts/testbed-deps.sh")
    argv = [
        mmdebstrap,
        "--quiet",
        "--variant=essential",
        f"--architectures={arch}",
        f"--include={','.join(PACKAGES)}",
        "--aptopt=APT::Install-Recommends false",
        '--setup-hook=mkdir -p "$1/usr/share/man/man1"',
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in images.DPKG_EXCLUDES),
        images.DEBIAN_SUITE,
        str(out),
    ]
    if mirror:
        argv.append(mirror)
    _run(argv)


def wheels(into: Path) -> list[Path]:
    """pyspark's and py4j's wheels, through pip (its cache holds pyspark's built wheel)."""
    into.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "--no-input",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(into),
            f"pyspark=={SPARK_VERSION}",
            f"py4j=={PY4J_VERSION}",
        ]
    )
    return sorted(into.glob("*.whl"))


def _directory(tar: tarfile.TarFile, name: str, seen: set[str]) -> None:
    parts = name.split("/")
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth])
        if folder not in seen:
            seen.add(folder)
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.mtime = images.EPOCH
            tar.addfile(info)


def wheel_layer(out: Path, wheel_files: list[Path]) -> None:
    """The wheels' packages under Debian's ``/usr/local`` site folder, with their modes (the
    ``bin`` scripts are executable), and the entrypoint. A wheel's ``.data`` scripts are left
    out: Spark runs its scripts from ``SPARK_HOME``."""
    seen: set[str] = set()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for wheel in wheel_files:
            with zipfile.ZipFile(wheel) as source:
                for entry in source.infolist():
                    if entry.is_dir() or entry.filename.split("/", 1)[0].endswith(".data"):
                        continue
                    name = f"{SITE}/{entry.filename}"
                    _directory(tar, name.rsplit("/", 1)[0], seen)
                    info = tarfile.TarInfo(name)
                    info.size = entry.file_size
                    info.mode = 0o755 if (entry.external_attr >> 16) & 0o111 else 0o644
                    info.mtime = images.EPOCH
                    with source.open(entry) as data:
                        tar.addfile(info, data)
        _directory(tar, ENTRYPOINT_IN_IMAGE.rsplit("/", 1)[0], seen)
        info = tar.gettarinfo(str(ENTRYPOINT), arcname=ENTRYPOINT_IN_IMAGE)
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = 0o755
        info.mtime = images.EPOCH
        with ENTRYPOINT.open("rb") as handle:
            tar.addfile(info, handle)


def build_image(force: bool = False) -> Path:
    """The image's archive, built if missing under its own lock."""
    target = archive()
    if not force and target.is_file():
        _say(f"testbed spark image up to date in {target.parent}")
        return target
    root = image_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and target.is_file():
            return target
        work = root / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        arch = build.go_arch()
        mirror = os.environ.get("RUNPLANE_TESTBED_DEBIAN_MIRROR") or None
        timings: dict[str, float] = {}
        began = time.monotonic()
        debian = work / "debian.tar"
        debian_layer(debian, arch, mirror)
        timings["debian_s"] = round(time.monotonic() - began, 1)
        mark = time.monotonic()
        found = wheels(work / "wheels")
        timings["wheels_s"] = round(time.monotonic() - mark, 1)
        mark = time.monotonic()
        python = work / "pyspark.tar"
        wheel_layer(python, found)
        images.oci_archive(SPARK_IMAGE, [debian, python], target, config(arch), arch)
        timings["layers_s"] = round(time.monotonic() - mark, 1)
        shutil.rmtree(work, ignore_errors=True)
        record = {
            "image": SPARK_IMAGE,
            "steps_s": timings,
            "total_s": round(time.monotonic() - began, 1),
            "archive_bytes": target.stat().st_size,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        build.append_history(root, record)
        size = target.stat().st_size / 1e6
        _say(f"testbed spark image: {SPARK_IMAGE} {size:.0f} MB in {record['total_s']}s {timings}")
    return target


def _say(line: str) -> None:
    """Build progress, for CI's log."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    """``python -m testbed spark-image [--force]``: the archive's path once built."""
    _say(str(build_image(force="--force" in argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
