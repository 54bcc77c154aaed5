"""Key/value-only decoding of magic-2 batches: the consumer's fast paths for records with no
headers (what line producers write). Sections in record.uniform's fixed-size layout are
sliced without a loop; others are walked once, in one loop over the section's bytes that
does the least per record (the checks that only a malformed record fails are folded into
accumulators tested once). Keys and values come back as bytes, and every function declines
(None) whenever the general `RecordBatch` iterator is needed, so the paths never disagree
(tests/record/test_value_scan.py, tests/client/test_producer_batch.py and
tests/record/test_uniform.py check it).

These are the pure-Python fast paths: with the compiled kernels (record/_accel.py) the
consumer renders whole batches in C instead (client/record_format.py's KernelFormat)."""

from __future__ import annotations

from itertools import compress, repeat

from kafkactl.record.batch import RecordBatch
from kafkactl.record.codecs import decompress
from kafkactl.record.errors import CorruptRecordError
from kafkactl.record.uniform import uniform_values
from kafkactl.record.varint import decode_varint

View = memoryview | bytes


def _section(batch: RecordBatch) -> memoryview:
    codec = batch.attributes & 0x07
    section = batch.records_section()
    return memoryview(decompress(codec, section)) if codec else section


def fast_values(batch: RecordBatch, start: int
                ) -> list[View | None] | tuple[bytes, ...] | None:
    """Values of a v2 batch (any codec) whose records carry no headers, with offset >=
    start (keys are passed over); None when the batch needs the general decoder."""
    found = fast_columns(batch, start, keys=False)
    return None if found is None else found[1]


def fast_key_values(batch: RecordBatch, start: int
                    ) -> tuple[list[View | None], list[View | None]] | None:
    """(keys, values) of a v2 batch whose records carry no headers, with offset >= start;
    None when the batch needs the general decoder."""
    found = fast_columns(batch, start, keys=True)
    return None if found is None else (found[0], found[1])  # type: ignore[return-value]


Columns = tuple[list[View | None] | None, list[View | None], list[int] | None]


def fast_columns(batch: RecordBatch, start: int, *, keys: bool = True,
                 offsets: bool = False) -> Columns | None:
    """(keys, values, offset deltas) of the records of a v2 batch with offset >= start, when
    none carries headers (unless `keys`, keys is None, as are the offset deltas unless
    `offsets`); None when the batch needs the general decoder."""
    section = _section(batch)
    skip = start - batch.base_offset
    count = batch.record_count
    whole = uniform_values(section, count)
    if whole is not None:  # fixed-size line records: sliced out without a record loop
        values: list[View | None] = list(whole[skip:] if skip > 0 else whole)
        first = max(skip, 0)
        return ([None] * len(values) if keys else None, values,
                list(range(first, first + len(values))) if offsets else None)
    scanned = _scan(bytes(section), count)
    if scanned is None:
        return None
    key_column, values, deltas = scanned
    if skip > 0:
        wanted = list(map(skip.__le__, deltas))
        values = list(compress(values, wanted))
        key_column = list(compress(key_column, wanted))
        deltas = list(compress(deltas, wanted))
    return key_column if keys else None, values, deltas if offsets else None


Scanned = tuple[list[View | None], list[View | None], list[int]]


def _scan(d: bytes, count: int) -> Scanned | None:
    """Walk `count` records once: (keys, values, offset deltas), or None when a record has
    headers, a key or value of 8 KiB or more, or does not add up. Checks that cannot fail
    for a well-formed record (sign bits, the header count, each record's end) are folded
    into two accumulators tested after the loop."""
    keys: list[View | None] = []
    values: list[View | None] = []
    deltas: list[int] = []
    key_append, value_append, delta_append = keys.append, values.append, deltas.append
    pos = 0
    signs = 0  # OR of every length's low byte: bit 0 set = a negative length
    bad = 0  # nonzero: a varint too long, a header count, a record that does not add up
    try:
        for _ in repeat(None, count):
            b = d[pos]
            if b < 0x80:  # record length
                q = pos + 1
                pos = q + (b >> 1)
            else:
                c = d[pos + 1]
                q = pos + 2
                pos = q + (((b & 0x7F) | (c << 7)) >> 1)
                bad |= c & 0x80
            signs |= b
            q += 1  # attributes
            if d[q] >= 0x80:  # a timestamp delta of more than one byte
                t = q
                while d[q] >= 0x80:
                    q += 1
                bad |= q - t > 8  # ten bytes or more: the general decoder's to judge
            b = d[q + 1]  # offset delta (its sign is bit 0 of the first byte: negative
            signs |= b  # deltas are the general decoder's)
            if b < 0x80:
                delta_append(b >> 1)
                q += 2
            elif d[q + 2] < 0x80:
                delta_append(((b & 0x7F) | (d[q + 2] << 7)) >> 1)
                q += 3
            else:
                delta, q = decode_varint(d, q + 1)
                delta_append(delta)
            b = d[q]  # key length
            if b == 1:
                key_append(None)
                q += 1
            elif b < 0x80:
                q += 1 + (b >> 1)
                key_append(d[q - (b >> 1):q])
                signs |= b
            else:
                c = d[q + 1]
                n = ((b & 0x7F) | (c << 7)) >> 1
                q += 2 + n
                key_append(d[q - n:q])
                signs |= b
                bad |= c & 0x80
            b = d[q]  # value length
            if b < 0x80:
                if b == 1:
                    value_append(None)
                    q += 1
                else:
                    q += 1 + (b >> 1)
                    value_append(d[q - (b >> 1):q])
                    signs |= b
            else:
                c = d[q + 1]
                n = ((b & 0x7F) | (c << 7)) >> 1
                q += 2 + n
                value_append(d[q - n:q])
                signs |= b
                bad |= c & 0x80
            bad |= d[q] | ((q + 1) ^ pos)  # header count 0, and the record ends there
    except (IndexError, CorruptRecordError):
        return None
    if signs & 1 or bad or pos != len(d):
        return None
    return keys, values, deltas
