"""Reading a topic back with kcat, record by record, whatever bytes the records hold."""

from __future__ import annotations

import subprocess

KCAT_QUICK_EOF = ("-X", "fetch.wait.max.ms=10")  # -e notices the end sooner

Record = tuple[int, bytes | None, bytes | None]


def kcat_records(bootstrap: str, topic: str, timeout: float = 120) -> list[Record]:
    """(partition, key, value) of every record, read by kcat and framed by the lengths it
    prints (-1: null), so any byte may appear in a key or value."""
    r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q",
                        *KCAT_QUICK_EOF, "-f", "%p %K %S:%k%s\n"],
                       capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    out, pos = r.stdout, 0
    got: list[Record] = []
    while pos < len(out):
        head_end = out.index(b":", pos)
        p, klen, vlen = map(int, out[pos:head_end].split())
        pos = head_end + 1
        key = None if klen < 0 else out[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos:pos + vlen]
        pos += max(vlen, 0)
        assert out[pos:pos + 1] == b"\n"
        pos += 1
        got.append((p, key, value))
    return got
