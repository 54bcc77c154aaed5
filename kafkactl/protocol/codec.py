"""Request/response framing and the public codec functions (sans-IO).

Wire layout: every request and response is ``int32 size`` + header + body.

* Request header v1 = api_key int16, api_version int16, correlation_id int32, client_id
  (nullable *non-compact* string, even in flexible versions); v2 (flexible versions) adds a
  tagged-field section. (v0, without client_id, is only used by ControlledShutdown v0,
  which we do not speak.)
* Response header v0 = correlation_id int32; v1 (flexible versions) adds a tagged-field
  section. **ApiVersions responses always use header v0**, whatever their version.

Buffers, to be precise about what each function expects:

* ``decode_request_header(buf, offset=0)``: ``buf`` is one request frame *without* the
  4-byte size prefix (what the network layer reads after the size). Returns the header and
  the offset of the body in ``buf``.
* ``decode_request(api_key, version, buf, offset)``: decodes the body starting at ``offset``
  (the ``body_offset`` returned above). Records fields are zero-copy ``memoryview`` slices
  of ``buf``.
* ``decode_response(api_key, version, buf, offset=0)``: ``buf`` is one response frame
  *without* the 4-byte size prefix but *with* the response header: the function skips the
  header (correlation id, plus tags when the header is v1), so callers need not know the
  ApiVersions exception. Use ``peek_correlation_id(buf)`` first to match the in-flight
  request. An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0 (that
  is how a broker answers a too-new ApiVersions request).
* ``encode_request(...)`` returns the complete frame (size prefix included) as ``bytes``.
* ``encode_response(...)`` returns a list of parts (``bytes``, ``memoryview`` for large
  in-memory records, and :class:`FileRegion` for records still in a segment file) whose
  first part starts with the 4-byte size prefix; write them in order (``os.sendfile`` the
  FileRegions). ``frame_bytes(parts)`` joins them when no FileRegion is present.

Malformed input raises :class:`ProtocolDecodeError` (an ``InvalidRequestError``, Kafka code
42) and an (api key, version) outside our table raises :class:`UnsupportedVersionError`
(code 35); ``struct.error``/``IndexError``/``UnicodeDecodeError`` never leak out. Encoding
a dict that does not fit the schema raises :class:`ProtocolEncodeError` (a ``ValueError``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.compiler import Decoder, Encoder, compile_decoder, compile_encoder
from kafkactl.protocol.errors import (
    ErrorCode,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnsupportedVersionError,
)
from kafkactl.protocol.kernels import codec_kernels
from kafkactl.protocol.messages import REQUESTS, RESPONSES
from kafkactl.protocol.schema import Message
from kafkactl.protocol.types import (
    INT16,
    INT32,
    FileRegion,
    skip_tagged_fields,
)
from kafkactl.protocol.versions import API_VERSIONS_MAX, SUPPORTED_VERSIONS

__all__ = [
    "RequestHeader", "ResponseHeader", "FileRegion", "decode_request_header",
    "decode_request", "encode_request", "decode_response",
    "decode_response_header",
    "encode_response", "encode_api_versions_unsupported", "peek_correlation_id",
    "frame_bytes", "frame_size", "request_header_version", "response_header_version",
]

_HEADER = struct.Struct(">hhi")
_HEADER_V1 = struct.Struct(">hhih")
_RESPONSE_HEADER_V0 = struct.Struct(">ii")  # size (filled in last), correlation id
_RESPONSE_HEADER_V1 = struct.Struct(">iiB")  # ... and an empty tagged-field section
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, TypeError)
_ENCODE_ERRORS = (struct.error, TypeError, AttributeError, OverflowError)


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class ResponseHeader(NamedTuple):
    correlation_id: int


def _flexible_from(table: dict[int, Message]) -> dict[int, int]:
    """api key -> first flexible version (open-ended, as in the specs)."""
    result = {}
    for key, msg in table.items():
        if msg.flexible is not None:
            result[key] = int(msg.flexible.rstrip("+").split("-")[0])
    return result


_REQUEST_FLEX = _flexible_from(REQUESTS)
_RESPONSE_FLEX = _flexible_from(RESPONSES)
_NEVER = 1 << 16


def request_header_version(api_key: int, version: int) -> int:
    """1, or 2 for flexible versions (also for versions above our max, as Kafka does)."""
    return 2 if version >= _REQUEST_FLEX.get(api_key, _NEVER) else 1


def response_header_version(api_key: int, version: int) -> int:
    """0, or 1 for flexible versions, except ApiVersions which always uses 0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if version >= _RESPONSE_FLEX.get(api_key, _NEVER) else 0


# ------------------------------------------------------------------ compiled-schema caches
_REQUEST_DECODERS: dict[tuple[int, int], Decoder] = {}
_REQUEST_ENCODERS: dict[tuple[int, int], Encoder] = {}
_RESPONSE_DECODERS: dict[tuple[int, int], Decoder] = {}
_RESPONSE_ENCODERS: dict[tuple[int, int], Encoder] = {}
# (api key, version) -> (encoder, response header v1?)
_RESPONSE_FRAMERS: dict[tuple[int, int], Callable[[int, Any], list[Any]]] = {}


def _check_supported(api_key: int, version: int) -> None:
    try:
        lo, hi = SUPPORTED_VERSIONS[ApiKey(api_key)]
    except (ValueError, KeyError):
        raise UnsupportedVersionError(f"unsupported API key {api_key}") from None
    if not lo <= version <= hi:
        raise UnsupportedVersionError(
            f"{ApiKey(api_key).spec_name} v{version} is not supported (we speak v{lo}-v{hi})"
        )


def _compiled(cache: dict[tuple[int, int], Any], table: dict[int, Message],
              api_key: int, version: int, encoder: bool) -> Any:
    key = (api_key, version)
    fn = cache.get(key)
    if fn is None:
        _check_supported(api_key, version)
        msg = table[api_key]
        fn = compile_encoder(msg, version) if encoder else compile_decoder(msg, version)
        cache[key] = fn
    return fn


def _as_view(buf: Any) -> memoryview:
    return buf if buf.__class__ is memoryview else memoryview(buf)


# ---------------------------------------------------------------------------- requests
def decode_request_header(buf: Any, offset: int = 0) -> tuple[RequestHeader, int]:
    """Parse a request header; ``buf`` is the frame without its size prefix."""
    mv = buf if buf.__class__ is memoryview else memoryview(buf)
    try:
        api_key, api_version, correlation_id, _n = _HEADER_V1.unpack_from(mv, offset)
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(f"malformed request header: {exc}") from exc
    client_id, pos = _header_rest(mv, offset, api_key, api_version)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def _header_rest(mv: memoryview, offset: int, api_key: int,
                 version: int) -> tuple[str | None, int]:
    """(client id, where the body starts) of a request header at `offset` whose fixed
    part (api key, version, correlation id) is already read."""
    try:
        n = INT16.unpack_from(mv, offset + 8)[0]
        pos = offset + 10
        if n >= 0:
            end = pos + n
            if end > len(mv):
                raise ProtocolDecodeError("request header: client id runs past the frame")
            client_id: str | None = str(mv[pos:end], "utf-8")
            pos = end
        elif n == -1:
            client_id = None
        else:
            raise ProtocolDecodeError(f"request header: invalid client id length {n}")
        if version >= _REQUEST_FLEX.get(api_key, _NEVER):
            pos = pos + 1 if mv[pos] == 0 else skip_tagged_fields(mv, pos)
    except ProtocolDecodeError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(f"malformed request header: {exc}") from exc
    return client_id, pos


def _request_decoder(api_key: int, version: int) -> Any:
    return _REQUEST_DECODERS.get((api_key, version)) or _compiled(
        _REQUEST_DECODERS, REQUESTS, api_key, version, False)


def decode_request(api_key: int, version: int, buf: Any, offset: int = 0) -> dict[str, Any]:
    """Decode a request body that starts at ``offset`` in ``buf``."""
    decode = _request_decoder(api_key, version)
    try:
        return decode(_as_view(buf), offset)[0]
    except ProtocolDecodeError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(
            f"malformed {REQUESTS[api_key].name} v{version}: {exc}"
        ) from exc


def request_frame_decoder(api_key: int, version: int) -> Callable[[Any], tuple[str | None, Any]]:
    """The decoder of request frames (without their size prefix) of one (api key, version),
    resolved once: ``decoder(frame) -> (client id, body)``; the caller has read the key and
    version from the frame (the broker's routes keep one per version). Produce's is the
    compiled twin when built (protocol/kernels.py), as is Fetch's;
    request_frame_decoder_py is their reference."""
    decode = request_frame_decoder_py(api_key, version)
    if api_key == ApiKey.PRODUCE and codec_kernels is not None:
        return codec_kernels.RequestDecoder(codec_kernels.decode_produce_frame, version,
                                            decode).decode
    if api_key == ApiKey.FETCH and codec_kernels is not None:
        return codec_kernels.RequestDecoder(codec_kernels.decode_fetch_frame, version,
                                            decode).decode
    return decode


def request_frame_decoder_py(api_key: int, version: int
                             ) -> Callable[[Any], tuple[str | None, Any]]:
    """request_frame_decoder's pure-Python definition (every API's)."""
    decode = _request_decoder(api_key, version)
    name = REQUESTS[api_key].name

    def decode_frame(frame: Any) -> tuple[str | None, Any]:
        mv = frame if frame.__class__ is memoryview else memoryview(frame)
        client_id, pos = _header_rest(mv, 0, api_key, version)
        try:
            return client_id, decode(mv, pos)[0]
        except ProtocolDecodeError:
            raise
        except _DECODE_ERRORS as exc:
            raise ProtocolDecodeError(f"malformed {name} v{version}: {exc}") from exc

    return decode_frame


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]
) -> bytes:
    """Frame a request: size prefix + header v1/v2 + body."""
    frame: bytes = _frame_request(api_key, version, correlation_id, client_id, body, False)
    return frame


def encode_request_parts(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]
) -> bytes | list[Any]:
    """encode_request's frame, but one holding large records fields (a Produce's batches)
    as its list of parts, the records not copied (`frame_size`, `frame_bytes`)."""
    frame: bytes | list[Any] = _frame_request(api_key, version, correlation_id, client_id,
                                              body, True)
    return frame


def _frame_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   body: dict[str, Any], as_parts: bool) -> Any:
    encode = _REQUEST_ENCODERS.get((api_key, version)) or _compiled(
        _REQUEST_ENCODERS, REQUESTS, api_key, version, True
    )
    out = bytearray(4)
    out += _HEADER.pack(api_key, version, correlation_id)
    if client_id is None:
        out += b"\xff\xff"
    else:
        cid = client_id.encode("utf-8")
        out += INT16.pack(len(cid))
        out += cid
    if request_header_version(api_key, version) >= 2:
        out.append(0)
    parts: list[Any] = []
    try:
        encode(out, parts, body)
    except ProtocolEncodeError:
        raise
    except _ENCODE_ERRORS as exc:
        raise ProtocolEncodeError(
            f"cannot encode {REQUESTS[api_key].name} v{version}: {exc}"
        ) from exc
    if parts:
        if any(isinstance(p, FileRegion) for p in parts):
            raise ProtocolEncodeError("a request cannot carry a FileRegion")
        if as_parts:
            parts.append(bytes(out))
            parts[0] = INT32.pack(frame_size(parts) - 4) + parts[0][4:]
            return parts
        parts.append(out)
        data = bytearray().join(parts)
        data[0:4] = INT32.pack(len(data) - 4)
        return bytes(data)
    out[0:4] = INT32.pack(len(out) - 4)
    return bytes(out)


# --------------------------------------------------------------------------- responses
def peek_correlation_id(buf: Any, offset: int = 0) -> int:
    """The correlation id of a response frame (without its size prefix)."""
    try:
        return INT32.unpack_from(buf, offset)[0]
    except struct.error as exc:
        raise ProtocolDecodeError("response frame shorter than its header") from exc


def decode_response_header(
    api_key: int, version: int, buf: Any, offset: int = 0
) -> tuple[ResponseHeader, int]:
    mv = _as_view(buf)
    try:
        correlation_id = INT32.unpack_from(mv, offset)[0]
        pos = offset + 4
        if response_header_version(api_key, version) >= 1:
            pos = skip_tagged_fields(mv, pos)
    except ProtocolDecodeError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(f"malformed response header: {exc}") from exc
    return ResponseHeader(correlation_id), pos


def decode_response(api_key: int, version: int, buf: Any, offset: int = 0) -> dict[str, Any]:
    """Decode a response frame (header included, size prefix excluded)."""
    mv = _as_view(buf)
    _header, pos = decode_response_header(api_key, version, mv, offset)
    if api_key == ApiKey.API_VERSIONS and version > 0:
        try:
            error_code = INT16.unpack_from(mv, pos)[0]
        except struct.error as exc:
            raise ProtocolDecodeError("truncated ApiVersions response") from exc
        if error_code == ErrorCode.UNSUPPORTED_VERSION:
            version = 0
    decode = _RESPONSE_DECODERS.get((api_key, version)) or _compiled(
        _RESPONSE_DECODERS, RESPONSES, api_key, version, False
    )
    try:
        return decode(mv, pos)[0]
    except ProtocolDecodeError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(
            f"malformed {RESPONSES[api_key].name} v{version}: {exc}"
        ) from exc


def response_encoder(api_key: int, version: int) -> Callable[[int, Any], list[Any]]:
    """`encode_response` for one (api key, version), resolved once:
    ``encoder(correlation_id, body) -> parts`` (the broker's routes keep one per version).
    Produce's, Metadata's and Fetch's are the compiled twins when built
    (protocol/kernels.py), response_encoder_py their reference."""
    framer = _RESPONSE_FRAMERS.get((api_key, version))
    if framer is None:
        framer = response_encoder_py(api_key, version)
        if codec_kernels is not None:  # the compiled twin, the generated encoder its reference
            twin = {int(ApiKey.PRODUCE): codec_kernels.encode_produce_response,
                    int(ApiKey.METADATA): codec_kernels.encode_metadata_response,
                    int(ApiKey.FETCH): codec_kernels.encode_fetch_response}.get(api_key)
            if twin is not None:
                framer = codec_kernels.ResponseEncoder(twin, version, framer).encode
        _RESPONSE_FRAMERS[(api_key, version)] = framer
    return framer


def response_encoder_py(api_key: int, version: int) -> Callable[[int, Any], list[Any]]:
    encode = _compiled(_RESPONSE_ENCODERS, RESPONSES, api_key, version, True)
    header = _RESPONSE_HEADER_V1 if response_header_version(api_key, version) >= 1 \
        else _RESPONSE_HEADER_V0
    pack_header = header.pack
    pack_size = INT32.pack_into
    flexible = header is _RESPONSE_HEADER_V1

    def encode_frame(correlation_id: int, body: Any) -> list[Any]:
        out = bytearray(pack_header(0, correlation_id, 0) if flexible
                        else pack_header(0, correlation_id))
        parts: list[Any] = []
        try:
            encode(out, parts, body)
        except ProtocolEncodeError:
            raise
        except _ENCODE_ERRORS as exc:
            raise ProtocolEncodeError(
                f"cannot encode {RESPONSES[api_key].name} v{version}: {exc}"
            ) from exc
        if not parts:
            pack_size(out, 0, len(out) - 4)
            return [bytes(out)]
        if out:
            parts.append(bytes(out))
        size = frame_size(parts) - 4
        parts[0] = INT32.pack(size) + parts[0][4:]
        return parts

    return encode_frame


def encode_response(
    api_key: int, version: int, correlation_id: int, body: dict[str, Any]
) -> list[Any]:
    """Frame a response: ``[bytes(size + header + ...), (FileRegion | memoryview | bytes)...]``."""
    framer = _RESPONSE_FRAMERS.get((api_key, version)) or response_encoder(api_key, version)
    return framer(correlation_id, body)


def frame_size(parts: list[Any]) -> int:
    """Total bytes of a list of parts (FileRegions count their length)."""
    total = 0
    for p in parts:
        if isinstance(p, FileRegion):
            total += p.length
        elif isinstance(p, memoryview):
            total += p.nbytes
        else:
            total += len(p)
    return total


def frame_bytes(parts: list[Any]) -> bytes:
    """Join parts that hold no FileRegion into one frame (tests, small responses)."""
    if any(isinstance(p, FileRegion) for p in parts):
        raise ValueError("cannot join a FileRegion; send it with os.sendfile")
    return b"".join(bytes(p) if isinstance(p, memoryview) else p for p in parts)


def encode_api_versions_unsupported(correlation_id: int) -> bytes:
    """The reply to an ApiVersions request newer than we speak: a v0-format body with
    UNSUPPORTED_VERSION and the single entry (18, 0, our max), under response header v0."""
    parts = encode_response(
        ApiKey.API_VERSIONS,
        0,
        correlation_id,
        {
            "error_code": int(ErrorCode.UNSUPPORTED_VERSION),
            "api_keys": [
                {"api_key": int(ApiKey.API_VERSIONS), "min_version": 0,
                 "max_version": API_VERSIONS_MAX}
            ],
        },
    )
    return parts[0]
