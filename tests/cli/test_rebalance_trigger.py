"""`kafkactl rebalance -G G --trigger`: a group in the middle of a rebalance with another
assignor than range (a describe names no protocol then) is triggered all the same; the
transient member leaves also when its own --timeout ends the wait; a --timeout that is
no number of seconds, and flags of the other mode (--partitions'), are usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests import zygote
from tests.conftest import BrokerProcess
from tests.groups.helpers import RawMember, subscription, wait_until

MODULE_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


class CooperativeMember(RawMember):
    """A member whose only assignor is cooperative-sticky (as confluent-kafka's with
    partition.assignment.strategy=cooperative-sticky)."""

    protocol = "cooperative-sticky"

    def join_body(self, member_id: str | None = None) -> dict[str, Any]:
        body = super().join_body(member_id)
        body["protocols"] = [{"name": "cooperative-sticky",
                              "metadata": subscription(self.topics)}]
        return body


def describe(bootstrap: str, group: str) -> Any:
    client = KafkaClient(bootstrap)
    try:
        return GroupAdmin(client).describe_group(group)
    finally:
        client.close()


def stable_member(bootstrap: str, group: str, **kw: Any) -> RawMember:
    m = CooperativeMember(bootstrap, group, ["rt"], **kw)
    assert m.join()["error_code"] == 0
    m.protocol = "cooperative-sticky"
    assert m.sync({m.member_id: b""})["error_code"] == 0
    return m


def test_trigger_joins_a_cooperative_group_that_is_rebalancing(
        module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    m1 = stable_member(b, "gH", session_ms=30000, rebalance_ms=30000)
    m2 = CooperativeMember(b, "gH", ["rt"], session_ms=30000, rebalance_ms=30000)
    proc = None
    try:
        parked = m2.start_join()  # a second member: the group is rebalancing, waiting on m1
        wait_until(lambda: describe(b, "gH").state == "PreparingRebalance", 10,
                   "the group rebalancing")
        assert describe(b, "gH").protocol == ""  # mid-rebalance: no protocol named
        proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "rebalance", "-G", "gH",
                                 "--trigger", "--timeout", "30", "--json", "-b", b],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def joined() -> bool:  # kafkactl's transient member waits in the rebalance too
            assert proc is not None
            return proc.poll() is not None or any(
                m.client_id == "kafkactl-rebalance" for m in describe(b, "gH").members)

        wait_until(joined, 30, "kafkactl's member in the rebalance")
        assert proc.poll() is None, proc.communicate()
        assert m1.join()["error_code"] == 0  # the last member rejoins: the rebalance ends
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "rebalancing already" in err
        assert json.loads(out)["triggered_generation"] == m1.generation
        assert m2.end_join(parked)["error_code"] == 0
        # the transient member left (a new rebalance, without it)
        assert not [m for m in describe(b, "gH").members
                    if m.client_id == "kafkactl-rebalance"]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        m1.close()
        m2.close()


def test_the_transient_member_leaves_when_its_timeout_ends_the_wait(
        module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    m1 = stable_member(b, "gT", session_ms=30000, rebalance_ms=30000)
    try:  # m1 never rejoins: the rebalance outlasts kafkactl's --timeout
        r = zygote.run(["rebalance", "-G", "gT", "--trigger", "--timeout", "1", "-b", b],
                       text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "did not finish rebalancing within 1 s" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        members = describe(b, "gT").members
        assert [m.member_id for m in members] == [m1.member_id], members
    finally:
        m1.close()


def test_bad_timeouts_and_flags_of_the_other_mode_are_usage_errors(
        module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    for args, why in [
        (["-G", "g", "--trigger", "--timeout", "inf"], "--timeout inf: give seconds from 1"),
        (["-G", "g", "--trigger", "--timeout", "nan"], "--timeout nan: give seconds"),
        (["-G", "g", "--trigger", "--timeout", "-5"], "--timeout -5: give seconds"),
        (["-G", "g", "--trigger", "--timeout", "0"], "--timeout 0: give seconds"),
        (["-G", "g", "--trigger", "--timeout", "0.001"], "--timeout 0.001: give seconds"),
        (["-G", "g", "--execute"], "--execute: only with --partitions"),
        (["-G", "g", "--partitions"], "-G/--group: not with --partitions"),
    ]:
        r = zygote.run(["rebalance", *args, "-b", b], text=True, timeout=60)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert why in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
