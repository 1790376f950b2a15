#!/usr/bin/env bash
# The README's first command: set up, then run the example job on this machine (the embedded
# default) with explicit resources, and show the runs table.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== runplane run examples/train.py (1 CPU, 256Mi requested, 512Mi limit)"
runplane run examples/train.py --handler train --param epochs=5 --param learning_rate=0.2 \
    --cpu 1 --memory 256Mi --limit-cpu 1 --limit-memory 512Mi

echo "== the same job as the SDK runs it"
python examples/run_train.py

echo "== runplane runs"
runplane runs --limit 5
