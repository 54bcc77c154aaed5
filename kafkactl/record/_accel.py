"""The one switch between the compiled kernels and the pure-Python reference.

`kafkactl.record._kernels` (Cython, built from `_kernels.pyx` by `pip install`) holds
compiled twins of the per-record loops; each pure-Python module picks its twin here and
keeps its own function as the definition (and the fallback). KAFKACTL_NO_EXTENSIONS=1 (any
value but empty or 0) forces pure Python. `kafkactl --version` prints `STATUS`, the broker
logs it at start.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["ACCELERATED", "NO_EXTENSIONS", "REASON", "STATUS", "kernels"]

API = 8  # must equal _kernels.pyx's API: a module built from an older .pyx is not used

NO_EXTENSIONS = os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0")


def _load() -> tuple[ModuleType | None, str]:
    if NO_EXTENSIONS:
        return None, "KAFKACTL_NO_EXTENSIONS is set"
    try:
        from kafkactl.record import _kernels
    except ImportError as e:
        return None, f"the extension is not built: {e}; reinstall with a C compiler"
    if getattr(_kernels, "API", None) != API:
        return None, "the extension was built from another version: reinstall kafkactl"
    return _kernels, ""


kernels, REASON = _load()
ACCELERATED = kernels is not None
STATUS = "compiled kernels: yes" if ACCELERATED else f"compiled kernels: no ({REASON})"
