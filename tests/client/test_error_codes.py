"""The client's error-code sets: ErrorCode members, the retriable ones inside
protocol.errors.RETRIABLE_CODES, and the same codes the client always handled."""

from __future__ import annotations

from kafkactl.client import errors
from kafkactl.protocol.errors import RETRIABLE_CODES, ErrorCode

NOT_RETRIABLE_IN_KAFKA = {ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                          ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}


def test_sets_hold_the_codes_the_client_always_handled() -> None:
    assert set(map(int, errors.METADATA_NOT_READY)) == {3, 5, 6, 9}
    assert set(map(int, errors.STALE_LEADER)) == {3, 5, 6, 74, 75}
    assert set(map(int, errors.PRODUCE_REFRESH_METADATA)) == {3, 5, 6, 13, 74, 75}
    assert set(map(int, errors.PRODUCE_RETRIABLE)) == {
        3, 5, 6, 7, 13, 14, 15, 19, 20, 45, 56, 74, 75, 76}
    assert set(map(int, errors.COORDINATOR_RETRIABLE)) == {14, 15, 16}
    # FENCED_INSTANCE_ID (82) was among them: it is fatal, no rejoin (consume -G and
    # mirror stop on it)
    assert set(map(int, errors.REJOIN_GROUP)) == {22, 25, 27}


def test_sets_are_error_codes_and_retriability_comes_from_the_table() -> None:
    for s in (errors.METADATA_NOT_READY, errors.STALE_LEADER,
              errors.PRODUCE_REFRESH_METADATA, errors.PRODUCE_RETRIABLE,
              errors.COORDINATOR_RETRIABLE, errors.REJOIN_GROUP):
        assert isinstance(s, frozenset)
        assert all(isinstance(c, ErrorCode) for c in s)
    for s in (errors.METADATA_NOT_READY, errors.STALE_LEADER,
              errors.PRODUCE_REFRESH_METADATA, errors.COORDINATOR_RETRIABLE):
        assert s <= RETRIABLE_CODES
    assert errors.PRODUCE_RETRIABLE - RETRIABLE_CODES == NOT_RETRIABLE_IN_KAFKA
    assert not errors.REJOIN_GROUP & RETRIABLE_CODES


def test_kafka_retriable_share_session_codes() -> None:
    assert {ErrorCode.SHARE_SESSION_NOT_FOUND,
            ErrorCode.INVALID_SHARE_SESSION_EPOCH} <= RETRIABLE_CODES
