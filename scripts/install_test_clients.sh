#!/usr/bin/env bash
# Install the test clients that are not Python packages, for tests/compat/:
#   * kafkajs (npm, pinned below) into tests/compat/node/node_modules (test_kafkajs.py);
#   * Go and Sarama from Debian (golang-go, golang-github-shopify-sarama-dev), which
#     test_sarama.py builds its probe against, offline (GOPATH mode).
# A client whose installer is missing here is skipped with the reason printed; so do its
# tests. KAFKACTL_SKIP_GO=1 skips the Go part (a large download). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

KAFKAJS_VERSION="2.2.4"

if command -v node >/dev/null && command -v npm >/dev/null; then
    npm install --prefix tests/compat/node --save-exact --no-package-lock --no-audit \
        --no-fund --loglevel=error "kafkajs@${KAFKAJS_VERSION}"
else
    echo "install_test_clients: node/npm not found; the kafkajs tests will skip" >&2
fi

if [ "${KAFKACTL_SKIP_GO:-0}" != "1" ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    need=()
    command -v go >/dev/null || need+=(golang-go)
    [ -d /usr/share/gocode/src/github.com/Shopify/sarama ] \
        || need+=(golang-github-shopify-sarama-dev)
    if [ ${#need[@]} -gt 0 ]; then
        if command -v apt-get >/dev/null; then
            $SUDO apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
        else
            echo "install_test_clients: no apt-get; the Sarama tests will skip" >&2
        fi
    fi
fi
