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
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

API = 1  # log/kernels.py refuses a module built from another version of this file

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


cdef inline int64_t _be(const uint8_t *d, int width) noexcept:
    """The signed big-endian integer of `width` bytes at d."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(width):
        v = (v << 8) | d[i]
    if width < 8 and v >> (8 * width - 1):
        v -= (<uint64_t>1) << (8 * width)
    return <int64_t>v



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
        got = self.fast(buf, max_message_bytes, max_timestamp_difference_ms, compacted) \
            if timestamp_type != "CreateTime" or max_timestamp_difference_ms == 2**63 - 1 \
            else None
        if got is not None:
            return got
        return self.reference(
            buf, max_message_bytes=max_message_bytes, timestamp_type=timestamp_type,
            max_timestamp_difference_ms=max_timestamp_difference_ms, now_ms=now_ms,
            produce_version=produce_version, single_batch=single_batch, compacted=compacted,
            topic_partition=topic_partition)

    cdef object fast(self, object buf, object max_message_bytes, object max_difference,
                     object compacted):
        """[BatchInfo] of the one plain batch in buf, or None (decline)."""
        cdef Py_buffer view
        cdef const uint8_t *d
        cdef Py_ssize_t n
        cdef int64_t size, count, last_delta, pid, base_seq, first_ts, max_ts
        cdef int attributes, pepoch
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
        if attributes & (CONTROL_FLAG | COMPRESSION_MASK):
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
        return [self.batch_info(0, size, pid, pepoch, base_seq, count, first_ts, max_ts, 0,
                                bool(attributes & TRANSACTIONAL_FLAG), False)]
