"""What `kafkactl produce` must land each input record as, with -K, -Z and --null-marker:
the oracle of the null tests of the client and of the CLI."""

from __future__ import annotations

from collections.abc import Iterable


def null_rows(records: Iterable[bytes], ksep: bytes | None, null_empty: bool,
              marker: bytes | None) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) per record: key SEP value with a separator (a record without it: a null
    key, the whole record the value); then -Z makes an empty value or key null and
    --null-marker one equal to the marker."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for raw in records:
        key: bytes | None = None
        value: bytes | None = raw
        if ksep is not None and ksep in raw:
            key, _, value = raw.partition(ksep)
        if (null_empty and value == b"") or (marker is not None and value == marker):
            value = None
        if key is not None and ((null_empty and key == b"") or key == marker):
            key = None
        out.append((key, value))
    return out
