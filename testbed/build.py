"""Build the testbed's control-plane binaries from Go modules, cached outside the repo.

Why from source: the machine may only reach the Go module proxy (no release downloads, no
Docker), so every binary is compiled from its published module. Kubernetes staging modules
are pinned by replacing each ``k8s.io/<name>`` with its published ``v0.X.Y`` tag; the list is
read from the release's own ``go.mod`` so a version bump never needs a hand-edited list.

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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

K8S_VERSION = os.environ.get("RUNPLANE_TESTBED_K8S_VERSION", "v1.36.3")
ETCD_VERSION = os.environ.get("RUNPLANE_TESTBED_ETCD_VERSION", "v3.6.16")
KWOK_VERSION = os.environ.get("RUNPLANE_TESTBED_KWOK_VERSION", "v0.8.0")

K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
BINARIES = ("etcd", *K8S_COMMANDS, "kwok")
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


def cache_key() -> str:
    """Every input that changes the output is in the key, so stale binaries are never reused."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return (
        f"k8s-{K8S_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}"
        f"_{go_version()}_{sys.platform}-{arch}"
    )


def key_dir() -> Path:
    return cache_root() / cache_key()


def bin_dir() -> Path:
    return key_dir() / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    where = directory or bin_dir()
    return [name for name in BINARIES if not os.access(where / name, os.X_OK)]


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
    """Runs the Go commands with a controlled environment and records how long each took."""

    workdir: Path
    out: Path
    timings: dict[str, float]

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
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env={**self.env(), **(env or {})},
            check=False,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}")
        return proc.stdout

    def step(self, name: str, func: Callable[[], None]) -> None:
        print(f"==> building {name}", flush=True)
        start = time.monotonic()
        func()
        took = time.monotonic() - start
        self.timings[name] = round(took, 1)
        print(f"==> {name} built in {took:.1f}s", flush=True)

    def module(self, name: str, gomod: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        (path / "go.mod").write_text(gomod)
        (path / "go.sum").unlink(missing_ok=True)
        return path

    def kubernetes(self) -> None:
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
        pkgs = [f"k8s.io/kubernetes/cmd/{cmd}" for cmd in K8S_COMMANDS]
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
            "-trimpath",
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
            "-trimpath",
            f"-ldflags={ldflags}",
            "-o",
            str(self.out / "etcd"),
            pkg,
            cwd=mod,
        )

    def kwok(self) -> None:
        self.go(
            "install",
            "-trimpath",
            "-ldflags=-s -w",
            f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
            env={"GOBIN": str(self.out)},
        )


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build(force: bool = False) -> Path:
    """Build whatever is missing for the current key; a complete cache costs one ``go env``.

    An exclusive lock serialises concurrent callers (parallel CI jobs, pytest-xdist workers):
    the second waits, then finds the cache complete.
    """
    target = bin_dir()
    if not force and not missing_binaries(target):
        print(f"testbed binaries up to date in {target}", flush=True)
        return target
    key_dir().mkdir(parents=True, exist_ok=True)
    with (key_dir() / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(target, force)


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
    if "etcd" in todo:
        builder.step(f"etcd {ETCD_VERSION}", builder.etcd)
    if any(cmd in todo for cmd in K8S_COMMANDS):
        builder.step(f"kubernetes {K8S_VERSION}", builder.kubernetes)
    if "kwok" in todo:
        builder.step(f"kwok {KWOK_VERSION}", builder.kwok)
    for produced in partial.iterdir():
        # rename is atomic, so a concurrent reader never sees a half-written binary
        os.replace(produced, target / produced.name)
    partial.rmdir()
    total = round(time.monotonic() - start, 1)
    record: dict[str, Any] = {
        "key": cache_key(),
        "built": list(todo),
        "steps_s": timings,
        "total_s": total,
        "bin_bytes": du(target),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    history_path = root / TIMINGS_FILE
    history = json.loads(history_path.read_text()) if history_path.exists() else []
    history.append(record)
    history_path.write_text(json.dumps(history, indent=2) + "\n")
    print(f"testbed build: done in {total:.1f}s ({record['bin_bytes'] / 1e6:.0f} MB of binaries)")
    still = missing_binaries(target)
    if still:
        raise RuntimeError(f"build finished but binaries are missing: {still}")
    return target


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if "--print-bin-dir" in args:
        print(bin_dir())
        return 0
    build(force="--force" in args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
