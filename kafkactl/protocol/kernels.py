"""The protocol's compiled kernels (`_codec_kernels.pyx`, Cython): the Produce request
decoder and response encoder, picked by protocol/codec.py for the broker's Produce routes.
The generated codecs stay the definition (and the fallback); the twins decline what is
not the plain shape and the reference decides (tests/protocol/test_produce_kernel.py).
record/_accel.py's switch applies: KAFKACTL_NO_EXTENSIONS=1 forces pure Python.
"""

from __future__ import annotations

from types import ModuleType

from kafkactl.record._accel import NO_EXTENSIONS

__all__ = ["REASON", "codec_kernels"]

API = 1  # must equal _codec_kernels.pyx's API: a module built from an older .pyx is not used


def _load() -> tuple[ModuleType | None, str]:
    if NO_EXTENSIONS:
        return None, "KAFKACTL_NO_EXTENSIONS is set"
    try:
        from kafkactl.protocol import _codec_kernels
    except ImportError as e:
        return None, f"the extension is not built: {e}; reinstall with a C compiler"
    if getattr(_codec_kernels, "API", None) != API:
        return None, "the extension was built from another version: reinstall kafkactl"
    return _codec_kernels, ""


codec_kernels, REASON = _load()
