"""`kafkactl quotas list` tells the default user apart from a user literally named
"<default>" (Kafka stores it as %3Cdefault%3E): the literal name is shown quoted. Real
broker, real CLI."""

from __future__ import annotations

from tests import zygote
from tests.conftest import BrokerProcess


def test_a_user_named_default_is_not_the_default_user(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    for args in (["--user", "<default>", "-c", "producer_byte_rate=1111"],
                 ["--user-default", "-c", "producer_byte_rate=2222"]):
        r = zygote.run(["quotas", "add", *args, "-b", b], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    try:
        r = zygote.run(["quotas", "list", "-b", b], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rows = {line.split()[0]: line.split()[2] for line in r.stdout.splitlines()[1:]
                if line.strip()}
        assert (rows.get("'<default>'"), rows.get("<default>")) == ("1111", "2222"), r.stdout
    finally:
        for args in (["--user", "<default>"], ["--user-default"]):
            zygote.run(["quotas", "remove", *args, "-c", "producer_byte_rate", "-b", b],
                       text=True, timeout=60)
