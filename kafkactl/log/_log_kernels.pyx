# cython: language_level=3, boundscheck=False, wraparound=False
# cython: cdivision=True, embedsignature=False
"""Compiled twin of log/validator.py's `validate_batches` for the plain case of a
produce: one uncompressed magic-2 batch that fills the partition's records. The pure
function is the definition; log/kernels.py picks this twin and tests/log/
test_validator_kernel.py proves, on the same inputs (malformed ones included), that it
returns what the reference returns.

The twin declines anything else to the reference, which then decides, its errors
included: a buffer that is not exactly one batch, a bad magic, length, CRC, count,
attribute, sequence, a compressed batch, a timestamp check (message.timestamp.difference
.max.ms set), records whose framing fails or that need renumbering, a null key on a
compacted topic. So it never raises on bad input and has no error message of its own.
Every read is checked against the buffer's end first (the bytes come from the network).

On a CreateTime topic the twin also reads every record's timestamp (Kafka's LogValidator
takes the batch's max timestamp from its records, not from the producer's header): a
batch whose header says otherwise, or that carries the LogAppendTime bit, is declined,
and the reference rewrites its header (or refuses it). `records_max_timestamp` is the
compiled twin of validator.py's `records_max_timestamp_py` (the same walk, for the
reference's compressed and multi-batch cases).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

API = 2  # log/kernels.py refuses a module built from another version of this file

DEF RECORDS_OFFSET = 61  # record/batch_header.py's offsets, checked by the parity tests
DEF LENGTH_OFFSET = 8
DEF MAGIC_OFFSET = 16
DEF CRC_OFFSET = 17
DEF ATTRIBUTES_OFFSET = 21
DEF LAST_OFFSET_DELTA_OFFSET = 23
DEF BASE_TIMESTAMP_OFFSET = 27
DEF MAX_TIMESTAMP_OFFSET = 35
DEF PRODUCER_ID_OFFSET = 43
DEF PRODUCER_EPOCH_OFFSET = 51
DEF BASE_SEQUENCE_OFFSET = 53
DEF RECORDS_COUNT_OFFSET = 57
DEF COMPRESSION_MASK = 0x07
DEF TRANSACTIONAL_FLAG = 0x10
DEF CONTROL_FLAG = 0x20
DEF TIMESTAMP_TYPE_FLAG = 0x08
DEF NO_TIMESTAMP = -1


cdef inline int64_t _be(const uint8_t *d, int width) noexcept:
    """The signed big-endian integer of `width` bytes at d."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(width):
        v = (v << 8) | d[i]
    if width < 8 and v >> (8 * width - 1):
        v -= (<uint64_t>1) << (8 * width)
    return <int64_t>v


cdef inline Py_ssize_t _uvarint(const uint8_t *d, Py_ssize_t pos, Py_ssize_t stop,
                                int max_bytes, uint64_t *out) noexcept:
    """The unsigned varint at pos (at most `max_bytes` bytes, before `stop`): the position
    after it, or -1."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef int k
    cdef uint8_t b
    for k in range(max_bytes):
        if pos >= stop:
            return -1
        b = d[pos]
        pos += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if not b & 0x80:
            out[0] = v
            return pos
        shift += 7
    return -1


cdef int _max_timestamp(const uint8_t *d, Py_ssize_t pos, Py_ssize_t stop, int64_t count,
                        int64_t first_ts, int64_t *best) noexcept:
    """max(NO_TIMESTAMP, first_ts + each record's timestamp delta (a Java long: wraps)) of
    the `count` records from pos into best[0]: 0, or -1 when the records do not frame."""
    cdef int64_t i, length, delta, ts
    cdef int64_t m = NO_TIMESTAMP
    cdef uint64_t z
    cdef Py_ssize_t p, end
    for i in range(count):
        if pos + 2 < stop and d[pos] < 0x80:  # one- and two-byte varints inline
            z = d[pos]
            p = pos + 1
        elif pos + 2 < stop and d[pos + 1] < 0x80:
            z = (d[pos] & 0x7F) | (<uint64_t>d[pos + 1] << 7)
            p = pos + 2
        else:
            p = _uvarint(d, pos, stop, 5, &z)
            if p < 0:
                return -1
        length = <int64_t>(z >> 1) ^ -(<int64_t>(z & 1))
        if length < 2 or length > stop - p:
            return -1
        end = p + length
        if d[p + 1] < 0x80:  # (p + 1 < end: length >= 2)
            z = d[p + 1]
        else:
            if _uvarint(d, p + 1, end, 10, &z) < 0:  # after the attributes byte
                return -1
        delta = <int64_t>(z >> 1) ^ -(<int64_t>(z & 1))
        ts = <int64_t>(<uint64_t>first_ts + <uint64_t>delta)
        if ts > m:
            m = ts
        pos = end
    best[0] = m
    return 0


def records_max_timestamp(object data, Py_ssize_t start, Py_ssize_t stop, long long count,
                          long long first_ts):
    """validator.records_max_timestamp_py's twin: the batch's max timestamp as Kafka's
    LogValidator takes it from `count` records in data[start:stop] (framing proven), or
    None when they do not frame (the reference then names nothing either: it is not
    called on such records)."""
    cdef Py_buffer view
    cdef int64_t best = NO_TIMESTAMP
    cdef int ok
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if start < 0 or stop > view.len or start > stop:
            return None
        ok = _max_timestamp(<const uint8_t *>view.buf, start, stop, count, first_ts, &best)
    finally:
        PyBuffer_Release(&view)
    return best if ok == 0 else None


cdef class BatchValidator:
    """`validate(buf, *, ...)`: validate_batches' twin, else `reference(buf, ...)`. A
    method, not __call__: a bound method of an extension type is called without a
    kwargs dict being built (vectorcall)."""
    cdef object reference, batch_info, check_records, prove, crc32c

    def __init__(self, object reference, object batch_info, object check_records,
                 object prove, object crc32c):
        """`check_records`: record/framing.py's; `prove`: the compiled record framing proof
        it uses (record/_kernels.pyx), called directly when built, else None."""
        self.reference = reference
        self.batch_info = batch_info
        self.check_records = check_records
        self.prove = prove
        self.crc32c = crc32c

    def validate(self, object buf, *, object max_message_bytes, object timestamp_type,
                 object max_timestamp_difference_ms, object now_ms, object produce_version,
                 object single_batch, object compacted=False, object topic_partition=""):
        cdef bint create_time = timestamp_type == "CreateTime"
        got = self.fast(buf, max_message_bytes, compacted, create_time) \
            if not create_time or max_timestamp_difference_ms == 2**63 - 1 else None
        if got is not None:
            return got
        return self.reference(
            buf, max_message_bytes=max_message_bytes, timestamp_type=timestamp_type,
            max_timestamp_difference_ms=max_timestamp_difference_ms, now_ms=now_ms,
            produce_version=produce_version, single_batch=single_batch, compacted=compacted,
            topic_partition=topic_partition)

    cdef object fast(self, object buf, object max_message_bytes, object compacted,
                     bint create_time):
        """[BatchInfo] of the one plain batch in buf, or None (decline). On a CreateTime
        topic, only when the header's max timestamp is its records' (see above)."""
        cdef Py_buffer view
        cdef const uint8_t *d
        cdef Py_ssize_t n
        cdef int64_t size, count, last_delta, pid, base_seq, first_ts, max_ts, best
        cdef int attributes, pepoch, ok
        cdef uint32_t crc
        if not isinstance(buf, memoryview):
            return None
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            d = <const uint8_t *>view.buf
            n = view.len
            if n < RECORDS_OFFSET or d[MAGIC_OFFSET] != 2:
                return None
            size = 12 + _be(d + LENGTH_OFFSET, 4)
            if size != n:
                return None
            attributes = <int>_be(d + ATTRIBUTES_OFFSET, 2)
            last_delta = _be(d + LAST_OFFSET_DELTA_OFFSET, 4)
            first_ts = _be(d + BASE_TIMESTAMP_OFFSET, 8)
            max_ts = _be(d + MAX_TIMESTAMP_OFFSET, 8)
            pid = _be(d + PRODUCER_ID_OFFSET, 8)
            pepoch = <int>_be(d + PRODUCER_EPOCH_OFFSET, 2)
            base_seq = _be(d + BASE_SEQUENCE_OFFSET, 4)
            count = _be(d + RECORDS_COUNT_OFFSET, 4)
            crc = <uint32_t>(_be(d + CRC_OFFSET, 4) & 0xFFFFFFFF)
        finally:
            PyBuffer_Release(&view)
        if size > max_message_bytes:
            return None
        if count <= 0 or last_delta != count - 1:
            return None
        if attributes & (CONTROL_FLAG | COMPRESSION_MASK | TIMESTAMP_TYPE_FLAG):
            return None
        if pid >= 0 and base_seq < 0:
            return None
        if attributes & TRANSACTIONAL_FLAG and pid < 0:
            return None
        if self.crc32c(buf[ATTRIBUTES_OFFSET:]) != crc:
            return None
        if self.prove is not None and not compacted:
            # what check_records does with the compiled proof: all records proven, in order
            if self.prove(buf, RECORDS_OFFSET, size, count, False, None) != (count, size):
                return None
        else:
            try:
                check = self.check_records(buf, count, want_keyless=compacted,
                                           start=RECORDS_OFFSET, end=size)
            except Exception:  # the reference names the fault
                return None
            if not check.sequential or check.keyless:
                return None
        if create_time:  # Kafka's maxBatchTimestamp: every record's timestamp
            PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
            try:
                if view.len != size:
                    return None
                ok = _max_timestamp(<const uint8_t *>view.buf, RECORDS_OFFSET, size, count,
                                    first_ts, &best)
            finally:
                PyBuffer_Release(&view)
            if ok != 0 or best != max_ts:
                return None  # the reference rewrites the header
        return [self.batch_info(0, size, pid, pepoch, base_seq, count, first_ts, max_ts, 0,
                                bool(attributes & TRANSACTIONAL_FLAG), False)]
