#!/usr/bin/env bash
# Debian's chromium, which the web UI's browser tests drive through Playwright (tests/ui;
# docs/ui.md). Playwright's own browser download is never used. Idempotent: a machine that has
# it makes no network call. Needs root when it is missing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "ui deps: chromium present ($(chromium --version 2>/dev/null | head -1))"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ui deps: chromium is missing; install it as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends chromium" >&2
    exit 1
fi
echo "ui deps: installing chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium
