#!/usr/bin/env bash
# The README's test command: sets up .venv if needed, then ruff (lint and format) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy src/runplane
.venv/bin/pytest "$@"
