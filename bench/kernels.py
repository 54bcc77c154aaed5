"""The compiled kernels against the pure-Python reference, in the same run (issue 33).

    PYTHONPATH=. python bench/kernels.py [--rounds 5] [--lines [--records 200000]]

In-process, for batches of the shapes bench/lines.py and bench/produce_validation.py use
(access-log lines of 50-500 bytes, keyed and unkeyed; fixed 100-byte values; `seq`; one
record, as a one-record Produce carries): the broker's framing check on append
(record.framing.check_records), the consumer's output of a whole batch
(client.topic_reader as `kafkactl consume` calls it: plain for every shape, then -K, -f and
-J; client.record_format.KernelFormat against the pure paths: record.value_scan and the
per-record renderers), the keyed producer's key split (client.line_producer) and
partitioner (murmur2 of access-log client addresses, client.partitioner), the producer's
record encoding (record.columns) and `kafkactl produce`'s lines to records as the CLI runs
them (compiled: encode_lines_into from the input buffer; pure: the lines split, then the table
encoders), each timed compiled and pure (KAFKACTL_NO_EXTENSIONS's path, switched
in-process). Prints ns per record of each and the ratio pure/compiled; the
best of `--rounds`.

`--lines` then runs bench/lines.py twice, compiled and with KAFKACTL_NO_EXTENSIONS=1 (broker
and clients alike), each against kcat in its own run: the end-to-end ratios vs kcat side by
side. Ratios, not absolute figures, are what to compare: the box is shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from lines import access_line

from kafkactl.cli.consume import (
    compile_batch_format,
    compile_format,
    compile_kernel_format,
    json_renderer,
)
from kafkactl.client import line_producer, partitioner, record_format, topic_reader
from kafkactl.client.record_format import KernelFormat
from kafkactl.record import _accel, columns, framing
from kafkactl.record.batch import RecordBatch, RecordBatchBuilder

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


@contextmanager
def pure() -> Iterator[None]:
    """The pure-Python path, as KAFKACTL_NO_EXTENSIONS=1 selects it at import."""
    saved = (framing.kernels, framing._runs, framing._walk, partitioner.murmur2,
             columns.encode_values, columns.encode_key_values, record_format.kernels,
             line_producer.split_keys, columns.encode_lines_into, partitioner.kernels)
    framing.kernels = record_format.kernels = partitioner.kernels = None
    line_producer.split_keys = line_producer.split_keys_py
    framing._runs, framing._walk = framing._column_runs, framing._walk_py
    partitioner.murmur2 = partitioner.murmur2_py
    columns.encode_values = columns.encode_values_py
    columns.encode_key_values = columns.encode_key_values_py
    columns.encode_lines_into = columns.encode_lines_into_py
    try:
        yield
    finally:
        (framing.kernels, framing._runs, framing._walk, partitioner.murmur2,
         columns.encode_values, columns.encode_key_values, record_format.kernels,
         line_producer.split_keys, columns.encode_lines_into, partitioner.kernels) = saved


def batch(kind: str, limit: int = MiB) -> tuple[bytes, int]:
    """A whole v2 batch of one shape, about `limit` bytes: (bytes, records)."""
    rng = random.Random(20)
    b = RecordBatchBuilder()
    ts = 1_795_000_000_000
    i = 0
    while b.size_in_bytes() < limit - 600 and (kind != "one" or i == 0):
        if kind in ("access", "one"):
            b.append(ts, None, access_line(rng, 1_795_000_000 + i // 50))
        elif kind == "access keyed":
            line = access_line(rng, 1_795_000_000 + i // 50)
            key, _, value = line.partition(b" ")
            b.append(ts, key, value)
        elif kind == "fixed":
            b.append(ts + i // 80, None, b"x" * 100)
        else:  # seq
            b.append(ts, None, b"%d" % (i + 1))
        i += 1
    return b.build(), i


def best(fn: Callable[[], object], rounds: int, inner: int) -> float:
    """Best seconds per call of `fn` over `rounds` rounds of `inner` calls."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return min(times)


def row(label: str, n: int, fn: Callable[[], object], rounds: int, inner: int) -> None:
    c = best(fn, rounds, inner)
    with pure():
        p = best(fn, rounds, inner)
    print(f"  {label:<40} {c / n * 1e9:>9.1f} {p / n * 1e9:>9.1f} {p / c:>8.1f}x", flush=True)


def kernels_table(rounds: int) -> None:
    print(f"{_accel.STATUS}\n")
    print(f"  {'ns/record':<40} {'compiled':>9} {'pure':>9} {'speed-up':>9}")
    for kind in ("access", "access keyed", "fixed", "seq", "one"):
        raw, n = batch(kind)
        section = raw[61:]
        backing = bytearray(raw)
        inner = 2000 if kind == "one" else 3
        row(f"framing check, {kind} ({n} rec)", n,
            partial(framing.check_records, backing, n, start=61, end=61 + len(section)),
            rounds, inner)
        rb = RecordBatch(memoryview(raw))
        row(f"consume output plain, {kind}", n, partial(consume_output("plain"), rb), rounds,
            inner)
    rng = random.Random(20)
    keys = [access_line(rng, 1_795_000_000).partition(b" ")[0] for _ in range(20_000)]
    part = partitioner.Partitioner()
    row("murmur2 partition, access-log keys", len(keys),
        lambda: [part.partition("t", k, 12) for k in keys], rounds, 3)
    rng = random.Random(20)
    lines = [access_line(rng, 1_795_000_000) for _ in range(20_000)]
    keys = [line.partition(b" ")[0] for line in lines]
    row("keyed records by partition (12), access-log lines", len(lines),
        lambda: partitioner.murmur2_groups(keys, lines, None, 12, 0), rounds, 3)
    text = b"".join(line + b"\n" for line in lines)
    row("keyed lines to partition buffers (12), access-log lines", len(lines),
        lambda: partitioner.murmur2_scatter(text, 0, len(text), b"\n", b" ", 12, 0), rounds, 3)
    row("producer key split (-K' '), access-log lines", len(lines),
        lambda: line_producer.split_keys(lines, b" "), rounds, 3)
    row("producer records, access-log lines", len(lines),
        lambda: _encode_all(lambda i: columns.encode_values(lines, i, 0, MiB), len(lines)),
        rounds, 3)
    row("producer records, keyed (-K' ')", len(lines),
        lambda: _encode_all(lambda i: columns.encode_key_values(keys, lines, i, 0, MiB),
                            len(lines)), rounds, 3)
    block = b"".join(line + b"\n" for line in lines)
    row("producer lines -> records, CLI path", len(lines),
        lambda: _cli_lines(block, None), rounds, 3)
    row("producer lines -> records, CLI path -K' '", len(lines),
        lambda: _cli_lines(block, b" "), rounds, 3)
    for kind, shape in (("-K '\\t'", "access keyed"),
                        ("-f '%k\\t%s\\n'", "access keyed"), ("-f '%o %T %s\\n'", "access"),
                        ("-J", "access keyed")):
        raw, n = batch(shape)
        rb = RecordBatch(memoryview(raw))
        out = consume_output(kind)
        row(f"consume output {kind}, {shape}", n, partial(out, rb), rounds, 3)


class _Fetch:
    """What topic_reader reads of a PartitionFetch for one batch."""

    topic, partition, fetch_offset = "access", 0, 0


def consume_output(kind: str) -> Callable[[RecordBatch], object]:
    """One whole batch rendered as `kafkactl consume` renders it (topic_reader._render_batch,
    the kernel first when there is one), for output `kind`."""
    fmt = {"-f '%k\\t%s\\n'": "%k\\t%s\\n", "-f '%o %T %s\\n'": "%o %T %s\\n"}.get(kind)
    sep = b"\t" if kind.startswith("-K") else None
    if kind == "-J":
        render: Any = json_renderer(lambda t, p: 1)
        batch_format, kernel = None, KernelFormat.json(lambda t, p: 1)
    elif fmt is not None:
        render, batch_format = compile_format(fmt), compile_batch_format(fmt)
        kernel = compile_kernel_format(fmt)
    else:
        render, batch_format = topic_reader.plain_renderer(sep), None
        kernel = KernelFormat.plain(sep)
    plain = fmt is None and kind != "-J"

    def run(rb: RecordBatch) -> object:
        buf: list[topic_reader.Piece] = []
        # under pure() the kernel form is not made, as KAFKACTL_NO_EXTENSIONS=1 would have it
        made = kernel if record_format.kernels is not None else None
        topic_reader._render_batch(rb, _Fetch(), buf, {}, None,  # type: ignore[arg-type]
                                   render, plain, sep, batch_format, made)
        return buf

    return run


def _encode_all(encode: Callable[[int], tuple[list[bytes], int, int]], n: int) -> None:
    """Batches of up to 1 MiB until every line is encoded (as the producer fills them)."""
    i = 0
    while i < n:
        parts, i, _ = encode(i)
        b"".join(parts)


def _cli_lines(block: bytes, ksep: bytes | None) -> None:
    """`kafkactl produce`'s lines to 1 MiB batches of records: compiled, encode_lines_into
    from the input buffer (delimited.read_blocks) into each batch's buffer; pure, as
    KAFKACTL_NO_EXTENSIONS=1 runs it, the lines split into objects (read_records), keys
    split, then the table encoders."""
    if columns.encode_lines_into is not columns.encode_lines_into_py:
        pos = 0
        while pos < len(block):
            buf = bytearray(MiB)  # a batch's buffer, records behind the header's 61 bytes
            pos, n, _ = columns.encode_lines_into(block, pos, len(block), b"\n", ksep, 0,
                                                  buf, 61)
            assert n, "a line longer than a batch"
        return
    lines = block.split(b"\n")
    lines.pop()
    if ksep is None:
        _encode_all(lambda i: columns.encode_values(lines, i, 0, MiB), len(lines))
        return
    keys, values = line_producer.split_keys(lines, ksep)
    _encode_all(lambda i: columns.encode_key_values(keys, values, i, 0, MiB), len(lines))


def lines_run(records: int) -> None:
    for label, switch in (("compiled", ""), ("pure (KAFKACTL_NO_EXTENSIONS=1)", "1")):
        env = {k: v for k, v in os.environ.items() if k != "KAFKACTL_NO_EXTENSIONS"}
        if switch:
            env["KAFKACTL_NO_EXTENSIONS"] = switch
        print(f"\n=== bench/lines.py, {label} ===", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "lines.py"),
                        "--records", str(records)], env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="best of this many")
    ap.add_argument("--lines", action="store_true",
                    help="then bench/lines.py compiled and pure, each against kcat")
    ap.add_argument("--records", type=int, default=200_000, help="lines per input (--lines)")
    args = ap.parse_args()
    if _accel.kernels is None:
        sys.exit(f"nothing to compare: {_accel.STATUS}")
    kernels_table(args.rounds)
    if args.lines:
        lines_run(args.records)


if __name__ == "__main__":
    main()
