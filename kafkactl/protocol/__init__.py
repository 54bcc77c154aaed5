"""kafkactl.protocol: Kafka's wire protocol, sans-IO (no sockets, no files).

* :mod:`.codec`: framing + the public functions (``decode_request_header``,
  ``decode_request``, ``encode_request``, ``decode_response``, ``encode_response``,
  ``encode_api_versions_unsupported``); read its docstring for what each buffer holds.
* :mod:`.messages`: one declarative table per API (data, not code).
* :mod:`.compiler`: turns a table into fast per-(api, version) functions, once.
* :mod:`.types`: primitives; :class:`FileRegion` for sendfile'd records.
* :mod:`.errors`: ``ErrorCode`` and the ``KafkaError`` hierarchy.
* :mod:`.api_keys`, :mod:`.versions`: API keys and the advertised version table.
* :mod:`.data`: version-prefixed consumer-protocol / ``__consumer_offsets`` schemas.
"""

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.codec import (
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_api_versions_unsupported,
    encode_request,
    encode_response,
    frame_bytes,
    frame_size,
    peek_correlation_id,
)
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for
from kafkactl.protocol.types import FileRegion
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

__all__ = [
    "ApiKey", "ErrorCode", "FileRegion", "KafkaError", "RequestHeader", "ResponseHeader",
    "SUPPORTED_VERSIONS", "decode_request", "decode_request_header", "decode_response",
    "encode_api_versions_unsupported", "encode_request", "encode_response", "error_for",
    "frame_bytes", "frame_size", "peek_correlation_id",
]
