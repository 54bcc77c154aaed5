"""Columnar encoding of header-less v2 records: a list of values (or of keys and values) of
any lengths into the records section's bytes, without a Python loop per record.

What line producers write: attributes 0, the timestamp delta of the call (`ts_delta`: the
clock reading of the producer's call against the batch's timestamp, 0 for the call that
began the batch), offset delta = the record's index in the batch, no headers. A record is
then

    length | 00 | timestamp delta | offset delta | key length (01: null) | key
           | value length | value | 00

A key or value may be None: null, its length varint -1 (01) and no bytes (a tombstone's
value: `kafkactl produce -Z`, --null-marker). Its record is as long as one with an empty
field (length 0: 00), so the tables count it as one; its two parts are patched after.

and everything but the key and value is a function of the key length, the value length,
the offset delta and the call's timestamp delta: tables by those lengths and the widths of
the two deltas' varints (built on demand) give the parts, `map` looks them up for a whole
run of records, slice assignment interleaves them with the timestamp delta, the keys and
values (a record's header count goes with the next record's head: five parts a null-key
record, seven a keyed one), and
`bytes.join` assembles the section once per batch. Sizes come from the same tables, summed
with `itertools.accumulate`, so a batch is filled to exactly the record that would not fit.
The bytes are those of `encode_record` (tests/record/test_columns.py compares them).

With the compiled kernels (record/_kernels.pyx, picked by record/_accel.py) `encode_values`
and `encode_key_values` are compiled twins that write a run's records into one bytes
object; the functions below stay the definition (tests/record/test_kernels.py proves the
same bytes, index and size).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate, compress, count, repeat
from operator import add, is_
from typing import TypeVar

from kafkactl.record._accel import kernels
from kafkactl.record.builder import encode_record
from kafkactl.record.varint import _UNSIGNED_CACHE, encode_varlong

T = TypeVar("T")
Buffer = bytes | bytearray | memoryview

# ZIGZAG[n]: the zig-zag varint of 0 <= n < len(ZIGZAG) (the unsigned varint of 2n).
ZIGZAG: tuple[bytes, ...] = _UNSIGNED_CACHE[0::2]
MAX_DELTA = len(ZIGZAG) - 1  # offset deltas the tables cover (the caller encodes the rest)
# Key and value lengths the tables cover: a record's length must stay inside ZIGZAG too.
MAX_FIELDS = MAX_DELTA - 32
RUN = 4096  # records encoded per step (a batch takes what fits of a step's run)
NULL_LENGTH = b"\x01"  # a null key's or value's length varint (-1)
NULL_KEY = NULL_LENGTH
NULL_KEY_NULL_VALUE = NULL_KEY + NULL_LENGTH
NO_HEADERS = b"\x00"
ATTRIBUTES = b"\x00"  # attributes 0 (then the timestamp delta, the call's)

# Offset deltas by the width of their varint: [start, end) and width.
_DELTA_CLASSES = ((0, 64, 1), (64, 8192, 2), (8192, MAX_DELTA, 3))


def _grow(table: list[T], size: int, item: Callable[[int], T]) -> list[T]:
    """`table` extended with item(n) up to index `size` (tables grow on demand)."""
    if len(table) <= size:
        table.extend(item(n) for n in range(len(table), size + 1))
    return table


# _FIELD[n]: bytes of a key or value of length n with its length varint.
_FIELD: list[int] = []
# _NULL_KEY_VALUE_LENGTH[n]: the null key and the length varint of a value of length n.
_NULL_KEY_VALUE_LENGTH: list[bytes] = []


class _Tables:
    """For records whose timestamp delta and offset delta varints are `width` bytes long
    together, by an index x: `head[x]` (record length varint, attributes), `after[x]` (the
    same after the previous record's header count) and `size[x]` (the whole record's
    bytes). Null-key records (`keyed` False) are indexed by the value length; keyed ones by
    the bytes of key and value with their length varints."""

    __slots__ = ("width", "keyed", "head", "after", "size")

    def __init__(self, width: int, keyed: bool) -> None:
        self.width = width
        self.keyed = keyed
        self.head: list[bytes] = []
        self.after: list[bytes] = []  # the previous record's header count 0, then head
        self.size: list[int] = []

    def cover(self, top: int) -> None:
        """Make the tables reach index `top`."""
        if len(self.head) > top:
            return
        field = _grow(_FIELD, top, _field_size)
        for x in range(len(self.head), top + 1):
            # attributes + timestamp delta + offset delta + key + value + header count
            length = 2 + self.width + (x if self.keyed else 1 + field[x])
            lv = ZIGZAG[length]
            self.head.append(lv + ATTRIBUTES)
            self.after.append(NO_HEADERS + lv + ATTRIBUTES)
            self.size.append(len(lv) + length)


def _field_size(n: int) -> int:
    return len(ZIGZAG[n]) + n


def _null_key_value_length(n: int) -> bytes:
    return NULL_KEY + ZIGZAG[n]


# by the width of both deltas' varints (2 to 13 bytes), made on first use
_VALUE_TABLES: dict[int, _Tables] = {}
_KEYED_TABLES: dict[int, _Tables] = {}


def _tables(tables: dict[int, _Tables], width: int) -> _Tables:
    table = tables.get(width)
    if table is None:
        table = tables[width] = _Tables(width, tables is _KEYED_TABLES)
    return table


def _delta_class(delta: int) -> tuple[int, int, int] | None:
    for cls in _DELTA_CLASSES:
        if delta < cls[1]:
            return cls
    return None


def _lengths(column: Sequence[bytes | None], limit: int) -> tuple[list[int], int, list[int]]:
    """len() of each item (0 for None: a null field's record is as long as an empty one's),
    cut before the first one longer than `limit`; the longest; the indexes of the Nones
    before the cut, ascending."""
    nulls: list[int] = []
    try:
        lengths = list(map(len, column))  # type: ignore[arg-type]  # a None: TypeError
    except TypeError:  # a None (or something without len(), which fails again below)
        nulls = list(compress(count(), map(is_, column, repeat(None))))
        if not nulls:
            raise
        lengths = [0 if x is None else len(x) for x in column]
    top = max(lengths, default=0)
    if top > limit:
        lengths = lengths[:next(i for i, n in enumerate(lengths) if n > limit)]
        top = max(lengths, default=0)
        if nulls and nulls[-1] >= len(lengths):
            nulls = [j for j in nulls if j < len(lengths)]
    return lengths, top, nulls


def _heads(table: _Tables, index: list[int]) -> list[bytes]:
    """Each record's head, after the previous record's header count but for the first."""
    heads = list(map(table.after.__getitem__, index))
    heads[0] = table.head[index[0]]
    return heads


def _fit(totals: list[int], room: int, first_in_batch: bool) -> int:
    """How many records fit in `room` bytes, given their running totals of bytes; the first
    record of a batch always does."""
    k = bisect_right(totals, room)
    return 1 if k == 0 and first_in_batch and totals else k


def encode_values_py(values: Sequence[bytes | None], start: int, first_delta: int, room: int,
                     ts_delta: int = 0) -> tuple[list[bytes], int, int]:
    """Null-key records holding values[start:] (None: a null value), from offset delta
    `first_delta`, with timestamp delta `ts_delta` (the call's time against the batch
    timestamp), while they fit in `room` bytes (the first record of a batch, delta 0,
    always fits). Returns the parts to join, the index after the last value encoded and
    the bytes they take. Stops early at a value longer than MAX_FIELDS or at offset delta
    MAX_DELTA: the caller encodes that record some other way."""
    ts = encode_varlong(ts_delta)
    parts: list[bytes] = []
    i, delta, used = start, first_delta, 0
    n = len(values)
    while i < n and (cls := _delta_class(delta)) is not None:
        table = _tables(_VALUE_TABLES, len(ts) + cls[2])
        run = values[i:i + min(RUN, cls[1] - delta)]
        lengths, top, nulls = _lengths(run, MAX_FIELDS)
        if not lengths:
            break
        table.cover(top)
        totals = list(accumulate(map(table.size.__getitem__, lengths)))
        k = _fit(totals, room - used, delta == 0)
        if k == 0:
            break
        full = k < len(lengths)
        if k < len(run):
            lengths, run = lengths[:k], run[:k]
        out: list[bytes | None] = [NO_HEADERS] * (5 * k + 1)  # the last: the header count
        out[0:-1:5] = _heads(table, lengths)
        out[1::5] = [ts] * k
        out[2::5] = ZIGZAG[delta:delta + k]
        out[3::5] = map(_grow(_NULL_KEY_VALUE_LENGTH, top, _null_key_value_length).__getitem__,
                        lengths)
        out[4::5] = run
        for j in nulls:  # null values: length -1 and no bytes
            if j >= k:
                break
            out[5 * j + 3] = NULL_KEY_NULL_VALUE
            out[5 * j + 4] = b""
        parts += out  # type: ignore[arg-type]  # no None is left
        used += totals[k - 1]
        delta += k
        i += k
        if full:
            break
    return parts, i, used


def encode_key_values_py(keys: Sequence[bytes | None], values: Sequence[bytes | None],
                         start: int, first_delta: int, room: int, ts_delta: int = 0
                         ) -> tuple[list[bytes], int, int]:
    """As encode_values, for (key or None, value or None) pairs from index `start`."""
    ts = encode_varlong(ts_delta)
    parts: list[bytes] = []
    i, delta, used = start, first_delta, 0
    n = len(values)
    while i < n and (cls := _delta_class(delta)) is not None:
        table = _tables(_KEYED_TABLES, len(ts) + cls[2])
        end = i + min(RUN, cls[1] - delta)
        run, krun = values[i:end], keys[i:end]
        lengths, top, nulls = _lengths(run, MAX_FIELDS // 2)
        klengths, ktop, knulls = _lengths(krun, MAX_FIELDS // 2)
        m = min(len(lengths), len(klengths))
        if m == 0:
            break
        if m < len(lengths) or m < len(klengths):
            lengths, klengths = lengths[:m], klengths[:m]
        field = _grow(_FIELD, max(top, ktop), _field_size)
        sizes = list(map(add, map(field.__getitem__, klengths), map(field.__getitem__, lengths)))
        table.cover(field[top] + field[ktop])
        totals = list(accumulate(map(table.size.__getitem__, sizes)))
        k = _fit(totals, room - used, delta == 0)
        if k == 0:
            break
        full = k < m
        out: list[bytes | None] = [NO_HEADERS] * (7 * k + 1)  # the last: header count
        out[0:-1:7] = _heads(table, sizes[:k])
        out[1::7] = [ts] * k
        out[2::7] = ZIGZAG[delta:delta + k]
        out[3::7] = map(ZIGZAG.__getitem__, klengths[:k])
        out[4::7] = krun[:k]
        out[5::7] = map(ZIGZAG.__getitem__, lengths[:k])
        out[6::7] = run[:k]
        for column, at in ((3, knulls), (5, nulls)):  # null keys, values: -1 and no bytes
            for j in at:
                if j >= k:
                    break
                out[7 * j + column] = NULL_LENGTH  # as long as an empty field's length 0
                out[7 * j + column + 1] = b""
        parts += out  # type: ignore[arg-type]  # no None is left
        used += totals[k - 1]
        delta += k
        i += k
        if full:
            break
    return parts, i, used


def encode_lines_into_py(data: Buffer, pos: int, end: int, delimiter: Buffer,
                         key_separator: Buffer | None, first_delta: int,
                         out: bytearray | memoryview, offset: int,
                         headers: Buffer = NO_HEADERS, ts_delta: int = 0
                         ) -> tuple[int, int, int]:
    """The records of delimited lines straight from the input buffer into `out`: the lines
    of data[pos:end], each ending at a delimiter or at `end` (a delimiter at `end` ends the
    last line: no empty line follows it), as records with offset deltas from
    `first_delta`, null keys, or with key_separator each line's `key SEP value` (a line
    without SEP: a null key and the whole line as the value), written at out[offset:]
    while they fit in it. Returns the position after the last line encoded (its delimiter
    included), how many and their size in bytes; when not even the first line fits, (pos,
    0, the bytes its record needs). `headers`: every record's header section, encoded
    (builder.encode_headers; the default is none). `ts_delta`: every record's timestamp
    delta (the call's time against the batch timestamp). No table limits: any line length
    and offset delta (`encode_record`'s int32 varints)."""
    with memoryview(out) as view:
        if view.readonly:
            raise BufferError("Object is not writable.")
        if not len(delimiter) or (key_separator is not None and not len(key_separator)):
            raise ValueError("empty separator")
        if not 0 <= pos <= end <= len(data):
            raise ValueError(f"pos {pos} and end {end} must satisfy "
                             f"0 <= pos <= end <= len(data) ({len(data)})")
        if first_delta < 0:
            raise ValueError(f"first_delta {first_delta} must not be negative")
        if not 0 <= offset <= view.nbytes:
            raise ValueError(f"offset {offset} must satisfy "
                             f"0 <= offset <= len(out) ({view.nbytes})")
        encode_varlong(ts_delta)  # out of int64 range: its error before any line
        room = view.nbytes - offset
        block = bytes(data[pos:end])
        delim = bytes(delimiter)
        ksep = None if key_separator is None else bytes(key_separator)
        section = bytes(headers)
        p, delta, used, n = 0, first_delta, 0, len(block)
        while p < n:
            q = block.find(delim, p)
            stop, after = (n, n) if q < 0 else (q, q + len(delim))
            line = block[p:stop]
            key: bytes | None = None
            value = line
            if ksep is not None:
                k, sep, v = line.partition(ksep)
                if sep:
                    key, value = k, v
            record = encode_record(delta, ts_delta, key, value, header_section=section)
            if used + len(record) > room:
                if delta == first_delta:
                    used = len(record)  # what the first line needs
                break
            view[offset + used:offset + used + len(record)] = record
            used += len(record)
            delta += 1
            p = after
    return pos + p, delta - first_delta, used


# (values, start, first_delta, room, ts_delta)
EncodeValues = Callable[[Sequence[bytes | None], int, int, int, int],
                        tuple[list[bytes], int, int]]
EncodeKeyValues = Callable[[Sequence[bytes | None], Sequence[bytes | None], int, int, int, int],
                           tuple[list[bytes], int, int]]
encode_values: EncodeValues = encode_values_py if kernels is None else kernels.encode_values
encode_key_values: EncodeKeyValues = (encode_key_values_py if kernels is None
                                      else kernels.encode_key_values)
# (data, pos, end, delimiter, key_separator, first_delta, out, offset, headers, ts_delta)
EncodeLinesInto = Callable[[Buffer, int, int, Buffer, Buffer | None, int,
                            bytearray | memoryview, int, Buffer, int], tuple[int, int, int]]
encode_lines_into: EncodeLinesInto = (encode_lines_into_py if kernels is None
                                      else kernels.encode_lines_into)
