"""Representative message bodies built from our schemas (non-default values everywhere,
nulls where the version allows them), and helpers to compare decoded dicts."""

from __future__ import annotations

import uuid
from typing import Any

from kafkactl.protocol.schema import Field, Message


def _primitive(f: Field, ftype: str, seed: int) -> Any:
    if ftype == "int8":
        return 10 + seed % 100
    if ftype in ("int16", "uint16"):
        return 1000 + seed
    if ftype in ("int32", "uint32"):
        return 100_000 + seed
    if ftype == "int64":
        return 10_000_000_000 + seed
    if ftype == "bool":
        return True
    if ftype == "float64":
        return 1.5 + seed
    if ftype == "string":
        return f"s{seed}-é"
    if ftype == "bytes":
        return bytes([seed % 256]) * 3
    if ftype == "records":
        return b"R" * (5 + seed % 7)
    if ftype == "uuid":
        return uuid.UUID(int=seed + 1)
    raise AssertionError(ftype)


def sample_value(f: Field, version: int, seed: int, use_nulls: bool) -> Any:
    if use_nulls and f.nullable_in(version) and seed % 2 == 0:
        return None
    if f.is_array:
        if f.fields:
            return [sample_struct(f.fields, version, seed * 7 + i, use_nulls) for i in range(2)]
        return [_primitive(f, f.element_type, seed + i) for i in range(3)]
    if f.fields:
        return sample_struct(f.fields, version, seed * 7, use_nulls)
    return _primitive(f, f.type, seed)


def sample_struct(
    fields: tuple[Field, ...], version: int, seed: int = 1, use_nulls: bool = False
) -> dict[str, Any]:
    return {
        f.name: sample_value(f, version, seed + i, use_nulls)
        for i, f in enumerate(fields)
        if f.present_in(version)
    }


def sample_message(msg: Message, version: int, use_nulls: bool = False) -> dict[str, Any]:
    return sample_struct(msg.fields, version, 1, use_nulls)


def expected_struct(fields: tuple[Field, ...], version: int, value: dict[str, Any]) -> Any:
    """What decoding ``value`` must give: every field, absent ones at their default."""
    out = {}
    for f in fields:
        if not f.present_in(version) or f.name not in value:
            out[f.name] = f.default_value(version)
            continue
        v = value[f.name]
        if v is not None and f.fields:
            v = (
                [expected_struct(f.fields, version, x) for x in v]
                if f.is_array
                else expected_struct(f.fields, version, v)
            )
        out[f.name] = v
    return out


def plain(value: Any) -> Any:
    """memoryview -> bytes, recursively (records decode to memoryviews)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
