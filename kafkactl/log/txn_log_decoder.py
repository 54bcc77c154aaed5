"""`dump-log --transaction-log-decoder`: the keys and values of `__transaction_state` records
as Kafka's DumpLogSegments prints them (its TransactionLogMessageParser): a key is
`{"type":"<key version>","data":{"transactionalId":...}}`, a value
`{"version":"<value version>","data":{...}}` with Kafka's field names, or `<DELETE>` for a
tombstone (an expired transactional id)."""

from __future__ import annotations

from typing import Any

from kafkactl.log.offsets_decoder import DELETE, _compact, to_json
from kafkactl.protocol.data import decode_data
from kafkactl.protocol.errors import KafkaError
from kafkactl.protocol.messages.transaction_log import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE


def decode_txn_log_record(offset: int, key: memoryview | bytes | None,
                          value: memoryview | bytes | None
                          ) -> tuple[str | None, str | None, dict[str, Any]]:
    """(key text, payload text, the same as JSON values) of one __transaction_state record;
    one that does not decode is one sentence in the key, with no payload."""
    if key is None:
        text = (f"Failed to decode message at offset {offset} using transaction log decoder "
                "(message had a missing key)")
        return text, None, {"key": text}
    try:
        kver, k = decode_data(TRANSACTION_LOG_KEY, key)
        if kver != 0:
            text = f"Unknown record type {kver} at offset {offset}, skipping."
            return text, None, {"key": text}
        key_doc = {"type": str(kver), "data": to_json(TRANSACTION_LOG_KEY, kver, k)}
        payload: Any = DELETE
        if value is not None:
            vver, v = decode_data(TRANSACTION_LOG_VALUE, value)
            payload = {"version": str(vver), "data": to_json(TRANSACTION_LOG_VALUE, vver, v)}
    except KafkaError as e:
        text = f"Error at offset {offset}, skipping. {e}"
        return text, None, {"key": text}
    payload_text = payload if isinstance(payload, str) else _compact(payload)
    return _compact(key_doc), payload_text, {"key": key_doc, "payload": payload}
