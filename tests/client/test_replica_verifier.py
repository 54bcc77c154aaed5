"""The replica comparison of `kafkactl cluster verify-replicas` at its edges."""

from __future__ import annotations

from kafkactl.client.replica_verifier import _first_difference


def test_identical_logs_have_no_difference() -> None:
    a = [(0, 9, 111), (10, 19, 222)]
    assert _first_difference(a, list(a)) is None
    assert _first_difference([], []) is None


def test_a_different_crc_or_boundary_is_reported_at_its_offset() -> None:
    a = [(0, 9, 111), (10, 19, 222)]
    assert _first_difference(a, [(0, 9, 111), (10, 19, 999)]) == 10
    assert _first_difference(a, [(0, 4, 111), (5, 19, 222)]) == 0


def test_a_missing_tail_is_reported_where_it_starts() -> None:
    a = [(0, 9, 111), (10, 19, 222)]
    assert _first_difference(a, a[:1]) == 10
    assert _first_difference(a[:1], a) == 10
    assert _first_difference([], a) == 0
