"""A PostgreSQL image for the chart's built-in database, built offline into an OCI archive.

A node that cannot pull from a registry (the testbed's real node) still runs the chart's
default install: Debian's ``postgresql`` packages in an ``mmdebstrap`` root filesystem, as the
runplane image is made (testbed/service_image.py), with a small entrypoint that keeps the
contract of the PostgreSQL project's Docker image, the chart's default: ``POSTGRES_USER``,
``POSTGRES_PASSWORD`` and ``POSTGRES_DB`` make the database on a first start in an empty
``PGDATA``, and the server then listens on every address with password (SCRAM) logins.

The ``postgres`` user has uid and gid 999, the chart's ``postgresql.uid``; no cluster is made
at build time (the data lives on the pod's volume). The archive is cached outside the
repository under a hash of its inputs (the suite and its sources, the packages, the
entrypoint, the uid, this module's format): a warm build hashes them and returns.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from testbed import build as tb_build
from testbed import images, service_image
from testbed.service_image import Built

#: Debian 12's PostgreSQL; its binaries' directory goes first on the image's PATH.
MAJOR = 15
PACKAGES = (f"postgresql-{MAJOR}",)
NAME = f"runplane.local/postgresql:{MAJOR}-bookworm"
ARCHIVE = "postgresql.oci.tar"
UID = 999
BIN_DIR = f"/usr/lib/postgresql/{MAJOR}/bin"
ENTRYPOINT = "/usr/local/bin/runplane-postgresql"
#: Bump when the way the image is assembled changes, so cached archives are rebuilt.
FORMAT_REVISION = 2
CACHE_PREFIX = "postgresql-image-"
#: LLVM and the bitcode PostgreSQL compiles queries from (130 MB): only its JIT uses them, which
#: then stays off (the server finds no provider and says nothing), as the entrypoint also asks.
JIT_EXCLUDES = (
    "/usr/lib/*/libLLVM*",
    f"/usr/lib/postgresql/{MAJOR}/lib/bitcode/*",
    f"/usr/lib/postgresql/{MAJOR}/lib/llvmjit*",
)
BUILD_FILE = "build.json"

#: The Docker image's first-start contract, in POSIX sh: initdb with the user and password
#: given, the database made in single-user mode (no socket is ever open without a password
#: on it), then the server in the foreground as PID 1, so SIGTERM is a clean shutdown.
ENTRYPOINT_SCRIPT = f"""#!/bin/sh
set -eu
: "${{PGDATA:=/var/lib/postgresql/data}}"
: "${{POSTGRES_USER:=postgres}}"
: "${{POSTGRES_DB:=$POSTGRES_USER}}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${{POSTGRES_PASSWORD:-}}" ]; then
        echo "runplane-postgresql: POSTGRES_PASSWORD is empty; set it (a Secret)" >&2
        exit 1
    fi
    mkdir -p "$PGDATA"
    chmod 700 "$PGDATA"
    pwfile="$(mktemp)"
    printf '%s\\n' "$POSTGRES_PASSWORD" >"$pwfile"
    {BIN_DIR}/initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \\
        --encoding=UTF8 --locale=C.UTF-8 --auth-local=scram-sha-256 --auth-host=scram-sha-256
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
        db="$(printf '%s' "$POSTGRES_DB" | sed 's/"/""/g')"
        echo "CREATE DATABASE \\"$db\\"" |
            {BIN_DIR}/postgres --single -D "$PGDATA" postgres >/dev/null
    fi
fi
exec {BIN_DIR}/postgres -D "$PGDATA" -c listen_addresses='*' -c jit=off \\
    -c unix_socket_directories=/var/run/postgresql "$@"
"""


def inputs_key(arch: str) -> str:
    inputs = {
        "arch": arch,
        "name": NAME,
        "suite": images.DEBIAN_SUITE,
        "sources": service_image.DEBIAN_SOURCES,
        "packages": PACKAGES,
        "excludes": (*service_image.DPKG_EXCLUDES, *JIT_EXCLUDES),
        "entrypoint": ENTRYPOINT_SCRIPT,
        "uid": UID,
        "format": FORMAT_REVISION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def image_dir(arch: str | None = None) -> Path:
    return tb_build.cache_root() / f"{CACHE_PREFIX}{inputs_key(arch or tb_build.go_arch())}"


def image_config() -> images.ImageConfig:
    return images.ImageConfig(
        entrypoint=(ENTRYPOINT,),
        env=(
            f"PATH={BIN_DIR}:" + images.DEFAULT_PATH.removeprefix("PATH="),
            "PGDATA=/var/lib/postgresql/data",
            "LANG=C.UTF-8",
        ),
        user=f"{UID}:{UID}",
        exposed_ports=("5432/tcp",),
        labels=(("org.opencontainers.image.title", "postgresql"),),
        # PostgreSQL's fast shutdown, as the official image's: SIGTERM is its "smart" one,
        # which waits for every client (the service's pooled connections) to leave.
        stop_signal="SIGINT",
    )


def mmdebstrap_argv(mmdebstrap: str, rootfs: Path, arch: str, mirror: str | None) -> list[str]:
    """Debian's PostgreSQL server. The postgres user is made before the packages (uid 999),
    which their maintainer scripts then keep; their default cluster is never made."""
    user = (
        f"echo 'postgres:x:{UID}:{UID}:PostgreSQL administrator:/var/lib/postgresql:/bin/sh'"
        ' >>"$1/etc/passwd"'
    )
    group = f"echo 'postgres:x:{UID}:' >>\"$1/etc/group\""
    no_cluster = (
        'mkdir -p "$1/etc/postgresql-common/createcluster.d" && '
        "echo 'create_main_cluster = false' "
        '>"$1/etc/postgresql-common/createcluster.d/runplane.conf"'
    )
    entrypoint = rootfs.parent / "entrypoint.sh"
    customize = [
        f"upload {entrypoint} {ENTRYPOINT}",
        f'chmod 755 "$1{ENTRYPOINT}"',
        f'rm -rf "$1/etc/postgresql/{MAJOR}" "$1/var/lib/postgresql/{MAJOR}"',
        f'mkdir -p "$1/var/lib/postgresql/data" && chown {UID}:{UID} "$1/var/lib/postgresql/data"',
    ]
    argv = [
        mmdebstrap,
        "--quiet",
        "--mode=root",
        "--variant=essential",
        f"--hook-dir={service_image.MERGED_USR_HOOKS}",
        f"--architectures={arch}",
        f"--include={','.join(PACKAGES)}",
        "--aptopt=APT::Install-Recommends false",
        *(
            f"--dpkgopt=path-exclude={pattern}"
            for pattern in (*service_image.DPKG_EXCLUDES, *JIT_EXCLUDES)
        ),
        *(f"--essential-hook={hook}" for hook in (user, group, no_cluster)),
        *(f"--customize-hook={hook}" for hook in customize),
        images.DEBIAN_SUITE,
        str(rootfs),
    ]
    return [*argv, mirror] if mirror else [*argv, *service_image.DEBIAN_SOURCES]


def build(force: bool = False, mirror: str | None = None) -> Built:
    """The archive for this module's inputs, built if the cache has none."""
    began = time.monotonic()
    arch = tb_build.go_arch()
    target = image_dir(arch)
    archive = target / ARCHIVE
    with service_image._locked(target):
        if archive.is_file() and not force:
            record = json.loads((target / BUILD_FILE).read_text())
            return Built(NAME, archive, archive.stat().st_size, record["total_s"], True)
        if os.geteuid() != 0:
            raise RuntimeError("the image build needs root (mmdebstrap's root mode, chroot)")
        mmdebstrap = shutil.which("mmdebstrap")
        if not mmdebstrap:
            raise RuntimeError("mmdebstrap not found; install it (scripts/testbed-deps.sh)")
        mirror = mirror or os.environ.get("RUNPLANE_TESTBED_DEBIAN_MIRROR") or None
        print(f"{NAME}: Debian {images.DEBIAN_SUITE}'s {', '.join(PACKAGES)}", flush=True)
        work = target / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "entrypoint.sh").write_text(ENTRYPOINT_SCRIPT)
        rootfs = work / "rootfs"
        service_image._run(mmdebstrap_argv(mmdebstrap, rootfs, arch, mirror), "mmdebstrap")
        layer = work / "layer.tar"
        service_image._tar(rootfs, layer)
        images.oci_archive(NAME, [layer], archive, image_config(), arch)
        total = round(time.monotonic() - began, 1)
        record = {"name": NAME, "bytes": archive.stat().st_size, "total_s": total}
        (target / BUILD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    service_image._prune(CACHE_PREFIX, keep=target)
    return Built(NAME, archive, archive.stat().st_size, total, False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m testbed postgresql-image",
        description="Build the chart's PostgreSQL image into an OCI archive (docs/install.md).",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.add_argument("--out", type=Path, help="also copy the archive into this directory")
    parser.add_argument(
        "--print-archive", action="store_true", help="print the cached archive's path only"
    )
    args = parser.parse_args(argv)
    try:
        built = build(force=args.force)
    except RuntimeError as error:
        print(f"postgresql image: {error}", file=sys.stderr)
        return 1
    return service_image.shown(built, args.out, args.print_archive)
