# cython: language_level=3, boundscheck=True, wraparound=False
# cython: cdivision=True, embedsignature=False
"""Compiled twins of the per-record loops (Cython). The pure-Python functions they mirror
are the definition; tests/record/test_kernels.py proves each twin gives the same result,
error class and error message as its reference on the same input, malformed or not.

- `walk`: record/framing.py's `_walk` (the v2 record framing check, broker produce path).
- `scan`: record/value_scan.py's `_scan` (the consumer's keys/values/offset-deltas scan).
- `murmur2`: client/partitioner.py's `murmur2_py` (the keyed producer's partition hash).
- `encode_values`, `encode_key_values`: record/columns.py's `encode_values_py` and
  `encode_key_values_py` (the producer's records of lines, keyed or not).

Bytes come from the network: the kernels read a raw buffer (the buffer protocol: bytes,
bytearray, memoryview, without a copy) and every read is checked against its end by the
code itself first (a read past it acts as the reference's IndexError); tests/record/
test_kernels.py fuzzes them. The module is loaded by record/_accel.py only.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_Check,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from libc.string cimport memcpy
from libc.stdint cimport int32_t, uint32_t

from kafkactl.record.errors import InvalidRecordError

API = 3  # record/_accel.py refuses a module built from another version of this file

DEF MIN_RECORD_SIZE = 7
DEF MAX_HEADS = 16384  # framing.MAX_HEADS: records the reference's fast path covers


# ---- the framing walk (record/framing.py `_walk`) ----------------------------------------------

class _Past(Exception):
    """A read past the end of the buffer (the reference's IndexError)."""



cdef inline Py_ssize_t _byte(const unsigned char *d, Py_ssize_t k, Py_ssize_t n) except -1:
    """d[k], or _Past when k is outside the buffer (n = its length)."""
    if k < 0 or k >= n:
        raise _Past()
    return d[k]


cdef inline Py_ssize_t _zz(const unsigned char *d, Py_ssize_t pos, Py_ssize_t n,
                           long long *value) except -1:
    """framing._varint: zigzag varint of at most 5 bytes at pos; the position after it."""
    cdef long long b
    if 0 <= pos < n:
        b = d[pos]
        if b < 0x80:  # one byte: most lengths and deltas
            value[0] = (b >> 1) ^ -(b & 1)
            return pos + 1
    return _zz_long(d, pos, n, value)


cdef Py_ssize_t _zz_long(const unsigned char *d, Py_ssize_t pos, Py_ssize_t n,
                         long long *value) except -1:
    cdef Py_ssize_t b = _byte(d, pos, n)
    cdef unsigned long long z
    cdef int shift
    cdef Py_ssize_t p
    if b < 0x80:
        value[0] = <long long>(b >> 1) ^ -<long long>(b & 1)
        return pos + 1
    z = b & 0x7F
    shift = 7
    p = pos + 1
    while True:
        b = _byte(d, p, n)
        p += 1
        z |= (<unsigned long long>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 35:
            raise InvalidRecordError(f"varint longer than 5 bytes at byte {pos}")
    value[0] = <long long>(z >> 1) ^ -<long long>(z & 1)
    return p


cdef Py_ssize_t _skip_headers(const unsigned char *d, Py_ssize_t n, Py_ssize_t p,
                              Py_ssize_t rec_end, Py_ssize_t i) except -1:
    """framing._skip_headers."""
    cdef long long nh, hk, hv, h
    p = _zz(d, p, n, &nh)
    if nh < 0 or nh > rec_end - p:
        raise InvalidRecordError(f"Found invalid number of record headers {nh} in record {i}")
    h = 0
    while h < nh:
        h += 1
        p = _zz(d, p, n, &hk)
        if hk < 0:
            raise InvalidRecordError(f"Invalid negative header key size {hk} in record {i}")
        p += hk
        p = _zz(d, p, n, &hv)
        if hv < -1:
            raise InvalidRecordError(f"record {i} has header value length {hv}")
        if hv > 0:
            p += hv
        if p > rec_end:
            break
    return p


cdef Py_ssize_t _one_record(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos,
                            Py_ssize_t end, Py_ssize_t i, bint want_keyless, list keyless,
                            bint *in_order) except -1:
    """framing._one_record: record i at pos field by field; its end."""
    cdef long long length, od, klen, vlen
    cdef Py_ssize_t p, rec_end
    p = _zz(d, pos, n, &length)
    rec_end = p + length
    if length < MIN_RECORD_SIZE - 1 or rec_end > end:
        raise InvalidRecordError(
            f"Invalid record size: record {i} at byte {pos} declares {length} bytes, "
            f"{end - p} remain in the records section")
    p += 1  # attributes
    while _byte(d, p, n) >= 0x80:  # timestamp delta
        p += 1
        if p - pos > 16:
            raise InvalidRecordError(f"record {i}: varlong longer than 10 bytes")
    p = _zz(d, p + 1, n, &od)
    p = _zz(d, p, n, &klen)
    if klen < -1:
        raise InvalidRecordError(f"record {i} has key length {klen}")
    if klen == -1:
        if want_keyless:
            keyless.append(i)
    else:
        p += klen
    p = _zz(d, p, n, &vlen)
    if vlen < -1:
        raise InvalidRecordError(f"record {i} has value length {vlen}")
    if vlen > 0:
        p += vlen
    if p >= rec_end:
        raise InvalidRecordError(
            f"Invalid record size: record {i}'s key and value overrun its {length} bytes")
    if _byte(d, p, n) == 0:
        p += 1
    else:
        p = _skip_headers(d, n, p, rec_end, i)
    if p != rec_end:
        raise InvalidRecordError(
            f"Invalid record size: record {i} at byte {pos} declares {length} bytes but its "
            f"fields use {p - (rec_end - length)}")
    in_order[0] = od == i
    return rec_end


def walk(data, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t first, Py_ssize_t count,
         bint want_keyless, list keyless):
    """framing._walk's twin: records first..count-1 from pos to stop (reads stay inside
    the buffer; the reference is given stop == len(data)); whether their offset deltas run
    in order. Keyless records' indexes are appended to `keyless`."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _walk(<const unsigned char *>view.buf, view.len, pos, stop, first, count,
                     want_keyless, keyless)
    finally:
        PyBuffer_Release(&view)


cdef object _walk(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t stop,
                  Py_ssize_t first, Py_ssize_t count, bint want_keyless, list keyless):
    cdef Py_ssize_t end = stop
    cdef Py_ssize_t i = first
    cdef Py_ssize_t b, length, p, rec_end
    cdef bint sequential = True
    cdef bint in_order = True
    try:
        while i < count:
            # The reference proves most records by a slice comparison first; the only way
            # that shortcut ends otherwise than the field-by-field parse below is its read
            # of the timestamp byte past the buffer, which is reproduced here.
            b = _byte(d, pos, n)
            if b < 0x80:
                length = b >> 1
                p = pos + 1
            elif _byte(d, pos + 1, n) < 0x80:
                length = ((b & 0x7F) | (d[pos + 1] << 7)) >> 1
                p = pos + 2
            else:
                length = -1
                p = pos
            rec_end = p + length
            if not b & 1 and rec_end <= end and i < MAX_HEADS:
                _byte(d, p + 1, n)
            pos = _one_record(d, n, pos, end, i, want_keyless, keyless, &in_order)
            sequential = sequential and in_order
            i += 1
    except _Past:
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
    return sequential


def prove(data, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t count, bint want_keyless,
          list keyless):
    """Records 0.. from pos proven well-formed with offset delta i, up to the first that is
    not (or count): (records proven, position after them). Reads stay below stop; keyless
    records' indexes are appended to `keyless` for the proven records only."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _prove(<const unsigned char *>view.buf, min(stop, view.len), pos, stop, count,
                      want_keyless, keyless)
    finally:
        PyBuffer_Release(&view)


cdef tuple _prove(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t stop,
                  Py_ssize_t count, bint want_keyless, list keyless):
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t nxt
    cdef bint key_null = False
    while i < count:
        nxt = _proven(d, n, pos, stop, i, &key_null)
        if nxt < 0:
            break
        if key_null and want_keyless:
            keyless.append(i)
        pos = nxt
        i += 1
    return i, pos


cdef inline Py_ssize_t _uv(const unsigned char *d, Py_ssize_t pos, Py_ssize_t n,
                           long long *value) noexcept nogil:
    """_zz without exceptions: the position after the varint, or -1 (past n, too long)."""
    cdef unsigned long long z = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if pos >= n:
            return -1
        b = d[pos]
        pos += 1
        z |= (<unsigned long long>(b & 0x7F)) << shift
        if b < 0x80:
            value[0] = <long long>(z >> 1) ^ -<long long>(z & 1)
            return pos
        shift += 7
        if shift >= 35:
            return -1


cdef Py_ssize_t _proven(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t end,
                        Py_ssize_t i, bint *key_null) noexcept nogil:
    """The end of record i at pos when `_one_record` accepts it with offset delta i, else
    -1: the same checks in the same order, without building the error (prove's loop)."""
    cdef long long length, v
    cdef Py_ssize_t p, rec_end
    cdef long long nh, h
    p = _uv(d, pos, n, &length)
    if p < 0:
        return -1
    rec_end = p + length
    if length < MIN_RECORD_SIZE - 1 or rec_end > end:
        return -1
    p += 1  # attributes
    while True:  # timestamp delta
        if p >= n:
            return -1
        if d[p] < 0x80:
            break
        p += 1
        if p - pos > 16:
            return -1
    p = _uv(d, p + 1, n, &v)  # offset delta
    if p < 0 or v != i:
        return -1
    p = _uv(d, p, n, &v)  # key
    if p < 0 or v < -1:
        return -1
    key_null[0] = v == -1
    if v > 0:
        p += v
    p = _uv(d, p, n, &v)  # value
    if p < 0 or v < -1:
        return -1
    if v > 0:
        p += v
    if p >= rec_end or p >= n:
        return -1
    if d[p] == 0:
        p += 1
    else:
        p = _uv(d, p, n, &nh)
        if p < 0 or nh < 0 or nh > rec_end - p:
            return -1
        h = 0
        while h < nh:
            h += 1
            p = _uv(d, p, n, &v)
            if p < 0 or v < 0:
                return -1
            p += v
            p = _uv(d, p, n, &v)
            if p < 0 or v < -1:
                return -1
            if v > 0:
                p += v
            if p > rec_end:
                break
    if p != rec_end:
        return -1
    return rec_end


# ---- the consumer's scan (record/value_scan.py `_scan`) -----------------------------------------

cdef inline object _slice(const unsigned char *d, Py_ssize_t lo, Py_ssize_t n):
    return PyBytes_FromStringAndSize(<const char *>(d + lo), n) if n else b""


def scan(data, Py_ssize_t count):
    """value_scan._scan's twin: (keys, values, offset deltas) of `count` records, or None
    when a record has headers, a key or value of 8 KiB or more, or does not add up."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _scan(<const unsigned char *>view.buf, view.len, count)
    finally:
        PyBuffer_Release(&view)


cdef object _scan(const unsigned char *d, Py_ssize_t end, Py_ssize_t count):
    # every read below is checked against end first
    cdef Py_ssize_t pos = 0, q, t, n, k
    cdef unsigned int b, c
    cdef unsigned long long z
    cdef int shift
    cdef list keys = []
    cdef list values = []
    cdef list deltas = []
    cdef Py_ssize_t r
    # Any fault ends the scan at once: the reference's accumulators only decide None too.
    for r in range(count):
        if pos >= end:
            return None
        b = d[pos]  # record length
        if b < 0x80:
            q = pos + 1
            pos = q + (b >> 1)
        else:
            if pos + 1 >= end:
                return None
            c = d[pos + 1]
            if c & 0x80:
                return None
            q = pos + 2
            pos = q + (((b & 0x7F) | (c << 7)) >> 1)
        if b & 1:
            return None
        q += 1  # attributes
        if q >= end:
            return None
        if d[q] >= 0x80:  # a timestamp delta of more than one byte
            t = q
            while True:
                if q >= end:
                    return None
                if d[q] < 0x80:
                    break
                q += 1
            if q - t > 8:
                return None
        if q + 1 >= end:
            return None
        b = d[q + 1]  # offset delta
        if b & 1:
            return None
        if b < 0x80:
            deltas.append(b >> 1)
            q += 2
        else:
            if q + 2 >= end:
                return None
            c = d[q + 2]
            if c < 0x80:
                deltas.append(((b & 0x7F) | (c << 7)) >> 1)
                q += 3
            else:  # record/varint.decode_varint: at most 5 bytes, a uint32
                z = 0
                shift = 0
                k = q + 1
                while True:
                    if k >= end:
                        return None
                    c = d[k]
                    k += 1
                    z |= (<unsigned long long>(c & 0x7F)) << shift
                    if c < 0x80:
                        break
                    shift += 7
                    if shift >= 35:
                        return None
                if z > 0xFFFFFFFF:
                    return None
                deltas.append(z >> 1)  # even: the sign was checked above
                q = k
        if q >= end:
            return None
        b = d[q]  # key length
        if b == 1:
            keys.append(None)
            q += 1
        elif b < 0x80:
            if b & 1:
                return None
            n = b >> 1
            q += 1 + n
            if q > end:
                return None
            keys.append(_slice(d, q - n, n))
        else:
            if b & 1 or q + 1 >= end:
                return None
            c = d[q + 1]
            if c & 0x80:
                return None
            n = ((b & 0x7F) | (c << 7)) >> 1
            q += 2 + n
            if q > end:
                return None
            keys.append(_slice(d, q - n, n))
        if q >= end:
            return None
        b = d[q]  # value length
        if b < 0x80:
            if b == 1:
                values.append(None)
                q += 1
            else:
                if b & 1:
                    return None
                n = b >> 1
                q += 1 + n
                if q > end:
                    return None
                values.append(_slice(d, q - n, n))
        else:
            if b & 1 or q + 1 >= end:
                return None
            c = d[q + 1]
            if c & 0x80:
                return None
            n = ((b & 0x7F) | (c << 7)) >> 1
            q += 2 + n
            if q > end:
                return None
            values.append(_slice(d, q - n, n))
        if q >= end or d[q] != 0 or q + 1 != pos:  # no headers, and the record ends there
            return None
    if pos != end:
        return None
    return keys, values, deltas


# ---- murmur2 (client/partitioner.py `murmur2_py`) --------------------------------------------

def murmur2(data):
    """partitioner.murmur2_py's twin: Kafka's murmur2 of a buffer, a signed 32-bit int."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _murmur2(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef int32_t _murmur2(const unsigned char *d, Py_ssize_t length) noexcept nogil:
    cdef uint32_t m = 0x5BD1E995
    cdef uint32_t seed = 0x9747B28C
    cdef uint32_t h = seed ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t n4 = length - (length & 3)
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t rest = length & 3
    while i < n4:
        k = d[i] | (<uint32_t>d[i + 1] << 8) | (<uint32_t>d[i + 2] << 16) \
            | (<uint32_t>d[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
        i += 4
    if rest == 3:
        h ^= <uint32_t>d[n4 + 2] << 16
    if rest >= 2:
        h ^= <uint32_t>d[n4 + 1] << 8
    if rest >= 1:
        h ^= d[n4]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


# ---- the producer's record encoding (record/columns.py `encode_values_py`, `..._key_values_py`)

DEF MAX_DELTA = 16383  # columns.MAX_DELTA: offset deltas the reference's tables cover
DEF MAX_FIELDS = MAX_DELTA - 32  # columns.MAX_FIELDS


cdef inline Py_ssize_t _zz_size(Py_ssize_t n) noexcept nogil:
    """Bytes of the zigzag varint of 0 <= n < 16384."""
    return 1 if n < 64 else (2 if n < 8192 else 3)


cdef inline char *_put_zz(char *out, Py_ssize_t n) noexcept nogil:
    """Write the zigzag varint of 0 <= n < 16384; the position after it."""
    cdef Py_ssize_t z = n << 1
    if z < 0x80:
        out[0] = <char>z
        return out + 1
    out[0] = <char>((z & 0x7F) | 0x80)
    if z < 0x4000:
        out[1] = <char>(z >> 7)
        return out + 2
    out[1] = <char>(((z >> 7) & 0x7F) | 0x80)
    out[2] = <char>(z >> 14)
    return out + 3


cdef char *_put_field(char *out, object field, Py_ssize_t size) except NULL:
    """Copy a bytes-like key or value of `size` bytes (its len(), which the space was
    counted by); the position after it."""
    cdef Py_buffer view
    if PyBytes_Check(field) and PyBytes_GET_SIZE(field) == size:
        memcpy(out, PyBytes_AS_STRING(field), size)
        return out + size
    PyObject_GetBuffer(field, &view, PyBUF_SIMPLE)
    try:
        if view.len != size:  # len() is not its bytes (a memoryview of wider items)
            raise ValueError(f"a key or value of {view.len} bytes has len() {size}")
        memcpy(out, view.buf, size)
        return out + size
    finally:
        PyBuffer_Release(&view)


def encode_values(values, Py_ssize_t start, Py_ssize_t first_delta, Py_ssize_t room):
    """columns.encode_values_py's twin: the same records (one part holding them all), the
    same index after them and the same size."""
    return _encode(None, values, start, first_delta, room, MAX_FIELDS)


def encode_key_values(keys, values, Py_ssize_t start, Py_ssize_t first_delta,
                      Py_ssize_t room):
    """columns.encode_key_values_py's twin, as encode_values."""
    return _encode(keys, values, start, first_delta, room, MAX_FIELDS // 2)


cdef tuple _encode(object keys, object values, Py_ssize_t start, Py_ssize_t first_delta,
                   Py_ssize_t room, Py_ssize_t longest):
    """Records for values[start:] (null keys, or keys[i]) from offset delta first_delta
    while they fit in room (the first of a batch, delta 0, always does), stopping before a
    key or value longer than `longest` and at offset delta MAX_DELTA."""
    cdef Py_ssize_t n = len(values)
    cdef Py_ssize_t i = start, delta = first_delta, used = 0
    cdef Py_ssize_t vlen, klen, kfield, length, size, j
    cdef object k, v
    # First the records that fit and their size, as the reference's tables count them.
    while i < n and delta < MAX_DELTA:
        v = values[i]
        vlen = len(v)
        if vlen > longest:
            break
        k = None
        kfield = 1  # the null key's length varint (-1)
        if keys is not None:
            k = keys[i]
            if k is not None:
                klen = len(k)
                if klen > longest:
                    break
                kfield = _zz_size(klen) + klen
        # attributes, timestamp delta 0, offset delta, key, value, header count 0
        length = 3 + _zz_size(delta) + kfield + _zz_size(vlen) + vlen
        size = _zz_size(length) + length
        if used + size > room and delta != 0:
            break
        used += size
        delta += 1
        i += 1
    if i == start:
        return [], i, 0
    # Then one bytes object holding them all.
    cdef bytes out = PyBytes_FromStringAndSize(NULL, used)
    cdef char *p = PyBytes_AS_STRING(out)
    cdef char *end = p + used
    delta = first_delta
    for j in range(start, i):
        v = values[j]
        k = None if keys is None else keys[j]
        vlen = len(v)
        klen = 0 if k is None else len(k)
        if vlen > longest or klen > longest:
            raise ValueError("the keys or values changed while they were encoded")
        kfield = 1 if k is None else _zz_size(klen) + klen
        length = 3 + _zz_size(delta) + kfield + _zz_size(vlen) + vlen
        if _zz_size(length) + length > end - p:
            raise ValueError("the keys or values changed while they were encoded")
        p = _put_zz(p, length)
        p[0] = 0  # attributes
        p[1] = 0  # timestamp delta
        p = _put_zz(p + 2, delta)
        if k is None:
            p[0] = 1  # null key
            p += 1
        else:
            p = _put_zz(p, klen)
            p = _put_field(p, k, klen)
        p = _put_zz(p, vlen)
        p = _put_field(p, v, vlen)
        p[0] = 0  # no headers
        p += 1
        delta += 1
    if p != end:
        raise ValueError("the keys or values changed while they were encoded")
    return [out], i, used
