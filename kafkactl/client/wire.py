"""The client's view of kafkactl.protocol: which versions it speaks and frame helpers."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

# The client speaks the codec's versions, with floors where older versions lack what the
# client relies on: magic-2 batches (Produce 3, Fetch 4), null topic list (Metadata 1),
# offsets by timestamp (ListOffsets 1).
_FLOORS = {ApiKey.PRODUCE: 3, ApiKey.FETCH: 4, ApiKey.METADATA: 1, ApiKey.LIST_OFFSETS: 1}
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    int(k): (max(lo, _FLOORS.get(k, lo)), hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()
}
API_VERSIONS_FIRST = min(3, CLIENT_VERSIONS[int(ApiKey.API_VERSIONS)][1])


def api_versions_request(version: int, software: str, software_version: str) -> dict[str, Any]:
    return {"client_software_name": software, "client_software_version": software_version}


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str,
                   body: dict[str, Any]) -> bytes:
    return codec.encode_request(api_key, version, correlation_id, client_id, body)


def decode_response(api_key: int, version: int, frame: memoryview) -> tuple[int, dict[str, Any]]:
    """(correlation id, body) of a response frame without its size prefix."""
    cid = codec.peek_correlation_id(frame)
    return cid, codec.decode_response(api_key, version, frame)
