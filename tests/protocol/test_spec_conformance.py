"""Check every table field by field against Kafka's JSON specs (skipped when absent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.messages import MODULES, consumer_protocol, group_metadata
from kafkactl.protocol.schema import MISSING, Field, Message, parse_range
from kafkactl.protocol.specjson import load_spec, resolve_common_structs, snake_case
from kafkactl.protocol.versions import INTER_BROKER_APIS, SUPPORTED_VERSIONS

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = [
    Path("/work/shared/reference/kafka-protocol"),
    REPO.parent / "shared" / "reference" / "kafka-protocol",
    Path("../shared/reference/kafka-protocol"),
]
SPEC_DIR = next((p for p in CANDIDATES if (p / "ProduceRequest.json").is_file()), None)

pytestmark = pytest.mark.skipif(SPEC_DIR is None, reason="Kafka protocol JSON specs not found")

TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool",
         "string", "bytes", "records", "uuid"}


def _norm_default(ftype: str, raw: Any) -> Any:
    if raw == "null" or raw is None:
        return None
    if ftype == "bool":
        return raw if isinstance(raw, bool) else raw == "true"
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return raw if isinstance(raw, int) else int(raw, 0)
    if ftype == "float64":
        return float(raw)
    return raw


def _versions_overlap(spec: str, max_version: int) -> bool:
    r = parse_range(spec)
    return r is not None and r[0] <= max_version


def _same_range(ours: str | None, theirs: str | None, max_version: int) -> bool:
    """Equal once clipped to the versions we speak (0..max_version)."""
    def clip(s: str | None) -> tuple[int, int] | None:
        r = parse_range(s)
        if r is None or r[0] > max_version:
            return None
        return r[0], min(r[1], max_version)
    return clip(ours) == clip(theirs)


def compare_fields(ours: tuple[Field, ...], spec_fields: list[dict[str, Any]],
                   max_version: int, path: str) -> None:
    wanted = [f for f in spec_fields if _versions_overlap(f["versions"], max_version)]
    assert [f.name for f in ours] == [snake_case(f["name"]) for f in wanted], path
    for f, s in zip(ours, wanted, strict=True):
        where = f"{path}.{f.name}"
        assert f.type == s["type"], where
        assert f.element_type in TYPES or f.fields, f"{where}: unknown type {f.type}"
        assert _same_range(f.versions, s["versions"], max_version), where
        assert _same_range(f.nullable, s.get("nullableVersions"), max_version), where
        assert f.tag == s.get("tag"), where
        assert _same_range(f.tagged, s.get("taggedVersions"), max_version), where
        base = s["type"][2:] if s["type"].startswith("[]") else s["type"]
        if "default" in s:
            assert f.default == _norm_default(base, s["default"]), where
        else:
            assert f.default is MISSING, where
        compare_fields(f.fields, s.get("fields", []), max_version, where)


def compare_message(msg: Message, spec: dict[str, Any], max_version: int) -> None:
    assert msg.name == spec["name"]
    assert msg.api_key == spec.get("apiKey")
    valid = parse_range(spec["validVersions"])
    assert valid is not None
    assert msg.min_version == valid[0]
    assert msg.max_version == max_version <= valid[1], "we must not exceed the spec"
    assert _same_range(msg.flexible, spec.get("flexibleVersions"), max_version)
    compare_fields(msg.fields, resolve_common_structs(spec), max_version, msg.name)


@pytest.mark.parametrize("api_key", sorted(SUPPORTED_VERSIONS), ids=lambda k: k.spec_name)
def test_api_tables_match_spec(api_key: ApiKey) -> None:
    assert SPEC_DIR is not None
    module = MODULES[api_key]
    hi = SUPPORTED_VERSIONS[api_key][1]
    for kind, msg in (("Request", module.REQUEST), ("Response", module.RESPONSE)):
        spec = load_spec(SPEC_DIR / f"{api_key.spec_name}{kind}.json")
        compare_message(msg, spec, hi)
        assert msg.min_version == 0
        if api_key not in INTER_BROKER_APIS:
            assert SUPPORTED_VERSIONS[api_key][0] == 0


@pytest.mark.parametrize(
    ("msg", "filename"),
    [
        (consumer_protocol.SUBSCRIPTION, "ConsumerProtocolSubscription.json"),
        (consumer_protocol.ASSIGNMENT, "ConsumerProtocolAssignment.json"),
        (group_metadata.OFFSET_COMMIT_KEY, "OffsetCommitKey.json"),
        (group_metadata.OFFSET_COMMIT_VALUE, "OffsetCommitValue.json"),
        (group_metadata.GROUP_METADATA_KEY, "GroupMetadataKey.json"),
        (group_metadata.GROUP_METADATA_VALUE, "GroupMetadataValue.json"),
    ],
    ids=lambda x: getattr(x, "name", x),
)
def test_data_tables_match_spec(msg: Message, filename: str) -> None:
    assert SPEC_DIR is not None
    spec = load_spec(SPEC_DIR / "other" / filename)
    valid = parse_range(spec["validVersions"])
    assert valid is not None
    compare_message(msg, spec, valid[1])


def test_advertised_ranges_within_spec_and_never_unstable() -> None:
    assert SPEC_DIR is not None
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        assert 0 <= lo <= hi
        assert lo == 0 or key in INTER_BROKER_APIS
        spec = load_spec(SPEC_DIR / f"{key.spec_name}Request.json")
        valid = parse_range(spec["validVersions"])
        assert valid is not None and hi <= valid[1]
        if spec.get("latestVersionUnstable"):
            assert hi < valid[1], key
