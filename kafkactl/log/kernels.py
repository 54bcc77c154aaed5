"""The log's compiled kernel (`_log_kernels.pyx`, Cython): the produce path's batch
validation of one plain batch, picked by log/validator.py (`validate_batches`), whose
pure function stays the definition (and the fallback): the twin declines what is not the
plain case and the reference decides (tests/log/test_validator_kernel.py).
record/_accel.py's switch applies: KAFKACTL_NO_EXTENSIONS=1 forces pure Python.
"""

from __future__ import annotations

from types import ModuleType

from kafkactl.record._accel import NO_EXTENSIONS

__all__ = ["REASON", "log_kernels"]

API = 1  # must equal _log_kernels.pyx's API: a module built from an older .pyx is not used


def _load() -> tuple[ModuleType | None, str]:
    if NO_EXTENSIONS:
        return None, "KAFKACTL_NO_EXTENSIONS is set"
    try:
        from kafkactl.log import _log_kernels
    except ImportError as e:
        return None, f"the extension is not built: {e}; reinstall with a C compiler"
    if getattr(_log_kernels, "API", None) != API:
        return None, "the extension was built from another version: reinstall kafkactl"
    return _log_kernels, ""


log_kernels, REASON = _load()
