#!/usr/bin/env bash
# Build the one-file binary (dist/kafkactl, from build.spec) and smoke-test it end to end:
# it must report the compiled kernels in use (`--version`; KAFKACTL_NO_EXTENSIONS=1 expects
# pure Python instead),
# `serve` on a free port with a temp data dir, `produce` a few records (every codec, so the
# C extensions are proven to be in the binary), `consume` them back, `dump-log` the segment,
# then SIGTERM the broker and expect a clean exit. Any failure exits non-zero with a
# sentence saying what failed.
#
#   scripts/smoke_binary.sh              build, then test
#   scripts/smoke_binary.sh --no-build   test an existing dist/kafkactl
#
# Python (PyInstaller, kafkactl's version) comes from the project's virtual environment
# (KAFKACTL_VENV, default .venv, as made by scripts/test.sh) when it exists, else python3.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${KAFKACTL_VENV:-.venv}"
if [ -x "$venv/bin/python" ]; then PY="$venv/bin/python"; else PY=python3; fi

BIN=dist/kafkactl
TOPIC=smoke
STEP_TIMEOUT=60

work="$(mktemp -d)"
broker_pid=""
cleanup() {
    if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
        kill -KILL "$broker_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "smoke_binary: FAIL: $*" >&2; exit 1; }
say() { echo "smoke_binary: $*" >&2; }

if [ "${1:-}" != "--no-build" ]; then
    say "building $BIN with PyInstaller (build.spec, $PY)"
    "$PY" -m PyInstaller --noconfirm --clean --log-level WARN build.spec \
        || fail "pyinstaller build.spec failed"
fi
[ -x "$BIN" ] || fail "$BIN does not exist; build it with: pyinstaller --noconfirm --clean build.spec"

# --- the binary starts, and knows its version ------------------------------------------
"$BIN" --help >/dev/null || fail "$BIN --help exited non-zero"
want_version="kafkactl $("$PY" -c 'from kafkactl import __version__; print(__version__)')"
got_version="$("$BIN" --version)"
[ "$(sed -n 1p <<<"$got_version")" = "$want_version" ] \
    || fail "$BIN --version printed '$got_version', expected '$want_version' first"
if [ -n "${KAFKACTL_NO_EXTENSIONS:-}" ] && [ "$KAFKACTL_NO_EXTENSIONS" != 0 ]; then
    want_kernels="compiled kernels: no (KAFKACTL_NO_EXTENSIONS is set)"
else
    want_kernels="compiled kernels: yes"
fi
got_kernels="$(sed -n 2p <<<"$got_version")"
if [ "$got_kernels" != "$want_kernels" ]; then
    built="$("$PY" -c 'from kafkactl.record._accel import STATUS; print(STATUS)')"
    fail "$BIN --version says '$got_kernels', expected '$want_kernels' (the environment it" \
        "was built from says '$built': build.spec collects kafkactl.record._kernels when" \
        "the install compiled it)"
fi
say "$got_kernels"
best=""
for _ in 1 2 3 4 5; do
    t0=$(date +%s%N); "$BIN" --help >/dev/null; t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
done
say "start-up: '$BIN --help' best of 5 = ${best} ms ($(du -h "$BIN" | cut -f1) binary)"

# --- the subcommands this test needs are in the binary ---------------------------------
missing=()
for sub in serve produce consume dump-log; do
    if ! "$BIN" "$sub" --help >/dev/null 2>"$work/stderr.txt"; then
        module="kafkactl.cli.${sub//-/_}"
        if ! grep -q "No such command" "$work/stderr.txt"; then
            tail -n 20 "$work/stderr.txt" >&2
            fail "'$BIN $sub --help' failed (above): something the binary needs is not in it"
        elif "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$module') is None)"; then
            say "subcommand '$sub' is missing from the binary although $module exists:" \
                "build.spec does not collect it, or it was added after the build started"
        else
            say "subcommand '$sub' is not implemented yet ($module does not exist)"
        fi
        missing+=("$sub")
    fi
done
[ ${#missing[@]} -eq 0 ] || fail "cannot smoke-test the binary without: ${missing[*]}"

# --- a broker on a free port with a temp data dir --------------------------------------
port="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
bootstrap="127.0.0.1:$port"
"$BIN" serve --data-dir "$work/data" \
    --override "listeners=PLAINTEXT://$bootstrap" --override num.partitions=1 \
    >"$work/broker.log" 2>&1 &
broker_pid=$!
broker_log() { echo "--- broker log ---" >&2; tail -n 40 "$work/broker.log" >&2; }
for _ in $(seq 1 300); do
    kill -0 "$broker_pid" 2>/dev/null || { broker_log; fail "'kafkactl serve' exited during start-up"; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { broker_log; fail "'kafkactl serve' did not listen on $bootstrap within 30 s"; }
say "broker up on $bootstrap (pid $broker_pid)"

# --- produce (every codec), consume, dump-log ------------------------------------------
expected="$work/expected.txt"
: >"$expected"
for codec in none gzip snappy lz4 zstd; do
    printf '%s-1\n%s-2\n' "$codec" "$codec" | tee -a "$expected" \
        | timeout "$STEP_TIMEOUT" "$BIN" produce -b "$bootstrap" -t "$TOPIC" --compression "$codec" \
        || { broker_log; fail "'kafkactl produce --compression $codec' failed"; }
done
count=$(wc -l <"$expected")
timeout "$STEP_TIMEOUT" "$BIN" consume -b "$bootstrap" -t "$TOPIC" --from-beginning -e \
    --max-messages "$count" >"$work/consumed.txt" \
    || { broker_log; fail "'kafkactl consume' failed"; }
diff -u "$expected" "$work/consumed.txt" >&2 || fail "'kafkactl consume' did not print the produced records"
say "produced and consumed $count records"

# What users pipe most: `seq` (many lengths, more than 16,383 equal-length lines per batch).
seq 1 50000 | timeout "$STEP_TIMEOUT" "$BIN" produce -b "$bootstrap" -t seq -q \
    || { broker_log; fail "'seq 1 50000 | kafkactl produce' failed"; }
timeout "$STEP_TIMEOUT" "$BIN" consume -b "$bootstrap" -t seq --from-beginning -e -q \
    >"$work/seq.txt" || { broker_log; fail "'kafkactl consume -t seq' failed"; }
seq 1 50000 | cmp -s - "$work/seq.txt" || fail "'seq 1 50000' did not come back line for line"
say "seq 1 50000 round-tripped"

segment="$(find "$work/data" -path "*/$TOPIC-0/*.log" | sort | head -n 1)"
[ -n "$segment" ] || fail "no segment file for $TOPIC-0 under the data dir"
timeout "$STEP_TIMEOUT" "$BIN" dump-log --print-data-log "$segment" >"$work/dump.txt" \
    || fail "'kafkactl dump-log' failed on $segment"
grep -q "baseOffset: 0 " "$work/dump.txt" || fail "dump-log shows no batch at baseOffset 0"
for codec in gzip snappy lz4 zstd; do
    grep -q "compresscodec: $codec" "$work/dump.txt" || fail "dump-log shows no $codec batch"
done
grep -q "payload: zstd-2" "$work/dump.txt" || fail "dump-log --print-data-log misses a record"
say "dump-log read $(grep -c 'baseOffset:' "$work/dump.txt") batches from $(basename "$segment")"

# --- clean stop ------------------------------------------------------------------------
kill -TERM "$broker_pid"
rc=0
wait "$broker_pid" || rc=$?
broker_pid=""
[ "$rc" -eq 0 ] || { broker_log; fail "'kafkactl serve' exited with $rc after SIGTERM"; }
[ -n "$(find "$work/data" -name .kafka_cleanshutdown)" ] \
    || fail "no clean-shutdown marker after SIGTERM"
say "OK: build, serve, produce, consume, dump-log and clean shutdown"
