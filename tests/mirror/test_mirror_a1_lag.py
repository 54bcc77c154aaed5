"""The status's lag of a partition nothing was copied from since it was assigned (an idle,
fully mirrored topic after a rebalance) is known: the target has everything before where
the member started reading it (the group's committed offset). It was null until new
records came. Real brokers, real `kafkactl mirror` processes in one group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.mirror.helpers import FAST, create_topics, mirrored, produce, start_mirror
from tests.polling import wait_until


def _lag_known(st: dict[str, Any] | None) -> bool:
    topic = (st or {}).get("topics", {}).get("lagt")
    return bool(topic and topic["partitions"] > 0 and topic["lag"] is not None)


def test_lag_of_idle_partitions_after_a_rebalance_is_zero(broker_factory: Any,
                                                          tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"lagt": 4})
    produce(source.bootstrap, "lagt", 0, 400, partitions=4)
    first = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "lagt",
                         "-G", "g", name="first")
    second = None
    try:
        wait_until(lambda: mirrored(first, 400) and (first.status() or {}).get("lag") == 0,
                   60, "everything mirrored, lag 0")
        # a second member joins: every partition is revoked and assigned again, and
        # nothing is left to copy from any of them
        second = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "lagt",
                              "-G", "g", name="second")
        wait_until(lambda: _lag_known(second.status()) or second.proc.poll() is not None,
                   60, "the second member's lag")
        assert second.proc.poll() is None, second.log()
        st = second.status()
        assert st is not None and st["lag"] == 0 and st["topics"]["lagt"]["lag"] == 0, st
        assert st["mirrored"] == 0, st
        wait_until(lambda: _lag_known(first.status())
                   and (first.status() or {})["topics"]["lagt"]["partitions"] < 4, 60,
                   "the first member's lag after the rebalance")
        st = first.status()
        assert st is not None and st["topics"]["lagt"]["lag"] == 0, st
    finally:
        first.kill()
        if second is not None:
            second.kill()
