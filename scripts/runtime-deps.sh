#!/usr/bin/env bash
# What the mpijob, dask and spark runtimes need on this machine (docs/runtimes.md); idempotent.
#
#   openmpi-bin, libopenmpi-dev  Open MPI's mpirun and library (mpijob: ranks, mpi4py)
#   default-jre-headless         the Java that pyspark's local mode runs (spark)
#   runplane[mpijob,dask,spark]  mpi4py, dask/distributed, pyspark from PyPI, into .venv
#
# Installs only what is missing: on a provisioned machine (or a second run) it makes no network
# call and takes well under a second. Needs root when a Debian package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

needed=(openmpi-bin libopenmpi-dev default-jre-headless)
missing=()
for pkg in "${needed[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "runtime deps: missing ${missing[*]}; install them as root:" >&2
        echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
    echo "runtime deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "runtime deps: Debian packages present (${needed[*]})"
fi

python=${PYTHON:-.venv/bin/python}
if "$python" -c 'import mpi4py, distributed, pyspark' 2>/dev/null; then
    echo "runtime deps: mpi4py, distributed and pyspark present"
else
    echo "runtime deps: installing runplane[mpijob,dask,spark]"
    "$python" -m pip install --quiet -e '.[mpijob,dask,spark]'
fi
