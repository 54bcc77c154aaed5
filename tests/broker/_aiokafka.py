"""aiokafka import helper (kept as one place the tests import aiokafka from)."""

from __future__ import annotations

from types import ModuleType


def import_aiokafka() -> ModuleType:
    import aiokafka

    return aiokafka
