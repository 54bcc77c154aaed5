"""The one switch between the compiled kernels and the pure-Python reference.

`kafkactl.record._kernels` (Cython, built from `_kernels.pyx` by `pip install`) holds
compiled twins of the per-record loops; each pure-Python module picks its twin here and
keeps its own function as the definition (and the fallback). KAFKACTL_NO_EXTENSIONS=1 (any
value but empty or 0) forces pure Python, here and for the other kernel modules
(protocol/kernels.py, log/kernels.py load theirs with `load_extension`). `STATUS` is the
record kernels'; log/kernels.py's `STATUS`, of all of them, is what `kafkactl --version`
prints and the broker logs at start.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["ACCELERATED", "NO_EXTENSIONS", "REASON", "STATUS", "kernels", "load_extension"]

API = 14  # must equal _kernels.pyx's API: a module built from an older .pyx is not used

NO_EXTENSIONS = os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0")


def load_extension(name: str, api: int) -> tuple[ModuleType | None, str]:
    """The compiled module `name` if it is built and from this version (its `API` equals
    `api`), else None and why (the switch, not built, or built from another version)."""
    if NO_EXTENSIONS:
        return None, "KAFKACTL_NO_EXTENSIONS is set"
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        return None, f"the extension is not built: {e}; reinstall with a C compiler"
    if getattr(module, "API", None) != api:
        return None, f"{name} was built from another version: reinstall kafkactl"
    return module, ""


kernels, REASON = load_extension("kafkactl.record._kernels", API)
ACCELERATED = kernels is not None
STATUS = "compiled kernels: yes" if ACCELERATED else f"compiled kernels: no ({REASON})"
