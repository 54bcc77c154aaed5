# cython: language_level=3, boundscheck=False, wraparound=False
# cython: cdivision=True, embedsignature=False
"""Compiled twins of the Produce request decoder and response encoder (Cython), the
broker's per-request hot path for small produces, and of the Metadata response encoder
(10,000 partitions are 10,000 dicts to write), and of the Fetch request decoder and
response encoder (every consumer's and follower's fetch; at the bottom). The generated
codecs of protocol/codec.py (`request_frame_decoder(PRODUCE or FETCH, v)`,
`response_encoder(PRODUCE, METADATA or FETCH, v)`) are the definition; protocol/codec.py
picks these, and tests/protocol/test_produce_kernel.py, test_metadata_kernel.py and
test_fetch_kernel.py prove, on the same inputs (malformed ones included), that a twin
gives the reference's result or declines.

A twin declines (returns None) for anything but the plain shape, and the reference then
decides, its errors included: a frame with tagged fields, a null or negative length, a
truncated field, bytes that are not UTF-8, an out-of-range varint; a response body that
is not plain dicts, lists, ints and strings, or that carries record_errors. So a twin
never raises on bad input and never has an error message of its own to keep equal.

Bytes come from the network: every read is checked against the frame's end first.
The module is loaded by protocol/kernels.py only.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_CheckExact, PyDict_GetItem
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_Check
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Check, PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint8_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

API = 4  # protocol/kernels.py refuses a module built from another version of this file

# the request header of Produce is v2 (flexible) from v9 on, as is the body
DEF FLEXIBLE_FROM = 9
DEF INT32_MAX_ = 2147483647
DEF INT32_MIN_ = -2147483648


# ---- decoding ------------------------------------------------------------------------------

cdef inline Py_ssize_t _uvarint(const uint8_t *d, Py_ssize_t pos, Py_ssize_t end,
                                Py_ssize_t *value) noexcept:
    """An unsigned varint of at most 4 bytes (< 2**28: any length a frame can hold) at
    pos; the position after it, or -1 (truncated, longer: decline)."""
    cdef Py_ssize_t result = 0
    cdef int shift = 0
    cdef uint8_t b
    while shift < 28:
        if pos >= end:
            return -1
        b = d[pos]
        pos += 1
        result |= (<Py_ssize_t>(b & 0x7F)) << shift
        if b < 0x80:
            value[0] = result
            return pos
        shift += 7
    return -1


cdef inline int _i16(const uint8_t *d, Py_ssize_t pos) noexcept:
    return <short>((d[pos] << 8) | d[pos + 1])


cdef inline int _i32(const uint8_t *d, Py_ssize_t pos) noexcept:
    return <int>((<unsigned int>d[pos] << 24) | (<unsigned int>d[pos + 1] << 16)
                 | (<unsigned int>d[pos + 2] << 8) | <unsigned int>d[pos + 3])


cdef inline Py_ssize_t _length(const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, bint compact,
                               bint wide, Py_ssize_t *n) noexcept:
    """A length (string: int16, bytes/array: int32; compact: uvarint of n + 1) at pos: -1
    as n for null; the position after it, or -1 when it cannot be read."""
    if compact:
        pos = _uvarint(d, pos, end, n)
        if pos < 0:
            return -1
        n[0] -= 1
        return pos
    if wide:
        if pos + 4 > end:
            return -1
        n[0] = _i32(d, pos)
        return pos + 4
    if pos + 2 > end:
        return -1
    n[0] = _i16(d, pos)
    return pos + 2


cdef object _DECLINE = object()


cdef object _utf8(const uint8_t *d, Py_ssize_t pos, Py_ssize_t n):
    """The UTF-8 text of d[pos:pos + n], or _DECLINE when it is not UTF-8."""
    try:
        return PyUnicode_DecodeUTF8(<const char *>(d + pos), n, NULL)
    except UnicodeDecodeError:
        return _DECLINE


def decode_produce_frame(object frame, int version):
    """`codec.request_frame_decoder(PRODUCE, version)(frame)`: (client id, request) of a
    Produce request frame without its size prefix (its key and version already read), or
    None to let the reference decide."""
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        return _decode(frame, <const uint8_t *>view.buf, view.len, version)
    finally:
        PyBuffer_Release(&view)


cdef object _decode(object frame, const uint8_t *d, Py_ssize_t end, int version):
    cdef bint flex = version >= FLEXIBLE_FROM
    cdef Py_ssize_t pos, n, topics, parts, t, p
    cdef object client_id, txn_id, name, records, mv = None
    cdef int acks, timeout, index
    cdef list topic_data, partition_data
    if end < 10:
        return None
    n = _i16(d, 8)
    pos = 10
    if n >= 0:
        if pos + n > end:
            return None
        client_id = _utf8(d, pos, n)
        if client_id is _DECLINE:
            return None
        pos += n
    elif n == -1:
        client_id = None
    else:
        return None
    if flex:  # the header's tagged fields: none
        if pos >= end or d[pos] != 0:
            return None
        pos += 1
    txn_id = None
    if version >= 3:
        pos = _length(d, pos, end, flex, False, &n)
        if pos < 0 or n < -1:
            return None
        if n >= 0:
            if pos + n > end:
                return None
            txn_id = _utf8(d, pos, n)
            if txn_id is _DECLINE:
                return None
            pos += n
    if pos + 6 > end:
        return None
    acks = _i16(d, pos)
    timeout = _i32(d, pos + 2)
    pos += 6
    pos = _length(d, pos, end, flex, True, &topics)
    if pos < 0 or topics < 0:
        return None
    topic_data = []
    for t in range(topics):
        pos = _length(d, pos, end, flex, False, &n)
        if pos < 0 or n < 0 or pos + n > end:
            return None
        name = _utf8(d, pos, n)
        if name is _DECLINE:
            return None
        pos += n
        pos = _length(d, pos, end, flex, True, &parts)
        if pos < 0 or parts < 0:
            return None
        partition_data = []
        for p in range(parts):
            if pos + 4 > end:
                return None
            index = _i32(d, pos)
            pos = _length(d, pos + 4, end, flex, True, &n)
            if pos < 0 or n < -1:
                return None
            if n == -1:
                records = None
            else:
                if pos + n > end:
                    return None
                if mv is None:
                    mv = memoryview(frame)
                records = mv[pos:pos + n]
                pos += n
            if flex:
                if pos >= end or d[pos] != 0:
                    return None
                pos += 1
            partition_data.append({"index": index, "records": records})
        if flex:
            if pos >= end or d[pos] != 0:
                return None
            pos += 1
        topic_data.append({"name": name, "partition_data": partition_data})
    if flex:
        if pos >= end or d[pos] != 0:
            return None
    return client_id, {"transactional_id": txn_id, "acks": acks, "timeout_ms": timeout,
                       "topic_data": topic_data}


# ---- encoding ------------------------------------------------------------------------------

cdef class _Out:
    """A growing output buffer (malloc'd; freed with the object)."""
    cdef char *d
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.cap = 256
        self.d = <char *>malloc(self.cap)
        if self.d == NULL:
            raise MemoryError()
        self.n = 0

    def __dealloc__(self):
        free(self.d)

    cdef int room(self, Py_ssize_t k) except -1:
        cdef Py_ssize_t cap = self.cap
        cdef char *grown
        if self.n + k <= cap:
            return 0
        while self.n + k > cap:
            cap *= 2
        grown = <char *>realloc(self.d, cap)
        if grown == NULL:
            raise MemoryError()
        self.d, self.cap = grown, cap
        return 0

    cdef void reset(self) noexcept:
        """Empty, and back to its first size if a big response grew it."""
        cdef char *small
        self.n = 0
        if self.cap > 65536:
            small = <char *>realloc(self.d, 256)
            if small != NULL:
                self.d, self.cap = small, 256

    cdef int be(self, int64_t v, int width) except -1:
        cdef int i
        self.room(width)
        for i in range(width):
            self.d[self.n + i] = <char>((v >> (8 * (width - 1 - i))) & 0xFF)
        self.n += width
        return 0

    cdef int uvarint(self, Py_ssize_t v) except -1:
        self.room(5)
        while v >= 0x80:
            self.d[self.n] = <char>((v & 0x7F) | 0x80)
            self.n += 1
            v >>= 7
        self.d[self.n] = <char>v
        self.n += 1
        return 0

    cdef int raw(self, const char *s, Py_ssize_t k) except -1:
        self.room(k)
        memcpy(self.d + self.n, s, k)
        self.n += k
        return 0


def encode_produce_response(object correlation_id, int version, object body):
    """`codec.response_encoder(PRODUCE, version)(correlation_id, body)`: the response
    frame as a one-part list, or None to let the reference encode it (or fail)."""
    cdef bint flex = version >= FLEXIBLE_FROM
    cdef _Out out = _OUT  # reused: nothing in here runs Python code that could reenter
    cdef PyObject *v
    cdef object topics, parts, topic, part
    cdef Py_ssize_t i, j, size
    cdef bytes frame
    cdef int64_t cid
    if not PyDict_CheckExact(body) or not _in_range(correlation_id, INT32_MIN_, INT32_MAX_, &cid):
        return None
    out.n = 0
    out.be(0, 4)  # the size, written at the end
    out.be(cid, 4)
    if flex:
        out.uvarint(0)  # response header v1: no tagged fields
    v = PyDict_GetItem(body, "responses")
    if v == NULL:
        topics = []
    else:
        topics = <object>v
    if not PyList_CheckExact(topics):
        return None
    if not _m_length(out, PyList_GET_SIZE(topics), flex):
        return None
    for i in range(PyList_GET_SIZE(topics)):
        topic = <object>PyList_GET_ITEM(topics, i)
        if not PyDict_CheckExact(topic):
            return None
        v = PyDict_GetItem(topic, "name")
        if v == NULL or not _m_str(out, <object>v, flex, False):
            return None
        v = PyDict_GetItem(topic, "partition_responses")
        parts = [] if v == NULL else <object>v
        if not PyList_CheckExact(parts):
            return None
        if not _m_length(out, PyList_GET_SIZE(parts), flex):
            return None
        for j in range(PyList_GET_SIZE(parts)):
            part = <object>PyList_GET_ITEM(parts, j)
            if not PyDict_CheckExact(part) or not _partition(out, part, version, flex):
                return None
        if flex:
            out.uvarint(0)
    if version >= 1 and not _m_int(out, body, "throttle_time_ms", 0, 4):
        return None
    if flex:
        out.uvarint(0)
    size = out.n - 4
    out.n = 0
    out.be(size, 4)
    frame = PyBytes_FromStringAndSize(out.d, size + 4)
    out.reset()
    return [frame]


cdef bint _partition(_Out out, dict part, int version, bint flex) except -1:
    cdef PyObject *v
    if not _m_int(out, part, "index", 0, 4) or not _m_int(out, part, "error_code", 0, 2) \
            or not _f_int64(out, part, "base_offset", 0):
        return False
    if version >= 2 and not _f_int64(out, part, "log_append_time_ms", -1):
        return False
    if version >= 5 and not _f_int64(out, part, "log_start_offset", -1):
        return False
    if version >= 8:
        v = PyDict_GetItem(part, "record_errors")
        if v != NULL and not (PyList_CheckExact(<object>v) and
                              PyList_GET_SIZE(<object>v) == 0):
            return False  # record errors: the reference writes them
        _m_length(out, 0, flex)
        v = PyDict_GetItem(part, "error_message")
        if not _m_str(out, None if v == NULL else <object>v, flex, True):
            return False
    if flex:
        out.uvarint(0)
    return True


cdef _Out _OUT = _Out()


# ---- Metadata responses ----------------------------------------------------------------------
# MetadataResponse v0-v12 (protocol/messages/metadata.py), flexible from v9: the twin of
# `codec.response_encoder(METADATA, version)`. The body is the broker's: exact dicts (a
# missing key takes the spec's default, as the reference's `get`), lists or tuples, ints,
# str, bool, uuid.UUID (or 16 bytes). Anything else, and anything the reference refuses
# (a value out of its field's range, a null where the version allows none, a string the
# reference cannot write), declines. No user code runs in here but a dict's odd key's
# __eq__ (a lookup) and uuid.UUID.bytes: sequences are re-measured before every item and a
# change of length declines; the buffer is this call's own when one is already in use.

from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.bool cimport PyBool_Check
from cpython.bytes cimport PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_CheckExact, PyByteArray_GET_SIZE
from cpython.tuple cimport PyTuple_CheckExact
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_CheckExact
from cpython.sequence cimport PySequence_Fast_GET_ITEM, PySequence_Fast_GET_SIZE

import uuid as _uuid_module

cdef object _UUID = _uuid_module.UUID
DEF METADATA_FLEXIBLE_FROM = 9
DEF UVARINT_MAX = 4294967295  # record/varint.encode_uvarint's limit


cdef extern from "Python.h":
    # the plain C API, no exception check by Cython: NULL (or -1) and PyErr_Occurred()
    PyObject *_dict_get "PyDict_GetItemWithError"(object d, object key)
    long long _as_long_long "PyLong_AsLongLongAndOverflow"(object v, int *overflow)


cdef class _Buffer(_Out):
    """_Out with a flag: the call that holds it (a reentrant call takes its own)."""
    cdef bint busy


cdef _Buffer _METADATA_OUT = _Buffer()


cdef inline int _lookup(dict d, str key, PyObject **v) noexcept:
    """d[key] (borrowed; NULL when absent) in v: 1, or 0 when the lookup raised (an odd
    key's __eq__): decline, the reference raises it."""
    v[0] = _dict_get(d, key)
    if v[0] == NULL and PyErr_Occurred() != NULL:
        PyErr_Clear()
        return 0
    return 1


cdef inline int _in_range(object v, int64_t lo, int64_t hi, int64_t *out) noexcept:
    """An int (bool and int subclasses too, as struct.pack) in [lo, hi] (out): 1, or 0
    (not an int, out of range: decline). No exception is left set."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_Check(v):
        return 0
    x = _as_long_long(v, &overflow)
    if overflow != 0:
        return 0
    if x == -1 and PyErr_Occurred() != NULL:
        PyErr_Clear()
        return 0
    out[0] = x
    return lo <= x <= hi


cdef inline int _put(_Out out, int64_t v, int width) except -1:
    """`width` big-endian bytes of v (out.be, inlined: the hot writes)."""
    cdef int i
    if out.n + width > out.cap:
        out.room(width)
    for i in range(width):
        out.d[out.n + i] = <char>((v >> (8 * (width - 1 - i))) & 0xFF)
    out.n += width
    return 0


cdef inline int _put_uvarint(_Out out, int64_t v) except -1:
    """An unsigned varint (v < 2**32, what the lengths allow)."""
    if out.n + 5 > out.cap:
        out.room(5)
    while v >= 0x80:
        out.d[out.n] = <char>((v & 0x7F) | 0x80)
        out.n += 1
        v >>= 7
    out.d[out.n] = <char>v
    out.n += 1
    return 0


cdef int _m_int(_Out out, dict d, str key, int64_t default, int width) except -1:
    """An int field (int16/int32) of d, `default` when absent: 1, or 0 to decline."""
    cdef PyObject *v
    cdef int64_t x
    if not _lookup(d, key, &v):
        return 0
    if v == NULL:
        x = default
    elif width == 2:
        if not _in_range(<object>v, -32768, 32767, &x):
            return 0
    elif not _in_range(<object>v, INT32_MIN_, INT32_MAX_, &x):
        return 0
    _put(out, x, width)
    return 1


cdef int _m_length(_Out out, Py_ssize_t n, bint flex) except -1:
    """An array's (or compact string's) length, where the reference can write it."""
    if flex:
        if n + 1 > UVARINT_MAX:
            return 0
        _put_uvarint(out, n + 1)
    else:
        if n > INT32_MAX_:
            return 0
        _put(out, n, 4)
    return 1


cdef int _m_str(_Out out, object s, bint flex, bint nullable) except -1:
    """A string field's value (None: null): 1, or 0 to decline."""
    cdef const char *data
    cdef Py_ssize_t n
    if s is None:
        if not nullable:
            return 0
        if flex:
            _put_uvarint(out, 0)
        else:
            _put(out, -1, 2)
        return 1
    if not PyUnicode_CheckExact(s):
        return 0
    try:
        data = PyUnicode_AsUTF8AndSize(s, &n)
    except UnicodeEncodeError:  # lone surrogates: the reference raises
        return 0
    if flex:
        if not _m_length(out, n, True):
            return 0
    else:
        if n > 32767:
            return 0
        _put(out, n, 2)
    out.raw(data, n)
    return 1


cdef int _m_str_field(_Out out, dict d, str key, object default, bint flex,
                      bint nullable) except -1:
    cdef PyObject *v
    if not _lookup(d, key, &v):
        return 0
    return _m_str(out, default if v == NULL else <object>v, flex, nullable)


cdef inline bint _is_seq(object v) noexcept:
    return PyList_CheckExact(v) or PyTuple_CheckExact(v)


cdef int _m_int32s(_Out out, dict d, str key, bint flex) except -1:
    """A []int32 field (not nullable; absent: empty)."""
    cdef PyObject *v
    cdef object seq
    cdef Py_ssize_t i, n
    cdef int64_t x
    if not _lookup(d, key, &v):
        return 0
    if v == NULL:
        return _m_length(out, 0, flex)
    seq = <object>v
    if not _is_seq(seq):
        return 0
    n = PySequence_Fast_GET_SIZE(seq)
    if not _m_length(out, n, flex):
        return 0
    out.room(4 * n)
    for i in range(n):  # ints only: no code runs, the sequence cannot change
        if not _in_range(<object>PySequence_Fast_GET_ITEM(seq, i), INT32_MIN_, INT32_MAX_,
                         &x):
            return 0
        _put(out, x, 4)
    return 1


cdef int _m_uuid(_Out out, dict d) except -1:
    """topic_id: a uuid.UUID (exactly) or 16 bytes; absent: the zero uuid."""
    cdef PyObject *v
    cdef object u, b
    if not _lookup(d, "topic_id", &v):
        return 0
    if v == NULL:
        out.room(16)
        memset(out.d + out.n, 0, 16)
        out.n += 16
        return 1
    u = <object>v
    if type(u) is _UUID:
        try:
            b = u.bytes
        except Exception:
            return 0
        if not PyBytes_CheckExact(b) or PyBytes_GET_SIZE(b) != 16:
            return 0
        out.raw(PyBytes_AS_STRING(b), 16)
    elif PyBytes_CheckExact(u) and PyBytes_GET_SIZE(u) == 16:
        out.raw(PyBytes_AS_STRING(u), 16)
    elif PyByteArray_CheckExact(u) and PyByteArray_GET_SIZE(u) == 16:
        out.raw(PyByteArray_AS_STRING(u), 16)
    else:
        return 0
    return 1


cdef int _m_bool(_Out out, dict d, str key) except -1:
    """A bool field (absent: False); only True and False (the reference packs any
    object's truth)."""
    cdef PyObject *v
    if not _lookup(d, key, &v):
        return 0
    if v == NULL:
        _put(out, 0, 1)
    elif PyBool_Check(<object>v):
        _put(out, 1 if <object>v is True else 0, 1)
    else:
        return 0
    return 1


cdef int _m_partition(_Out out, object part, int version, bint flex) except -1:
    cdef dict p
    if not PyDict_CheckExact(part):
        return 0
    p = <dict>part
    if not (_m_int(out, p, "error_code", 0, 2) and _m_int(out, p, "partition_index", 0, 4)
            and _m_int(out, p, "leader_id", 0, 4)):
        return 0
    if version >= 7 and not _m_int(out, p, "leader_epoch", -1, 4):
        return 0
    if not (_m_int32s(out, p, "replica_nodes", flex) and _m_int32s(out, p, "isr_nodes", flex)):
        return 0
    if version >= 5 and not _m_int32s(out, p, "offline_replicas", flex):
        return 0
    if flex:
        _put(out, 0, 1)
    return 1


cdef int _m_topic(_Out out, object topic, int version, bint flex) except -1:
    cdef dict t
    cdef PyObject *v
    cdef object parts, part
    cdef Py_ssize_t i, n
    if not PyDict_CheckExact(topic):
        return 0
    t = <dict>topic
    if not _m_int(out, t, "error_code", 0, 2):
        return 0
    if not _m_str_field(out, t, "name", "", flex, version >= 12):
        return 0
    if version >= 10 and not _m_uuid(out, t):
        return 0
    if version >= 1 and not _m_bool(out, t, "is_internal"):
        return 0
    if not _lookup(t, "partitions", &v):
        return 0
    if v == NULL:
        parts = ()
    else:
        parts = <object>v
    if not _is_seq(parts):
        return 0
    n = PySequence_Fast_GET_SIZE(parts)
    if not _m_length(out, n, flex):
        return 0
    for i in range(n):
        if PySequence_Fast_GET_SIZE(parts) != n:  # changed by code run in here: decline
            return 0
        part = <object>PySequence_Fast_GET_ITEM(parts, i)
        if not _m_partition(out, part, version, flex):
            return 0
    if PySequence_Fast_GET_SIZE(parts) != n:
        return 0
    if version >= 8 and not _m_int(out, t, "topic_authorized_operations", INT32_MIN_, 4):
        return 0
    if flex:
        _put_uvarint(out, 0)
    return 1


cdef int _m_broker(_Out out, object broker, int version, bint flex) except -1:
    cdef dict b
    if not PyDict_CheckExact(broker):
        return 0
    b = <dict>broker
    if not (_m_int(out, b, "node_id", 0, 4) and _m_str_field(out, b, "host", "", flex, False)
            and _m_int(out, b, "port", 0, 4)):
        return 0
    if version >= 1 and not _m_str_field(out, b, "rack", None, flex, True):
        return 0
    if flex:
        _put_uvarint(out, 0)
    return 1


cdef int _m_array(_Out out, dict body, str key, int version, bint flex, int which) except -1:
    """The brokers (which 0) or topics (1) array of the body (absent: empty)."""
    cdef PyObject *v
    cdef object items, item
    cdef Py_ssize_t i, n
    cdef int ok
    if not _lookup(body, key, &v):
        return 0
    items = () if v == NULL else <object>v
    if not _is_seq(items):
        return 0
    n = PySequence_Fast_GET_SIZE(items)
    if not _m_length(out, n, flex):
        return 0
    for i in range(n):
        if PySequence_Fast_GET_SIZE(items) != n:
            return 0
        item = <object>PySequence_Fast_GET_ITEM(items, i)
        if which == 0:
            ok = _m_broker(out, item, version, flex)
        else:
            ok = _m_topic(out, item, version, flex)
        if not ok:
            return 0
    return PySequence_Fast_GET_SIZE(items) == n


cdef int _m_body(_Out out, dict body, int version, bint flex) except -1:
    if version >= 3 and not _m_int(out, body, "throttle_time_ms", 0, 4):
        return 0
    if not _m_array(out, body, "brokers", version, flex, 0):
        return 0
    if version >= 2 and not _m_str_field(out, body, "cluster_id", None, flex, True):
        return 0
    if version >= 1 and not _m_int(out, body, "controller_id", -1, 4):
        return 0
    if not _m_array(out, body, "topics", version, flex, 1):
        return 0
    if 8 <= version <= 10 and not _m_int(out, body, "cluster_authorized_operations",
                                         INT32_MIN_, 4):
        return 0
    if flex:
        _put_uvarint(out, 0)
    return 1


def encode_metadata_response(object correlation_id, int version, object body):
    """`codec.response_encoder(METADATA, version)(correlation_id, body)`: the response
    frame as a one-part list, or None to let the reference encode it (or fail)."""
    cdef bint flex = version >= METADATA_FLEXIBLE_FROM
    cdef _Buffer out
    cdef bint own = not _METADATA_OUT.busy
    cdef int64_t cid = 0
    cdef Py_ssize_t size
    if version < 0 or version > 12 or not PyDict_CheckExact(body) \
            or not _in_range(correlation_id, INT32_MIN_, INT32_MAX_, &cid):
        return None
    out = _METADATA_OUT if own else _Buffer()
    out.busy = True
    try:
        out.n = 0
        _put(out, 0, 4)  # the size, written at the end
        _put(out, cid, 4)
        if flex:
            _put_uvarint(out, 0)  # response header v1: no tagged fields
        if not _m_body(out, <dict>body, version, flex):
            return None
        size = out.n - 4
        if size > INT32_MAX_:
            return None
        out.n = 0
        _put(out, size, 4)
        return [PyBytes_FromStringAndSize(out.d, size + 4)]
    finally:
        out.busy = False
        out.reset()


# ---- Fetch requests --------------------------------------------------------------------------
# FetchRequest v0-v12 (protocol/messages/fetch.py), flexible (header v2, compact lengths,
# tagged fields) from v12: the twin of `codec.request_frame_decoder(FETCH, version)`, one
# per consumer's and follower's fetch. It declines (None) a frame with any tagged field
# (the header's, the body's cluster_id, a topic's or a partition's), a null or negative
# length, a truncated field, text that is not UTF-8, a varint of more than 4 bytes; the
# reference decides those. Trailing bytes after the body are ignored, as the reference
# ignores them. The dicts' keys are in the reference's order (its absent fields first,
# then the fixed-width runs as the generated decoder writes them).

from libc.stdint cimport uint64_t

DEF FETCH_FLEXIBLE_FROM = 12
DEF FETCH_MAX_VERSION = 12


cdef inline int64_t _i64(const uint8_t *d, Py_ssize_t pos) noexcept:
    return <int64_t>((<uint64_t><unsigned int>_i32(d, pos) << 32)
                     | <uint64_t><unsigned int>_i32(d, pos + 4))


cdef inline object _name(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, bint flex):
    """A non-nullable string at pos[0] (pos[0] moved past it), or _DECLINE (null,
    negative, truncated, not UTF-8)."""
    cdef Py_ssize_t n = 0
    cdef Py_ssize_t p = _length(d, pos[0], end, flex, False, &n)
    if p < 0 or n < 0 or n > end - p:
        return _DECLINE
    pos[0] = p + n
    return _utf8(d, p, n)


def decode_fetch_frame(object frame, int version):
    """`codec.request_frame_decoder(FETCH, version)(frame)`: (client id, request) of a
    Fetch request frame without its size prefix (its key and version already read), or
    None to let the reference decide."""
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        return _decode_fetch(<const uint8_t *>view.buf, view.len, version)
    finally:
        PyBuffer_Release(&view)


cdef object _decode_fetch(const uint8_t *d, Py_ssize_t end, int version):
    cdef bint flex = version >= FETCH_FLEXIBLE_FROM
    cdef Py_ssize_t pos, n, count, topics, parts, t, p, i, fixed, part_size
    cdef object client_id, name, rack_id
    cdef dict body
    cdef list topic_list, part_list, forgotten, ids
    cdef int replica_id, max_wait_ms, min_bytes, partition, partition_max_bytes
    cdef int max_bytes = INT32_MAX_, session_id = 0, session_epoch = -1, isolation_level = 0
    cdef int current_leader_epoch = -1, last_fetched_epoch = -1
    cdef int64_t fetch_offset, log_start_offset = -1
    if version < 0 or version > FETCH_MAX_VERSION or end < 10:
        return None
    # the header's client id (a plain nullable string in every version), its tags
    n = _i16(d, 8)
    pos = 10
    if n >= 0:
        if n > end - pos:
            return None
        client_id = _utf8(d, pos, n)
        if client_id is _DECLINE:
            return None
        pos += n
    elif n == -1:
        client_id = None
    else:
        return None
    if flex:
        if pos >= end or d[pos] != 0:
            return None
        pos += 1
    # replica_id, max_wait_ms, min_bytes[, max_bytes][, isolation_level][, session id, epoch]
    fixed = 12 + (4 if version >= 3 else 0) + (1 if version >= 4 else 0) \
        + (8 if version >= 7 else 0)
    if fixed > end - pos:
        return None
    replica_id = _i32(d, pos)
    max_wait_ms = _i32(d, pos + 4)
    min_bytes = _i32(d, pos + 8)
    pos += 12
    if version >= 3:
        max_bytes = _i32(d, pos)
        pos += 4
    if version >= 4:
        isolation_level = <signed char>d[pos]
        pos += 1
    if version >= 7:
        session_id = _i32(d, pos)
        session_epoch = _i32(d, pos + 4)
        pos += 8
    # a partition: partition[, current_leader_epoch], fetch_offset[, last_fetched_epoch]
    # [, log_start_offset], partition_max_bytes[, its tags]
    part_size = 16 + (4 if version >= 9 else 0) + (4 if version >= 12 else 0) \
        + (8 if version >= 5 else 0) + (1 if flex else 0)
    pos = _length(d, pos, end, flex, True, &topics)
    if pos < 0 or topics < 0:
        return None
    topic_list = []
    for t in range(topics):
        name = _name(d, &pos, end, flex)
        if name is _DECLINE:
            return None
        pos = _length(d, pos, end, flex, True, &parts)
        if pos < 0 or parts < 0:
            return None
        part_list = []
        for p in range(parts):
            if part_size > end - pos:
                return None
            partition = _i32(d, pos)
            pos += 4
            if version >= 9:
                current_leader_epoch = _i32(d, pos)
                pos += 4
            fetch_offset = _i64(d, pos)
            pos += 8
            if version >= 12:
                last_fetched_epoch = _i32(d, pos)
                pos += 4
            if version >= 5:
                log_start_offset = _i64(d, pos)
                pos += 8
            partition_max_bytes = _i32(d, pos)
            pos += 4
            if flex:
                if d[pos] != 0:
                    return None
                pos += 1
            if version >= 12:
                part_list.append({
                    "partition": partition, "current_leader_epoch": current_leader_epoch,
                    "fetch_offset": fetch_offset, "last_fetched_epoch": last_fetched_epoch,
                    "log_start_offset": log_start_offset,
                    "partition_max_bytes": partition_max_bytes})
            elif version >= 9:
                part_list.append({
                    "last_fetched_epoch": -1, "partition": partition,
                    "current_leader_epoch": current_leader_epoch,
                    "fetch_offset": fetch_offset, "log_start_offset": log_start_offset,
                    "partition_max_bytes": partition_max_bytes})
            elif version >= 5:
                part_list.append({
                    "current_leader_epoch": -1, "last_fetched_epoch": -1,
                    "partition": partition, "fetch_offset": fetch_offset,
                    "log_start_offset": log_start_offset,
                    "partition_max_bytes": partition_max_bytes})
            else:
                part_list.append({
                    "current_leader_epoch": -1, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition": partition,
                    "fetch_offset": fetch_offset,
                    "partition_max_bytes": partition_max_bytes})
        if flex:
            if pos >= end or d[pos] != 0:
                return None
            pos += 1
        topic_list.append({"topic": name, "partitions": part_list})
    forgotten = []
    if version >= 7:
        pos = _length(d, pos, end, flex, True, &topics)
        if pos < 0 or topics < 0:
            return None
        for t in range(topics):
            name = _name(d, &pos, end, flex)
            if name is _DECLINE:
                return None
            pos = _length(d, pos, end, flex, True, &count)
            if pos < 0 or count < 0 or count > (end - pos) // 4:
                return None
            ids = []
            for i in range(count):
                ids.append(_i32(d, pos))
                pos += 4
            if flex:
                if pos >= end or d[pos] != 0:
                    return None
                pos += 1
            forgotten.append({"topic": name, "partitions": ids})
    rack_id = ""
    if version >= 11:
        rack_id = _name(d, &pos, end, flex)
        if rack_id is _DECLINE:
            return None
    if flex and (pos >= end or d[pos] != 0):  # the body's tags: cluster_id would be one
        return None
    body = {"cluster_id": None}
    if version < 3:
        body["max_bytes"] = max_bytes
    if version < 4:
        body["isolation_level"] = isolation_level
    if version < 7:
        body["session_id"] = session_id
        body["session_epoch"] = session_epoch
    body["replica_id"] = replica_id
    body["max_wait_ms"] = max_wait_ms
    body["min_bytes"] = min_bytes
    if version >= 3:
        body["max_bytes"] = max_bytes
    if version >= 4:
        body["isolation_level"] = isolation_level
    if version >= 7:
        body["session_id"] = session_id
        body["session_epoch"] = session_epoch
    body["topics"] = topic_list
    body["forgotten_topics_data"] = forgotten
    body["rack_id"] = rack_id
    return client_id, body


# ---- Fetch responses -------------------------------------------------------------------------
# FetchResponse v0-v12 (flexible from v12): the twin of `codec.response_encoder(FETCH,
# version)`. Its parts are the reference's: the bytes around each records field that the
# reference does not copy (a FileRegion, for sendfile, or an in-memory buffer of at least
# ZERO_COPY_THRESHOLD bytes) and that very object, in order, the size prefix in the first
# part. The body is handlers/fetch.py's: exact dicts (a missing key takes the spec's
# default, as the reference's `get`), lists or tuples, ints, str, and records that are None,
# an exact FileRegion, bytes, bytearray or a contiguous memoryview. Anything else declines,
# as does a partition carrying a v12 tagged field (diverging_epoch, current_leader,
# snapshot_id: the reference writes those) or a value the reference would refuse.

from kafkactl.protocol.compiler import ZERO_COPY_THRESHOLD as _ZERO_COPY_THRESHOLD
from kafkactl.protocol.types import FileRegion as _FileRegion_type

from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

cdef object _FileRegion = _FileRegion_type
cdef Py_ssize_t _ZERO_COPY = _ZERO_COPY_THRESHOLD
cdef _Buffer _FETCH_OUT = _Buffer()


cdef int _f_int64(_Out out, dict d, str key, int64_t default) except -1:
    """An int64 field of d, `default` when absent: 1, or 0 to decline."""
    cdef PyObject *v
    cdef int64_t x
    if not _lookup(d, key, &v):
        return 0
    if v == NULL:
        x = default
    elif not _in_range(<object>v, INT64_MIN, INT64_MAX, &x):
        return 0
    _put(out, x, 8)
    return 1


cdef inline object _f_seq(dict d, str key, bint *ok):
    """The list or tuple d[key] ([] when absent); ok[0] False to decline (not a list or a
    tuple, a lookup that raised). None stays None (the caller decides)."""
    cdef PyObject *v
    ok[0] = False
    if not _lookup(d, key, &v):
        return None
    if v == NULL:
        ok[0] = True
        return []
    if (<object>v) is None or _is_seq(<object>v):
        ok[0] = True
        return <object>v
    return None


cdef int _f_flush(_Out out, list parts, Py_ssize_t *total) except -1:
    """The bytes written so far become a part of their own (the reference's
    `parts.append(bytes(out)); out.clear()`)."""
    parts.append(PyBytes_FromStringAndSize(out.d, out.n))
    total[0] += out.n
    out.n = 0
    return 0


cdef int _f_records(_Out out, object v, bint flex, list parts, Py_ssize_t *total) except -1:
    """A records field's value: 1, or 0 to decline."""
    cdef Py_buffer view
    cdef int64_t n
    cdef object length
    if v is None:
        if flex:
            _put_uvarint(out, 0)
        else:
            _put(out, -1, 4)
        return 1
    if type(v) is _FileRegion:
        if PyTuple_GET_SIZE(v) != 3:
            return 0
        length = <object>PyTuple_GET_ITEM(v, 2)
        if not _in_range(length, 0, INT32_MAX_, &n) or not _m_length(out, n, flex):
            return 0
        _f_flush(out, parts, total)
        parts.append(v)
        total[0] += n
        return 1
    if not (PyBytes_CheckExact(v) or PyByteArray_CheckExact(v) or type(v) is memoryview):
        return 0
    try:
        PyObject_GetBuffer(v, &view, PyBUF_SIMPLE)
    except (BufferError, ValueError, TypeError):  # not contiguous, released: the reference
        return 0
    try:
        n = view.len
        if n > INT32_MAX_ or not _m_length(out, n, flex):
            return 0
        if n >= _ZERO_COPY:
            _f_flush(out, parts, total)
            parts.append(v)
            total[0] += n
        else:
            out.raw(<const char *>view.buf, n)
    finally:
        PyBuffer_Release(&view)
    return 1


cdef int _f_partition(_Out out, object part, int version, bint flex, list parts,
                      Py_ssize_t *total) except -1:
    cdef dict d
    cdef PyObject *v
    cdef object txns, txn
    cdef Py_ssize_t i, n
    cdef bint ok
    if not PyDict_CheckExact(part):
        return 0
    d = <dict>part
    if flex:  # the reference writes the tagged fields itself
        if not _lookup(d, "diverging_epoch", &v) or v != NULL \
                or not _lookup(d, "current_leader", &v) or v != NULL \
                or not _lookup(d, "snapshot_id", &v) or v != NULL:
            return 0
    if not _m_int(out, d, "partition_index", 0, 4) or not _m_int(out, d, "error_code", 0, 2) \
            or not _f_int64(out, d, "high_watermark", 0):
        return 0
    if version >= 4 and not _f_int64(out, d, "last_stable_offset", -1):
        return 0
    if version >= 5 and not _f_int64(out, d, "log_start_offset", -1):
        return 0
    if version >= 4:
        txns = _f_seq(d, "aborted_transactions", &ok)
        if not ok:
            return 0
        if txns is None:
            if flex:
                _put_uvarint(out, 0)
            else:
                _put(out, -1, 4)
        else:
            if not _m_length(out, PySequence_Fast_GET_SIZE(txns), flex):
                return 0
            n = PySequence_Fast_GET_SIZE(txns)
            for i in range(n):
                if PySequence_Fast_GET_SIZE(txns) != n:
                    return 0
                txn = <object>PySequence_Fast_GET_ITEM(txns, i)
                if not PyDict_CheckExact(txn) \
                        or not _f_int64(out, <dict>txn, "producer_id", 0) \
                        or not _f_int64(out, <dict>txn, "first_offset", 0):
                    return 0
                if flex:
                    _put_uvarint(out, 0)
    if version >= 11 and not _m_int(out, d, "preferred_read_replica", -1, 4):
        return 0
    if not _lookup(d, "records", &v):
        return 0
    if not _f_records(out, None if v == NULL else <object>v, flex, parts, total):
        return 0
    if flex:
        _put_uvarint(out, 0)
    return 1


cdef int _f_body(_Out out, dict body, int version, bint flex, list parts,
                 Py_ssize_t *total) except -1:
    cdef object topics, partitions, topic, part
    cdef Py_ssize_t i, j, n, m
    cdef bint ok
    if version >= 1 and not _m_int(out, body, "throttle_time_ms", 0, 4):
        return 0
    if version >= 7 and (not _m_int(out, body, "error_code", 0, 2)
                         or not _m_int(out, body, "session_id", 0, 4)):
        return 0
    topics = _f_seq(body, "responses", &ok)
    if not ok or topics is None or not _m_length(out, PySequence_Fast_GET_SIZE(topics), flex):
        return 0
    n = PySequence_Fast_GET_SIZE(topics)
    for i in range(n):
        if PySequence_Fast_GET_SIZE(topics) != n:  # changed under us (an odd key's __eq__)
            return 0
        topic = <object>PySequence_Fast_GET_ITEM(topics, i)
        if not PyDict_CheckExact(topic) \
                or not _m_str_field(out, <dict>topic, "topic", "", flex, False):
            return 0
        partitions = _f_seq(<dict>topic, "partitions", &ok)
        if not ok or partitions is None \
                or not _m_length(out, PySequence_Fast_GET_SIZE(partitions), flex):
            return 0
        m = PySequence_Fast_GET_SIZE(partitions)
        for j in range(m):
            if PySequence_Fast_GET_SIZE(partitions) != m:
                return 0
            part = <object>PySequence_Fast_GET_ITEM(partitions, j)
            if not _f_partition(out, part, version, flex, parts, total):
                return 0
        if flex:
            _put_uvarint(out, 0)
    if flex:
        _put_uvarint(out, 0)
    return 1


def encode_fetch_response(object correlation_id, int version, object body):
    """`codec.response_encoder(FETCH, version)(correlation_id, body)`: the reference's
    parts, or None to let the reference encode it (or fail)."""
    cdef bint flex = version >= FETCH_FLEXIBLE_FROM
    cdef _Buffer out
    cdef bint own = not _FETCH_OUT.busy
    cdef int64_t cid = 0
    cdef Py_ssize_t size, total = 0
    cdef list parts = []
    cdef bytes first, framed
    if version < 0 or version > FETCH_MAX_VERSION or not PyDict_CheckExact(body) \
            or not _in_range(correlation_id, INT32_MIN_, INT32_MAX_, &cid):
        return None
    out = _FETCH_OUT if own else _Buffer()
    out.busy = True
    try:
        out.n = 0
        _put(out, 0, 4)  # the size, written at the end
        _put(out, cid, 4)
        if flex:
            _put_uvarint(out, 0)  # response header v1: no tagged fields
        if not _f_body(out, <dict>body, version, flex, parts, &total):
            return None
        if not parts:
            size = out.n - 4
            if size > INT32_MAX_:
                return None
            out.n = 0
            _put(out, size, 4)
            return [PyBytes_FromStringAndSize(out.d, size + 4)]
        if out.n:
            _f_flush(out, parts, &total)
        size = total - 4
        if size > INT32_MAX_:
            return None
        first = <bytes>parts[0]
        framed = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(first))
        memcpy(PyBytes_AS_STRING(framed), PyBytes_AS_STRING(first), PyBytes_GET_SIZE(first))
        out.n = 0
        _put(out, size, 4)
        memcpy(PyBytes_AS_STRING(framed), out.d, 4)
        parts[0] = framed
        return parts
    finally:
        out.busy = False
        out.reset()


# ---- what the broker's routes hold ----------------------------------------------------------
cdef class _Twinned:
    """A compiled twin for one API version and the reference it declines to (None) to.
    Routes hold a subclass's bound method (called by vectorcall; an instance's __call__ is
    not)."""
    cdef readonly object twin
    cdef int version
    cdef object reference

    def __init__(self, object twin, int version, object reference):
        self.twin = twin
        self.version = version
        self.reference = reference


cdef class RequestDecoder(_Twinned):
    """`decode(frame) -> (client id, request)`: `twin(frame, version)`, else, when the twin
    declines (None), `reference(frame)`."""

    def decode(self, object frame):
        got = self.twin(frame, self.version)
        return self.reference(frame) if got is None else got


cdef class ResponseEncoder(_Twinned):
    """`encode(correlation_id, body) -> parts`: `twin(correlation_id, version, body)`, else,
    when the twin declines (None), `reference(correlation_id, body)`."""

    def encode(self, object correlation_id, object body):
        got = self.twin(correlation_id, self.version, body)
        return self.reference(correlation_id, body) if got is None else got
