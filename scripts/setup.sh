#!/usr/bin/env bash
# Creates .venv with runplane (editable) and its test tools; a no-op when already current.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
stamp="$venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -e '.[test]'
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
