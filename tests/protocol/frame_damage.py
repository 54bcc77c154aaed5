"""One way the compiled decoders' parity tests damage a valid request frame (Hypothesis):
cut it, flip a byte, insert or append bytes, or set a byte to a value that makes a lying
length, a null marker or an overlong varint. The twin and the reference must then agree."""

from __future__ import annotations

from hypothesis import strategies as st


def damaged(frame: bytearray, data: st.DataObject) -> bytearray:
    """`frame` damaged one way, drawn from `data` (past its 8-byte request header)."""
    kind = data.draw(st.sampled_from(["cut", "flip", "insert", "trail", "set"]))
    at = data.draw(st.integers(8, max(8, len(frame))))
    if kind == "cut":
        frame = frame[:at]
    elif kind == "flip" and at < len(frame):
        frame[at] ^= data.draw(st.integers(1, 255))
    elif kind == "insert":
        frame[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    elif kind == "trail":
        frame += data.draw(st.binary(min_size=1, max_size=6))
    elif at < len(frame):  # a lying length, a null marker, an overlong varint
        frame[at] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return frame
