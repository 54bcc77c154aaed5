#!/usr/bin/env bash
# Install every test dependency and run the whole test suite (the README's test command;
# CI runs it through .ci/run). Arguments are passed to pytest:
#
#   ./scripts/test.sh                          everything
#   ./scripts/test.sh tests/record -q -x       ruff, mypy, then only these tests, then the binary
#   KAFKACTL_TEST_WORKERS=0 ./scripts/test.sh  the tests one after another, in this process
#   KAFKACTL_SKIP_BINARY=1 ./scripts/test.sh   without the binary build and smoke test
#   KAFKACTL_TEST_STEPS="ruff mypy pytest" ./scripts/test.sh    only these steps
#
# The steps, in order; each is a function step_<name> below. To add one, write the
# function, add its name to STEPS and a few words to STEP_WHAT.
#   apt     Debian packages: zookeeper and kcat (real peers for the tests), openssl, a Java runtime
#           (ZooKeeper), man-db, zsh and fish (the man page and completion tests), prometheus
#           (it scrapes a broker in a test), and
#           python3-venv when python3 cannot make a virtual environment, gcc and python3-dev
#           when missing (the compiled kernels: the tests require them built)
#   clients the test clients that are not Python packages (scripts/install_test_clients.sh:
#           kafkajs from npm, Go and Sarama from Debian); a client that cannot be installed
#           makes its tests skip with the reason printed
#   venv    the virtual environment (.venv, or KAFKACTL_VENV=DIR) with this checkout
#           installed editable with its `test` extra: never the system's python (PEP 668)
#   ruff    ruff check, from the environment
#   mypy    mypy kafkactl, from the environment, with pyproject.toml's [tool.mypy]: zero
#           errors or the run fails
#   pytest  pytest, run by the environment's python (the tests start `sys.executable -m
#           kafkactl`; this checkout's bytecode is compiled first, PYTHONDONTWRITEBYTECODE
#           or not); exit 5 (no tests collected) is a failure like any other. The tests run
#           in KAFKACTL_TEST_WORKERS pytest-xdist workers (default 6: a test mostly waits on
#           the brokers, ZooKeeper or Spark it starts; 0 runs them serially); tests that share
#           a module-scoped fixture or the SparkSession, or are marked xdist_group("<name>"),
#           run on one worker (tests/conftest.py)
#   pure    the record, protocol, log and client tests again with KAFKACTL_NO_EXTENSIONS=1:
#           the pure-Python reference the compiled kernels fall back to (with test paths as
#           arguments, only those under tests/record, tests/protocol, tests/log or
#           tests/client)
#   binary  build the one-file binary and smoke-test it (scripts/smoke_binary.sh);
#           KAFKACTL_SKIP_BINARY=1 skips it
#
# When a step fails, the last line names it and what was skipped, e.g.
#   test.sh: FAILED at pytest (exit 1); skipped: binary (the binary build and smoke test)
# and the script exits with that step's code.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT_NAME=test.sh
# shellcheck source=scripts/venv.sh
. scripts/venv.sh

STEPS=(apt clients venv ruff mypy pytest pure binary)
declare -A STEP_WHAT=(
    [apt]="the Debian packages"
    [clients]="the non-Python test clients (kafkajs, Go + Sarama)"
    [venv]="the virtual environment and the install"
    [ruff]="the lint"
    [mypy]="the type check"
    [pytest]="the tests"
    [pure]="the record, protocol, log and client tests in pure Python"
    [binary]="the binary build and smoke test"
)

step_apt() {
    local need=()
    command -v kcat >/dev/null || need+=(kcat)
    command -v openssl >/dev/null || need+=(openssl)  # the TLS tests make certificates
    [ -x /usr/share/zookeeper/bin/zkServer.sh ] || need+=(zookeeper)
    command -v java >/dev/null || need+=(default-jre-headless)
    command -v man >/dev/null || need+=(man-db)
    command -v zsh >/dev/null || need+=(zsh)
    command -v fish >/dev/null || need+=(fish)
    command -v prometheus >/dev/null || need+=(prometheus)  # scrapes a broker in a test
    if ! venv_usable && ! "${PYTHON:-python3}" -c 'import ensurepip' 2>/dev/null; then
        need+=(python3-venv)
    fi
    local tool
    for tool in $(build_tools_missing); do need+=("$tool"); done
    if [ ${#need[@]} -gt 0 ]; then
        apt_install "${need[@]}"
    fi
}

step_clients() {
    ./scripts/install_test_clients.sh
}

step_venv() {
    ensure_venv
    venv_install '.[test]'
}

step_ruff() {
    "$VENV_PY" -m ruff check kafkactl tests bench scripts
}

step_mypy() {
    "$VENV_PY" -m mypy kafkactl
}

step_pytest() {
    local workers="${KAFKACTL_TEST_WORKERS:-6}"
    # The tests start a few hundred broker and CLI processes from this checkout: with
    # PYTHONDONTWRITEBYTECODE set (some CI images set it) each would compile ~200 modules
    # from source (~0.3 s of CPU apiece). Write the bytecode caches once, here.
    unset PYTHONDONTWRITEBYTECODE
    "$VENV_PY" -m compileall -q kafkactl tests >/dev/null
    # The Spark tests' driver JVMs map their classes from an archive kept in ~/.cache
    # (tests/jvm_archive.py): made once per environment, JDK and Spark (~35 s) when this run
    # includes the Spark tests; a failure to make it only makes those tests slower.
    if [ $# = 0 ] || [[ " $* " == *spark* ]]; then
        "$VENV_PY" -m tests.jvm_archive || true
    fi
    if [ "$workers" = 0 ]; then
        "$VENV_PY" -m pytest -q "$@"
    else
        "$VENV_PY" -m pytest -q -n "$workers" --dist loadgroup "$@"
    fi
}

step_pure() {
    local workers="${KAFKACTL_TEST_WORKERS:-6}" paths=() arg
    if [ $# = 0 ]; then
        paths=(tests/record tests/protocol tests/log tests/client)
    else
        for arg in "$@"; do
            case "$arg" in tests/record*|tests/protocol*|tests/log*|tests/client*) paths+=("$arg") ;; esac
        done
        if [ ${#paths[@]} = 0 ]; then
            say "no record, protocol, log or client tests among the arguments: nothing to run"
            return 0
        fi
    fi
    local opts=(-q)
    [ "$workers" = 0 ] || opts+=(-n "$workers" --dist loadgroup)
    KAFKACTL_NO_EXTENSIONS=1 "$VENV_PY" -m pytest "${opts[@]}" "${paths[@]}"
}

step_binary() {
    ./scripts/smoke_binary.sh
}

# --- the runner -------------------------------------------------------------------------
selected=("${STEPS[@]}")
if [ -n "${KAFKACTL_TEST_STEPS:-}" ]; then
    read -r -a selected <<<"$KAFKACTL_TEST_STEPS"
    for name in "${selected[@]}"; do
        [ -n "${STEP_WHAT[$name]:-}" ] \
            || { say "KAFKACTL_TEST_STEPS: no step '$name' (steps: ${STEPS[*]})"; exit 2; }
    done
fi
if [ "${KAFKACTL_SKIP_BINARY:-0}" = "1" ]; then
    kept=()
    for name in "${selected[@]}"; do [ "$name" = binary ] || kept+=("$name"); done
    selected=("${kept[@]}")
fi

# Every step runs with the environment first on the PATH, as if activated, so that what
# they start (python3, kafkactl, pyinstaller) is the environment's; the environment itself
# is made by the python3 found before that (or PYTHON).
PYTHON="${PYTHON:-$(command -v python3 || echo python3)}"
export VIRTUAL_ENV="$KAFKACTL_VENV"
export PATH="$KAFKACTL_VENV/bin:$PATH"
export KAFKACTL_VENV

current=""
done_steps=()
on_exit() {
    local rc=$?
    [ -n "$current" ] || return 0
    local msg="FAILED at $current (exit $rc)"
    if [ "$current" = pytest ] && [ "$rc" -eq 5 ]; then msg+=": pytest collected no tests"; fi
    local skipped="" seen=0 name
    for name in "${selected[@]}"; do
        if [ "$seen" = 1 ]; then skipped+="${skipped:+, }$name (${STEP_WHAT[$name]})"; fi
        if [ "$name" = "$current" ]; then seen=1; fi
    done
    if [ -n "$skipped" ]; then msg+="; skipped: $skipped"; fi
    say "$msg"
    [ "$rc" -ne 0 ] || exit 1
}
trap on_exit EXIT

for name in "${selected[@]}"; do
    current="$name"
    started=$SECONDS
    say "step $name: ${STEP_WHAT[$name]}"
    case "$name" in pytest|pure) "step_$name" "$@" ;; *) "step_$name" ;; esac
    done_steps+=("$name ($((SECONDS - started)) s)")
done
current=""
say "OK: ${done_steps[*]}"
