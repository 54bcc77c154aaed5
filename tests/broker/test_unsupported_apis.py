"""Every API key and version in Kafka's protocol specs, sent to a running broker: each
request the broker does not serve gets a refusal that Kafka's own response spec decodes
(UNSUPPORTED_VERSION in the API's shape, as KafkaApis answers an API it has but does not
enable, e.g. ConsumerGroupHeartbeat with the classic group coordinator), or the connection
is closed (as Kafka closes it for an API key it does not know or a version it does not
enable). Never a traceback, and the broker keeps serving a bystander throughout."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.compiler import compile_decoder, compile_encoder
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.schema import Message, parse_range
from kafkactl.protocol.versions import SUPPORTED_VERSIONS
from tests.protocol.spec_messages import SPEC_DIR, api_specs

from .wire import Wire

pytestmark = pytest.mark.skipif(SPEC_DIR is None, reason="Kafka protocol JSON specs not found")

SERVED = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


def _request_frame(request: Message | None, api_key: int, version: int, cid: int) -> bytes:
    """A request with Kafka's header (v2 for flexible versions) and a body holding every
    field at its spec default."""
    flexible = request is not None and request.is_flexible(version)
    out = bytearray(struct.pack(">hhih", api_key, version, cid, 4) + b"test")
    if flexible:
        out.append(0)  # no tagged header fields
    if request is not None:
        compile_encoder(request, version)(out, [], {})
    return struct.pack(">i", len(out)) + bytes(out)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _answer(sock: socket.socket) -> bytes | None:
    """The next response frame, or None when the broker closed the connection."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    return _recv_exact(sock, struct.unpack(">i", head)[0])


def _cases() -> list[tuple[int, int]]:
    cases: list[tuple[int, int]] = []
    for key, (request, _response) in sorted(api_specs().items()):
        valid = parse_range(request.valid)
        assert valid is not None
        for version in range(valid[0], valid[1] + 2):  # and one version past Kafka's
            served = SERVED.get(key)
            if served is None or not served[0] <= version <= served[1]:
                cases.append((key, version))
    # keys no Kafka defines
    cases += [(key, 0) for key in (88, 200, 1000, 32767, -1)]
    return cases


def test_every_unserved_key_and_version_is_refused_well_or_closed(broker) -> None:
    specs = api_specs()
    bystander = Wire(broker.bootstrap)
    sock: socket.socket | None = None
    answered: list[tuple[int, int]] = []
    closed: list[tuple[int, int]] = []
    for n, (key, version) in enumerate(_cases()):
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        request, response = specs.get(key, (None, None))
        cid = 1000 + n
        sock.sendall(_request_frame(request, key, version, cid))
        frame = _answer(sock)
        if frame is None:
            closed.append((key, version))
            sock.close()
            sock = None
        else:
            assert struct.unpack_from(">i", frame)[0] == cid, (key, version)
            assert response is not None, (key, version)
            answered.append((key, version))
            if key == ApiKey.API_VERSIONS:  # a too-new ApiVersions: the v0 reply
                assert struct.unpack_from(">h", frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION
            else:
                pos = 5 if response.is_flexible(version) else 4
                body, end = compile_decoder(response, version)(memoryview(frame), pos)
                assert end == len(frame), (key, version, "trailing bytes")
                assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION, (key, version)
        # the bystander is served all along
        if n % 25 == 0:
            assert bystander.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    if sock is not None:
        sock.close()
    assert bystander.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    bystander.close()
    # both outcomes were met, and the one that raised before answers now
    assert (68, 0) in answered and (68, 1) in answered
    assert (200, 0) in closed and (3, 13) in closed
    assert broker.log_path is not None
    text = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in text and "unexpected error" not in text
