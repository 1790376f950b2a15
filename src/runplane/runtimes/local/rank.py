"""One rank of an mpijob here: started by ``mpirun`` as ``python -m runplane.runtimes.local.rank
RUN_DIR``, it takes its share of the run's cores and GPUs and calls the handler.

The handler's ``context`` knows ``rank`` and ``world_size`` (from Open MPI's variables); rank 0
records the results (``context.is_logging_worker()``), and any rank's failure is reported with
its rank. ``mpirun`` ends the other ranks when one fails.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def share(items: list[str], rank: int, size: int) -> list[str]:
    """Rank ``rank``'s equal share of ``items`` (all of them when there are fewer than ranks)."""
    each = len(items) // size
    return items[rank * each : (rank + 1) * each] if each else items


def main(run_dir: Path) -> int:
    os.umask(0o077)
    if sys.platform.startswith("linux"):  # ends with mpirun, as ranks do
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    from runplane.bootstrap import Context, Invocation, call_handler, rank_and_size

    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    rank, size = rank_and_size(os.environ)
    cores = share([str(c) for c in spec.get("cpu_ids") or []], rank, size)
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, [int(c) for c in cores])
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    if gpus:
        mine = ",".join(share(gpus, rank, size))
        os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["NVIDIA_VISIBLE_DEVICES"] = mine
    os.chdir(run_dir / "work")
    if spec.get("source_dir"):
        sys.path.insert(0, spec["source_dir"])
    invocation = Invocation.from_json(spec["invocation"])
    return call_handler(Context(invocation, run_dir, spec["mounts"]), invocation)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
