# shellcheck shell=bash
# The project's virtual environment, shared by scripts/install.sh and scripts/test.sh
# (sourced, from the checkout's root, with SCRIPT_NAME set).
#
# Every pip call of these scripts goes through venv_pip, i.e. through the virtual
# environment's own python: Debian's python3 is externally managed (PEP 668) and is never
# installed into. The environment is made by python3 on the PATH (PYTHON=... picks another);
# when that python cannot make one (Debian without python3-venv), python3-venv is installed
# with apt-get first (with sudo when not root).
#
#   KAFKACTL_VENV   the environment's directory (default: .venv in the checkout)
#   PYTHON          the interpreter that makes it (default: python3; 3.11 or newer)

KAFKACTL_VENV="${KAFKACTL_VENV:-.venv}"
case "$KAFKACTL_VENV" in
    /*) ;;
    *) KAFKACTL_VENV="$PWD/$KAFKACTL_VENV" ;;
esac
VENV_PY="$KAFKACTL_VENV/bin/python"

say() { echo "${SCRIPT_NAME:-kafkactl}: $*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        say "root is needed for: $* (and there is no sudo)"
        return 1
    fi
}

# apt_install PACKAGE...: Debian packages, non-interactively, without their recommended
# packages (for the test dependencies: 136 packages, ~300 MB, prometheus-node-exporter among them).
apt_install() {
    if ! command -v apt-get >/dev/null; then
        say "cannot install $* without apt-get: install them with your system's package manager"
        return 1
    fi
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
        say "root is needed to install the Debian packages $* (and there is no sudo): install them as root, then run this again"
        return 1
    fi
    say "installing Debian packages: $*"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# base_python: print the interpreter that makes the environment, or say why there is none.
base_python() {
    local py="${PYTHON:-python3}"
    if ! command -v "$py" >/dev/null; then
        say "no '$py' on the PATH: install Python 3.11 or newer (Debian: apt-get install python3)"
        return 1
    fi
    if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        say "'$py' is $("$py" -V 2>&1); kafkactl needs Python 3.11 or newer (PYTHON=/path/to/python3.11)"
        return 1
    fi
    command -v "$py"
}

# venv_usable: the environment exists, is a virtual environment and has pip.
venv_usable() {
    [ -x "$VENV_PY" ] \
        && "$VENV_PY" -c 'import sys; sys.exit(sys.version_info < (3, 11) or sys.prefix == sys.base_prefix)' \
            2>/dev/null \
        && venv_pip --version >/dev/null 2>&1
}

# ensure_venv: reuse the environment when it works, else (re)make it.
ensure_venv() {
    venv_usable && return 0
    local py
    py="$(base_python)" || return 1
    if [ -e "$KAFKACTL_VENV" ]; then
        if [ ! -f "$KAFKACTL_VENV/pyvenv.cfg" ]; then
            say "$KAFKACTL_VENV exists and is not a virtual environment: move it away or set KAFKACTL_VENV"
            return 1
        fi
        say "$KAFKACTL_VENV is not usable (no python or no pip in it): making it again"
        rm -rf "$KAFKACTL_VENV"
    fi
    if ! "$py" -c 'import ensurepip' 2>/dev/null; then
        # Debian's python3 without the python3-venv package: `python3 -m venv` would fail.
        say "$py cannot make a virtual environment (no ensurepip): installing python3-venv"
        apt_install python3-venv || return 1
    fi
    say "making the virtual environment $KAFKACTL_VENV with $py ($("$py" -V 2>&1))"
    if ! "$py" -m venv "$KAFKACTL_VENV"; then
        [ -f "$KAFKACTL_VENV/pyvenv.cfg" ] && rm -rf "$KAFKACTL_VENV"
        say "'$py -m venv $KAFKACTL_VENV' failed (above)"
        return 1
    fi
}

venv_pip() { "$VENV_PY" -m pip "$@"; }

# The editable install's mode (setuptools' editable_mode). "compat" puts the checkout itself
# on the environment's sys.path (a .pth file), as `setup.py develop` did: Spark 4 discovers
# Python data sources with pkgutil.iter_modules() (top-level modules named pyspark_*,
# SPARK-45917), which sees pyspark_kafkactl there. The default mode ("lenient") imports the
# checkout's packages through an import hook that iter_modules() cannot see, and
# spark.read.format("kafkactl") fails with DATA_SOURCE_NOT_FOUND unless register(spark) is
# called. Either way, edited and new sources are used without a reinstall.
EDITABLE_MODE=compat

# install_digest: what an install depends on: pyproject.toml (the dependencies and the
# entry point), kafkactl/__init__.py (the version), setup.py and the compiled kernels'
# sources (kafkactl/*/*.pyx: the editable install compiles them in place), whether the
# kernels can be built (the build tools missing, KAFKACTL_NO_EXTENSIONS: a pure-Python
# install is redone once a compiler is there), the editable mode, this checkout's path and
# the venv's python. Other source changes need no reinstall.
install_digest() {
    { cat pyproject.toml kafkactl/__init__.py setup.py kafkactl/*/*.pyx 2>/dev/null
      echo "missing=$(build_tools_missing | tr '\n' ' ')"
      echo "no_extensions=${KAFKACTL_NO_EXTENSIONS:-}"
      echo "editable_mode=$EDITABLE_MODE"; echo "$PWD"; "$VENV_PY" -V 2>&1; } \
        | sha256sum | cut -c1-16
}

# build_tools_missing: print the Debian packages the compiled kernels need that are missing
# (a C compiler; the headers of the python that makes the environment), nothing when none.
build_tools_missing() {
    local py="${PYTHON:-python3}"
    command -v cc >/dev/null || command -v gcc >/dev/null || echo gcc
    if command -v "$py" >/dev/null && ! "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
            2>/dev/null; then
        echo python3-dev
    fi
}

# ensure_build_tools: install what the compiled kernels need with apt-get when it is missing
# (on Debian; with sudo when not root). Never fatal: without them kafkactl installs as pure
# Python (slower), and says so.
ensure_build_tools() {
    local need
    need="$(build_tools_missing | tr '\n' ' ')"
    need="${need% }"
    [ -n "$need" ] || return 0
    if [ "${KAFKACTL_NO_EXTENSIONS:-}" != "" ] && [ "${KAFKACTL_NO_EXTENSIONS}" != 0 ]; then
        return 0
    fi
    # shellcheck disable=SC2086  # one word per package
    if ! command -v apt-get >/dev/null || ! apt_install $need; then
        say "without $need the compiled kernels cannot be built: installing pure Python (slower)"
    fi
}

# venv_editable_install SPEC: `pip install -e SPEC` in $EDITABLE_MODE. A setuptools that no
# longer has that mode (setuptools calls "compat" transitional) gets the default mode
# instead, and is said to: kafkactl works, and Spark finds its data source only through
# register(spark).
venv_editable_install() {
    local spec=$1 out
    if out="$(venv_pip install -q --config-settings "editable_mode=$EDITABLE_MODE" -e "$spec" 2>&1)"; then
        [ -z "$out" ] || printf '%s\n' "$out" >&2
        return 0
    fi
    printf '%s\n' "$out" >&2
    if ! grep -qi "invalid editable mode" <<<"$out"; then
        return 1
    fi
    say "this setuptools has no editable mode '$EDITABLE_MODE': installing in its default mode," \
        "where Spark does not find the kafkactl data source by itself (call register(spark))"
    venv_pip install -q -e "$spec"
}

# venv_install SPEC: `pip install -e SPEC` (SPEC is "." or ".[extra]") into the environment,
# skipped when it is already there (an extra's install includes "."), unchanged, and imports
# this checkout's kafkactl. pip's download and wheel cache (~/.cache/pip) is reused.
venv_install() {
    local spec=$1 stamp_file="$KAFKACTL_VENV/.kafkactl-install" digest
    local here_init="$PWD/kafkactl/__init__.py"
    digest="$(install_digest)"
    if [ -f "$stamp_file" ] \
        && { grep -qxF "$spec $digest" "$stamp_file" \
             || { [ "$spec" = "." ] && grep -q " $digest\$" "$stamp_file"; }; } \
        && (cd / && "$VENV_PY" -c 'import sys, kafkactl; sys.exit(kafkactl.__file__ != sys.argv[1])' \
            "$here_init"); then
        say "kafkactl ($spec) is up to date in $KAFKACTL_VENV"
        return 0
    fi
    say "installing kafkactl ($spec, editable) into $KAFKACTL_VENV"
    venv_editable_install "$spec" || return 1
    # Keep the stamps of this digest only (another digest means another install).
    { grep " $digest\$" "$stamp_file" 2>/dev/null || true; echo "$spec $digest"; } \
        | sort -u >"$stamp_file.new"
    mv "$stamp_file.new" "$stamp_file"
}
