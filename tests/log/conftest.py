from __future__ import annotations

from pathlib import Path

import pytest

from tests.log.helpers import FakeTime


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"
