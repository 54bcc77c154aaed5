#!/usr/bin/env bash
# Install the test clients that are not Python packages: kafkajs (npm) into
# tests/compat/node/node_modules, for tests/compat/test_kafkajs.py. Needs node and npm
# (Debian: nodejs, npm); without them this prints why and exits 0, and those tests skip
# with the reason printed. Safe to run again: npm keeps an installed, matching version.
set -euo pipefail
cd "$(dirname "$0")/.."

KAFKAJS_VERSION="2.2.4"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install_test_clients: node/npm not found; the kafkajs tests will skip" >&2
    exit 0
fi
npm install --prefix tests/compat/node --save-exact --no-package-lock --no-audit --no-fund --loglevel=error \
    "kafkajs@${KAFKAJS_VERSION}"
