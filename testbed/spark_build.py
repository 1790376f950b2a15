"""Build the Kubeflow Spark Operator from its Go module, cached outside the repo.

``go install …@v2.5.2`` is refused (the module's go.mod has ``replace`` lines pinning every
``k8s.io/*`` module to one release), so a wrapper module requires the operator and copies that
``replace`` block; ``go build`` of ``cmd/operator`` then links the same dependencies its own
release does. The cache key is the operator's version and the toolchain, like helm's: bumping
Kubernetes leaves it be. The operator's CRDs come from the same module (``config/crd/bases``)
and are kept beside the binary, so the CRDs the tests install are the binary's own.

Only the standard library is used: ``python -m testbed build`` runs before any dependency.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from testbed import build

SPARK_OPERATOR_VERSION = os.environ.get("RUNPLANE_TESTBED_SPARK_OPERATOR_VERSION", "v2.5.2")
SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2"
#: The CRDs of the module: the controller watches all three kinds, so all are installed.
SPARK_CRDS = (
    "sparkoperator.k8s.io_sparkapplications.yaml",
    "sparkoperator.k8s.io_scheduledsparkapplications.yaml",
    "sparkoperator.k8s.io_sparkconnects.yaml",
)

_REPLACE_BLOCK = re.compile(r"^replace\s*\(\s*$(.*?)^\)\s*$", re.M | re.S)
_REPLACE_LINE = re.compile(r"^\s*replace\s+(\S+\s+=>\s+\S+(?:\s+\S+)?)\s*$", re.M)


def operator_dir() -> Path:
    return build.tool_dir("spark-operator", SPARK_OPERATOR_VERSION)


def operator_binary() -> Path:
    return operator_dir() / "bin" / "spark-operator"


def crd_dir() -> Path:
    return operator_dir() / "crds"


def replacements(gomod: str) -> list[str]:
    """The module's ``replace`` directives (``old => new version``), block or single lines."""
    found: list[str] = []
    for block in _REPLACE_BLOCK.findall(gomod):
        found += [line.strip() for line in block.splitlines() if "=>" in line]
    found += _REPLACE_LINE.findall(gomod)
    local = [line for line in found if line.split("=>", 1)[1].strip().startswith(".")]
    if local:
        raise RuntimeError(f"the operator's go.mod replaces modules with local paths: {local}")
    return found


def wrapper_gomod(upstream: str) -> str:
    go_line = re.search(r"^go\s+(\S+)", upstream, re.M)
    return "\n".join(
        [
            "module runplane.local/testbed/spark-operator",
            "",
            f"go {go_line.group(1) if go_line else '1.24'}",
            "",
            f"require {SPARK_OPERATOR_MODULE} {SPARK_OPERATOR_VERSION}",
            "",
            "replace (",
            *(f"\t{line}" for line in replacements(upstream)),
            ")",
            "",
        ]
    )


def build_operator(force: bool = False) -> Path:
    """Build the operator if missing, under its own lock (the Go build lock of a machine that
    shares its Go caches is the caller's); the binary's path."""
    return build.build_cached_binary(
        operator_dir(),
        operator_binary(),
        SPARK_OPERATOR_VERSION,
        _compile_operator,
        force,
        extra_files=tuple(crd_dir() / name for name in SPARK_CRDS),
    )


def _compile_operator(builder: build.Builder) -> None:
    """The binary into ``builder.out``; the module's CRDs straight into ``crd_dir()``, whole."""
    info = json.loads(
        builder.go("mod", "download", "-json", f"{SPARK_OPERATOR_MODULE}@{SPARK_OPERATOR_VERSION}")
    )
    mod = builder.module("spark-operator", wrapper_gomod(Path(info["GoMod"]).read_text()))
    package = f"{SPARK_OPERATOR_MODULE}/cmd/operator"
    builder.go("get", f"{package}@{SPARK_OPERATOR_VERSION}", cwd=mod)
    # as its own Makefile does: ``spark-operator version`` names the release
    version = "k8s.io/component-base/version"
    ldflags = (
        f"-s -w -X {version}.gitVersion={SPARK_OPERATOR_VERSION} -X {version}.gitTreeState=clean"
    )
    builder.go(
        "build",
        "-mod=mod",
        *build.COMPILE_FLAGS,
        f"-ldflags={ldflags}",
        "-o",
        str(builder.out / "spark-operator"),
        package,
        cwd=mod,
    )
    crds = operator_dir() / "crds.partial"
    shutil.rmtree(crds, ignore_errors=True)
    crds.mkdir()
    for name in SPARK_CRDS:
        shutil.copyfile(Path(info["Dir"]) / "config" / "crd" / "bases" / name, crds / name)
    shutil.rmtree(crd_dir(), ignore_errors=True)
    os.replace(crds, crd_dir())


def _say(line: str) -> None:
    """Build progress, for CI's log."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    _say(str(build_operator(force="--force" in sys.argv[1:])))
