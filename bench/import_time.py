"""How long ``import runplane`` takes in a fresh interpreter (goal: at most 150 ms).

Also measures the first real use (``new_function`` + ``render``), which loads pydantic and the
renderer, and, when a virtual environment with mlrun is given, ``import mlrun`` in the same run
for the ratio.

    python bench/import_time.py [--runs 20] [--mlrun-python PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import fresh_interpreter_seconds, header, summary

FIRST_USE = (
    "import runplane\n"
    "fn = runplane.new_function('training').with_requests(mem='1G', cpu=1)\n"
    "runplane.render(fn)"
)
DEFAULT_MLRUN = Path.home() / ".cache" / "runplane-bench" / "mlrun-venv" / "bin" / "python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--mlrun-python", type=Path, default=DEFAULT_MLRUN)
    args = parser.parse_args()
    header("import time")
    ours = fresh_interpreter_seconds(sys.executable, "import runplane", args.runs)
    print(f"import runplane:                 {summary(ours)}")
    first = fresh_interpreter_seconds(sys.executable, FIRST_USE, args.runs)
    print(f"import + new_function + render:  {summary(first)}")
    if args.mlrun_python.exists():
        theirs = fresh_interpreter_seconds(str(args.mlrun_python), "import mlrun", args.runs)
        print(f"import mlrun:                    {summary(theirs)}")
        ratio = statistics.median(theirs) / statistics.median(ours)
        first_ratio = statistics.median(theirs) / statistics.median(first)
        print(f"ratio mlrun/runplane: import {ratio:.0f}x, against first use {first_ratio:.1f}x")
    else:
        print(
            f"import mlrun: not measured ({args.mlrun_python} missing; "
            "python -m venv it and pip install mlrun==1.12.1)"
        )
    goal = statistics.median(ours) * 1000 <= 150
    print(f"goal import <= 150 ms: {'met' if goal else 'MISSED'}")


if __name__ == "__main__":
    main()
