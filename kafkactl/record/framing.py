"""The record framing check of a v2 records section (what Kafka's LogValidator learns by
iterating every record on append), done as a scan rather than a decode.

A records section (after decompression) must hold exactly `count` records that tile it:
each a length varint and that many bytes of attributes, timestamp delta (varlong), offset
delta (varint, record i carries i), key and value (varint length, -1 = null), header count
and headers (varint-length key, varint-length value). Layout: record/batch.py.

`check_records` proves this in two ways:

- **Columns** (the hot path, no Python object per record): the record at the current
  position is parsed into a template, and the records after it are assumed to share its
  shape (timestamp-delta width, key/value/header lengths) and so to sit at one stride, up
  to where the offset-delta varint widens (records 64 and 8192). Each field is then a
  column of the section read with one strided slice (C speed): length varints and
  key/value/header lengths must equal the template's bytes, timestamp deltas must keep
  their width (continuation bits), offset deltas must read i for record i. The first
  record that differs in any column ends the run and starts the next template there, so
  a batch whose timestamp deltas or value sizes change a few times costs a few runs.
  Producers write this shape (fixed-size values, timestamps close together).
- **Walk**: when runs stay short (mixed value sizes) or a record has no provable shape (a
  bad one), the rest is walked record by record with ints only: a record with a null key,
  no headers and a one-byte timestamp delta by a few slice comparisons, any other field by
  field. The walk accepts every well-formed section and names the first fault. It costs
  a Python loop per record (~0.5 us; see bench/produce_validation.py's `mixed` case).

With the compiled kernels (record/_kernels.pyx, picked by record/_accel.py), the records
are proven in place by a compiled walk instead of the columns (`_runs`), and `_walk` is the
compiled twin of the walk below, which stays the definition (tests/record/test_kernels.py
proves the twins equal: same result, same error and message). Either way a fault is named
by the walk, with byte positions counted from the section's start. The columns stay for
the pure-Python fallback alone: without them it would check producer-shaped batches (fixed
sizes, `seq`) at ~0.5 us a record instead of ~10-20 ns (bench/kernels.py), a broker
bottleneck.

Stricter than Kafka on one point: a key or value length below -1 is refused (Kafka reads
any negative length as null; no producer writes one, and not every consumer agrees).

Faults raise `InvalidRecordError` (Kafka's InvalidRecordException: INVALID_RECORD).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kafkactl.record._accel import kernels
from kafkactl.record.errors import InvalidRecordError
from kafkactl.record.uniform import ZIGZAG
from kafkactl.record.varint import encode_varint

__all__ = ["RecordsCheck", "check_records"]

Buf = bytes | bytearray | memoryview
Data = bytes | bytearray  # what the scan reads (a memoryview is copied to bytes first)

MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key len, value len, headers
MAX_COLUMN_RECORDS = 1 << 20  # offset deltas up to 3 varint bytes take the column path
MAX_TEMPLATE_HEADERS = 4
_HIGH = bytes(range(0x80, 0x100))
_BYTE = tuple(bytes((b,)) for b in range(256))
# offset-delta width by record index: [lo, hi) -> varint bytes of zigzag(i)
_OD_RUNS = ((0, 64, 1), (64, 8192, 2), (8192, MAX_COLUMN_RECORDS, 3))


@dataclass(slots=True, frozen=True)
class RecordsCheck:
    """What the check learnt: whether offset deltas run 0..n-1 (a compressed batch whose
    deltas do not is renumbered, as Kafka does), and the indexes of null-key records when
    asked for (a compacted topic refuses them)."""

    sequential: bool
    keyless: tuple[int, ...] = ()


SEQUENTIAL = RecordsCheck(True)  # what most checks find (a frozen instance costs ~1 us)


def check_records(section: Buf, count: int, *, want_keyless: bool = False,
                  start: int = 0, end: int | None = None) -> RecordsCheck:
    """Check that `section` (or its bytes start..end, which saves a copy of a bytearray
    the caller already holds) holds exactly `count` well-framed v2 records."""
    if isinstance(section, memoryview) and kernels is None:  # the columns slice bytes
        section = section[start:end].tobytes()
        start, end = 0, None
    stop = len(section) if end is None else end
    if count <= 0:
        raise InvalidRecordError(f"Found invalid record count {count}")
    if count > (stop - start) // MIN_RECORD_SIZE:
        raise InvalidRecordError(
            f"Incorrect declared batch size, premature EOF reached: {count} records cannot "
            f"fit in {stop - start} bytes")
    keyless: list[int] = []
    i, pos = 0, start
    # A few records: the pure walk costs less than one template; the compiled proof costs
    # less than the copy the walk reads.
    if count > MAX_WALK_FIRST or kernels is not None:
        i, pos = _runs(section, pos, stop, count, want_keyless, keyless)
    if i < count:  # the walk reads bytes from the section's start (cheaper to index)
        data = section
        if start or stop != len(data) or not isinstance(data, bytes):
            data = bytes(data[start:stop])
        return _walk(data, pos - start, stop - start, i, count, want_keyless, keyless)
    if pos != stop:
        raise InvalidRecordError(
            f"Incorrect declared batch size, records still remaining in file: "
            f"{stop - pos} bytes follow record {count - 1}")
    return RecordsCheck(True, tuple(keyless)) if keyless else SEQUENTIAL


# ---- the column path -------------------------------------------------------------------------

MAX_WALK_FIRST = 4  # batches of up to this many records are walked (bench: mb_framing)
MAX_RUNS = 8  # after this many runs, columns go on only while runs are long enough
MIN_AVERAGE_RUN = 32
_LOW = re.compile(rb"[\x00-\x7f]")
_NOT_ASCII = re.compile(rb"[\x80-\xff]")


def _column_runs(data: Data, pos: int, stop: int, count: int, want_keyless: bool,
                 keyless: list[int]) -> tuple[int, int]:
    """Prove records by column runs from `pos` while runs stay long: (records proven,
    position after them); the walk checks the rest."""
    i = runs = 0
    while i < count:
        if runs >= MAX_RUNS and i < runs * MIN_AVERAGE_RUN:  # short runs: walk the rest
            break
        run = _column_run(data, pos, stop, i, count)
        if run is None:
            break
        j, pos, key_null = run
        if key_null and want_keyless:
            keyless.extend(range(i, j))
        i, runs = j, runs + 1
    return i, pos


def _od_table(width: int, k: int) -> bytes:
    """Byte k of zigzag(i)'s `width`-byte varint for every i below the width's bound
    (indexed by i; meaningful only where i's varint has that width). Built from repeats."""
    key = (width, k)
    table = _OD_TABLES.get(key)
    if table is not None:
        return table
    n = _OD_RUNS[width - 1][1]
    # zigzag(i) = 2i: 7-bit group k of 2i is (i >> (7k - 1)) & 0x7F, group 0 is 2i & 0x7F
    more = 0x80 if k < width - 1 else 0
    if k == 0:
        table = bytes(((2 * i) & 0x7F) | more for i in range(64)) * (n // 64)
    else:
        step = 1 << (7 * k - 1)
        period = b"".join(_BYTE[(g & 0x7F) | more] * step for g in range(128))
        table = (period * (n // len(period) + 1))[:n]
    _OD_TABLES[key] = table
    return table


_OD_TABLES: dict[tuple[int, int], bytes] = {}


def _od_width(i: int) -> tuple[int, int]:
    """(varint width of zigzag(i), first index past that width)."""
    for _lo, hi, width in _OD_RUNS:
        if i < hi:
            return width, hi
    return 0, 0


def _shape(data: Data, pos: int, stop: int, index: int, od_width: int
           ) -> tuple[int, int, list[tuple[int, int]], int, bool] | None:
    """The record at `pos` as a template: (length-varint width, timestamp width, constant
    bytes as (offset in record, byte), record size, key is null); None when it is not a
    record the columns can prove (the walk then decides)."""
    try:
        length, p = _varint(data, pos)
        head = p - pos
        ts_end = p + 1  # after the attributes byte
        while data[ts_end] >= 0x80:
            ts_end += 1
        ts_width = ts_end - p
        if ts_width > 10:
            return None
        q = ts_end + 1
        if data[q:q + od_width] != encode_varint(index):
            return None
        q += od_width
        consts: list[tuple[int, int]] = [(k, data[pos + k]) for k in range(head)]

        def const_varint(at: int) -> tuple[int, int]:
            value, nxt = _varint(data, at)
            consts.extend((k - pos, data[k]) for k in range(at, nxt))
            return value, nxt

        klen, q = const_varint(q)
        if klen < -1:
            return None
        q += max(klen, 0)
        vlen, q = const_varint(q)
        if vlen < -1:
            return None
        q += max(vlen, 0)
        nh, q = const_varint(q)
        if not 0 <= nh <= MAX_TEMPLATE_HEADERS:
            return None
        for _ in range(nh):
            hk, q = const_varint(q)
            if hk < 0:
                return None
            q += hk
            hv, q = const_varint(q)
            if hv < -1:
                return None
            q += max(hv, 0)
    except (IndexError, InvalidRecordError):
        return None
    if q - p != length or q > stop:
        return None
    return head, ts_width, consts, q - pos, klen < 0


def _column_run(data: Data, pos: int, stop: int, i: int, count: int
                ) -> tuple[int, int, bool] | None:
    """Records i.. shaped like record i at `pos`, proven column by column: (index after
    the run, position after it, keys are null); None when record i has no provable shape."""
    width, bound = _od_width(i)
    if not width:
        return None
    shape = _shape(data, pos, stop, i, width)
    if shape is None:
        return None
    head, ts_width, consts, stride, key_null = shape
    ok = min(min(bound, count) - i, (stop - pos) // stride)
    # Records 0..ok-1 of the run match every column checked so far; a column that differs
    # cuts `ok` to its first difference, and later columns are read only up to there.
    for off, b in consts:  # the length varint first: where a record's size changes
        col = data[pos + off:pos + stride * ok:stride]
        want = _BYTE[b] * ok
        if col != want:
            ok = _first_difference(col, want)
    ts_at = head + 1
    for k in range(ts_width - 1):
        col = data[pos + ts_at + k:pos + stride * ok:stride]
        if col.translate(None, _HIGH):
            m = _LOW.search(col)
            ok = m.start() if m is not None else ok
    col = data[pos + ts_at + ts_width - 1:pos + stride * ok:stride]
    if not col.isascii():
        m = _NOT_ASCII.search(col)
        ok = m.start() if m is not None else ok
    od_at = ts_at + ts_width
    for k in range(width):
        col = data[pos + od_at + k:pos + stride * ok:stride]
        want = _od_table(width, k)[i:i + ok]
        if col != want:
            ok = _first_difference(col, want)
    if ok <= 0:  # cannot happen: record i is the template
        return None
    return i + ok, pos + stride * ok, key_null


def _first_difference(a: Data, b: bytes) -> int:
    """Index of the first differing byte of two equal-length, unequal byte strings."""
    lo, hi = 0, len(a)  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# ---- the walk ----------------------------------------------------------------------------------

def _varint(mv: Buf, pos: int) -> tuple[int, int]:
    """Zigzag varint (<= 5 bytes) at pos -> (value, next)."""
    b = mv[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z = b & 0x7F
    shift = 7
    p = pos + 1
    while True:
        b = mv[p]
        p += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 35:
            raise InvalidRecordError(f"varint longer than 5 bytes at byte {pos}")
    return (z >> 1) ^ -(z & 1), p


def _walk_py(data: bytes, pos: int, stop: int, first: int, count: int, want_keyless: bool,
             keyless: list[int]) -> RecordsCheck:
    """Records first.. one by one. A record with a null key, no headers and a one-byte
    timestamp delta (what most producers write, whatever the value sizes) is proven by a
    few slice comparisons: its offset delta and null key against a table, its value length
    against what its record length leaves, its header count at its last byte. Any other
    record is parsed field by field (`_one_record`)."""
    end = stop
    sequential = True
    heads = _value_only_heads(count)
    zz = ZIGZAG
    i = first
    try:
        for i in range(first, count):
            b = data[pos]
            if b < 0x80:
                length = b >> 1
                p = pos + 1
            elif data[pos + 1] < 0x80:
                length = ((b & 0x7F) | (data[pos + 1] << 7)) >> 1
                p = pos + 2
            else:
                length, p = -1, pos
            rec_end = p + length
            if not b & 1 and rec_end <= end and i < len(heads) and data[p + 1] < 0x80:
                head = heads[i]  # offset delta i, then the null key
                q = p + 2 + len(head)
                v = rec_end - q - 2  # value size if its length takes one byte
                if v > 63:
                    v -= 1  # two bytes
                if (0 <= v < 8192 and data[p + 2:q] == head and data[rec_end - 1] == 0
                        and data[q:rec_end - 1 - v] == zz[v]):
                    if want_keyless:
                        keyless.append(i)
                    pos = rec_end
                    continue
            pos, in_order = _one_record(data, pos, end, i, want_keyless, keyless)
            sequential = sequential and in_order
    except IndexError:
        if pos >= end:
            raise InvalidRecordError(
                f"Incorrect declared batch size, premature EOF reached: the records "
                f"section ends after {i} of {count} records") from None
        raise InvalidRecordError(
            f"Found invalid record structure: record {i} runs past the records section") \
            from None
    if pos != end:
        raise InvalidRecordError(
            f"Incorrect declared batch size, records still remaining in file: {end - pos} "
            f"bytes follow record {count - 1}")
    return RecordsCheck(sequential, tuple(keyless))


_HEADS: list[bytes] = []
MAX_HEADS = 1 << 14


def _value_only_heads(count: int) -> list[bytes]:
    """zigzag(i) + the null key (0x01), for i < min(count, MAX_HEADS), built on demand."""
    want = min(count, MAX_HEADS)
    if len(_HEADS) < want:
        _HEADS.extend(ZIGZAG[i] + b"\x01" for i in range(len(_HEADS), want))
    return _HEADS


def _one_record(data: bytes, pos: int, end: int, i: int, want_keyless: bool,
                keyless: list[int]) -> tuple[int, bool]:
    """Parse record i at pos field by field: (its end, its offset delta is i)."""
    vi = _varint
    length, p = vi(data, pos)
    rec_end = p + length
    if length < MIN_RECORD_SIZE - 1 or rec_end > end:
        raise InvalidRecordError(
            f"Invalid record size: record {i} at byte {pos} declares {length} bytes, "
            f"{end - p} remain in the records section")
    p += 1  # attributes
    while data[p] >= 0x80:  # timestamp delta
        p += 1
        if p - pos > 16:
            raise InvalidRecordError(f"record {i}: varlong longer than 10 bytes")
    od, p = vi(data, p + 1)
    klen, p = vi(data, p)
    if klen < -1:
        raise InvalidRecordError(f"record {i} has key length {klen}")
    if klen == -1:
        if want_keyless:
            keyless.append(i)
    else:
        p += klen
    vlen, p = vi(data, p)
    if vlen < -1:
        raise InvalidRecordError(f"record {i} has value length {vlen}")
    if vlen > 0:
        p += vlen
    if p >= rec_end:
        raise InvalidRecordError(
            f"Invalid record size: record {i}'s key and value overrun its {length} bytes")
    p = p + 1 if data[p] == 0 else _skip_headers(data, p, rec_end, i)
    if p != rec_end:
        raise InvalidRecordError(
            f"Invalid record size: record {i} at byte {pos} declares {length} bytes but its "
            f"fields use {p - (rec_end - length)}")
    return rec_end, od == i


def _skip_headers(data: Data, p: int, rec_end: int, i: int) -> int:
    nh, p = _varint(data, p)
    if nh < 0 or nh > rec_end - p:
        raise InvalidRecordError(f"Found invalid number of record headers {nh} in record {i}")
    for _ in range(nh):
        hk, p = _varint(data, p)
        if hk < 0:
            raise InvalidRecordError(f"Invalid negative header key size {hk} in record {i}")
        p += hk
        hv, p = _varint(data, p)
        if hv < -1:
            raise InvalidRecordError(f"record {i} has header value length {hv}")
        p += max(hv, 0)
        if p > rec_end:
            break
    return p


# ---- the compiled twins ----------------------------------------------------------------------

Runs = Callable[..., tuple[int, int]]  # (data, pos, stop, count, want_keyless, keyless)
Walk = Callable[[bytes, int, int, int, int, bool, list[int]], RecordsCheck]


def _walk_compiled(data: bytes, pos: int, stop: int, first: int, count: int,
                   want_keyless: bool, keyless: list[int]) -> RecordsCheck:
    """`_walk_py`'s compiled twin (record/_kernels.pyx `walk`)."""
    assert kernels is not None
    sequential = kernels.walk(data, pos, stop, first, count, want_keyless, keyless)
    return RecordsCheck(sequential, tuple(keyless))


# Compiled: the records are proven in place by the compiled walk (record/_kernels.pyx
# `prove`), up to the first that is not well-formed with offset delta i; the walk names it.
_runs: Runs = _column_runs if kernels is None else kernels.prove
_walk: Walk = _walk_py if kernels is None else _walk_compiled
