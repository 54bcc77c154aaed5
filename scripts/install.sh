#!/usr/bin/env bash
# Install kafkactl from this checkout into a virtual environment, .venv in the checkout
# (KAFKACTL_VENV=DIR picks another), never into the system's python: Debian's python3 is
# externally managed (PEP 668). The environment is made by python3 on the PATH (PYTHON=...
# picks another, 3.11 or newer); on Debian without python3-venv, that package is installed
# first with apt-get (with sudo when not root). The compiled kernels (Cython) are built on
# the way: a C compiler and Python's headers are installed with apt-get when missing (gcc,
# python3-dev); without them kafkactl installs as pure Python, slower, and says so
# (KAFKACTL_NO_EXTENSIONS=1 skips them). Running it again reuses the environment and skips
# the install when pyproject.toml, setup.py and the kernels' sources have not changed.
#
#   ./scripts/install.sh && .venv/bin/kafkactl serve
set -euo pipefail
called_from="$PWD"
cd "$(dirname "$0")/.."
SCRIPT_NAME=install.sh
# shellcheck source=scripts/venv.sh
. scripts/venv.sh

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi
if [ $# -gt 0 ]; then
    say "takes no arguments (got: $*); environment: KAFKACTL_VENV=DIR, PYTHON=python3.x"
    exit 2
fi

on_exit() {
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        say "FAILED (exit $rc): kafkactl is not installed; nothing was installed into the system's python"
    fi
}
trap on_exit EXIT

ensure_venv
ensure_build_tools
venv_install .
bin="$KAFKACTL_VENV/bin"
kernels="$("$bin/kafkactl" --version | sed -n 2p)"
say "$kernels"
# the command as the caller types it: relative only from the checkout itself
shown="$bin"
[ "$KAFKACTL_VENV" = "$PWD/.venv" ] && [ "$called_from" = "$PWD" ] && shown=".venv/bin"
say "installed: run '$shown/kafkactl serve' (or put $KAFKACTL_VENV/bin on your PATH)"
