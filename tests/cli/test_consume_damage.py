"""`kafkactl consume` over a log with a hole: the active segment cut short under the running
broker, then appended to, leaves zeros between the last whole batches and the new ones.
Every record before the damage is printed, then the error names the partition and the
first offset not printed (the offset after the last good batch); a group commits exactly
what was printed. The tester's case: 200 records of ~1000 B in segments of 50000 bytes,
the segment of offset 152 cut at 30000 bytes (inside its second batch, 171-189)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkactl.record.memory_records import iter_batches
from tests.conftest import BrokerProcess
from tests.polling import wait_until

RECORDS = "".join(f"{i:04d}" + "x" * 996 + "\n" for i in range(200)).encode()
MORE = "".join(f"n{i:03d}\n" for i in range(10)).encode()  # fits the segment still


def kafkactl(*args: str, input: bytes | None = None, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], input=input,
                          capture_output=True, timeout=90, env={**os.environ, **(env or {})})


def _hole(b: BrokerProcess, topic: str, cut: int | None) -> tuple[Path, list[tuple[int, int]]]:
    """The tester's topic with the segment of offset 152 cut at `cut` bytes (None: at the
    end of its first batch) while the broker runs, then 10 more records appended after the
    hole. The segment's batches (first, last offset) as written."""
    r = kafkactl("topics", "create", "-t", topic, "-b", b.bootstrap, "--config",
                 "segment.bytes=50000")
    assert r.returncode == 0, r.stderr
    r = kafkactl("produce", "-t", topic, "-b", b.bootstrap, "-q", "--batch-size", "20000",
                 input=RECORDS)
    assert r.returncode == 0, r.stderr
    seg = b.data_dir / f"{topic}-0" / "00000000000000000152.log"
    wait_until(lambda: seg.exists() and any(x.last_offset == 199 for x in
                                            iter_batches(seg.read_bytes())), 10, "offset 199")
    batches = list(iter_batches(seg.read_bytes()))
    layout = [(x.base_offset, x.last_offset) for x in batches]
    size = seg.stat().st_size
    os.truncate(seg, batches[0].size if cut is None else cut)
    r = kafkactl("produce", "-t", topic, "-b", b.bootstrap, "-q", "--batch-size", "20000",
                 input=MORE)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: seg.stat().st_size > size, 10, "the records after the hole")
    return seg, layout


def _consume(b: BrokerProcess, topic: str, *args: str, env: dict[str, str] | None = None
             ) -> tuple[list[int], str]:
    r = kafkactl("consume", "-b", b.bootstrap, "-t", topic, "-e", *args, env=env)
    err = r.stderr.decode()
    assert r.returncode == 1, (args, r.stdout[-300:], err)
    assert "Traceback" not in err, err
    return [int(x.split()[0][:4]) for x in r.stdout.decode().splitlines()], err


PURE = {"KAFKACTL_NO_EXTENSIONS": "1"}  # the pure-Python paths, not the compiled kernel


def test_the_testers_case(broker: BrokerProcess) -> None:
    """Cut inside the batch 171-189: 152-170 print after 150, 151; the batch at 171 fails
    its CRC check. Unchecked, the records of it that decode print, then the first that
    does not is named."""
    seg, layout = _hole(broker, "f", 30000)
    assert layout == [(152, 170), (171, 189), (190, 199)]
    for env in (None, PURE):
        for fmt in ("%o\n", "%o %s\n"):
            got, err = _consume(broker, "f", "-o", "150", "-f", fmt, env=env)
            assert got == list(range(150, 171)), (fmt, env)
            assert "error: f-0: the batch at offset 171 fails its CRC check" in err, err
            assert "nothing from offset 171 on is printed" in err, err
        got, err = _consume(broker, "f", "-o", "150", "-f", "%o\n", "-X", "check.crcs=false",
                            env=env)
        last = got[-1]
        assert got == list(range(150, last + 1)) and 171 <= last < 189, got
        assert (f"error: f-0: the record at offset {last + 1} (in the batch at offset 171) "
                "cannot be read") in err, err


@pytest.mark.parametrize("env", [None, PURE], ids=["kernel", "pure"])
def test_a_hole_after_a_whole_batch(broker: BrokerProcess, env: dict[str, str] | None
                                    ) -> None:
    """Cut at the end of the batch 152-170: no batch fails its CRC, the header after it
    cannot be framed. Every output mode, CRCs checked or not, prints up to 170 and names
    171; a group commits 171."""
    _seg, layout = _hole(broker, "g", None)
    assert layout[0] == (152, 170)
    message = ("error: g-0: the data at offset 171 cannot be read: message size 0 at "
               "position 19232 is smaller than the minimum (the data is damaged; nothing "
               "from offset 171 on is printed)")
    for args in (["-f", "%o\n"], ["-f", "%o %s %h\n"], [], ["-J"],
                 ["-f", "%o\n", "-X", "check.crcs=false"]):
        got_out = kafkactl("consume", "-b", broker.bootstrap, "-t", "g", "-e", "-o", "150",
                           *args, env=env)
        assert got_out.returncode == 1, (args, got_out.stderr)
        err = got_out.stderr.decode()
        assert message in err, (args, err)
        lines = got_out.stdout.decode().splitlines()
        if args == ["-J"]:
            offsets = [json.loads(x)["offset"] for x in lines]
        elif args == []:
            offsets = [int(x[:4]) for x in lines]
        else:
            offsets = [int(x.split()[0]) for x in lines]
        assert offsets == list(range(150, 171)), (args, offsets)
    got, err = _consume(broker, "g", "-G", "dmg", "-X", "auto.offset.reset=earliest",
                        env=env)
    assert got == list(range(171)) and message in err, err
    r = kafkactl("offsets", "show", "-G", "dmg", "--json", "-b", broker.bootstrap)
    assert [row["current_offset"] for row in json.loads(r.stdout)] == [171]
