#!/usr/bin/env bash
# Install every test dependency and run the whole test suite.
# Debian packages: zookeeper and kcat (real peers for the tests), a Java runtime
# (ZooKeeper, Spark), man-db, zsh and fish (the man page and completion tests); then
# this package with its `test` extra; then ruff and pytest; then the PyInstaller binary
# is built and smoke-tested (scripts/smoke_binary.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
command -v kcat >/dev/null || need+=(kcat)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need+=(zookeeper)
command -v java >/dev/null || need+=(default-jre-headless)
command -v man >/dev/null || need+=(man-db)
command -v zsh >/dev/null || need+=(zsh)      # the zsh and fish completion tests
command -v fish >/dev/null || need+=(fish)
if [ ${#need[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

python3 -m pip install -q -e '.[test]'
python3 -m ruff check kafkactl tests bench scripts
python3 -m pytest -q "$@"

# The one-file binary: build it (once per run) and smoke-test it against itself
# (serve, produce, consume, dump-log). KAFKACTL_SKIP_BINARY=1 skips this step locally.
if [ "${KAFKACTL_SKIP_BINARY:-0}" != "1" ]; then
    ./scripts/smoke_binary.sh
fi
