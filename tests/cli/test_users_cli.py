"""`kafkactl users add` reads the password from stdin when stdin is not a terminal, without
getpass's warning (issue 30, item 10)."""

from __future__ import annotations

from tests import zygote
from tests.conftest import BrokerProcess


def test_password_from_stdin_without_a_warning(module_broker: BrokerProcess) -> None:
    r = zygote.run(["users", "add", "bob", "-b", module_broker.bootstrap],
                   input="bob-secret\n", text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and "getpass" not in r.stderr.lower(), r.stderr
    assert "User bob: SCRAM-SHA-256, SCRAM-SHA-512 credentials stored." in r.stdout
    r = zygote.run(["users", "list", "-b", module_broker.bootstrap], text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("bob\t"), (r.stdout, r.stderr)


def test_an_empty_password_on_stdin_is_an_error(module_broker: BrokerProcess) -> None:
    r = zygote.run(["users", "add", "carol", "-b", module_broker.bootstrap],
                   input="\n", text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr == "error: the password is empty: give --password, or the password on " \
                       "stdin\n", r.stderr
