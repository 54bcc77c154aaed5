"""`kafkactl consume` and `dump-log` over header names and values of any bytes, as kcat
(librdkafka) writes them and Java reads them; -c -1; an explicit -o outside the log and
auto.offset.reset; --print-offsets' help; -K separators with a `%` or in a Latin-1 locale.

Each output is checked in both paths: the compiled kernels and the pure Python reference
(KAFKACTL_NO_EXTENSIONS=1), end to end through a real broker and real kcat."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess

KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
PATHS = ["compiled", "pure"]


def kafkactl(*args: str, input: bytes | None = None, path: str = "compiled",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    e = {k: v for k, v in os.environ.items() if k != "KAFKACTL_NO_EXTENSIONS"}
    if path == "pure":
        e["KAFKACTL_NO_EXTENSIONS"] = "1"
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], input=input,
                          capture_output=True, timeout=120, env=e)


def kcat(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    r = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r


def kcat_produce(b: BrokerProcess, topic: str, value: bytes, *headers: bytes) -> None:
    """One record with these `name=value` headers, written by kcat: its header names need
    not be UTF-8 (librdkafka takes any bytes, Java's consumer reads them)."""
    args = ["-b", b.bootstrap, "-P", "-t", topic]
    for h in headers:
        args += ["-H", os.fsdecode(h)]
    kcat(*args, input=value + b"\n")


def _json_lines(out: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


@needs_kcat
@pytest.mark.parametrize("path", PATHS)
def test_a_header_name_that_is_not_utf8_is_read_in_every_output(
        module_broker: BrokerProcess, path: str) -> None:
    """The record kcat writes with -H $'h\\xe9=v' (its CRC valid) reads like any other:
    %h prints the name's own bytes (as kcat does), -J base64s it and flags it, -G reads
    past it, dump-log prints it as Java does (U+FFFD). Before, every one of them failed
    with "header key is not UTF-8 ... the data is damaged"."""
    b = module_broker
    topic = f"hk-{path}"
    kcat_produce(b, topic, b"a", b"h\xe9=v", b"x=\xe9", b"n")
    kcat_produce(b, topic, b"b", b"plain=1")
    base = ["-t", topic, "-b", b.bootstrap, "-e", "-q", "-o", "earliest"]

    r = kafkactl("consume", *base, path=path)
    assert (r.returncode, r.stdout) == (0, b"a\nb\n"), r.stderr
    r = kafkactl("consume", *base, "-f", "%h|%s\\n", path=path)
    assert r.returncode == 0, r.stderr
    want = kcat("-b", b.bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%h|%s\n").stdout
    assert r.stdout == want == b"h\xe9=v,x=\xe9,n=NULL|a\nplain=1|b\n"

    r = kafkactl("consume", *base, "-J", path=path)
    assert r.returncode == 0, r.stderr
    first, second = _json_lines(r.stdout)
    assert first["headers"] == ["aOk=", "v", "x", "6Q==", "n", None]
    assert first["headers_encoding"] == ["base64", None, None, "base64", None, None]
    assert base64.b64decode("aOk=") == b"h\xe9"
    assert second["headers"] == ["plain", "1"] and "headers_encoding" not in second

    r = kafkactl("consume", "-t", topic, "-b", b.bootstrap, "-e", "-q", "-G", f"g-{path}",
                 "-X", "auto.offset.reset=earliest", path=path)
    assert (r.returncode, r.stdout) == (0, b"a\nb\n"), r.stderr

    segment = b.data_dir / f"{topic}-0" / "00000000000000000000.log"
    r = kafkactl("dump-log", "--print-data-log", str(segment), path=path)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")
    assert "headerKeys: [h\ufffd,x,n] payload: a" in text, text
    r = kafkactl("dump-log", "--print-data-log", "--json", str(segment), path=path)
    assert r.returncode == 0, r.stderr
    records = [o for o in _json_lines(r.stdout) if o.get("type") == "record"]
    assert [o["header_keys"] for o in records] == [["h\ufffd", "x", "n"], ["plain"]]


@needs_kcat
@pytest.mark.parametrize("path", PATHS)
def test_json_tells_a_base64_header_value_from_text_that_looks_like_it(
        module_broker: BrokerProcess, path: str) -> None:
    """A header value b'\\xe9' and a value "6Q==" (its base64) printed the same under -J;
    headers_encoding tells them apart (kcat -J prints the raw byte: not JSON)."""
    b = module_broker
    topic = f"hv-{path}"
    kcat_produce(b, topic, b"v", b"h=\xe9")
    kcat_produce(b, topic, b"v", b"h=6Q==")
    r = kafkactl("consume", "-t", topic, "-b", b.bootstrap, "-e", "-q", "-o", "earliest",
                 "-J", path=path)
    assert r.returncode == 0, r.stderr
    binary, text = _json_lines(r.stdout)
    assert binary["headers"] == text["headers"] == ["h", "6Q=="]
    assert binary["headers_encoding"] == [None, "base64"]
    assert "headers_encoding" not in text


def _ten(b: BrokerProcess, topic: str) -> None:
    r = kafkactl("produce", "-t", topic, "-b", b.bootstrap, "-q",
                 input=b"".join(b"%d\n" % i for i in range(1, 11)))
    assert r.returncode == 0, r.stderr


def test_max_messages_minus_one_is_no_limit(module_broker: BrokerProcess) -> None:
    """-c -1 is kafka-console-consumer's default (no limit) and kcat's; before, it printed
    nothing. Other negatives are a usage error."""
    b = module_broker
    _ten(b, "cmax")
    base = ["-t", "cmax", "-b", b.bootstrap, "-e", "-q", "-o", "earliest"]
    r = kafkactl("consume", *base, "-c", "-1")
    assert (r.returncode, r.stdout.split()) == (0, [b"%d" % i for i in range(1, 11)]), r.stderr
    r = kafkactl("consume", *base, "-c", "3")
    assert r.stdout.split() == [b"1", b"2", b"3"]
    r = kafkactl("consume", *base, "-c", "-2")
    assert r.returncode == 2 and b"-c/--max-messages -2" in r.stderr, r.stderr
    if KCAT is not None:
        k = kcat("-b", b.bootstrap, "-C", "-t", "cmax", "-e", "-q", "-c", "-1")
        assert len(k.stdout.split()) == 10


def test_an_offset_outside_the_log_follows_auto_offset_reset(
        module_broker: BrokerProcess) -> None:
    """After delete-records --before 5 the log is 5..10: -o 2 and -o 99 are offsets it does
    not have, which go where auto.offset.reset says (earliest, latest, none: an error), as
    in kcat and Java's consumer; without -X, latest (the consumer's default, kcat's too)."""
    b = module_broker
    topic = "oreset"
    _ten(b, topic)
    r = kafkactl("delete-records", "-t", topic, "--before", "5", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    base = ["consume", "-t", topic, "-b", b.bootstrap, "-e", "-q"]
    tail = [b"6", b"7", b"8", b"9", b"10"]
    cases = [("2", "latest", []), ("2", "earliest", tail), ("99", "earliest", tail),
             ("99", "latest", []), ("2", None, []), ("7", "earliest", [b"8", b"9", b"10"]),
             ("7", "none", [b"8", b"9", b"10"]), ("5", "latest", tail), ("10", "earliest", [])]
    for offset, reset, want in cases:
        prop = ["-X", f"auto.offset.reset={reset}"] if reset else []
        r = kafkactl(*base, "-o", offset, *prop)
        assert (r.returncode, r.stdout.split()) == (0, want), (offset, reset, r.stderr)
        out_of_range = not 5 <= int(offset) <= 10
        assert (b"out of range" in r.stderr) == out_of_range, (offset, reset, r.stderr)
        if KCAT is not None and reset != "none":  # (librdkafka's name for it: error)
            k = kcat("-b", b.bootstrap, "-C", "-t", topic, "-e", "-q", "-o", offset, *prop)
            assert k.stdout.split() == want, (offset, reset, k.stdout)
    for offset in ("2", "99"):
        r = kafkactl(*base, "-o", offset, "-X", "auto.offset.reset=none")
        assert r.returncode == 1 and r.stdout == b"", r.stderr
        assert (f"offset {offset} is out of range for {topic}-0 (its log is 5..10) and "
                "auto.offset.reset=none").encode() in r.stderr, r.stderr


def test_print_offsets_prints_the_bare_offset_and_its_help_says_so(
        module_broker: BrokerProcess) -> None:
    b = module_broker
    _ten(b, "poff")
    r = kafkactl("consume", "-t", "poff", "-b", b.bootstrap, "-e", "-q", "-o", "-1",
                 "--print-offsets")
    assert (r.returncode, r.stdout) == (0, b"9\t10\n"), r.stderr
    r = kafkactl("consume", "--help", env={"COLUMNS": "1000"})
    line = next(x for x in r.stdout.decode().splitlines() if "--print-offsets  " in x)
    assert "the bare offset" in line and "Offset:OFFSET" in line, line


@pytest.mark.parametrize("path", PATHS)
def test_a_key_separator_with_a_percent_sign_is_literal(module_broker: BrokerProcess,
                                                       path: str) -> None:
    """-K's SEP is printed as it is: a % in it is not a -f token (before, -K '%' made the
    format %k%%s and printed `key%s`, the value lost)."""
    b = module_broker
    topic = f"kpct-{path}"
    r = kafkactl("produce", "-t", topic, "-b", b.bootstrap, "-q", "-K", ":",
                 input=b"k1:v1\nk2:v2\n")
    assert r.returncode == 0, r.stderr
    base = ["consume", "-t", topic, "-b", b.bootstrap, "-e", "-q", "-o", "earliest"]
    for sep, want in (("%", b"k1%v1\nk2%v2\n"), ("%s", b"k1%sv1\nk2%sv2\n"),
                      ("%%", b"k1%%v1\nk2%%v2\n")):
        r = kafkactl(*base, "-K", sep, path=path)
        assert (r.returncode, r.stdout) == (0, want), (sep, r.stderr)
        r = kafkactl(*base, "-K", sep, "--print-offsets", path=path)
        s = sep.encode()
        assert (r.returncode, r.stdout) == (0, b"0" + s + b"k1" + s + b"v1\n1" + s + b"k2"
                                            + s + b"v2\n"), (sep, r.stderr)


def _latin1_locale(tmp: Path) -> dict[str, str] | None:
    """LOCPATH/LC_ALL of an en_US.ISO-8859-1 locale made with localedef (None: cannot)."""
    localedef = shutil.which("localedef")
    if localedef is None:
        return None
    loc = tmp / "loc"
    loc.mkdir(exist_ok=True)
    subprocess.run([localedef, "-i", "en_US", "-f", "ISO-8859-1",
                    str(loc / "en_US.ISO-8859-1")], capture_output=True, timeout=120)
    if not (loc / "en_US.ISO-8859-1").exists():
        return None
    return {"LOCPATH": str(loc), "LC_ALL": "en_US.ISO-8859-1", "PYTHONUTF8": "0"}


@pytest.mark.parametrize("path", PATHS)
def test_separator_bytes_in_a_latin1_locale_are_the_arguments_bytes(
        module_broker: BrokerProcess, tmp_path: Path, path: str) -> None:
    """In a Latin-1 locale the argument byte \\xe9 of -K and -f is printed as \\xe9 (the
    argument's own bytes, os.fsencode), not as its UTF-8 re-encoding \\xc3\\xa9."""
    env = _latin1_locale(tmp_path)
    if env is None:
        pytest.skip("no localedef to make a Latin-1 locale")
    b = module_broker
    topic = f"l1-{path}"
    r = kafkactl("produce", "-t", topic, "-b", b.bootstrap, "-q", "-K", ":",
                 input=b"k:v\n")
    assert r.returncode == 0, r.stderr
    base = ["consume", "-t", topic, "-b", b.bootstrap, "-e", "-q", "-o", "earliest"]
    sep = os.fsdecode(b"\xe9")  # the byte as this (UTF-8) process passes it on
    r = kafkactl(*base, "-K", sep, path=path, env=env)
    assert (r.returncode, r.stdout) == (0, b"k\xe9v\n"), r.stderr
    r = kafkactl(*base, "-f", os.fsdecode(b"%k\xe9%s\\n"), path=path, env=env)
    assert (r.returncode, r.stdout) == (0, b"k\xe9v\n"), r.stderr
    r = kafkactl(*base, "-K", sep, "--print-offsets", path=path, env=env)
    assert (r.returncode, r.stdout) == (0, b"0\xe9k\xe9v\n"), r.stderr
