"""`dump-log --offsets-decoder`: the keys and values of `__consumer_offsets` records as
Kafka's DumpLogSegments prints them (its OffsetsMessageParser).

A key is `{"type":"<key version>","data":{...}}` (version 0/1 an offset commit, 2 a group's
metadata); a value is `{"version":"<value version>","data":{...}}`, or `<DELETE>` for a
tombstone. Field names are those of Kafka's message specs (camelCase), one compact JSON
object each. In a group of protocol type "consumer" each member's subscription and
assignment bytes are replaced by the decoded ConsumerProtocolSubscription and
ConsumerProtocolAssignment (kept as base64 when they do not decode, as Kafka does).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from kafkactl.protocol.data import (
    ASSIGNMENT,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    SUBSCRIPTION,
    decode_data,
)
from kafkactl.protocol.errors import KafkaError
from kafkactl.protocol.schema import Field, Message

DELETE = "<DELETE>"
CONSUMER_PROTOCOL_TYPE = "consumer"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _json_value(f: Field, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_struct:
        if f.is_array:
            return [_json_fields(f.fields, v, version) for v in value]
        return _json_fields(f.fields, value, version)
    if f.element_type == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    return list(value) if f.is_array else value


def _json_fields(fields: tuple[Field, ...], data: dict[str, Any], version: int
                 ) -> dict[str, Any]:
    """The fields present at `version`, in the spec's order, as Kafka's JsonConverter
    writes them."""
    return {_camel(f.name): _json_value(f, data.get(f.name), version)
            for f in fields if f.present_in(version) and not f.tagged_in(version)}


def to_json(schema: Message, version: int, data: dict[str, Any]) -> dict[str, Any]:
    """A decoded data message as Kafka's generated JsonConverter writes it."""
    return _json_fields(schema.fields, data, min(version, schema.max_version))


def _decoded_or_base64(schema: Message, raw: Any) -> Any:
    if raw is None:
        return None
    try:
        version, data = decode_data(schema, raw)
    except KafkaError:
        return base64.b64encode(bytes(raw)).decode("ascii")
    return to_json(schema, version, data)


def _group_value(version: int, raw: dict[str, Any]) -> dict[str, Any]:
    doc = to_json(GROUP_METADATA_VALUE, version, raw)
    if raw.get("protocol_type") == CONSUMER_PROTOCOL_TYPE:
        for member, source in zip(doc.get("members") or (), raw.get("members") or (),
                                  strict=True):
            member["subscription"] = _decoded_or_base64(SUBSCRIPTION, source["subscription"])
            member["assignment"] = _decoded_or_base64(ASSIGNMENT, source["assignment"])
    return doc


def _key_version(key: memoryview | bytes) -> int:
    return int.from_bytes(bytes(key[:2]), "big", signed=True) if len(key) >= 2 else -1


def decode_offsets_record(offset: int, key: memoryview | bytes | None,
                          value: memoryview | bytes | None
                          ) -> tuple[str | None, str | None, dict[str, Any]]:
    """(key text, payload text, the same as JSON values) of one __consumer_offsets record;
    a record that does not decode is one sentence in the key, with no payload."""
    if key is None:
        text = (f"Failed to decode message at offset {offset} using offset topic decoder "
                f"(message had a missing key)")
        return text, None, {"key": text}
    kver = _key_version(key)
    if kver not in (0, 1, 2):
        text = f"Unknown record type {kver} at offset {offset}, skipping."
        return text, None, {"key": text}
    try:
        if kver <= 1:
            _v, k = decode_data(OFFSET_COMMIT_KEY, key)
            key_doc = {"type": str(kver), "data": to_json(OFFSET_COMMIT_KEY, kver, k)}
            if value is None:
                payload: Any = DELETE
            else:
                vver, v = decode_data(OFFSET_COMMIT_VALUE, value)
                payload = {"version": str(vver), "data": to_json(OFFSET_COMMIT_VALUE, vver, v)}
        else:
            _v, k = decode_data(GROUP_METADATA_KEY, key)
            key_doc = {"type": str(kver), "data": to_json(GROUP_METADATA_KEY, kver, k)}
            if value is None:
                payload = DELETE
            else:
                vver, v = decode_data(GROUP_METADATA_VALUE, value)
                payload = {"version": str(vver), "data": _group_value(vver, v)}
    except KafkaError as e:
        text = f"Error at offset {offset}, skipping. {e}"
        return text, None, {"key": text}
    payload_text = payload if isinstance(payload, str) else _compact(payload)
    return _compact(key_doc), payload_text, {"key": key_doc, "payload": payload}


def _compact(doc: dict[str, Any]) -> str:
    """JSON as Jackson's ObjectNode.toString() writes it: no spaces, UTF-8 as is."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
