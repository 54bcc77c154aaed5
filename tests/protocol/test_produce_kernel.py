"""The compiled Produce codecs (kafkactl/protocol/_codec_kernels.pyx) against their
references, the generated codecs (`codec.request_frame_decoder_py`, `codec.response_encoder_py`),
on the same inputs: requests of every served version and shape, malformed frames
(truncated, flipped, lying lengths, tagged fields, bad UTF-8, overlong varints), and
response bodies at and past every field's limits. The codec the broker's routes pick
(`codec.request_frame_decoder`, `codec.response_encoder`) must give the same result, or
raise the same error class with the same message; a twin alone answers the reference's
result or declines (None), and never raises.

Under KAFKACTL_NO_EXTENSIONS=1 the comparisons skip and only the switch is checked;
otherwise the kernels must have loaded (a build that fell back to pure Python fails here)."""

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
from kafkactl.protocol.kernels import REASON, codec_kernels
from kafkactl.protocol.versions import SUPPORTED_VERSIONS
from tests.hypothesis_profiles import examples
from tests.protocol.frame_damage import damaged

compiled = pytest.mark.skipif(codec_kernels is None, reason=f"pure Python: {REASON}")
LO, HI = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
VERSIONS = list(range(LO, HI + 1))
INT16 = (-(2**15), 2**15 - 1)
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def _outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: ("ok", its result with memoryviews as (type, bytes)), or the
    error's class and message."""
    try:
        return "ok", _plain(fn())
    except Exception as e:  # noqa: BLE001 - the class and the message are what is compared
        return type(e), str(e)


def _plain(v: Any) -> Any:
    if isinstance(v, memoryview):
        return "memoryview", v.tobytes()
    if isinstance(v, bytes | bytearray):
        return type(v).__name__, bytes(v)
    if isinstance(v, dict):
        return [(k, _plain(x)) for k, x in v.items()]  # the keys' order too
    if isinstance(v, list | tuple):
        return type(v).__name__, [_plain(x) for x in v]
    return type(v).__name__, v


# ---- the switch ------------------------------------------------------------------------------

def test_the_switch_picks_the_twins_unless_told_not_to() -> None:
    decoder = codec.request_frame_decoder(ApiKey.PRODUCE, HI)
    encoder = codec.response_encoder(ApiKey.PRODUCE, HI)
    if os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0"):
        assert codec_kernels is None and REASON == "KAFKACTL_NO_EXTENSIONS is set"
        assert getattr(decoder, "__name__", None) == "decode_frame"
        assert getattr(encoder, "__name__", None) == "encode_frame"
        return
    # scripts/test.sh builds the extension: a missing one there is a broken build
    assert codec_kernels is not None, REASON
    assert getattr(decoder, "__self__", None).twin is codec_kernels.decode_produce_frame
    assert getattr(encoder, "__self__", None).twin is codec_kernels.encode_produce_response
    # the other APIs keep the generated codecs
    assert getattr(codec.request_frame_decoder(ApiKey.LIST_OFFSETS, 4), "__self__", None) is None


# ---- requests --------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_records = st.none() | st.binary(max_size=80)
_partition = st.fixed_dictionaries({"index": st.integers(*INT32), "records": _records})
_topic = st.fixed_dictionaries({"name": _text,
                                "partition_data": st.lists(_partition, max_size=3)})
_request = st.fixed_dictionaries({
    "transactional_id": st.none() | _text, "acks": st.integers(*INT16),
    "timeout_ms": st.integers(*INT32), "topic_data": st.lists(_topic, max_size=3)})


def _frame(version: int, client_id: str | None, body: dict[str, Any]) -> bytearray:
    """The request frame without its size prefix, written by the pure encoder."""
    return bytearray(codec.encode_request(ApiKey.PRODUCE, version, 7, client_id, body)[4:])


def _same_request(frame: bytearray, version: int) -> None:
    reference = codec.request_frame_decoder_py(ApiKey.PRODUCE, version)
    expected = _outcome(lambda: reference(frame))
    picked = codec.request_frame_decoder(ApiKey.PRODUCE, version)
    assert _outcome(lambda: picked(frame)) == expected
    if codec_kernels is not None:
        got = codec_kernels.decode_produce_frame(frame, version)
        assert got is None or ("ok", _plain(got)) == expected


@settings(max_examples=examples(300))
@given(st.sampled_from(VERSIONS), st.none() | _text, _request)
def test_request_twins_agree(version: int, client_id: str | None, body: dict[str, Any]
                             ) -> None:
    frame = _frame(version, client_id, body)
    _same_request(frame, version)
    if codec_kernels is not None and version >= 3:  # the plain shape: the twin answers
        assert codec_kernels.decode_produce_frame(frame, version) is not None


@settings(max_examples=examples(400))
@given(st.sampled_from(VERSIONS), _request, st.data())
def test_request_twins_agree_on_malformed_frames(version: int, body: dict[str, Any],
                                                 data: st.DataObject) -> None:
    frame = damaged(_frame(version, "cli", body), data)
    _same_request(frame, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_request_edges(version: int) -> None:
    """Null records, empty arrays, the limits of each fixed field, non-ASCII and invalid
    UTF-8 names, tagged fields (v9), a null client id."""
    bodies: list[dict[str, Any]] = [
        {"transactional_id": None, "acks": a, "timeout_ms": t, "topic_data": []}
        for a in INT16 for t in INT32]
    bodies.append({"transactional_id": "tx-é", "acks": -1, "timeout_ms": 0, "topic_data": [
        {"name": "tópico", "partition_data": [{"index": INT32[0], "records": None},
                                              {"index": INT32[1], "records": b""}]},
        {"name": "", "partition_data": []}]})
    for body in bodies:
        for client_id in (None, "", "c" * 300):
            _same_request(_frame(version, client_id, body), version)
    frame = _frame(version, "cli", bodies[-1])
    at = frame.index(b"t\xc3\xb3pico")
    bad = bytearray(frame)
    bad[at + 1] = 0xFF  # not UTF-8
    _same_request(bad, version)
    if version >= 9:  # a tagged field at the end of the body: the twin declines
        tagged = frame[:-1] + bytes([1, 5, 2, 0xAB, 0xCD])
        _same_request(tagged, version)
        assert codec_kernels is None or \
            codec_kernels.decode_produce_frame(tagged, version) is None


def test_request_twin_survives_random_bytes() -> None:
    """Random bytes and every truncation of a valid frame, every version: the twin
    answers the reference's result or None, reading only inside the frame (a frame in a
    bigger buffer gives the same answer as the frame alone)."""
    rng = random.Random(33)
    valid = _frame(HI, "cli", {"transactional_id": "t", "acks": 1, "timeout_ms": 5,
                               "topic_data": [{"name": "a", "partition_data": [
                                   {"index": 1, "records": b"r" * 40}]}]})
    cases = [bytearray(rng.randbytes(rng.randrange(80))) for _ in range(2000)]
    cases += [valid[:k] for k in range(len(valid) + 1)]
    for frame in cases:
        for version in (0, 3, 8, 9):
            _same_request(frame, version)
            if codec_kernels is not None:
                padded = bytearray(frame + b"\x01" * 64)
                alone = codec_kernels.decode_produce_frame(frame, version)
                inside = codec_kernels.decode_produce_frame(
                    memoryview(padded)[:len(frame)], version)
                assert _plain(alone) == _plain(inside)


# ---- responses -------------------------------------------------------------------------------

def _edges(lo: int, hi: int) -> st.SearchStrategy[Any]:
    return st.sampled_from([lo - 1, lo, 0, -1, hi, hi + 1]) | st.integers(lo, hi)


_odd = st.sampled_from([None, 1.0, "7", True, b"x"])
_message = st.none() | _text | st.just("\ud800") | _odd
_part_response = st.fixed_dictionaries(
    {"index": _edges(*INT32), "error_code": _edges(*INT16), "base_offset": _edges(*INT64)},
    optional={"log_append_time_ms": _edges(*INT64), "log_start_offset": _edges(*INT64),
              "error_message": _message,
              "record_errors": st.just([]) | st.lists(st.fixed_dictionaries(
                  {"batch_index": st.integers(0, 9), "batch_index_error_message": _message}),
                  max_size=2) | _odd,
              "unknown_key": st.integers()})
_topic_response = st.fixed_dictionaries(
    {"name": _text}, optional={"partition_responses": st.lists(_part_response, max_size=3)})
_response = st.fixed_dictionaries(
    {}, optional={"responses": st.lists(_topic_response, max_size=3) | _odd,
                  "throttle_time_ms": _edges(*INT32) | _odd})


def _same_response(correlation_id: Any, version: int, body: Any) -> None:
    reference = codec.response_encoder_py(ApiKey.PRODUCE, version)
    expected = _outcome(lambda: reference(correlation_id, body))
    picked = codec.response_encoder(ApiKey.PRODUCE, version)
    assert _outcome(lambda: picked(correlation_id, body)) == expected
    if codec_kernels is not None:
        got = codec_kernels.encode_produce_response(correlation_id, version, body)
        assert got is None or ("ok", _plain(got)) == expected


@settings(max_examples=examples(400))
@given(st.sampled_from(VERSIONS), _edges(*INT32), _response)
def test_response_twins_agree(version: int, correlation_id: int, body: dict[str, Any]
                              ) -> None:
    _same_response(correlation_id, version, body)


@pytest.mark.parametrize("version", VERSIONS)
def test_response_twin_answers_the_handlers_shapes(version: int) -> None:
    """What handlers/produce.py writes: the twin encodes it (no fallback on the hot
    path), byte for byte as the reference."""
    ok = {"index": 3, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1,
          "log_start_offset": 0}
    failed = {"index": 4, "error_code": 87, "base_offset": -1, "log_append_time_ms": -1,
              "log_start_offset": 0, "error_message": "bad — record"}
    body = {"responses": [{"name": "small", "partition_responses": [ok, failed]}],
            "throttle_time_ms": 0}
    _same_response(5, version, body)
    if codec_kernels is not None:
        assert codec_kernels.encode_produce_response(5, version, body) is not None


@pytest.mark.parametrize("body", [None, [], "x", {"responses": [None]},
                                  {"responses": [{"name": None}]},
                                  {"responses": [{"name": "t", "partition_responses": [7]}]}])
def test_response_twins_agree_on_bodies_that_are_not_dicts(body: Any) -> None:
    for version in VERSIONS:
        _same_response(1, version, body)


def test_response_twin_grows_for_big_responses_and_shrinks_after() -> None:
    """A response of thousands of partitions (its buffer grows past 64 KiB), then small
    ones again: each byte for byte as the reference."""
    big = {"responses": [{"name": f"topic-{t}", "partition_responses": [
        {"index": p, "error_code": 0, "base_offset": p * 1000, "log_append_time_ms": -1,
         "log_start_offset": 0, "error_message": "m" * (p % 7)} for p in range(1500)]}
        for t in range(3)], "throttle_time_ms": 0}
    small = {"responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 0, "base_offset": 9}]}], "throttle_time_ms": 3}
    for version in (HI, 7, 0):
        for body in (big, small, big, small):
            _same_response(11, version, body)
