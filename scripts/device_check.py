"""Check the embedded default where CI cannot: NVIDIA GPUs, and a host's own cgroup layout.

No test may depend on a GPU (CI has none), and CI's machine has one cgroup layout, so what
``docs/local.md`` promises is checked here, by hand, on a machine that has GPUs (often a VM
whose agent delegates only some cgroup controllers): the devices ``nvidia-smi`` lists become the
node's ``nvidia.com/gpu``; a run granted GPUs sees exactly those devices through the CUDA driver
(not only in an environment variable); a run without GPUs sees none; grants are exclusive, so a
run asking for a GPU that is taken waits with the scheduler's reason and starts when it frees;
and the kernel holds a run to its memory and CPU limits with whatever this host delegates.

    python scripts/device_check.py         # exits 0 when every check holds, 1 otherwise

It prints one line per check and the figures behind it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

PROBE = '''
import ctypes
import os
import time


def probe(context, hold: float = 0.0):
    """What the CUDA driver shows this process: a device count and each device's name."""
    cuda = ctypes.CDLL("libcuda.so.1")
    status = cuda.cuInit(0)
    if status == 100:  # CUDA_ERROR_NO_DEVICE: none is visible to this process
        return {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "count": 0, "names": []}
    if status != 0:
        return {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "count": -status, "names": []}
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    names = []
    for ordinal in range(count.value):
        device = ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(device), ordinal)
        name = ctypes.create_string_buffer(128)
        cuda.cuDeviceGetName(name, 128, device)
        names.append(name.value.decode())
    time.sleep(hold)
    return {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "count": count.value,
            "names": names}
'''

SPIN = '''
import os
import time


def spin(context, seconds: float = 2.0):
    """Two processes busy for ``seconds``: a limit of half a core must hold them to it."""
    end = time.monotonic() + seconds
    child = os.fork()
    while time.monotonic() < end:
        pass
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    return {"seconds": seconds}
'''

HOG = '''
def hog(context):
    """Grows past its memory limit: the kernel must stop it there."""
    held = [bytearray(10 * 2**20) for _ in range(40)]
    return {"survived": len(held)}
'''


def main() -> int:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    print(f"nvidia-smi: {len(gpus)} GPU(s): {'; '.join(gpus)}")
    with tempfile.TemporaryDirectory(prefix="runplane-gpu-check-") as home:
        os.environ["RUNPLANE_LOCAL__HOME"] = home
        return run_checks(Path(home), len(gpus))


def run_checks(home: Path, gpu_count: int) -> int:
    import runplane
    from runplane.config import load_settings
    from runplane.runtimes.local.cgroups import Unavailable, open_hierarchy
    from runplane.runtimes.local.node import detect_gpus
    from runplane.service.embedded import EmbeddedService
    from runplane.spec.run_options import RunOptions

    failures: list[str] = []

    def check(what: str, holds: bool, figures: object) -> None:
        print(f"{'ok  ' if holds else 'FAIL'} {what}: {figures}")
        if not holds:
            failures.append(what)

    check("detected as the node's GPUs", len(detect_gpus()) == gpu_count, detect_gpus())
    try:
        hierarchy = open_hierarchy(1000)
        print(f"cgroups here: {hierarchy.version} beneath {hierarchy.where}, {hierarchy.enforced}")
        hierarchy.close()
    except Unavailable as why:
        print(f"cgroups here: none writable ({why})")
    code = home / "gpu_probe.py"
    code.write_text(textwrap.dedent(PROBE))
    (home / "hog.py").write_text(textwrap.dedent(HOG))
    (home / "spin.py").write_text(textwrap.dedent(SPIN))
    service = EmbeddedService(load_settings()).start()
    try:

        def function(gpus: int) -> runplane.Function:
            fn = runplane.code_to_function("gpu-probe", filename=str(code), handler="probe")
            return fn.with_limits(gpus=gpus) if gpus else fn

        def wait_for(condition: Callable[[], bool], timeout: float = 120) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if condition():
                    return True
                time.sleep(0.1)
            return False

        hog = runplane.code_to_function("hog", filename=str(home / "hog.py"), handler="hog")
        hogged = service.wait(service.submit(hog.with_limits(mem="200Mi")).uid, timeout=120)
        check(
            "a run above its memory limit is stopped at it (this machine's isolation)",
            hogged.reason == "OOMKilled" and hogged.peak_memory_bytes <= 200 * 2**20,
            f"{hogged.isolation}: {hogged.status_text}",
        )
        spin = runplane.code_to_function("spin", filename=str(home / "spin.py"), handler="spin")
        spun = service.wait(service.submit(spin.with_limits(cpu="500m")).uid, timeout=120)
        check(
            "two busy processes under a 500m limit use at most a core (2 s: <= 2.2 s of CPU)",
            spun.state == "completed" and spun.cpu_seconds <= 2.2,
            f"{spun.cpu_seconds:.2f} s of CPU in 2 s; {spun.isolation}",
        )
        started = time.monotonic()
        none = service.wait(service.submit(function(0)).uid, timeout=120)
        check(
            "a run without GPUs sees no device",
            none.state == "completed" and none.results.get("count") == 0,
            f"{none.state}, {none.results}, {time.monotonic() - started:.2f} s",
        )
        started = time.monotonic()
        one = service.wait(service.submit(function(1)).uid, timeout=120)
        check(
            "a run granted one GPU sees exactly that device",
            one.state == "completed"
            and one.results.get("count") == 1
            and one.results.get("visible") in {str(i) for i in range(gpu_count)},
            f"{one.state}, {one.results}, {time.monotonic() - started:.2f} s",
        )
        started = time.monotonic()
        every = service.wait(service.submit(function(gpu_count)).uid, timeout=120)
        check(
            f"a run granted all {gpu_count} GPUs sees all of them",
            every.state == "completed" and every.results.get("count") == gpu_count,
            f"{every.state}, {every.results}, {time.monotonic() - started:.2f} s",
        )
        holders = [
            service.submit(function(1), RunOptions(params={"hold": 6})).uid
            for _ in range(gpu_count)
        ]
        all_running = wait_for(
            lambda: all(service.store.get(uid).state == "running" for uid in holders)
        )
        waiting = service.submit(function(1)).uid
        reason_seen = wait_for(
            lambda: service.store.get(waiting).status_text.startswith("0/1 nodes are available")
        )
        record = service.store.get(waiting)
        check(
            "a run asking for a GPU that is taken waits with the reason",
            all_running and reason_seen and record.state == "pending",
            f"{record.state}: {record.status_text}",
        )
        held = [service.wait(uid, timeout=120) for uid in holders]
        visible = sorted(str(h.results.get("visible")) for h in held)
        check(
            "concurrent runs hold distinct devices",
            len(set(visible)) == gpu_count and all(h.state == "completed" for h in held),
            visible,
        )
        record = service.wait(waiting, timeout=120)
        check(
            "the waiting run starts and sees one device when a GPU frees",
            record.state == "completed" and record.results.get("count") == 1,
            f"{record.state}, {record.results}",
        )
    finally:
        service.close()
    print("all checks hold" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
