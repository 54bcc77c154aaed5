"""Well-formed error answers to APIs Kafka has and this broker does not serve.

A client that sends such a request without checking ApiVersions first (Sarama's
ClusterAdmin, tools written for a full Kafka) gets UNSUPPORTED_VERSION (35) in that API's
own response shape, with every array empty, and keeps its connection. SaslHandshake and
SaslAuthenticate get ILLEGAL_SASL_STATE (34), Kafka's answer on a listener without SASL.
Only responses with a top-level error code at the requested version can carry the error;
for the others (and for keys or versions Kafka does not define) the caller closes the
connection, as Kafka does.
"""

from __future__ import annotations

from kafkactl.protocol.compiler import Encoder, compile_encoder
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.messages.refusals import RESPONSES
from kafkactl.protocol.schema import in_range, parse_range
from kafkactl.protocol.types import INT32

_SASL_KEYS = {17, 36}
_ENCODERS: dict[tuple[int, int], Encoder] = {}


def refusal_frame(api_key: int, version: int, correlation_id: int,
                  message: str) -> bytes | None:
    """The complete response frame (size prefix included), or None if there is none."""
    msg = RESPONSES.get(api_key)
    if msg is None:
        return None
    valid = parse_range(msg.valid)
    if valid is None or not valid[0] <= version <= valid[1]:
        return None
    fields = {f.name: f for f in msg.fields if f.present_in(version)}
    if "error_code" not in fields:
        return None
    code = ErrorCode.ILLEGAL_SASL_STATE if api_key in _SASL_KEYS else \
        ErrorCode.UNSUPPORTED_VERSION
    body: dict[str, object] = {"error_code": int(code)}
    if "error_message" in fields:
        body["error_message"] = message
    encode = _ENCODERS.get((api_key, version))
    if encode is None:
        encode = _ENCODERS[(api_key, version)] = compile_encoder(msg, version)
    out = bytearray(4)
    out += INT32.pack(correlation_id)
    if msg.flexible is not None and in_range(msg.flexible, version):
        out.append(0)  # response header v1: no tagged fields
    encode(out, [], body)
    out[0:4] = INT32.pack(len(out) - 4)
    return bytes(out)
