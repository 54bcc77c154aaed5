"""The protocol's compiled kernels (`_codec_kernels.pyx`, Cython): the Produce request
decoder and response encoder, the Metadata response encoder and the Fetch request
decoder and response encoder (tests/protocol/test_fetch_kernel.py), picked by
protocol/codec.py for the broker's routes (tests/protocol/test_metadata_kernel.py).
The generated codecs stay the definition (and the fallback); the twins decline what is
not the plain shape and the reference decides (tests/protocol/test_produce_kernel.py).
record/_accel.py's switch applies: KAFKACTL_NO_EXTENSIONS=1 forces pure Python.
"""

from __future__ import annotations

from kafkactl.record._accel import load_extension

__all__ = ["REASON", "codec_kernels"]

API = 4  # must equal _codec_kernels.pyx's API: a module built from an older .pyx is not used


codec_kernels, REASON = load_extension("kafkactl.protocol._codec_kernels", API)
