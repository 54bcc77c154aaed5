# cython: language_level=3, boundscheck=True, wraparound=False
# cython: cdivision=True, embedsignature=False
"""Compiled twins of the per-record loops (Cython). The pure-Python functions they mirror
are the definition; tests/record/test_kernels.py proves each twin gives the same result,
error class and error message as its reference on the same input, malformed or not.

- `walk`: record/framing.py's `_walk` (the v2 record framing check, broker produce path).
- `murmur2`: client/partitioner.py's `murmur2_py` (the keyed producer's partition hash).
- `murmur2_groups`, `murmur2_scatter`: client/partitioner.py's `murmur2_groups_py` and
  `murmur2_scatter_py` (keyed records, or keyed lines still in their buffer, by partition).
- `encode_values`, `encode_key_values`: record/columns.py's `encode_values_py` and
  `encode_key_values_py` (the producer's records of lines, keyed or not).
- `encode_lines_into`: record/columns.py's `encode_lines_into_py` (the producer's records of
  delimited lines, straight from the input buffer).
- `split_keys`, `null_values`: client/line_producer.py's `split_keys_py` (`produce -K`'s
  key SEP value) and `null_values_py` (-Z's and --null-marker's null fields).
- `render`: `kafkactl consume`'s output of a whole batch (client/record_format.py's
  KernelFormat); its definition is the per-record renderers of cli/consume.py and
  client/topic_reader.py (tests/record/test_render_kernel.py). With it the consumer needs
  no compiled twin of record/value_scan.py's scan, which serves the pure fallback only.

Bytes come from the network: the kernels read a raw buffer (the buffer protocol: bytes,
bytearray, memoryview, without a copy) and every read is checked against its end by the
code itself first (a read past it acts as the reference's IndexError); tests/record/
test_kernels.py fuzzes them. The module is loaded by record/_accel.py only.
"""

from cpython.buffer cimport (
    PyBUF_SIMPLE,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_Check,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp, memcpy

from kafkactl.record.errors import InvalidRecordError
from kafkactl.record.varint import encode_varlong

API = 14  # record/_accel.py refuses a module built from another version of this file

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


# ---- keyed records by partition (client/partitioner.py `murmur2_groups_py`) ---------------------

DEF MAX_GROUP_PARTITIONS = 1 << 20  # partitions indexed in a list; more: the reference


def murmur2_groups(keys, values, entries, Py_ssize_t num_partitions,
                   Py_ssize_t null_partition):
    """partitioner.murmur2_groups_py's twin for its plain shape: lists of one length, every
    key exact bytes or None, 1 <= num_partitions <= MAX_GROUP_PARTITIONS. Anything else
    returns None: the reference decides (its result, or its error)."""
    cdef Py_ssize_t n, i, p
    cdef object k, g
    cdef dict groups = {}
    cdef list slots, klist, vlist, elist
    cdef bint keep = entries is not None
    if (type(keys) is not list or type(values) is not list
            or (keep and type(entries) is not list)
            or not 1 <= num_partitions <= MAX_GROUP_PARTITIONS):
        return None
    n = len(<list>keys)
    if len(<list>values) != n or (keep and len(<list>entries) != n):
        return None
    slots = [None] * num_partitions
    for i in range(n):
        k = (<list>keys)[i]
        if k is None:
            p = null_partition
        elif PyBytes_CheckExact(k):
            p = ((<uint32_t>_murmur2(<const unsigned char *>PyBytes_AS_STRING(k),
                                     PyBytes_GET_SIZE(k))) & 0x7FFFFFFF) % num_partitions
        else:
            return None
        if 0 <= p < num_partitions:
            g = slots[p]
        else:
            g = groups.get(p)
        if g is None:
            g = ([], [], [] if keep else None)
            groups[p] = g
            if 0 <= p < num_partitions:
                slots[p] = g
        klist = <list>(<tuple>g)[0]
        vlist = <list>(<tuple>g)[1]
        klist.append(k)
        vlist.append((<list>values)[i])
        if keep:
            elist = <list>(<tuple>g)[2]
            elist.append((<list>entries)[i])
    return groups


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


def encode_values(values, Py_ssize_t start, Py_ssize_t first_delta, Py_ssize_t room,
                  ts_delta=0):
    """columns.encode_values_py's twin: the same records (one part holding them all), the
    same index after them and the same size."""
    return _encode(None, values, start, first_delta, room, MAX_FIELDS, ts_delta)


def encode_key_values(keys, values, Py_ssize_t start, Py_ssize_t first_delta,
                      Py_ssize_t room, ts_delta=0):
    """columns.encode_key_values_py's twin, as encode_values."""
    return _encode(keys, values, start, first_delta, room, MAX_FIELDS // 2, ts_delta)


cdef tuple _encode(object keys, object values, Py_ssize_t start, Py_ssize_t first_delta,
                   Py_ssize_t room, Py_ssize_t longest, object ts_delta):
    """Records for values[start:] (null keys, or keys[i]; a None key or value is null)
    from offset delta first_delta with timestamp delta ts_delta while they fit in room
    (the first of a batch, delta 0, always does), stopping before a key or value longer
    than `longest` and at offset delta MAX_DELTA."""
    # the timestamp delta's zigzag varlong: its size (the reference's encode_varlong, and
    # its error out of int64 range) and the unsigned value it encodes
    cdef Py_ssize_t tsz = len(encode_varlong(ts_delta))
    cdef uint64_t tz = (ts_delta << 1) ^ (ts_delta >> 63)
    cdef Py_ssize_t n = len(values)
    cdef Py_ssize_t i = start, delta = first_delta, used = 0
    cdef Py_ssize_t vlen, klen, kfield, vfield, length, size, j
    cdef object k, v
    # First the records that fit and their size, as the reference's tables count them.
    while i < n and delta < MAX_DELTA:
        v = values[i]
        vfield = 1  # a null value's length varint (-1)
        if v is not None:
            vlen = len(v)
            if vlen > longest:
                break
            vfield = _zz_size(vlen) + vlen
        k = None
        kfield = 1  # the null key's length varint (-1)
        if keys is not None:
            k = keys[i]
            if k is not None:
                klen = len(k)
                if klen > longest:
                    break
                kfield = _zz_size(klen) + klen
        # attributes, timestamp delta, offset delta, key, value, header count 0
        length = 2 + tsz + _zz_size(delta) + kfield + vfield
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
        vlen = 0 if v is None else len(v)
        klen = 0 if k is None else len(k)
        if vlen > longest or klen > longest:
            raise ValueError("the keys or values changed while they were encoded")
        kfield = 1 if k is None else _zz_size(klen) + klen
        vfield = 1 if v is None else _zz_size(vlen) + vlen
        length = 2 + tsz + _zz_size(delta) + kfield + vfield
        if _zz_size(length) + length > end - p:
            raise ValueError("the keys or values changed while they were encoded")
        p = _put_zz(p, length)
        p[0] = 0  # attributes
        p = _put_uv(p + 1, tz)  # timestamp delta
        p = _put_zz(p, delta)
        if k is None:
            p[0] = 1  # null key
            p += 1
        else:
            p = _put_zz(p, klen)
            p = _put_field(p, k, klen)
        if v is None:
            p[0] = 1  # null value
            p += 1
        else:
            p = _put_zz(p, vlen)
            p = _put_field(p, v, vlen)
        p[0] = 0  # no headers
        p += 1
        delta += 1
    if p != end:
        raise ValueError("the keys or values changed while they were encoded")
    return [out], i, used


# ---- the consumer's output (cli/consume.py's per-record renderers) --------------------------------

cdef extern from "Python.h":
    PyObject *_bytes_new "PyBytes_FromStringAndSize"(const char *, Py_ssize_t)
    char *_bytes_data "PyBytes_AS_STRING"(PyObject *)
    int _PyBytes_Resize(PyObject **, Py_ssize_t)


cdef struct _Out:
    PyObject *obj  # a bytes object this code alone holds (NULL until the first _reserve)
    char *buf  # its bytes
    Py_ssize_t len
    Py_ssize_t cap


cdef int _reserve(_Out *o, Py_ssize_t more) except -1:
    """Room for `more` bytes after o.len (the bytes object grown in place when it can)."""
    cdef Py_ssize_t want
    if more <= o.cap - o.len:
        return 0
    if more > PY_SSIZE_T_MAX // 4 - o.len:
        raise MemoryError()
    want = o.len + more
    if want < 2 * o.cap:
        want = 2 * o.cap
    if o.obj == NULL:
        o.obj = _bytes_new(NULL, want)
        if o.obj == NULL:
            return -1  # MemoryError is set
    elif _PyBytes_Resize(&o.obj, want) < 0:
        return -1  # o.obj is NULL and MemoryError set
    o.buf = _bytes_data(o.obj)
    o.cap = want
    return 0


cdef object _finish(_Out *o):
    """The bytes written, as the bytes object itself (cut to its length); o gives it up."""
    cdef object result
    if o.obj == NULL:
        return b""
    if _PyBytes_Resize(&o.obj, o.len) < 0:
        raise MemoryError()
    result = <object>o.obj
    Py_XDECREF(o.obj)
    o.obj = NULL
    return result


cdef inline int _put(_Out *o, const unsigned char *p, Py_ssize_t n) except -1:
    if n > o.cap - o.len:
        _reserve(o, n)
    memcpy(o.buf + o.len, p, n)
    o.len += n
    return 0


cdef int _put_dec(_Out *o, long long v) except -1:
    """v in decimal, as Python's %d."""
    cdef char tmp[24]
    cdef int i = 24
    cdef unsigned long long u = <unsigned long long>v
    if v < 0:
        u = 0 - u
    while True:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if v < 0:
        i -= 1
        tmp[i] = b'-'
    return _put(o, <const unsigned char *>tmp + i, 24 - i)


cdef inline Py_ssize_t _vr(const unsigned char *d, Py_ssize_t pos, Py_ssize_t lim,
                           int max_bytes, unsigned long long top, long long *value
                           ) noexcept nogil:
    """record/varint's zigzag decode (at most max_bytes bytes, the unsigned value at most
    `top`) reading below lim: the position after it, or -1 where the reference raises (or
    reads past lim, where it raises or ends its record elsewhere)."""
    cdef unsigned long long z = 0
    cdef unsigned long long b
    cdef int shift = 0
    cdef Py_ssize_t p = pos
    while True:
        if p >= lim:
            return -1
        b = d[p]
        p += 1
        if shift == 63 and b > 1:  # bits past the 64th: out of range
            return -1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 7 * max_bytes:
            return -1
    if z > top:
        return -1
    value[0] = <long long>(z >> 1) ^ -<long long>(z & 1)
    return p


cdef inline Py_ssize_t _vi(const unsigned char *d, Py_ssize_t pos, Py_ssize_t lim,
                           long long *value) noexcept nogil:
    """decode_varint below lim, the one-byte case inline."""
    cdef unsigned int b
    if pos < lim:
        b = d[pos]
        if b < 0x80:
            value[0] = <long long>(b >> 1) ^ -<long long>(b & 1)
            return pos + 1
    return _vr(d, pos, lim, 5, 0xFFFFFFFF, value)


cdef bint _utf8(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """Whether s[:n] is UTF-8 as Python's strict decoder takes it (no surrogates, no
    overlong forms, nothing above U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef unsigned int c, c1
    cdef uint64_t w
    cdef uint64_t highs = <uint64_t>0x0101010101010101 * 0x80
    while i < n:
        if i + 8 <= n:
            memcpy(&w, s + i, 8)
            if not w & highs:  # eight ASCII bytes
                i += 8
                continue
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
            continue
        if i + 1 >= n:
            return False
        c1 = s[i + 1]
        if c < 0xF0:
            if (c1 & 0xC0) != 0x80 or (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return False
            if i + 2 >= n or (s[i + 2] & 0xC0) != 0x80:
                return False
            i += 3
            continue
        if (c1 & 0xC0) != 0x80 or (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
            return False
        if i + 3 >= n or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
            return False
        i += 4
    return True


cdef const char *_HEX = b"0123456789abcdef"
cdef const char *_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef int _put_json_str(_Out *o, const unsigned char *s, Py_ssize_t n) except -1:
    """s (valid UTF-8) as json.dumps(ensure_ascii=False) writes the str: quoted, with
    " \\ and the control characters escaped."""
    cdef Py_ssize_t i = 0, run
    cdef unsigned char c
    cdef char *w
    _reserve(o, 6 * n + 2)
    w = o.buf + o.len
    w[0] = b'"'
    w += 1
    while i < n:
        run = i
        i += _unescaped(s + i, n - i, False)
        if i > run:
            memcpy(w, s + run, i - run)
            w += i - run
        if i >= n:
            break
        c = s[i]
        i += 1
        w[0] = b'\\'
        if c == 0x22 or c == 0x5C:
            w[1] = <char>c
            w += 2
        elif c == 0x0A:
            w[1] = b'n'
            w += 2
        elif c == 0x0D:
            w[1] = b'r'
            w += 2
        elif c == 0x09:
            w[1] = b't'
            w += 2
        elif c == 0x08:
            w[1] = b'b'
            w += 2
        elif c == 0x0C:
            w[1] = b'f'
            w += 2
        else:
            w[1] = b'u'
            w[2] = b'0'
            w[3] = b'0'
            w[4] = _HEX[c >> 4]
            w[5] = _HEX[c & 15]
            w += 6
    w[0] = b'"'
    w += 1
    o.len = w - o.buf
    return 0


cdef int _put_base64_str(_Out *o, const unsigned char *s, Py_ssize_t n) except -1:
    """s as base64.b64encode writes it, quoted."""
    cdef Py_ssize_t i = 0
    cdef unsigned int v
    cdef char *w
    _reserve(o, (n + 2) // 3 * 4 + 2)
    w = o.buf + o.len
    w[0] = b'"'
    w += 1
    while i + 3 <= n:
        v = (<unsigned int>s[i] << 16) | (<unsigned int>s[i + 1] << 8) | s[i + 2]
        w[0] = _B64[v >> 18]
        w[1] = _B64[(v >> 12) & 63]
        w[2] = _B64[(v >> 6) & 63]
        w[3] = _B64[v & 63]
        w += 4
        i += 3
    if n - i == 1:
        v = <unsigned int>s[i] << 16
        w[0] = _B64[v >> 18]
        w[1] = _B64[(v >> 12) & 63]
        w[2] = b'='
        w[3] = b'='
        w += 4
    elif n - i == 2:
        v = (<unsigned int>s[i] << 16) | (<unsigned int>s[i + 1] << 8)
        w[0] = _B64[v >> 18]
        w[1] = _B64[(v >> 12) & 63]
        w[2] = _B64[(v >> 6) & 63]
        w[3] = b'='
        w += 4
    w[0] = b'"'
    w += 1
    o.len = w - o.buf
    return 0


cdef bint _put_json_text(_Out *o, const unsigned char *s, Py_ssize_t n, bint null
                         ) except -1:
    """consume._text's value as JSON: null, the UTF-8 text, or base64 (then True)."""
    cdef Py_ssize_t plain
    cdef char *w
    if null:
        _put(o, <const unsigned char *>b"null", 4)
        return False
    plain = _unescaped(s, n, True)
    if plain == n:  # the common case: printable ASCII, copied as it is
        _reserve(o, n + 2)
        w = o.buf + o.len
        w[0] = b'"'
        memcpy(w + 1, s, n)
        w[n + 1] = b'"'
        o.len += n + 2
        return False
    if _utf8(s + plain, n - plain):
        _put_json_str(o, s, n)
        return False
    _put_base64_str(o, s, n)
    return True


cdef inline Py_ssize_t _unescaped(const unsigned char *s, Py_ssize_t n, bint ascii_only
                                  ) noexcept nogil:
    """How many bytes from the start of s[:n] JSON takes as they are (no control character,
    quote or backslash; with ascii_only, nothing from 0x80 up either), eight at a time while
    it can (a word with such a byte, or rarely one without, goes byte by byte)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t w, q, b, bad
    cdef uint64_t ones = 0x0101010101010101
    cdef uint64_t highs = ones * 0x80
    cdef unsigned char c
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        q = w ^ (ones * 0x22)
        b = w ^ (ones * 0x5C)
        bad = (w - ones * 0x20) & ~w & highs  # a byte < 0x20
        bad |= (q - ones) & ~q & highs  # a '"'
        bad |= (b - ones) & ~b & highs  # a backslash
        if ascii_only:
            bad |= w & highs  # a byte >= 0x80
        if bad:
            break
        i += 8
    while i < n:
        c = s[i]
        if c < 0x20 or c == 0x22 or c == 0x5C or (ascii_only and c >= 0x80):
            break
        i += 1
    return i


cdef struct _Rec:
    long long offset
    long long ts
    Py_ssize_t key, klen, value, vlen  # klen/vlen -1: null
    Py_ssize_t headers  # the first header's position
    long long nh
    Py_ssize_t end  # the record's end


cdef Py_ssize_t _record(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end,
                        long long base_offset, long long base_ts, bint log_append,
                        long long max_ts, _Rec *r) noexcept nogil:
    """record.batch._iter_records' parse of the record at pos: its end, or -1 where the
    reference raises (the caller then leaves the batch to it)."""
    cdef long long length = 0, v = 0, delta = 0, hk = 0
    cdef Py_ssize_t p, rec_end, h
    cdef unsigned int b
    p = _vi(d, pos, end, &length)
    if p < 0 or length < 6 or length > end - p:
        return -1
    rec_end = p + length
    p += 1  # attributes
    b = d[p]  # timestamp delta (a varlong)
    if b < 0x80:
        delta = <long long>(b >> 1) ^ -<long long>(b & 1)
        p += 1
    else:
        p = _vr(d, p, end, 10, 0xFFFFFFFFFFFFFFFF, &delta)
        if p < 0:
            return -1
    if log_append:
        r.ts = max_ts
    elif (delta > 0 and base_ts > INT64_MAX - delta) or (
            delta < 0 and base_ts < INT64_MIN - delta):
        return -1  # past int64: the reference's Python int prints it
    else:
        r.ts = base_ts + delta
    p = _vi(d, p, end, &v)  # offset delta
    if p < 0 or (v > 0 and base_offset > INT64_MAX - v) or (
            v < 0 and base_offset < INT64_MIN - v):
        return -1
    r.offset = base_offset + v
    p = _vi(d, p, end, &v)  # key
    if p < 0:
        return -1
    if v < 0:
        r.klen = -1
    else:
        if v > rec_end - p:
            return -1
        r.key = p
        r.klen = v
        p += v
    p = _vi(d, p, end, &v)  # value
    if p < 0:
        return -1
    if v < 0:
        r.vlen = -1
    else:
        if v > rec_end - p:
            return -1
        r.value = p
        r.vlen = v
        p += v
    if p >= rec_end:
        return -1
    if d[p] == 0:
        r.nh = 0
        p += 1
    else:
        p = _vi(d, p, end, &r.nh)
        if p < 0 or r.nh < 0 or r.nh > rec_end - p:
            return -1
        r.headers = p
        h = 0
        while h < r.nh:
            h += 1
            p = _vi(d, p, end, &hk)
            if p < 0 or hk < 0 or hk > rec_end - p:  # any bytes: Kafka's key, as the
                return -1  # reference reads it (not UTF-8 ones too)
            p += hk
            p = _vi(d, p, end, &v)
            if p < 0:
                return -1
            if v > 0:
                if v > rec_end - p:
                    return -1
                p += v
    if p != rec_end:
        return -1
    r.end = rec_end
    return rec_end


cdef bint _base64_text(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """Whether _put_json_text writes s[:n] (not null) as base64: it is not UTF-8."""
    cdef Py_ssize_t plain = _unescaped(s, n, True)
    return plain != n and not _utf8(s + plain, n - plain)


cdef inline int _put_encoding(_Out *o, bint b64) except -1:
    if b64:
        _put(o, <const unsigned char *>b'"base64"', 8)
    else:
        _put(o, <const unsigned char *>b"null", 4)
    return 0


cdef int _put_headers(_Out *o, const unsigned char *d, const _Rec *r, bint json
                      ) except -1:
    """%h (`key=value,...`, the key's bytes as they are, a null value as NULL) or, for -J,
    `,"headers":[k,v,...]` when there are any, each name and value as consume._text's JSON,
    then `,"headers_encoding":[...]` ("base64" or null for each) when one is base64. The
    record's headers were checked by _record."""
    cdef Py_ssize_t p = r.headers, h = 0
    cdef long long hk = 0, hv = 0
    cdef bint b64 = False
    if json:
        if r.nh == 0:
            return 0
        _put(o, <const unsigned char *>b',"headers":[', 12)
    while h < r.nh:
        if h:
            _put(o, <const unsigned char *>b",", 1)
        h += 1
        p = _vi(d, p, r.end, &hk)
        if p < 0:  # _record checked them: never
            raise ValueError("a header that _record did not check")
        if json:
            b64 |= _put_json_text(o, d + p, hk, False)
            _put(o, <const unsigned char *>b",", 1)
        else:
            _put(o, d + p, hk)
            _put(o, <const unsigned char *>b"=", 1)
        p += hk
        p = _vi(d, p, r.end, &hv)
        if p < 0:
            raise ValueError("a header that _record did not check")
        if json:
            b64 |= _put_json_text(o, d + p, hv if hv > 0 else 0, hv < 0)
        elif hv < 0:
            _put(o, <const unsigned char *>b"NULL", 4)
        else:
            _put(o, d + p, hv)
        if hv > 0:
            p += hv
    if not json:
        return 0
    _put(o, <const unsigned char *>b"]", 1)
    if not b64:
        return 0
    _put(o, <const unsigned char *>b',"headers_encoding":[', 21)
    p = r.headers
    h = 0
    while h < r.nh:
        if h:
            _put(o, <const unsigned char *>b",", 1)
        h += 1
        p = _vi(d, p, r.end, &hk)
        if p < 0:
            raise ValueError("a header that _record did not check")
        _put_encoding(o, _base64_text(d + p, hk))
        _put(o, <const unsigned char *>b",", 1)
        p += hk
        p = _vi(d, p, r.end, &hv)
        if p < 0:
            raise ValueError("a header that _record did not check")
        _put_encoding(o, hv > 0 and _base64_text(d + p, hv))
        if hv > 0:
            p += hv
    _put(o, <const unsigned char *>b"]", 1)
    return 0



DEF MAX_TOKENS = 64
TOKENS = frozenset(b"skSKoTRhHjvE")


def render(data, Py_ssize_t count, long long base_offset, long long base_ts, bint log_append,
           long long max_ts, long long start, list literals, bytes tokens,
           bytes null=b""):
    """The records of a magic-2 records section (uncompressed) with offset >= start, each
    rendered as literals[0] tokens[0] literals[1] ... literals[-1], into one bytes object:
    (bytes, records, ends), ends the end of each record in the bytes (native int64s). None
    when a record does not parse as record.batch's iterator takes it (the caller leaves
    the batch to that iterator, which raises) or a number would pass int64.

    Tokens (one byte each): s k (value, key; null as `null`), S K (their length, -1 for
    null), R (the value's length, 4 bytes big-endian), o T (offset, timestamp), h (kcat's
    headers: key=value,...), and for -J: v j (value, key as consume._text's JSON), H (a
    `,"headers":[...]` member when there are headers, and `,"headers_encoding":[...]`
    when one of their names or values is base64), E (the `,"key_encoding":"base64"`
    and `,"payload_encoding":"base64"` members of the record's base64 fields)."""
    cdef Py_ssize_t m = len(tokens)
    if m > MAX_TOKENS or len(literals) != m + 1:
        raise ValueError(f"a format of {m} tokens needs {m + 1} literals, at most "
                         f"{MAX_TOKENS} tokens")
    for op in tokens:
        if op not in TOKENS:
            raise ValueError(f"unknown token {chr(op)!r}")
    cdef const unsigned char *lit[MAX_TOKENS + 1]
    cdef Py_ssize_t lit_len[MAX_TOKENS + 1]
    cdef const unsigned char *ops = <const unsigned char *>PyBytes_AS_STRING(tokens)
    cdef Py_ssize_t i
    for i in range(m + 1):
        item = literals[i]
        if not PyBytes_Check(item):
            raise TypeError("literals must be bytes")
        lit[i] = <const unsigned char *>PyBytes_AS_STRING(item)
        lit_len[i] = PyBytes_GET_SIZE(item)
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef _Out out
    cdef _Out ends
    out.obj = out.buf = NULL
    out.len = out.cap = 0
    ends.obj = ends.buf = NULL
    ends.len = ends.cap = 0
    try:
        _reserve(&out, view.len + 64)
        return _render(<const unsigned char *>view.buf, view.len, count, base_offset, base_ts,
                       log_append, max_ts, start, m, lit, lit_len, ops,
                       <const unsigned char *>PyBytes_AS_STRING(null), PyBytes_GET_SIZE(null),
                       &out, &ends)
    finally:
        PyBuffer_Release(&view)
        Py_XDECREF(out.obj)
        Py_XDECREF(ends.obj)


cdef object _render(const unsigned char *d, Py_ssize_t end, Py_ssize_t count,
                    long long base_offset, long long base_ts, bint log_append,
                    long long max_ts, long long start, Py_ssize_t m,
                    const unsigned char **lit, Py_ssize_t *lit_len,
                    const unsigned char *ops, const unsigned char *null, Py_ssize_t null_len,
                    _Out *out, _Out *ends):
    cdef Py_ssize_t pos = 0, i, n = 0, left = count
    cdef long long at
    cdef unsigned char op
    cdef unsigned char be[4]
    cdef bint kb64, vb64
    cdef _Rec rec
    cdef long long length
    rec.key = rec.value = rec.headers = 0
    while left > 0:
        left -= 1
        if pos >= end:
            return None
        pos = _record(d, pos, end, base_offset, base_ts, log_append, max_ts, &rec)
        if pos < 0:
            return None
        if rec.offset < start:
            continue
        kb64 = vb64 = False
        _put(out, lit[0], lit_len[0])
        for i in range(m):
            op = ops[i]
            if op == b's':
                if rec.vlen > 0:
                    _put(out, d + rec.value, rec.vlen)
                elif rec.vlen < 0 and null_len:
                    _put(out, null, null_len)
            elif op == b'k':
                if rec.klen > 0:
                    _put(out, d + rec.key, rec.klen)
                elif rec.klen < 0 and null_len:
                    _put(out, null, null_len)
            elif op == b'S':
                _put_dec(out, rec.vlen)
            elif op == b'K':
                _put_dec(out, rec.klen)
            elif op == b'o':
                _put_dec(out, rec.offset)
            elif op == b'T':
                _put_dec(out, rec.ts)
            elif op == b'R':
                length = rec.vlen
                be[0] = <unsigned char>((length >> 24) & 0xFF)
                be[1] = <unsigned char>((length >> 16) & 0xFF)
                be[2] = <unsigned char>((length >> 8) & 0xFF)
                be[3] = <unsigned char>(length & 0xFF)
                _put(out, be, 4)
            elif op == b'h':
                _put_headers(out, d, &rec, False)
            elif op == b'H':
                _put_headers(out, d, &rec, True)
            elif op == b'j':
                kb64 = _put_json_text(out, d + rec.key, rec.klen if rec.klen > 0 else 0,
                                      rec.klen < 0)
            elif op == b'v':
                vb64 = _put_json_text(out, d + rec.value, rec.vlen if rec.vlen > 0 else 0,
                                      rec.vlen < 0)
            elif op == b'E':
                if kb64:
                    _put(out, <const unsigned char *>b',"key_encoding":"base64"', 24)
                if vb64:
                    _put(out, <const unsigned char *>b',"payload_encoding":"base64"', 28)
            _put(out, lit[i + 1], lit_len[i + 1])
        at = out.len
        _put(ends, <const unsigned char *>&at, sizeof(at))
        n += 1
    if pos != end:
        return None
    return _finish(out), n, _finish(ends)



# ---- the producer's key split (client/line_producer.py `split_keys_py`) ---------------------------

cdef inline Py_ssize_t _find(const char *s, Py_ssize_t n, const char *sep, Py_ssize_t m
                             ) noexcept nogil:
    """The first index of sep (m >= 1 bytes) in s[:n], or -1 (bytes.find)."""
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t last = n - m  # the last index sep can start at
    cdef const char *hit
    while i <= last:
        hit = <const char *>memchr(s + i, sep[0], last - i + 1)
        if hit == NULL:
            return -1
        if m == 1 or memcmp(hit + 1, sep + 1, m - 1) == 0:
            return hit - s
        i = hit - s + 1
    return -1


DEF MAX_SCATTER_PARTITIONS = 1 << 16  # partitions murmur2_scatter answers for; more: declined

def murmur2_scatter(data, Py_ssize_t start, Py_ssize_t end, delimiter, key_separator,
                    Py_ssize_t num_partitions, Py_ssize_t null_partition):
    """partitioner.murmur2_scatter_py's twin: the lines of data[start:end], each ended by
    the one-byte `delimiter`, copied to one bytes per partition (murmur2 of the key before
    the first `key_separator`; a line without one goes to `null_partition`), in input
    order. None (the reference decides) unless data is bytes and data[start:end] whole
    lines, the delimiter one byte, the separator not empty and the partitions within the
    twin's reach."""
    cdef Py_buffer dv
    cdef const char *d
    cdef const char *sep
    cdef const char *hit
    cdef char dl
    cdef Py_ssize_t m, pos, le, k, lines = 0, i, p
    cdef int32_t *parts = NULL
    cdef Py_ssize_t *sizes = NULL
    cdef char **write = NULL
    cdef list out
    cdef object b
    if (not PyBytes_CheckExact(data)
            or not PyBytes_CheckExact(delimiter) or PyBytes_GET_SIZE(delimiter) != 1
            or not PyBytes_CheckExact(key_separator) or PyBytes_GET_SIZE(key_separator) < 1
            or not 1 <= num_partitions <= MAX_SCATTER_PARTITIONS
            or not 0 <= null_partition < num_partitions):
        return None
    dl = PyBytes_AS_STRING(delimiter)[0]
    sep = PyBytes_AS_STRING(key_separator)
    m = PyBytes_GET_SIZE(key_separator)
    PyObject_GetBuffer(data, &dv, PyBUF_SIMPLE)
    try:
        if not 0 <= start <= end <= dv.len:
            return None
        d = <const char *>dv.buf
        if end > start and d[end - 1] != dl:
            return None  # not whole lines: the reference's way
        pos = start
        while pos < end:  # count the lines
            hit = <const char *>memchr(d + pos, dl, end - pos)
            pos = (hit - d) + 1
            lines += 1
        parts = <int32_t *>malloc((lines + 1) * sizeof(int32_t))
        sizes = <Py_ssize_t *>malloc(num_partitions * sizeof(Py_ssize_t))
        write = <char **>malloc(num_partitions * sizeof(char *))
        if parts == NULL or sizes == NULL or write == NULL:
            raise MemoryError()
        for p in range(num_partitions):
            sizes[p] = 0
        pos, i = start, 0
        while pos < end:  # each line's partition, and each partition's bytes
            le = (<const char *>memchr(d + pos, dl, end - pos)) - d
            k = _find(d + pos, le - pos, sep, m)
            if k < 0:
                p = null_partition
            else:
                p = ((<uint32_t>_murmur2(<const unsigned char *>(d + pos), k)) & 0x7FFFFFFF) \
                    % num_partitions
            parts[i] = <int32_t>p
            sizes[p] += le - pos + 1
            pos, i = le + 1, i + 1
        out = []
        for p in range(num_partitions):
            b = PyBytes_FromStringAndSize(NULL, sizes[p])
            out.append(b)
            write[p] = PyBytes_AS_STRING(b)
        pos, i = start, 0
        while pos < end:  # the lines, each to its partition's bytes
            le = (<const char *>memchr(d + pos, dl, end - pos)) - d
            p = parts[i]
            memcpy(write[p], d + pos, le - pos + 1)
            write[p] += le - pos + 1
            pos, i = le + 1, i + 1
        return out
    finally:
        free(parts)
        free(sizes)
        free(write)
        PyBuffer_Release(&dv)


cdef inline bint _null(const char *d, Py_ssize_t n, tuple spellings) except -1:
    """Whether the field d[:n] equals one of `spellings` (exact bytes, null_values'
    check)."""
    cdef Py_ssize_t i
    cdef object s
    for i in range(len(spellings)):
        s = spellings[i]
        if PyBytes_GET_SIZE(s) == n and memcmp(PyBytes_AS_STRING(s), d, n) == 0:
            return True
    return False


cdef inline bint _equals_one(object field, tuple spellings) except -1:
    """Whether `field` == one of `spellings` (list.index's test, the reference's)."""
    cdef object s
    if field is None:
        return False
    if PyBytes_CheckExact(field):
        return _null(PyBytes_AS_STRING(field), PyBytes_GET_SIZE(field), spellings)
    for s in spellings:
        if field == s:
            return True
    return False


cdef tuple _spellings(object nulls):
    """The null spellings as a tuple of exact bytes; None when one is not (the caller
    takes the reference's way)."""
    cdef tuple t = tuple(nulls) if nulls is not None else ()
    for s in t:
        if not PyBytes_CheckExact(s):
            return None
    return t


def null_values(values, nulls):
    """line_producer.null_values_py's twin: a list of `values` with each equal to one of
    `nulls` as None; `values` itself when it is a list and none is."""
    cdef tuple spellings = _spellings(nulls)
    cdef list out
    cdef Py_ssize_t n, i, first = -1
    if spellings is None:  # not bytes: the reference's comparisons, in its order
        spellings = tuple(nulls)
        out = values if type(values) is list else list(values)
        found = [i for s in spellings for i, x in enumerate(out) if x == s]
        if not found:
            return out
        out = list(out)
        for i in found:
            out[i] = None
        return out
    out = values if type(values) is list else list(values)
    n = len(out)
    if not spellings:
        return out
    for i in range(n):
        if _equals_one(out[i], spellings):
            first = i
            break
    if first < 0:
        return out
    out = list(out)
    for i in range(first, n):
        if _equals_one(out[i], spellings):
            out[i] = None
    return out


def split_keys(records, separator, nulls=None):
    """line_producer.split_keys_py's twin: (keys, values) of `key SEP value` records, a
    record without SEP keeping a null key and itself as the value; with `nulls`, a key or
    value equal to one of them is None. Records that are not bytes go through their own
    partition(), as in the reference."""
    cdef Py_buffer sep
    cdef list keys = []
    cdef list values = []
    cdef Py_ssize_t n, i
    cdef const char *d
    cdef tuple spellings = _spellings(nulls)
    cdef bint check
    if spellings is None:  # null spellings that are not bytes: the reference's way
        keys, values = split_keys(records, separator)
        return null_values(keys, nulls), null_values(values, nulls)
    check = len(spellings) > 0
    PyObject_GetBuffer(separator, &sep, PyBUF_SIMPLE)
    try:
        for raw in records:
            if not PyBytes_CheckExact(raw) or sep.len == 0:
                k, found, v = raw.partition(separator)  # the reference's own errors
                if found:
                    keys.append(None if check and _equals_one(k, spellings) else k)
                    values.append(None if check and _equals_one(v, spellings) else v)
                else:
                    keys.append(None)
                    values.append(None if check and _equals_one(raw, spellings) else raw)
                continue
            d = PyBytes_AS_STRING(raw)
            n = PyBytes_GET_SIZE(raw)
            i = _find(d, n, <const char *>sep.buf, sep.len)
            if i < 0:
                keys.append(None)
                values.append(None if check and _null(d, n, spellings) else raw)
            elif check:
                keys.append(None if _null(d, i, spellings)
                            else PyBytes_FromStringAndSize(d, i))
                values.append(None if _null(d + i + sep.len, n - i - sep.len, spellings)
                              else PyBytes_FromStringAndSize(d + i + sep.len,
                                                             n - i - sep.len))
            else:
                keys.append(PyBytes_FromStringAndSize(d, i))
                values.append(PyBytes_FromStringAndSize(d + i + sep.len, n - i - sep.len))
        return keys, values
    finally:
        PyBuffer_Release(&sep)


# ---- the producer's records of delimited lines (record/columns.py `encode_lines_into_py`) ---

cdef inline Py_ssize_t _uv_size(uint64_t z) noexcept nogil:
    """Bytes of the unsigned varint of z."""
    cdef Py_ssize_t n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


cdef inline char *_put_uv(char *out, uint64_t z) noexcept nogil:
    """Write the unsigned varint of z; the position after it."""
    while z >= 0x80:
        out[0] = <char>((z & 0x7F) | 0x80)
        z >>= 7
        out += 1
    out[0] = <char>z
    return out + 1


DEF INT32 = 0x7FFFFFFF


cdef struct _Line:
    Py_ssize_t start  # of the record (its key, when it has one)
    Py_ssize_t klen  # -1: a null key
    Py_ssize_t vstart
    Py_ssize_t vlen
    Py_ssize_t next  # the position after its delimiter (or the end)
    Py_ssize_t length  # of the record after its length varint
    Py_ssize_t size  # of the whole record


cdef inline void _line(const char *d, Py_ssize_t p, Py_ssize_t end, const char *dl,
                       Py_ssize_t dn, const char *ks, Py_ssize_t kn, Py_ssize_t delta,
                       Py_ssize_t tsz, Py_ssize_t hn, _Line *r) noexcept nogil:
    """The record starting at p (to the next delimiter, or to `end`) as offset delta `delta`,
    split into key SEP value when ks is not NULL, with a timestamp delta of tsz bytes and a
    header section of hn bytes."""
    cdef Py_ssize_t q = _find(d + p, end - p, dl, dn)
    cdef Py_ssize_t stop, k
    if q < 0:
        stop = end
        r.next = end
    else:
        stop = p + q
        r.next = stop + dn
    r.start = p
    r.klen = -1
    r.vstart = p
    r.vlen = stop - p
    if ks != NULL:
        k = _find(d + p, stop - p, ks, kn)
        if k >= 0:
            r.klen = k
            r.vstart = p + k + kn
            r.vlen = stop - r.vstart
    # attributes, timestamp delta, offset delta, key, value, header section
    r.length = (1 + tsz + hn + _uv_size(<uint64_t>delta << 1)
                + (1 if r.klen < 0 else _uv_size(<uint64_t>r.klen << 1) + r.klen)
                + _uv_size(<uint64_t>r.vlen << 1) + r.vlen)
    r.size = _uv_size(<uint64_t>r.length << 1) + r.length


def encode_lines_into(data, Py_ssize_t pos, Py_ssize_t end, delimiter, key_separator,
                      Py_ssize_t first_delta, out, Py_ssize_t offset, headers=b"\x00",
                      ts_delta=0):
    """columns.encode_lines_into_py's twin: the same records written into out[offset:], the
    same position after them, count and size. One pass without the GIL: each line's
    record is sized, then written where it goes when it fits."""
    cdef Py_buffer view, dview, kview, oview
    cdef bytes section = bytes(headers)
    cdef const char *hs = PyBytes_AS_STRING(section)
    cdef Py_ssize_t hn = PyBytes_GET_SIZE(section)
    cdef Py_ssize_t tsz
    cdef uint64_t tz
    cdef bint have_key = key_separator is not None
    cdef Py_ssize_t p, delta, used = 0, count = 0, big = 0, room
    cdef const char *d
    cdef const char *dl
    cdef const char *ks = NULL
    cdef Py_ssize_t dn, kn = 0
    cdef _Line r
    cdef char *o
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(delimiter, &dview, PyBUF_SIMPLE)
        try:
            if have_key:
                PyObject_GetBuffer(key_separator, &kview, PyBUF_SIMPLE)
            try:
                PyObject_GetBuffer(out, &oview, PyBUF_WRITABLE)
                try:
                    if dview.len == 0 or (have_key and kview.len == 0):
                        raise ValueError("empty separator")
                    if not 0 <= pos <= end <= view.len:
                        raise ValueError(f"pos {pos} and end {end} must satisfy "
                                         f"0 <= pos <= end <= len(data) ({view.len})")
                    if first_delta < 0:
                        raise ValueError(f"first_delta {first_delta} must not be negative")
                    if not 0 <= offset <= oview.len:
                        raise ValueError(f"offset {offset} must satisfy "
                                         f"0 <= offset <= len(out) ({oview.len})")
                    # the timestamp delta's zigzag varlong: its size (the reference's
                    # encode_varlong, and its error) and the unsigned value it encodes
                    tsz = len(encode_varlong(ts_delta))
                    tz = (ts_delta << 1) ^ (ts_delta >> 63)
                    d = <const char *>view.buf
                    dl = <const char *>dview.buf
                    dn = dview.len
                    if have_key:
                        ks = <const char *>kview.buf
                        kn = kview.len
                    room = oview.len - offset
                    o = <char *>oview.buf + offset
                    with nogil:
                        p = pos
                        delta = first_delta
                        while p < end:
                            _line(d, p, end, dl, dn, ks, kn, delta, tsz, hn, &r)
                            # what the reference's int32 varints refuse, in its order
                            big = (delta if delta > INT32 else r.klen if r.klen > INT32 else
                                   r.vlen if r.vlen > INT32 else
                                   r.length if r.length > INT32 else 0)
                            if big:
                                break
                            if used + r.size > room:
                                if count == 0:
                                    used = r.size  # what the first line needs
                                break
                            o = _put_uv(o, <uint64_t>r.length << 1)
                            o[0] = 0  # attributes
                            if tsz == 1:  # timestamp delta (most often one byte)
                                o[1] = <char>tz
                                o += 2
                            else:
                                o = _put_uv(o + 1, tz)
                            o = _put_uv(o, <uint64_t>delta << 1)
                            if r.klen < 0:
                                o[0] = 1  # null key
                                o += 1
                            else:
                                o = _put_uv(o, <uint64_t>r.klen << 1)
                                memcpy(o, d + p, r.klen)
                                o += r.klen
                            o = _put_uv(o, <uint64_t>r.vlen << 1)
                            memcpy(o, d + r.vstart, r.vlen)
                            o += r.vlen
                            memcpy(o, hs, hn)  # the header section
                            o += hn
                            count += 1
                            used += r.size
                            delta += 1
                            p = r.next
                    if big:
                        raise ValueError(f"varint out of int32 range: {big}")
                    return p, count, used
                finally:
                    PyBuffer_Release(&oview)
            finally:
                if have_key:
                    PyBuffer_Release(&kview)
        finally:
            PyBuffer_Release(&dview)
    finally:
        PyBuffer_Release(&view)
