"""The log's compiled kernel (`_log_kernels.pyx`, Cython): the produce path's batch
validation of one plain batch, picked by log/validator.py (`validate_batches`), whose
pure function stays the definition (and the fallback): the twin declines what is not the
plain case and the reference decides (tests/log/test_validator_kernel.py).
record/_accel.py's switch applies: KAFKACTL_NO_EXTENSIONS=1 forces pure Python.

`STATUS` says which of all the kernel modules are in use (record's, protocol's and this
one; log is the lowest layer that sees them all): `kafkactl --version` prints it and the
broker logs it at start.
"""

from __future__ import annotations

from kafkactl.protocol import kernels as protocol_kernels
from kafkactl.record import _accel
from kafkactl.record._accel import load_extension

__all__ = ["REASON", "STATUS", "log_kernels"]

API = 2  # must equal _log_kernels.pyx's API: a module built from an older .pyx is not used


log_kernels, REASON = load_extension("kafkactl.log._log_kernels", API)


def _status() -> str:
    """"compiled kernels: yes", "no (why)", or "partly" with the modules not in use."""
    reasons = {"record": _accel.REASON, "protocol": protocol_kernels.REASON, "log": REASON}
    missing = {name: why for name, why in reasons.items() if why}
    if not missing:
        return "compiled kernels: yes"
    if len(missing) == len(reasons):
        return f"compiled kernels: no ({_accel.REASON})"
    return "compiled kernels: partly (" + "; ".join(
        f"{name}'s not in use: {why}" for name, why in missing.items()) + ")"


STATUS = _status()
