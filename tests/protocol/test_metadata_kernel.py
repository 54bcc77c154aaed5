"""The compiled Metadata response encoder (kafkactl/protocol/_codec_kernels.pyx) against
its reference, the generated encoder (`codec.response_encoder_py(METADATA, v)`), on the
same bodies: every version (v0-v12; flexible from v9, topic ids from v10, a nullable
topic name in v12), the broker's shapes, every field at and one past its limits, nulls
where a version allows them and where it does not, and bodies of the wrong types and
shapes. The encoder the broker's routes pick (`codec.response_encoder`) must give the
reference's bytes, or raise the same error class with the same message; the twin alone
gives the reference's bytes or declines (None), and never raises.

Under KAFKACTL_NO_EXTENSIONS=1 the comparisons run against the reference alone and the
switch is checked; otherwise the kernels must have loaded (a build that fell back to
pure Python fails here)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.kernels import REASON, codec_kernels
from kafkactl.protocol.versions import SUPPORTED_VERSIONS
from tests.hypothesis_profiles import examples

compiled = pytest.mark.skipif(codec_kernels is None, reason=f"pure Python: {REASON}")
LO, HI = SUPPORTED_VERSIONS[ApiKey.METADATA]
VERSIONS = list(range(LO, HI + 1))
INT16 = (-(2**15), 2**15 - 1)
INT32 = (-(2**31), 2**31 - 1)
SWITCHED_OFF = os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0")


def _outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: ("ok", its parts as bytes), or the error's class and message."""
    try:
        return "ok", [bytes(p) for p in fn()]
    except Exception as e:  # noqa: BLE001 - the class and the message are what is compared
        return type(e), str(e)


def _same(correlation_id: Any, version: int, body: Any) -> Any:
    """The picked encoder and the twin against the reference; the reference's outcome."""
    reference = codec.response_encoder_py(ApiKey.METADATA, version)
    expected = _outcome(lambda: reference(correlation_id, body))
    picked = codec.response_encoder(ApiKey.METADATA, version)
    assert _outcome(lambda: picked(correlation_id, body)) == expected
    if codec_kernels is not None:
        got = codec_kernels.encode_metadata_response(correlation_id, version, body)
        assert got is None or ("ok", got) == expected
    return expected


def _twin(correlation_id: int, version: int, body: Any) -> list[bytes] | None:
    assert codec_kernels is not None
    return codec_kernels.encode_metadata_response(correlation_id, version, body)


def _partition(p: int, leader: int = 1) -> dict[str, Any]:
    """One partition as handlers/metadata.py writes it."""
    return {"error_code": ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": p, "leader_id": leader, "leader_epoch": 3,
            "replica_nodes": [1, 2, 3], "isr_nodes": [1, 3], "offline_replicas": []}


def _handler_body(topics: int, partitions: int) -> dict[str, Any]:
    """The shape handlers/metadata.py answers: brokers, cluster id, controller, topics
    (an unknown one too), authorized operations."""
    ts: list[dict[str, Any]] = [
        {"error_code": ErrorCode.NONE, "name": f"topic-{t}", "topic_id": uuid.uuid4(),
         "is_internal": t == 0, "partitions": [_partition(p, p % 5 - 1) for p in
                                                range(partitions)],
         "topic_authorized_operations": -2147483648} for t in range(topics)]
    ts.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": "gone",
               "topic_id": uuid.UUID(int=0), "partitions": [],
               "topic_authorized_operations": 0x5F8})
    return {"throttle_time_ms": 0,
            "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None},
                        {"node_id": 2, "host": "b2.example", "port": 9093, "rack": "r1"}],
            "cluster_id": "cluster-Ä", "controller_id": 1, "topics": ts,
            "cluster_authorized_operations": -2147483648}


# ---- the switch ------------------------------------------------------------------------------

def test_the_switch_picks_the_twin_unless_told_not_to() -> None:
    encoder = codec.response_encoder(ApiKey.METADATA, HI)
    if SWITCHED_OFF:
        assert codec_kernels is None and REASON == "KAFKACTL_NO_EXTENSIONS is set"
        assert getattr(encoder, "__name__", None) == "encode_frame"
        return
    # scripts/test.sh builds the extension: a missing one there is a broken build
    assert codec_kernels is not None, REASON
    for version in VERSIONS:
        picked = codec.response_encoder(ApiKey.METADATA, version)
        assert getattr(picked, "__self__", None).twin is \
            codec_kernels.encode_metadata_response
    # and encode_response goes through it
    body = _handler_body(1, 2)
    assert codec.encode_response(ApiKey.METADATA, 9, 4, body) == _twin(4, 9, body)


# ---- the broker's shapes ---------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_the_handlers_shapes_are_encoded_by_the_twin(version: int) -> None:
    """What handlers/metadata.py answers: the twin encodes it (no fallback on the hot
    path), byte for byte as the reference, and it decodes back."""
    body = _handler_body(3, 7)
    expected = _same(77, version, body)
    assert expected[0] == "ok"
    if codec_kernels is not None:
        assert _twin(77, version, body) is not None
    frame = expected[1][0]
    back = codec.decode_response(ApiKey.METADATA, version, frame[4:])
    assert [t["name"] for t in back["topics"]] == [t["name"] for t in body["topics"]]
    assert [p["replica_nodes"] for p in back["topics"][1]["partitions"]] == [[1, 2, 3]] * 7


def test_ten_thousand_partitions_then_small_bodies() -> None:
    """The many-partitions figure's body (its buffer grows past 64 KiB), then small ones
    again, in every version a client sends: byte for byte as the reference."""
    big = _handler_body(100, 100)
    small = _handler_body(1, 1)
    one_topic = {"topics": [{"name": "wide", "partitions": [_partition(p)
                                                            for p in range(10_000)]}]}
    for version in (1, 4, 5, 9, 12):
        for body in (big, small, one_topic, small):
            assert _same(11, version, body)[0] == "ok"
            if codec_kernels is not None:
                assert _twin(11, version, body) is not None


# ---- properties: every version, every field at its edges --------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_ODD: list[Any] = [None, 1.0, "7", b"x", [], (), {}, 2**70]
_odd = st.sampled_from(_ODD)


def _edges(lo: int, hi: int) -> st.SearchStrategy[Any]:
    return st.sampled_from([lo - 1, lo, 0, -1, hi, hi + 1]) | st.integers(lo, hi)


def _int(lo_hi: tuple[int, int]) -> st.SearchStrategy[Any]:
    return _edges(*lo_hi) | st.booleans() | st.sampled_from(list(ErrorCode)[:5]) | _odd


_ints = st.lists(_edges(*INT32), max_size=4)
_int_list = _ints | _ints.map(tuple) | st.lists(_odd, min_size=1, max_size=2) | _odd
_string = _text | st.none() | st.just("\ud800") | st.just("é" * 20000) | _odd
_topic_id = (st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)) | st.binary(min_size=15,
             max_size=17) | st.binary(min_size=16, max_size=16).map(bytearray) | _odd)
_partition_st = st.fixed_dictionaries(
    {}, optional={"error_code": _int(INT16), "partition_index": _int(INT32),
                  "leader_id": _int(INT32), "leader_epoch": _int(INT32),
                  "replica_nodes": _int_list, "isr_nodes": _int_list,
                  "offline_replicas": _int_list, "unknown_key": st.integers()})
_partitions = st.lists(_partition_st, max_size=4)
_topic = st.fixed_dictionaries(
    {}, optional={"error_code": _int(INT16), "name": _string, "topic_id": _topic_id,
                  "is_internal": st.booleans() | st.sampled_from([0, 1, "x", None]),
                  "partitions": _partitions | _partitions.map(tuple) | _odd,
                  "topic_authorized_operations": _int(INT32)})
_broker = st.fixed_dictionaries(
    {}, optional={"node_id": _int(INT32), "host": _string, "port": _int(INT32),
                  "rack": _string})
_body = st.fixed_dictionaries(
    {}, optional={"throttle_time_ms": _int(INT32),
                  "brokers": st.lists(_broker, max_size=3) | _odd,
                  "cluster_id": _string, "controller_id": _int(INT32),
                  "topics": st.lists(_topic, max_size=3) | st.lists(_topic, max_size=2).map(
                      tuple) | _odd,
                  "cluster_authorized_operations": _int(INT32)})


@settings(max_examples=examples(600))
@given(st.sampled_from(VERSIONS), _edges(*INT32), _body)
def test_twin_agrees_on_every_version(version: int, correlation_id: int, body: dict[str, Any]
                                      ) -> None:
    _same(correlation_id, version, body)


_plain_partition = st.fixed_dictionaries(
    {"error_code": st.integers(*INT16), "partition_index": st.integers(*INT32),
     "leader_id": st.integers(*INT32), "leader_epoch": st.integers(*INT32),
     "replica_nodes": st.lists(st.integers(*INT32), max_size=5),
     "isr_nodes": st.lists(st.integers(*INT32), max_size=5),
     "offline_replicas": st.lists(st.integers(*INT32), max_size=2)})
_plain_body = st.fixed_dictionaries(
    {"throttle_time_ms": st.integers(*INT32),
     "brokers": st.lists(st.fixed_dictionaries(
         {"node_id": st.integers(*INT32), "host": _text, "port": st.integers(*INT32),
          "rack": st.none() | _text}), max_size=3),
     "cluster_id": st.none() | _text, "controller_id": st.integers(*INT32),
     "topics": st.lists(st.fixed_dictionaries(
         {"error_code": st.integers(*INT16), "name": _text, "topic_id": st.uuids(),
          "is_internal": st.booleans(), "partitions": st.lists(_plain_partition, max_size=5),
          "topic_authorized_operations": st.integers(*INT32)}), max_size=4),
     "cluster_authorized_operations": st.integers(*INT32)})


@settings(max_examples=examples(300))
@given(st.sampled_from(VERSIONS), st.integers(*INT32), _plain_body)
def test_twin_encodes_every_valid_body_itself(version: int, correlation_id: int,
                                              body: dict[str, Any]) -> None:
    """A body every field of which is in range: the twin writes it (never declines), the
    reference's bytes."""
    assert _same(correlation_id, version, body)[0] == "ok"
    if codec_kernels is not None:
        assert _twin(correlation_id, version, body) is not None


# ---- edges, one by one -----------------------------------------------------------------------

def _body_with(version: int, where: str, key: str, value: Any) -> dict[str, Any]:
    body = _handler_body(1, 2)
    target = {"body": body, "broker": body["brokers"][0], "topic": body["topics"][0],
              "partition": body["topics"][0]["partitions"][1]}[where]
    target[key] = value
    return body


_LIMITS = [("body", "throttle_time_ms", INT32), ("body", "controller_id", INT32),
           ("body", "cluster_authorized_operations", INT32), ("broker", "node_id", INT32),
           ("broker", "port", INT32), ("topic", "error_code", INT16),
           ("topic", "topic_authorized_operations", INT32),
           ("partition", "error_code", INT16), ("partition", "partition_index", INT32),
           ("partition", "leader_id", INT32), ("partition", "leader_epoch", INT32)]


@pytest.mark.parametrize(("where", "key", "limits"), _LIMITS)
def test_int_fields_at_and_past_their_limits(where: str, key: str,
                                             limits: tuple[int, int]) -> None:
    lo, hi = limits
    for version in VERSIONS:
        for value in (lo - 1, lo, lo + 1, -1, 0, hi - 1, hi, hi + 1, 2**63, -(2**63) - 1,
                      True, ErrorCode.NOT_CONTROLLER, 1.0, "1", None):
            outcome = _same(3, version, _body_with(version, where, key, value))
            if isinstance(value, int) and lo <= value <= hi:
                assert outcome[0] == "ok"


def test_int32_arrays_at_and_past_their_limits() -> None:
    lo, hi = INT32
    for version in VERSIONS:
        for key in ("replica_nodes", "isr_nodes", "offline_replicas"):
            for value in ([lo, hi], [lo - 1], [hi + 1], (hi, 0, lo), [], list(range(5000)),
                          None, [None], [1.0], "abc", {1: 2}, [True]):
                _same(3, version, _body_with(version, "partition", key, value))


def test_correlation_ids_at_and_past_their_limits() -> None:
    body = _handler_body(1, 1)
    for version in VERSIONS:
        for cid in (INT32[0] - 1, INT32[0], 0, INT32[1], INT32[1] + 1, 1.0, None, "1", True):
            _same(cid, version, body)


def test_nulls_where_a_version_allows_them_and_where_it_does_not() -> None:
    """rack (v1+), cluster_id (v2+) and the topic name (v12+) are nullable; host is
    never: a null is written (or nothing, before the field exists), or the reference's
    error."""
    for version in VERSIONS:
        for where, key in (("broker", "rack"), ("body", "cluster_id"), ("topic", "name"),
                           ("broker", "host")):
            outcome = _same(5, version, _body_with(version, where, key, None))
            # (present from, nullable from): an absent field's value is not written
            present, nullable = {"rack": (1, 1), "cluster_id": (2, 2), "name": (0, 12),
                                 "host": (0, 99)}[key]
            assert (outcome[0] == "ok") == (version < present or version >= nullable), (
                version, key)


def test_empty_and_absent_fields() -> None:
    bodies: tuple[dict[str, Any], ...] = ({}, {"topics": []}, {"brokers": [], "topics": []},
                                           {"topics": [{}]},
                                           {"topics": [{"partitions": [{}]}]},
                                           {"brokers": [{}]},
                                           {"topics": [{"name": "", "partitions": []}]})
    for version in VERSIONS:
        for body in bodies:
            assert _same(9, version, body)[0] == "ok"
            if codec_kernels is not None:
                assert _twin(9, version, body) is not None


def test_strings_unicode_long_and_invalid() -> None:
    """Names in other scripts and of every length class (a one-byte and a two-byte compact
    length, past int16 where only flexible versions can write it), lone surrogates, str
    subclasses (declined; the reference decides)."""

    class Name(str):
        pass

    for version in VERSIONS:
        for name in ("t", "主题-ñ-🚀", "x" * 126, "x" * 127, "é" * 64, "y" * 32767,
                     "y" * 32768, "\ud800", "a\x00b", Name("sub"), b"bytes", 7):
            for where, key in (("topic", "name"), ("broker", "host"), ("broker", "rack"),
                               ("body", "cluster_id")):
                _same(5, version, _body_with(version, where, key, name))


def test_topic_ids() -> None:
    class Id(uuid.UUID):
        pass

    cases = [(uuid.UUID(int=0), True), (uuid.UUID(int=2**128 - 1), True),
             (uuid.uuid4(), True), (Id(int=5), True), (b"\x01" * 16, True),
             (bytearray(b"\x02" * 16), True), (b"\x01" * 15, False), (b"\x01" * 17, False),
             (memoryview(b"\x03" * 16), False), (str(uuid.uuid4()), False), (None, False),
             (0, False)]
    for version in VERSIONS:
        for topic_id, valid in cases:
            outcome = _same(5, version, _body_with(version, "topic", "topic_id", topic_id))
            assert (outcome[0] == "ok") == (valid or version < 10), (version, topic_id)


def test_is_internal_values() -> None:
    values: list[Any] = [True, False, 0, 1, 2, "x", "", None, [], 1.5]
    for version in VERSIONS:
        for value in values:
            _same(5, version, _body_with(version, "topic", "is_internal", value))


@pytest.mark.parametrize("body", [None, [], "x", 7, {"topics": None}, {"topics": [None]},
                                  {"topics": "abc"}, {"topics": {"a": 1}},
                                  {"topics": [{"partitions": None}]},
                                  {"topics": [{"partitions": [None]}]},
                                  {"topics": [{"partitions": [7]}]},
                                  {"topics": [{"partitions": [[]]}]},
                                  {"brokers": None}, {"brokers": [None]}, {"brokers": [3]},
                                  {"brokers": "b"}])
def test_bodies_of_the_wrong_shape(body: Any) -> None:
    for version in VERSIONS:
        assert _same(1, version, body)[0] != "ok"


def test_dict_subclasses_and_other_sequences_are_left_to_the_reference() -> None:
    class Body(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            return super().get(key, default)

    base = _handler_body(1, 2)
    shapes = [Body(base), {**base, "topics": iter(base["topics"])},
              {**base, "brokers": tuple(base["brokers"])},
              {**base, "topics": [Body(base["topics"][0])]},
              {**base, "topics": [{**base["topics"][0],
                                   "partitions": [Body(_partition(0))]}]}]
    for version in VERSIONS:
        for body in shapes:
            _same(2, version, body)


# ---- code that runs inside the twin ----------------------------------------------------------

class _Key:
    """A dict key whose hash equals a field name's: a lookup of that name in its dict
    calls __eq__, which runs `action` (code the twin cannot prevent from running)."""

    def __init__(self, name: str, action: Callable[[], Any]) -> None:
        self.name, self.action, self.armed = name, action, False

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if self.armed:
            self.action()
        return False


def _plant(d: dict[Any, Any], name: str, action: Callable[[], Any]) -> None:
    """A _Key in d ahead of `name` in its probe sequence (the field itself kept)."""
    value = d.pop(name, None)
    key = _Key(name, action)
    d[key] = 1
    if value is not None:
        d[name] = value
    key.armed = True


@compiled
def test_a_lookup_that_changes_the_lists_being_written() -> None:
    """An odd key's __eq__ empties the partitions and the topics while the twin walks
    them: the twin declines (or writes what it read consistently), and never reads past a
    list."""
    for version in (0, 5, 9, 12):
        body = _handler_body(2, 50)
        topics = body["topics"]
        parts = topics[0]["partitions"]

        def shrink(topics: list[Any] = topics, parts: list[Any] = parts) -> None:
            parts.clear()
            del topics[1:]

        _plant(parts[10], "leader_id", shrink)
        got = _twin(6, version, body)
        assert got is None or int.from_bytes(got[0][:4], "big") == len(got[0]) - 4


@compiled
def test_a_lookup_that_raises_is_left_to_the_reference() -> None:
    def fail() -> None:
        raise RuntimeError("an odd key")

    for version in (0, 9, 12):
        body = _handler_body(1, 3)
        _plant(body["topics"][0]["partitions"][1], "isr_nodes", fail)
        assert _twin(6, version, body) is None
        for encoder in (codec.response_encoder_py(ApiKey.METADATA, version),
                        codec.response_encoder(ApiKey.METADATA, version)):
            assert _outcome(partial(encoder, 6, body)) == (RuntimeError, "an odd key")


def _encode_into(results: list[Any], version: int, body: dict[str, Any]) -> None:
    results.append((version, _twin(8, version, body)))


@compiled
def test_a_lookup_that_encodes_another_response_meanwhile() -> None:
    """A Metadata response encoded from inside another's encoding (reentry): each gets
    its own buffer, both the reference's bytes."""
    inner_body = _handler_body(2, 30)
    inner: list[Any] = []
    for version in (1, 9, 12):
        body = _handler_body(1, 40)
        _plant(body["topics"][0]["partitions"][20], "leader_id",
               partial(_encode_into, inner, version, inner_body))
        got = _twin(7, version, body)
        reference = codec.response_encoder_py(ApiKey.METADATA, version)
        assert got is None or got == reference(7, body)
        assert inner and all(r == codec.response_encoder_py(ApiKey.METADATA, v)(8, inner_body)
                             for v, r in inner)
        inner.clear()
