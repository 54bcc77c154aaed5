"""Kafka's JSON protocol specs as whole :class:`Message` tables (every field, every
version), for tests that check our answers against the spec itself rather than against our
own (trimmed) tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkactl.protocol.schema import MISSING, Field, Message
from kafkactl.protocol.specjson import load_spec, resolve_common_structs, snake_case

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = [
    Path("/work/shared/reference/kafka-protocol"),
    REPO.parent / "shared" / "reference" / "kafka-protocol",
    Path("../shared/reference/kafka-protocol"),
]
SPEC_DIR = next((p for p in CANDIDATES if (p / "ProduceRequest.json").is_file()), None)


def _default(ftype: str, raw: Any) -> Any:
    if "default" not in raw:
        return MISSING
    value = raw["default"]
    if value is None or value == "null":
        return None
    if ftype == "bool":
        return value if isinstance(value, bool) else value == "true"
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return value if isinstance(value, int) else int(value, 0)
    if ftype == "float64":
        return float(value)
    return value


def _none(spec: str | None) -> str | None:
    return None if spec in (None, "", "none") else spec


def _fields(raw_fields: list[dict[str, Any]]) -> tuple[Field, ...]:
    out = []
    for raw in raw_fields:
        base = raw["type"][2:] if raw["type"].startswith("[]") else raw["type"]
        out.append(Field(
            snake_case(raw["name"]), raw["type"], raw["versions"],
            nullable=_none(raw.get("nullableVersions")), tag=raw.get("tag"),
            tagged=_none(raw.get("taggedVersions")), default=_default(base, raw),
            fields=_fields(raw["fields"]) if raw.get("fields") else ()))
    return tuple(out)


def spec_message(path: Path) -> Message:
    spec = load_spec(path)
    return Message(spec["name"], spec.get("apiKey"), spec["validVersions"],
                   _none(spec.get("flexibleVersions")), _fields(resolve_common_structs(spec)))


def api_specs() -> dict[int, tuple[Message, Message]]:
    """api key -> (request, response), for every API in the spec directory."""
    assert SPEC_DIR is not None
    out: dict[int, tuple[Message, Message]] = {}
    for path in sorted(SPEC_DIR.glob("*Request.json")):
        request = spec_message(path)
        response = spec_message(path.with_name(path.name.replace("Request.json",
                                                                  "Response.json")))
        assert request.api_key is not None
        out[request.api_key] = (request, response)
    return out
