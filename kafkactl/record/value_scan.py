"""Value-only decoding of magic-2 batches: the consumer's fast path for records with no key
and no headers (what line producers write). Sections in record.uniform's fixed-size layout
are sliced without a loop; others are walked once. Values come back as memoryviews, and it
declines (None) whenever the general `RecordBatch` iterator is needed, so the two never
disagree (tests/client/test_producer_batch.py and tests/record/test_uniform.py check it)."""

from __future__ import annotations

from kafkactl.record.batch import RecordBatch
from kafkactl.record.codecs import decompress
from kafkactl.record.uniform import uniform_values


def fast_values(batch: RecordBatch, start: int
                ) -> list[memoryview | None] | tuple[bytes, ...] | None:
    """Values of an uncompressed-or-compressed v2 batch whose records carry no headers and
    no keys, with offset >= start; None when the batch needs the general decoder."""
    codec = batch.attributes & 0x07
    section = batch.records_section()
    if codec:
        section = memoryview(decompress(codec, section))
    skip = start - batch.base_offset
    whole = uniform_values(section, batch.record_count)
    if whole is not None:  # fixed-size line records: sliced out without a record loop
        return whole[skip:] if skip > 0 else whole
    out: list[memoryview | None] = []
    append = out.append
    sec = section
    pos = 0
    end = len(sec)
    try:
        for _ in range(batch.record_count):
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
            if sec[q] != 1:  # a key: general path
                return None
            b = sec[q + 1]
            if b == 1:
                value = None
                vend = q + 2
            elif b < 0x80:
                vend = q + 2 + (b >> 1)
                value = sec[q + 2:vend]
            else:
                b2 = sec[q + 2]
                if b2 >= 0x80:
                    return None
                vend = q + 3 + (((b & 0x7F) | (b2 << 7)) >> 1)
                value = sec[q + 3:vend]
            if vend + 1 != rec_end or sec[vend] != 0:  # headers: general path
                return None
            if od >= skip:
                append(value)
            pos = rec_end
    except IndexError:
        return None
    if pos != end:
        return None
    return out
