"""`kafkactl rebalance --partitions` with nothing to move says so in a sentence, with no
empty table (issue 30, item 10)."""

from __future__ import annotations

from tests import zygote
from tests.conftest import BrokerProcess


def test_nothing_to_move_is_a_sentence(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    assert zygote.run(["topics", "create", "-b", b, "-t", "still", "--partitions", "2"],
                      timeout=60).returncode == 0
    r = zygote.run(["rebalance", "--partitions", "-b", b], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Nothing to move: every partition's replicas are spread evenly over "
                        "the live brokers already.\n"), r.stdout
    assert "PARTITION" not in r.stdout and "Dry run" not in r.stderr
