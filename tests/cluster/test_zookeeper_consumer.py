"""The seed's ZooKeeper consumers against a real broker registered in a real ZooKeeper:
members share a topic with every record delivered once, hand partitions over when they
join or leave, and keep their offsets in /consumers/[group]/offsets."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from kafkactl.client.producer import Producer
from kafkactl.client.zookeeper_consumer import ZookeeperConsumer
from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zookeeper as zkmod
from tests.cluster.test_broker_registration import wait_for
from tests.cluster.zk import ZooKeeperServer

PARTITIONS = 6


@pytest.fixture
def zk_broker(broker_factory, zookeeper: ZooKeeperServer) -> Iterator[tuple[object, str]]:
    connect = f"{zookeeper.connect}/zc-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=connect, num_partitions=str(PARTITIONS))
    client = zkmod.connect(connect, timeout_s=10)
    try:
        wait_for(lambda: client.exists("/brokers/ids/0"), what="broker registration")
        yield b, connect
    finally:
        zkmod.close(client)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    p = Producer(bootstrap_servers=bootstrap, linger_ms=1)
    try:
        futs = [p.send(topic, b"%d" % i, partition=i % PARTITIONS)
                for i in range(start, start + count)]
        for f in futs:
            f.result(30)
    finally:
        p.close()


class Runner:
    """A ZooKeeper consumer polling in its own thread, recording every value it is given."""

    def __init__(self, connect: str, group: str, topic: str, **kw: object) -> None:
        self.consumer = ZookeeperConsumer(topic, group_id=group, zookeeper=connect,
                                          auto_offset_reset="earliest",
                                          zookeeper_session_timeout_ms=4000, **kw)
        self.values: list[bytes] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for recs in self.consumer.poll(200).values():
                    self.values += [bytes(r.value) for r in recs]
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        assert self.error is None, repr(self.error)


def owners_settled(connect: str, group: str, runners: list[Runner]) -> bool:
    client = zkmod.connect(connect, timeout_s=10)
    try:
        owners = registry.owners(client, group)
    finally:
        zkmod.close(client)
    ids = {r.consumer.consumer_id for r in runners}
    if len(owners) != PARTITIONS:
        return False
    owning = {o.rsplit("-", 1)[0] for o in owners.values()}
    return owning == ids and all(
        set(r.consumer.owned) == {tp for tp, o in owners.items()
                                  if o.rsplit("-", 1)[0] == r.consumer.consumer_id}
        for r in runners)


def test_members_share_a_topic_and_hand_over_on_join_and_leave(zk_broker) -> None:
    b, connect = zk_broker
    group = "g-share"
    produce(b.bootstrap, "zt", 0, 600)
    a = Runner(connect, group, "zt")
    wait_for(lambda: len(a.values) >= 200, what="first consumer reading")
    second = Runner(connect, group, "zt")
    wait_for(lambda: owners_settled(connect, group, [a, second]), what="two owners")
    produce(b.bootstrap, "zt", 600, 600)
    third = Runner(connect, group, "zt")
    wait_for(lambda: owners_settled(connect, group, [a, second, third]),
             what="three owners")
    # The seed's range split: 6 partitions over 3 consumers -> 2 each.
    assert sorted(len(r.consumer.owned) for r in (a, second, third)) == [2, 2, 2]
    produce(b.bootstrap, "zt", 1200, 600)
    a.close()  # leaves: its partitions go to the other two
    wait_for(lambda: owners_settled(connect, group, [second, third]), what="handover")
    produce(b.bootstrap, "zt", 1800, 600)
    everyone = (a, second, third)
    wait_for(lambda: sum(len(r.values) for r in everyone) >= 2400, timeout=60,
             what="every record")
    second.close()
    third.close()
    counts = Counter(v for r in everyone for v in r.values)
    assert set(counts) == {b"%d" % i for i in range(2400)}  # nothing lost
    assert max(counts.values()) == 1  # nothing repeated across the handovers

    client = zkmod.connect(connect, timeout_s=10)
    try:
        stored = registry.read_offsets(client, group)
        assert registry.owners(client, group) == {}  # every owner released
    finally:
        zkmod.close(client)
    assert {tp: s.offset for tp, s in stored.items()} == {
        ("zt", p): 400 for p in range(PARTITIONS)}


def test_a_restarted_member_resumes_from_zookeeper_offsets(zk_broker) -> None:
    b, connect = zk_broker
    group = "g-resume"
    produce(b.bootstrap, "zr", 0, 120)
    first = Runner(connect, group, "zr")
    wait_for(lambda: len(first.values) == 120, what="first read")
    first.close()
    produce(b.bootstrap, "zr", 120, 60)
    again = Runner(connect, group, "zr")
    wait_for(lambda: len(again.values) == 60, what="resumed read")
    time.sleep(0.5)  # nothing more may arrive (a repeat would show up here)
    again.close()
    assert sorted(again.values, key=int) == [b"%d" % i for i in range(120, 180)]


def test_dual_commit_writes_both_stores(zk_broker) -> None:
    b, connect = zk_broker
    group = "g-dual"
    produce(b.bootstrap, "zd", 0, 60)
    r = Runner(connect, group, "zd", offsets_storage="kafka", dual_commit=True)
    wait_for(lambda: len(r.values) == 60, what="read")
    r.close()
    client = zkmod.connect(connect, timeout_s=10)
    try:
        zk_offsets = {tp: s.offset for tp, s in registry.read_offsets(client, group).items()}
    finally:
        zkmod.close(client)
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    kc = KafkaClient(b.bootstrap)
    try:
        kafka_offsets = GroupAdmin(kc).fetch_offsets(group)
    finally:
        kc.close()
    want = {("zd", p): 10 for p in range(PARTITIONS)}
    assert zk_offsets == want and kafka_offsets == want


def test_pattern_subscription_picks_up_new_topics(zk_broker) -> None:
    b, connect = zk_broker
    group = "g-pattern"
    produce(b.bootstrap, "pat-a", 0, 12)
    c = ZookeeperConsumer(group_id=group, zookeeper=connect, pattern="pat-.*",
                          auto_offset_reset="earliest")
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        produced_b = False
        while len(got) < 24 and time.monotonic() < deadline:
            for recs in c.poll(200).values():
                got += [bytes(r.value) for r in recs]
            if len(got) >= 12 and not produced_b:
                produce(b.bootstrap, "pat-b", 100, 12)  # a new matching topic
                produced_b = True
    finally:
        c.close()
    assert sorted(got, key=int) == [b"%d" % i for i in range(12)] + [
        b"%d" % i for i in range(100, 112)]
