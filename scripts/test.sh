#!/usr/bin/env bash
# The README's test command: sets up .venv if needed, builds (or reuses) the Kubernetes testbed,
# then runs what pre-commit runs (ruff lint and format, mypy, the import-layer contract) and the
# whole pytest suite with its coverage floor. Arguments go to pytest (e.g. a test file).
#
# On a cold machine the testbed's builds (Go modules, images) are most of the run. They need
# nothing but the Debian packages, so they go on beside the checks and every test that does not
# use the cluster, at the lowest CPU priority: those tests keep the machine as if alone, and the
# builds take the time the tests spend waiting. The cluster's tests (tests/integration) start once
# the control plane and the real node are built; the tools some of them use (helm, the operators,
# Kueue) build after those, beside the cluster's tests, which run the tests that need a tool last
# (testbed/build.py's TOOLS). With a warm cache the builds end within seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Every Debian package first: apt takes one lock, so nothing installs beside the builds.
# Open MPI, Java and the mpijob/dask/spark engines (docs/runtimes.md); instant when present.
bash scripts/runtime-deps.sh
# runc, mmdebstrap, iproute2, nftables, gcc: the real node's runtime and image builds.
bash scripts/testbed-deps.sh
# Debian's chromium for the web UI's browser tests (tests/ui fail, never skip, without it).
bash scripts/ui-deps.sh
# A real PostgreSQL for the service tests (they also run on SQLite).
eval "$(bash scripts/postgres.sh start)"

# The Kubernetes testbed binaries and images: built from Go modules once, cached outside the repo.
build_log="$(mktemp)"
nice -n 19 env PYTHON=.venv/bin/python bash testbed/ci.sh >"$build_log" 2>&1 &
build_pid=$!
finish() {
    kill "$build_pid" 2>/dev/null || true
    bash scripts/postgres.sh stop
    rm -f "$build_log"
}
trap finish EXIT
builds_done() {
    local started=$SECONDS
    if ! wait "$build_pid"; then
        cat "$build_log" >&2
        echo "the testbed did not build" >&2
        exit 1
    fi
    cat "$build_log"
    echo "testbed: waited $((SECONDS - started)) s for the builds after the tests beside them"
}
# The control plane's binaries and the real node's images: this waits on the locks of the builds
# going on beside (or builds what they have not started), and leaves the tools to them.
control_plane_built() {
    local started=$SECONDS
    if ! .venv/bin/python -m testbed build --no-tools; then
        cat "$build_log" >&2
        echo "the testbed's control plane did not build" >&2
        exit 1
    fi
    echo "testbed: waited $((SECONDS - started)) s for the control plane's builds after the tests beside them"
}

.venv/bin/ruff check src tests bench testbed scripts
.venv/bin/ruff format --check src tests bench testbed scripts
.venv/bin/mypy src/runplane testbed
.venv/bin/lint-imports

# With coverage of runplane in this process and in every process the tests start (runs, the
# CLI, runplane serve, the warm launcher and its forks), and its floor (pyproject.toml). The
# source is named by its absolute directory, so the scripts runs start (child.py, the fork
# server) are measured from any working directory; the data goes to one directory any run's
# user may write to (sticky, like /tmp), which the runs inherit as COVERAGE_FILE.
rm -rf .coverage-data && mkdir -m 1777 .coverage-data
export COVERAGE_FILE="$PWD/.coverage-data/.coverage"
cov=(--cov="$PWD/src/runplane")
if [ "$#" -gt 0 ]; then
    builds_done
    .venv/bin/pytest "${cov[@]}" "$@"
    exit
fi
# pyproject.toml's testpaths, the cluster's tests last; the floor applies to all parts together.
# Each part names its slowest tests: where a run's time goes (with the cache it must stay under
# an hour; from nothing it takes longer, docs/testing.md).
# The tests that need no cluster run two at a time (pytest-xdist, a file to a worker): each
# starts its own services, databases and runs, and most of a test's time is spent waiting on
# them, so one process left a core idle (about 29 min for these in one, 15 two at a time). The
# browser's tests run after them in one process: Playwright's sync API leaves its event loop
# marked running on the main thread, where a later test's asyncio.run() would fail.
.venv/bin/pytest "${cov[@]}" --cov-report= --cov-fail-under=0 --durations=25 -n 2 --dist loadfile \
    tests/unit tests/local tests/service tests/compat
.venv/bin/pytest "${cov[@]}" --cov-append --cov-report= --cov-fail-under=0 --durations=5 tests/ui
control_plane_built
.venv/bin/pytest "${cov[@]}" --cov-append --durations=15 tests/integration
builds_done
