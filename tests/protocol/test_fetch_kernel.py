"""The compiled Fetch request decoder (kafkactl/protocol/_codec_kernels.pyx) against its
reference, the generated decoder (`codec.request_frame_decoder_py(FETCH, v)`), on the same
frames: requests of every served version (v0-v12: kafka-python's v4-v10, librdkafka's
v11, Java clients' and kafkactl's replica fetcher's v12), malformed frames (truncated,
flipped, lying lengths, overlong varints, tagged fields, bad UTF-8, trailing bytes) and
every fixed field's limits. The decoder the broker's routes pick
(`codec.request_frame_decoder`) must give the same result (the same dicts, their keys in
the same order) or raise the same error class with the same message; the twin alone
answers the reference's result or declines (None), and never raises.

Under KAFKACTL_NO_EXTENSIONS=1 the twin's own checks skip and only the switch and the
picked decoder (then the reference itself) are checked."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.compiler import ZERO_COPY_THRESHOLD
from kafkactl.protocol.kernels import REASON, codec_kernels
from kafkactl.protocol.types import FileRegion
from kafkactl.protocol.versions import SUPPORTED_VERSIONS
from tests.hypothesis_profiles import examples
from tests.protocol.frame_damage import damaged

LO, HI = SUPPORTED_VERSIONS[ApiKey.FETCH]
VERSIONS = list(range(LO, HI + 1))
INT8 = (-(2**7), 2**7 - 1)
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def _outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: ("ok", its result), or the error's class and message."""
    try:
        return "ok", _plain(fn())
    except Exception as e:  # noqa: BLE001 - the class and the message are what is compared
        return type(e), str(e)


def _plain(v: Any) -> Any:
    """A value with its types, its dicts' keys in order."""
    if isinstance(v, dict):
        return [(k, _plain(x)) for k, x in v.items()]
    if isinstance(v, list | tuple):
        return type(v).__name__, [_plain(x) for x in v]
    return type(v).__name__, v


def _frame(version: int, client_id: str | None, body: dict[str, Any]) -> bytearray:
    """The request frame without its size prefix, written by the pure encoder."""
    return bytearray(codec.encode_request(ApiKey.FETCH, version, 7, client_id, body)[4:])


def _same(frame: Any, version: int) -> Any:
    """The picked decoder gives the reference's outcome, and the twin alone that result
    or None; the twin's answer."""
    reference = codec.request_frame_decoder_py(ApiKey.FETCH, version)
    expected = _outcome(lambda: reference(frame))
    picked = codec.request_frame_decoder(ApiKey.FETCH, version)
    assert _outcome(lambda: picked(frame)) == expected
    if codec_kernels is None:
        return None
    got = codec_kernels.decode_fetch_frame(frame, version)
    assert got is None or ("ok", _plain(got)) == expected
    return got


# ---- the switch ------------------------------------------------------------------------------

def test_the_switch_picks_the_twin_unless_told_not_to() -> None:
    decoder = codec.request_frame_decoder(ApiKey.FETCH, HI)
    encoder = codec.response_encoder(ApiKey.FETCH, HI)
    if os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0"):
        assert codec_kernels is None and REASON == "KAFKACTL_NO_EXTENSIONS is set"
        assert getattr(decoder, "__name__", None) == "decode_frame"
        assert getattr(encoder, "__name__", None) == "encode_frame"
        return
    assert codec_kernels is not None, REASON  # scripts/test.sh builds the extension
    for version in VERSIONS:
        decoder = codec.request_frame_decoder(ApiKey.FETCH, version)
        encoder = codec.response_encoder(ApiKey.FETCH, version)
        assert getattr(decoder, "__self__", None).twin is codec_kernels.decode_fetch_frame
        assert getattr(encoder, "__self__", None).twin is codec_kernels.encode_fetch_response


# ---- well-formed requests --------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_int32 = st.integers(*INT32)
_partition = st.fixed_dictionaries({
    "partition": _int32, "current_leader_epoch": _int32, "fetch_offset": st.integers(*INT64),
    "last_fetched_epoch": _int32, "log_start_offset": st.integers(*INT64),
    "partition_max_bytes": _int32})
_topic = st.fixed_dictionaries({"topic": _text, "partitions": st.lists(_partition, max_size=4)})
_forgotten = st.fixed_dictionaries({"topic": _text,
                                    "partitions": st.lists(_int32, max_size=4)})
_request = st.fixed_dictionaries({
    "replica_id": _int32, "max_wait_ms": _int32, "min_bytes": _int32, "max_bytes": _int32,
    "isolation_level": st.integers(*INT8), "session_id": _int32, "session_epoch": _int32,
    "topics": st.lists(_topic, max_size=3),
    "forgotten_topics_data": st.lists(_forgotten, max_size=2), "rack_id": _text})


@settings(max_examples=examples(400))
@given(st.sampled_from(VERSIONS), st.none() | _text, _request)
def test_twin_decodes_what_the_reference_decodes(version: int, client_id: str | None,
                                                 body: dict[str, Any]) -> None:
    got = _same(_frame(version, client_id, body), version)
    if codec_kernels is not None:  # the plain shape: the twin answers, no fallback
        assert got is not None


@settings(max_examples=examples(100))
@given(_text, _request)
def test_a_cluster_id_tag_is_left_to_the_reference(cluster_id: str, body: dict[str, Any]
                                                   ) -> None:
    """v12's tagged cluster_id: the twin declines and the reference decodes it."""
    frame = _frame(12, "cli", {**body, "cluster_id": cluster_id})
    assert _same(frame, 12) is None
    assert codec.request_frame_decoder(ApiKey.FETCH, 12)(frame)[1]["cluster_id"] == cluster_id


def _consumer(version: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "orders", "partitions": [
                {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 1234,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1048576}]}],
            "forgotten_topics_data": [], "rack_id": ""}


@pytest.mark.parametrize("version", VERSIONS)
def test_edges(version: int) -> None:
    """Empty topic and partition lists, every fixed field at its limits, null and empty
    client ids, unicode names, a null-like (empty) rack."""
    for lo_hi in (0, 1):
        v32 = INT32[lo_hi]
        body = {"replica_id": v32, "max_wait_ms": v32, "min_bytes": v32, "max_bytes": v32,
                "isolation_level": INT8[lo_hi], "session_id": v32, "session_epoch": v32,
                "topics": [{"topic": "tópico-☃", "partitions": [
                    {"partition": v32, "current_leader_epoch": v32,
                     "fetch_offset": INT64[lo_hi], "last_fetched_epoch": v32,
                     "log_start_offset": INT64[lo_hi], "partition_max_bytes": v32}]},
                    {"topic": "", "partitions": []}],
                "forgotten_topics_data": [{"topic": "x", "partitions": [v32, 0]},
                                          {"topic": "", "partitions": []}],
                "rack_id": "rack-é"}
        for client_id in (None, "", "c" * 300):
            assert codec_kernels is None or _same(_frame(version, client_id, body),
                                                  version) is not None
    empty = {**_consumer(version), "topics": [], "rack_id": ""}
    _same(_frame(version, "rdkafka", empty), version)
    # bad UTF-8 in a topic name: the reference raises, the twin declines
    frame = _frame(version, "cli", {**_consumer(version), "topics": [
        {"topic": "tópico", "partitions": []}]})
    at = frame.index("tópico".encode())
    frame[at + 2] = 0xFF
    assert _same(frame, version) is None
    assert _outcome(lambda: codec.request_frame_decoder(ApiKey.FETCH, version)(frame))[0] \
        != "ok"


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_and_tagged_fields(version: int) -> None:
    frame = _frame(version, "cli", _consumer(version))
    _same(frame + b"\x00\x01\xff", version)  # the reference ignores trailing bytes
    if version >= 12:
        # a tagged field on the body, on a topic, on a partition, in the header
        body_tag = frame[:-1] + bytes([1, 9, 2, 0xAB, 0xCD])
        assert _same(body_tag, 12) is None
        header = frame.index(b"cli") + 3
        header_tag = frame[:header] + bytes([1, 4, 1, 0x55]) + frame[header + 1:]
        assert _same(header_tag, 12) is None
        part_end = frame.index(b"\x00\x10\x00\x00") + 4  # partition_max_bytes, then its tags
        part_tag = frame[:part_end] + bytes([1, 3, 0]) + frame[part_end + 1:]
        assert _same(part_tag, 12) is None
        topic_tag = frame[:part_end + 1] + bytes([1, 3, 0]) + frame[part_end + 2:]
        assert _same(topic_tag, 12) is None
        # an overlong (5-byte) but valid compact length: the reference reads it
        overlong = frame[:header + 1] + b"\x80\x80\x80\x80\x00" + frame[header + 1:]
        _same(overlong, 12)


# ---- malformed frames ------------------------------------------------------------------------

@settings(max_examples=examples(500))
@given(st.sampled_from(VERSIONS), _request, st.data())
def test_twin_agrees_on_malformed_frames(version: int, body: dict[str, Any],
                                         data: st.DataObject) -> None:
    frame = damaged(_frame(version, "cli", body), data)
    _same(frame, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation(version: int) -> None:
    body = {**_consumer(version), "forgotten_topics_data": [{"topic": "gone",
                                                             "partitions": [1, 2]}],
            "rack_id": "r1"}
    frame = _frame(version, "cli", body)
    for k in range(len(frame) + 1):
        _same(frame[:k], version)
    for k in range(8, len(frame)):  # every byte at the lying-length values
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            bad = bytearray(frame)
            bad[k] = value
            _same(bad, version)


def test_twin_reads_only_inside_the_frame() -> None:
    """Random bytes and random valid frames cut anywhere, every version: the twin answers
    the reference's result or None, and a frame inside a bigger buffer gives the same
    answer as the frame alone (nothing past its end is read)."""
    rng = random.Random(33)
    cases = [bytearray(rng.randbytes(rng.randrange(120))) for _ in range(1500)]
    for version in (4, 11, 12):
        valid = _frame(version, "cli", {**_consumer(version), "rack_id": "r"})
        cases += [valid[:k] for k in range(len(valid) + 1)]
    for frame in cases:
        for version in VERSIONS:
            _same(frame, version)
            if codec_kernels is not None:
                padded = bytearray(frame + b"\x01" * 64)
                alone = codec_kernels.decode_fetch_frame(frame, version)
                inside = codec_kernels.decode_fetch_frame(memoryview(padded)[:len(frame)],
                                                          version)
                assert _plain(alone) == _plain(inside)


def test_a_follower_fetch_of_many_partitions() -> None:
    """kafkactl's replica fetcher (FETCH_VERSION 12) asks for many partitions at once."""
    body = {**_consumer(12), "replica_id": 2, "topics": [
        {"topic": f"t{t}", "partitions": [
            {"partition": p, "current_leader_epoch": 4, "fetch_offset": 10**9 + p,
             "last_fetched_epoch": 4, "log_start_offset": 0, "partition_max_bytes": 1 << 20}
            for p in range(10)]} for t in range(5)]}
    got = _same(_frame(12, "broker-2-fetcher", body), 12)
    assert codec_kernels is None or got is not None


# ---- responses -------------------------------------------------------------------------------
# The parts must be the reference's: equal bytes, and the very same records objects (a
# FileRegion for sendfile, a large buffer not copied) at the same places.

INT16 = (-(2**15), 2**15 - 1)
_BIG = b"b" * 20000
_BIG_VIEW = memoryview(bytearray(b"v" * 17000))
_REGION = FileRegion(7, 4096, 1 << 20)


class _Bytes(bytes):
    pass


class _HasFd:
    fd, position, length = 9, 0, 10


def _released() -> memoryview:
    view = memoryview(b"gone")
    view.release()
    return view


_RECORDS = [None, b"", b"abc", bytearray(b"xyz" * 10), memoryview(b"m" * 50), _BIG,
            bytearray(_BIG), _BIG_VIEW, memoryview(bytearray(b"s" * 40000))[::2],
            memoryview(b"x" * (ZERO_COPY_THRESHOLD - 1)), memoryview(b"y" * ZERO_COPY_THRESHOLD),
            _REGION, FileRegion(3, 0, 0), FileRegion(3, 0, -1), FileRegion(3, 0, 2**31),
            FileRegion(3, 0, "x"),  # type: ignore[arg-type]
            _Bytes(b"sub"), _HasFd(), _released(), "text", 7]


def _record(i: int) -> Any:
    """_RECORDS[i] (sampled by index: some are not hashable, some have huge reprs)."""
    return _RECORDS[i]


def _parts(v: Any) -> Any:
    """Parts as comparable values: bytes by value, anything else by identity."""
    if isinstance(v, list):
        return [("bytes", p) if type(p) is bytes else ("same", id(p), type(p).__name__)
                for p in v]
    return type(v).__name__, v


def _parts_outcome(fn: Callable[[], Any]) -> Any:
    try:
        return "ok", _parts(fn())
    except Exception as e:  # noqa: BLE001 - the class and the message are what is compared
        return type(e), str(e)


def _same_response(correlation_id: Any, version: int, body: Any) -> Any:
    reference = codec.response_encoder_py(ApiKey.FETCH, version)
    expected = _parts_outcome(lambda: reference(correlation_id, body))
    picked = codec.response_encoder(ApiKey.FETCH, version)
    assert _parts_outcome(lambda: picked(correlation_id, body)) == expected
    if codec_kernels is None:
        return None
    got = codec_kernels.encode_fetch_response(correlation_id, version, body)
    assert got is None or ("ok", _parts(got)) == expected
    return got


def _edges(lo: int, hi: int) -> st.SearchStrategy[Any]:
    return st.sampled_from([lo - 1, lo, 0, -1, hi, hi + 1]) | st.integers(lo, hi)


_odd = st.sampled_from([None, 1.0, "7", True, b"x"])
_txn = st.fixed_dictionaries({}, optional={"producer_id": _edges(*INT64),
                                           "first_offset": _edges(*INT64) | _odd})
_part_response = st.fixed_dictionaries(
    {"partition_index": _edges(*INT32), "error_code": _edges(*INT16),
     "high_watermark": _edges(*INT64)},
    optional={"last_stable_offset": _edges(*INT64), "log_start_offset": _edges(*INT64),
              "aborted_transactions": st.none() | st.lists(_txn, max_size=2)
              | st.lists(_txn, max_size=2).map(tuple) | _odd,
              "preferred_read_replica": _edges(*INT32),
              "records": st.integers(0, len(_RECORDS) - 1).map(_record),
              "diverging_epoch": st.just({"epoch": 1, "end_offset": 5}),
              "snapshot_id": st.just({"end_offset": -1, "epoch": -1}),
              "unknown_key": st.integers()})
_topic_response = st.fixed_dictionaries(
    {"topic": _text | st.sampled_from(["\ud800", "é" * 20000]) | _odd},
    optional={"partitions": st.lists(_part_response, max_size=3) | _odd})
_response = st.fixed_dictionaries(
    {}, optional={"responses": st.lists(_topic_response, max_size=3) | _odd,
                  "throttle_time_ms": _edges(*INT32) | _odd,
                  "error_code": _edges(*INT16), "session_id": _edges(*INT32)})


@settings(max_examples=examples(500))
@given(st.sampled_from(VERSIONS), _edges(*INT32), _response)
def test_response_twin_gives_the_references_parts(version: int, correlation_id: int,
                                                  body: dict[str, Any]) -> None:
    _same_response(correlation_id, version, body)


def _handler_body(records: list[Any], read_committed: bool) -> dict[str, Any]:
    """What handlers/fetch.py answers."""
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "orders", "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 1000 + p,
             "last_stable_offset": 1000 + p, "log_start_offset": 0,
             "aborted_transactions": [{"producer_id": 4, "first_offset": 17}]
             if read_committed else None,
             "preferred_read_replica": -1, "records": r} for p, r in enumerate(records)]}]}


@pytest.mark.parametrize("version", VERSIONS)
def test_response_twin_answers_the_handlers_shapes(version: int) -> None:
    """FileRegions (several, back to back), small and large in-memory records, empty
    ones, read_committed's aborted transactions: the twin answers, with the reference's
    parts, the regions themselves in the same places."""
    regions = [FileRegion(11, 4096 * i, 1000 + i) for i in range(3)]
    for records in (regions, [b"", b"tiny"], [_BIG, regions[0], b"", _BIG_VIEW], []):
        for read_committed in (False, True):
            got = _same_response(3, version, _handler_body(records, read_committed))
            assert codec_kernels is None or got is not None
            if got is not None:
                for region in regions:
                    if region in records:
                        assert any(p is region for p in got)


@pytest.mark.parametrize("body", [None, [], "x", {"responses": None}, {"responses": [None]},
                                  {"responses": [{"topic": None}]},
                                  {"responses": [{"topic": "t", "partitions": [7]}]},
                                  {"responses": ({"topic": "t", "partitions": ()},)}])
def test_response_twin_on_bodies_that_are_not_the_plain_shape(body: Any) -> None:
    for version in VERSIONS:
        _same_response(1, version, body)
        _same_response(2**31, version, {})


def test_response_twin_with_many_partitions_and_a_frame_past_int32() -> None:
    """A follower's answer of 2,000 partitions (the buffer grows past 64 KiB, then small
    again); regions whose lengths add up past int32: the reference fails, the twin
    declines."""
    many = _handler_body([FileRegion(5, i, 100) if i % 3 else b"r" * (i % 50)
                          for i in range(2000)], True)
    small = _handler_body([b"x"], False)
    for version in (12, 11, 4, 0):
        for body in (many, small, many, small):
            _same_response(9, version, body)
        huge = _handler_body([FileRegion(5, 0, 2**31 - 1), FileRegion(5, 0, 2**31 - 1)],
                             False)
        assert _same_response(9, version, huge) is None
