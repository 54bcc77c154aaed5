"""Tests that watch the pure-Python framing path's own steps (test_framing.py's `walks` spy:
which records the columns prove and which the walk does) run on that path, compiled kernels
or not; tests/record/test_kernels.py proves the compiled path equal to it."""

from __future__ import annotations

import pytest

from kafkactl.record import framing


@pytest.fixture(autouse=True)
def _pure_framing_for_spies(request: pytest.FixtureRequest,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    if "walks" in request.fixturenames:
        monkeypatch.setattr(framing, "kernels", None)
        monkeypatch.setattr(framing, "_runs", framing._column_runs)
        monkeypatch.setattr(framing, "_walk", framing._walk_py)
