"""Key/value-only decoding of magic-2 batches: the consumer's fast paths for records with no
headers (what line producers write). Sections in record.uniform's fixed-size layout are
sliced without a loop; others are walked once. Keys and values come back as memoryviews
(bytes from the uniform path), and both functions decline (None) whenever the general
`RecordBatch` iterator is needed, so the paths never disagree
(tests/client/test_producer_batch.py and tests/record/test_uniform.py check it)."""

from __future__ import annotations

from kafkactl.record.batch import RecordBatch
from kafkactl.record.codecs import decompress
from kafkactl.record.uniform import uniform_values

View = memoryview | bytes


def _section(batch: RecordBatch) -> memoryview:
    codec = batch.attributes & 0x07
    section = batch.records_section()
    return memoryview(decompress(codec, section)) if codec else section


def fast_values(batch: RecordBatch, start: int
                ) -> list[memoryview | None] | tuple[bytes, ...] | None:
    """Values of a v2 batch (any codec) whose records carry no headers and no keys, with
    offset >= start; None when the batch needs the general decoder."""
    section = _section(batch)
    skip = start - batch.base_offset
    whole = uniform_values(section, batch.record_count)
    if whole is not None:  # fixed-size line records: sliced out without a record loop
        return whole[skip:] if skip > 0 else whole
    scanned = _scan(section, batch.record_count, skip, keyed=False)
    return None if scanned is None else scanned[1]


def fast_key_values(batch: RecordBatch, start: int
                    ) -> tuple[list[View | None], list[View | None]] | None:
    """(keys, values) of a v2 batch whose records carry no headers, with offset >= start;
    None when the batch needs the general decoder."""
    section = _section(batch)
    skip = start - batch.base_offset
    whole = uniform_values(section, batch.record_count)
    if whole is not None:
        values = list(whole[skip:] if skip > 0 else whole)
        return [None] * len(values), values  # type: ignore[return-value]
    scanned = _scan(section, batch.record_count, skip, keyed=True)
    return None if scanned is None else (scanned[0], scanned[1])  # type: ignore[return-value]


# C901: consume fast path: each record's varint walk inlined for speed
def _scan(sec: memoryview, count: int, skip: int, *, keyed: bool  # noqa: C901
          ) -> tuple[list[memoryview | None], list[memoryview | None]] | None:
    """Walk `count` records: (keys, values) of those with offset delta >= skip, or None
    when a record has headers, a key longer than 2 varint bytes' worth, or (unless
    `keyed`) any key at all."""
    keys: list[memoryview | None] = []
    out: list[memoryview | None] = []
    append = out.append
    key_append = keys.append
    pos = 0
    end = len(sec)
    try:
        for _ in range(count):
            b = sec[pos]
            if b < 0x80:
                p = pos + 1
                length = b >> 1
            else:
                b2 = sec[pos + 1]
                if b2 >= 0x80:
                    return None
                length = ((b & 0x7F) | (b2 << 7)) >> 1
                p = pos + 2
            rec_end = p + length
            q = p + 1  # after attributes
            while sec[q] >= 0x80:  # timestamp delta, any length
                q += 1
            q += 1
            b = sec[q]
            if b < 0x80:
                od = b >> 1
                q += 1
            else:
                od = b & 0x7F
                shift = 7
                q += 1
                b = sec[q]
                while b >= 0x80:
                    od |= (b & 0x7F) << shift
                    shift += 7
                    q += 1
                    b = sec[q]
                od = (od | (b << shift)) >> 1
                q += 1
            b = sec[q]
            if b == 1:  # null key
                key = None
                q += 1
            elif not keyed or b & 1:  # a key we may not take, or a negative length
                return None
            elif b < 0x80:
                kend = q + 1 + (b >> 1)
                key = sec[q + 1:kend]
                q = kend
            else:
                b2 = sec[q + 1]
                if b2 >= 0x80:
                    return None
                kend = q + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                key = sec[q + 2:kend]
                q = kend
            b = sec[q]
            if b == 1:
                value = None
                vend = q + 1
            elif b & 1:  # a negative length other than -1: malformed
                return None
            elif b < 0x80:
                vend = q + 1 + (b >> 1)
                value = sec[q + 1:vend]
            else:
                b2 = sec[q + 1]
                if b2 >= 0x80:
                    return None
                vend = q + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                value = sec[q + 2:vend]
            if vend + 1 != rec_end or sec[vend] != 0:  # headers: general path
                return None
            if od >= skip:
                key_append(key)
                append(value)
            pos = rec_end
    except IndexError:
        return None
    if pos != end:
        return None
    return keys, out
