"""Import aiokafka even though tests/packaging/ shadows PyPI's `packaging` on sys.path.

pytest's default import mode puts tests/ on sys.path (tests/ has no __init__.py), so the
test package tests/packaging/ hides the real `packaging` that aiokafka imports. Import the
real one first with tests/ taken off the path for a moment.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

TESTS_DIR = str(Path(__file__).resolve().parents[1])


def import_aiokafka() -> ModuleType:
    shadow = sys.modules.get("packaging")
    if shadow is None or str(getattr(shadow, "__file__", "")).startswith(TESTS_DIR):
        saved_path = list(sys.path)
        saved_mods = {k: v for k, v in sys.modules.items()
                      if k == "packaging" or k.startswith("packaging.")}
        for k in saved_mods:
            del sys.modules[k]
        sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != TESTS_DIR]
        try:
            import packaging.version  # noqa: F401
        finally:
            sys.path[:] = saved_path
    import aiokafka

    return aiokafka
