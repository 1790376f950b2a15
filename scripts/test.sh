#!/usr/bin/env bash
# The README's test command: sets up .venv if needed, builds (or reuses) the Kubernetes testbed,
# then runs what pre-commit runs (ruff lint and format, mypy, the import-layer contract) and the
# whole pytest suite with its coverage floor.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Open MPI, Java and the mpijob/dask/spark engines (docs/runtimes.md); instant when present.
bash scripts/runtime-deps.sh
.venv/bin/ruff check src tests bench testbed scripts
.venv/bin/ruff format --check src tests bench testbed scripts
.venv/bin/mypy src/runplane testbed
.venv/bin/lint-imports
# The Kubernetes testbed binaries: built from Go modules once, cached outside the repo.
PYTHON=.venv/bin/python bash testbed/ci.sh
# Debian's chromium for the web UI's browser tests (tests/ui fail, never skip, without it).
bash scripts/ui-deps.sh
# A real PostgreSQL for the service tests (they also run on SQLite).
eval "$(bash scripts/postgres.sh start)"
trap 'bash scripts/postgres.sh stop' EXIT
# With coverage of runplane in this process and in every process the tests start (runs, the
# CLI, runplane serve, the warm launcher and its forks), and its floor (pyproject.toml). The
# source is named by its absolute directory, so the scripts runs start (child.py, the fork
# server) are measured from any working directory; the data goes to one directory any run's
# user may write to (sticky, like /tmp), which the runs inherit as COVERAGE_FILE.
rm -rf .coverage-data && mkdir -m 1777 .coverage-data
export COVERAGE_FILE="$PWD/.coverage-data/.coverage"
.venv/bin/pytest --cov="$PWD/src/runplane" "$@"
