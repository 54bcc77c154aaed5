"""consume's output options: -f and -J each say all of how a record prints, so they refuse
each other and -K / --print-offsets (which shape the default output) rather than silently
ignore one; --print-offsets puts -K's separator after the offset (kafka-console-consumer's
print.offset with key.separator); --help says where consume starts by default and what
its exit status means."""

from __future__ import annotations

import subprocess

import pytest

from tests import zygote
from tests.conftest import BrokerProcess

REFUSED = {
    ("-J", "-f", "%s\\n"): "-f/--format and -J/--json both say how a record prints: give one",
    ("-f", "%s\\n", "-K", ":"): "-K/--key-separator does not go with -f/--format: the format "
                                "says where the key goes (-f '%k SEP%s\\n')",
    ("-f", "%s\\n", "--print-offsets"): "--print-offsets does not go with -f/--format: put %o "
                                        "in the format",
    ("-J", "-K", ":"): "-K/--key-separator does not go with -J/--json: its objects have the "
                       "key and the offset",
    ("-J", "--print-offsets"): "--print-offsets does not go with -J/--json: its objects have "
                               "the key and the offset",
}


def kafkactl(*args: str, input: str = "") -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), input=input, text=True, timeout=60)


@pytest.mark.parametrize("args", list(REFUSED))
def test_conflicting_output_options_are_refused(args: tuple[str, ...]) -> None:
    r = kafkactl("consume", "-t", "t", "-b", "127.0.0.1:1", "-e", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip() == f"error: {REFUSED[args]}"


def test_print_offsets_puts_the_key_separator_after_the_offset(
        module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    r = kafkactl("produce", "-t", "offsets-sep", "-K", ":", "-b", b, "-q",
                 input="k1:v1\nk2:v=2\n")
    assert r.returncode == 0, r.stderr
    r = kafkactl("consume", "-t", "offsets-sep", "-o", "earliest", "-e", "-q", "-b", b,
                 "--print-offsets", "-K", "=")
    assert r.returncode == 0 and r.stdout == "0=k1=v1\n1=k2=v=2\n", r.stderr
    r = kafkactl("consume", "-t", "offsets-sep", "-o", "earliest", "-e", "-q", "-b", b,
                 "--print-offsets")
    assert r.returncode == 0 and r.stdout == "0\tv1\n1\tv=2\n", r.stderr


def test_help_says_the_default_start_and_the_exit_status() -> None:
    r = kafkactl("consume", "--help")
    text = " ".join(r.stdout.replace("│", " ").split())
    assert "Default: latest, the records produced from now on, as kafka-console-consumer" \
        in text, text
    assert "Exit status: 0 when it stops at -e, -c, --timeout-ms, on Ctrl-C or SIGTERM" \
        in text, text
    assert "OFFSET SEP KEY SEP VALUE" in text, text
