"""How much MLRun user code runs unchanged: the corpus in tests/compat/corpus (MLRun
documentation snippets about functions, resources, runs and projects, and, named t*, MLRun's
own client-side unit tests of function configuration) run with runplane, the imports changed
and nothing else, and with MLRun 1.12 itself (no MLRun service, as on a laptop: local runs
work, remote ones need a cluster).

A snippet counts as running when its process exits 0 within the time limit; the snippets
assert what MLRun's documentation (or MLRun's test) says they produce, so a wrong answer fails
too. ``--prefix t`` runs MLRun's own tests only.

    python bench/mlrun_corpus.py [--mlrun-python PATH] [--only NAME] [--prefix P] [--timeout 180]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "compat" / "corpus"
DEFAULT_MLRUN = Path.home() / ".cache" / "runplane-bench" / "mlrun-venv" / "bin" / "python"

_IMPORTS = [
    (re.compile(r"\bimport mlrun\b(?![.\w])"), "import runplane as mlrun"),
    (re.compile(r"\bimport mlrun\."), "import runplane."),
    (re.compile(r"\bfrom mlrun\b"), "from runplane"),
]


def with_runplane(source: str) -> str:
    """``source`` with its imports of mlrun made imports of runplane, and nothing else:
    ``import mlrun`` becomes ``import runplane as mlrun`` (also in the code a snippet writes
    to files, which is the user's code too)."""
    for pattern, replacement in _IMPORTS:
        source = pattern.sub(replacement, source)
    return source


@dataclass(frozen=True)
class Outcome:
    name: str
    ok: bool
    seconds: float
    last_line: str


def run_snippet(
    python: str, path: Path, source: str, env: dict[str, str], timeout: float
) -> Outcome:
    """Run ``source`` as ``path.name`` in a fresh directory with ``python``."""
    with tempfile.TemporaryDirectory(prefix="corpus-") as folder:
        work = Path(folder)
        (work / path.name).write_text(source)
        environment = {**env, "HOME": str(work / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
        environment["RUNPLANE_LOCAL__HOME"] = str(work / "runplane-home")
        started = time.monotonic()
        try:
            done = subprocess.run(
                [python, path.name],
                cwd=work,
                env=environment,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return Outcome(path.stem, False, time.monotonic() - started, "timed out")
        elapsed = time.monotonic() - started
        lines = [line for line in (done.stderr + done.stdout).strip().splitlines() if line]
        last = lines[-1] if lines and done.returncode else ""
        return Outcome(path.stem, done.returncode == 0, elapsed, last[:160])


def base_env() -> dict[str, str]:
    """The caller's environment without runplane's or MLRun's own settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("RUNPLANE_", "MLRUN_", "V3IO_"))
    }
    env["RUNPLANE_CONFIG"] = os.devnull
    return env


#: MLRun's tests of function configuration (tests/runtimes/test_run.py, test_pod.py,
#: tests/api/runtimes/test_kubejob.py, tests/run/test_run.py) that are not in the corpus, and
#: why: they need MLRun's API, its DB, Kubernetes, or mocks of MLRun's internals.
NOT_PORTED = {
    "runtimes/test_pod.py::test_runtimes_inheritance": "compares the keyword arguments of "
    "MLRun's internal spec and runtime classes (DaskSpec, NuclioSpec, MPIResourceSpec...)",
    "api/runtimes/test_kubejob.py (the other 40 tests)": "run the function through MLRun's API "
    "server with its DB session and a mocked Kubernetes client, asserting on the pod it creates",
    "run/test_run.py::test_noparams, test_with_params, test_local_runtime_with_kwargs, "
    "test_is_watchable, test_local_runtime_failure_before_executing_the_function_code": "need "
    "the rundb_mock fixture (a mock of MLRun's run DB)",
    "run/test_run.py::test_failed_schedule_not_creating_run": "mocks MLRun's DB and its "
    "function's store_run with MagicMock",
    "run/test_run.py::test_verify_run_output_uri, test_verify_tag_in_output_for_relogged_"
    "artifact": "read artifact store:// URIs from MLRun's DB (they fail on MLRun 1.12 without "
    "a DB too)",
    "run/test_run.py::test_handler_project, test_local_runtime, test_local_runtime_hyper, "
    "test_local_handler, test_local_args, test_args_integrity": "run files of MLRun's "
    "examples/ and tests/ directories (training.py, no_ctx.py) with MLRun's artifact paths",
    "run/test_run.py::test_with_params_s3": "needs S3 credentials",
    "run/test_run.py::test_get_or_create_ctx_run_kind_exists_in_mlrun_exec_config": "sets "
    "MLRUN_EXEC_CONFIG, the way MLRun hands a run to its own process",
    "run/test_run.py::test_code_to_function_file_include_invalid_handler_name_for_nuclio_mlrun_"
    "run_kind": "kind nuclio:mlrun (Nuclio) is not part of runplane",
}


def snippets(only: str = "", prefix: str = "") -> list[Path]:
    return [
        path
        for path in sorted(CORPUS.glob("*.py"))
        if only in path.stem and path.stem.startswith(prefix)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlrun-python", type=Path, default=DEFAULT_MLRUN)
    parser.add_argument("--only", default="")
    parser.add_argument("--prefix", default="", help="t: MLRun's own tests only")
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    env = base_env()
    paths = snippets(args.only, args.prefix)
    have_mlrun = args.mlrun_python.exists()
    print(
        f"corpus: {len(paths)} snippets of MLRun user code: its documentation's examples and "
        f"its own tests ({CORPUS.relative_to(ROOT)})"
    )
    ours: list[Outcome] = []
    theirs: list[Outcome] = []
    for path in paths:
        source = path.read_text()
        ours.append(run_snippet(sys.executable, path, with_runplane(source), env, args.timeout))
        if have_mlrun:
            theirs.append(run_snippet(str(args.mlrun_python), path, source, env, args.timeout))
        mark = "ok " if ours[-1].ok else "ERR"
        other = ("ok " if theirs[-1].ok else "ERR") if have_mlrun else "-"
        why = ours[-1].last_line or (theirs[-1].last_line if have_mlrun else "")
        print(f"  {path.stem:<40} runplane {mark}  mlrun {other}  {why}")
    passed = sum(o.ok for o in ours)
    print(f"runplane (import changed only): {passed}/{len(paths)} run")
    if have_mlrun:
        print(f"mlrun 1.12 (unchanged):         {sum(o.ok for o in theirs)}/{len(paths)} run")
        both = sum(a.ok and b.ok for a, b in zip(ours, theirs, strict=True))
        print(
            f"both: {both}; runplane only: {passed - both}; mlrun only: "
            f"{sum(b.ok for b in theirs) - both}"
        )
        for a, b in zip(ours, theirs, strict=True):
            if b.ok and not a.ok:
                print(f"  mlrun runs, runplane does not: {a.name}: {a.last_line}")
    else:
        print(
            f"mlrun: not measured ({args.mlrun_python} missing; python -m venv it and "
            "pip install 'mlrun==1.12.*')"
        )

    if args.prefix == "t" or not args.prefix:
        print("MLRun's tests not in the corpus (not client-side):")
        for test, why in NOT_PORTED.items():
            print(f"  {test}: {why}")


if __name__ == "__main__":
    main()
