"""StandaloneTopicAdmin over a real PartitionStore and LogManager (in a temp dir): what the
controller decides, what the store hosts (through the one partition lifecycle,
kafkactl.broker.replica_state), and the typed errors both raise."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.broker.config import BROKER_DEFAULTS, BrokerConfig
from kafkactl.broker.metadata_cache import BrokerEndpoint, StandaloneMetadataCache
from kafkactl.broker.partition_store import PartitionStore, TopicLogConfigs
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.broker.replica_manager import ReplicaManager
from kafkactl.broker.replica_state import LeadershipListener, ReplicaStates
from kafkactl.broker.standalone_topic_admin import METADATA_FILE, StandaloneTopicAdmin
from kafkactl.broker.topic_admin import TopicError
from kafkactl.cluster.metadata_store import LocalMetadataStore
from kafkactl.log.config import LogConfig
from kafkactl.log.manager import LogManager
from kafkactl.protocol.errors import ErrorCode, KafkaError

BROKER_ID = 7


@dataclass
class Standalone:
    log_manager: LogManager
    store: PartitionStore
    cache: StandaloneMetadataCache
    admin: StandaloneTopicAdmin


def _open(data: Path, listeners: dict[str, LeadershipListener] | None = None,
          **props: str) -> Standalone:
    """The parts in the order the KafkaServer builds them (`listeners`: coordinators of
    internal topics, told of each partition they come to lead)."""
    config = BrokerConfig({**BROKER_DEFAULTS, "broker.id": str(BROKER_ID), **props})
    defaults = LogConfig.from_properties({k: v for k, v in config.props.items() if v != ""})
    metadata = LocalMetadataStore(data / METADATA_FILE)
    metadata.read()
    configs = TopicLogConfigs(defaults, metadata.configs)
    log_manager = LogManager([data], defaults, topic_config=configs.for_topic)
    log_manager.load()
    cache = StandaloneMetadataCache("c", BrokerEndpoint(BROKER_ID, "localhost", 9092))
    purgatory = FetchPurgatory()
    store = PartitionStore(log_manager, configs, purgatory)
    admin = StandaloneTopicAdmin(store, cache, metadata, config=config, broker_id=BROKER_ID,
                                 default_partitions=config.get_int("num.partitions"))
    replica_manager = ReplicaManager(store, admin, purgatory, cache, auto_create=False)
    admin.replicas = ReplicaStates(BROKER_ID, store, replica_manager, purgatory)
    admin.replicas.listeners.update(listeners or {})
    admin.load()
    return Standalone(log_manager, store, cache, admin)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    s = _open(tmp_path)
    yield s
    s.log_manager.shutdown()


def _code(fn: object, *args: object, **kwargs: object) -> ErrorCode:
    with pytest.raises(TopicError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    assert isinstance(info.value, KafkaError)
    return info.value.code


def test_create_topics_checks_in_kafkas_order(standalone: Standalone) -> None:
    create = standalone.admin.create_topic
    assert _code(create, "t", 1, -1, [(0, [BROKER_ID])], []) == ErrorCode.INVALID_REQUEST
    assert _code(create, "t", -1, -1, [(0, [BROKER_ID]), (2, [BROKER_ID])], []) \
        == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _code(create, "t", -1, -1, [(0, [BROKER_ID + 1])], []) \
        == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    # the replication factor is checked before the configs
    assert _code(create, "t", 1, 3, [], [("retention.ms", None)]) \
        == ErrorCode.INVALID_REPLICATION_FACTOR
    assert _code(create, "t", 1, 1, [], [("retention.ms", None)]) == ErrorCode.INVALID_CONFIG
    assert _code(create, "t", 1, 1, [], [("no.such.key", "1")]) == ErrorCode.INVALID_CONFIG
    assert _code(create, "bad name", 1, 1, [], []) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert _code(create, "t", 0, 1, [], []) == ErrorCode.INVALID_PARTITIONS
    state = create("t", -1, -1, [], [], validate_only=True)
    assert (state.num_partitions, state.replication_factor) == (1, 1)
    assert standalone.admin.topic("t") is None and standalone.cache.topic("t") is None
    assert standalone.store.get_partition("t", 0) is None


def test_created_topic_is_hosted_announced_and_survives_a_restart(tmp_path: Path) -> None:
    s = _open(tmp_path)
    state = s.admin.create_topic("orders", -1, -1, [(1, [BROKER_ID]), (0, [BROKER_ID])],
                                 [("retention.ms", "60000")])
    assert state.num_partitions == 2
    for p in (0, 1):
        part = s.store.get_partition("orders", p)
        assert part is not None and part.log.config.retention_ms == 60000
    meta = s.cache.topic("orders")
    assert meta is not None and meta.topic_id == state.topic_id
    assert [m.replicas for m in meta.partitions.values()] == [[BROKER_ID], [BROKER_ID]]
    assert _code(s.admin.create_topic, "orders", 1, 1, [], []) == ErrorCode.TOPIC_ALREADY_EXISTS
    s.log_manager.shutdown()

    s = _open(tmp_path)
    again = s.admin.topic("orders")
    assert again is not None and again.topic_id == state.topic_id
    assert again.configs == {"retention.ms": "60000"}
    assert s.store.topic_config("orders").retention_ms == 60000
    s.log_manager.shutdown()


def test_delete_stops_hosting_and_forgets(standalone: Standalone) -> None:
    admin, store = standalone.admin, standalone.store
    admin.auto_create("gone", 3, {"cleanup.policy": "compact"})
    assert store.topic_config("gone").compact
    admin.delete_topic("gone")
    assert admin.topic("gone") is None and standalone.cache.topic("gone") is None
    assert all(store.get_partition("gone", p) is None for p in range(3))
    assert store.logs_on_disk() == []
    with pytest.raises(KeyError):
        store.topic_config("gone")
    assert _code(admin.delete_topic, "gone") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_partitions_and_configs(standalone: Standalone) -> None:
    admin, store = standalone.admin, standalone.store
    admin.auto_create("grow")
    assert _code(admin.add_partitions, "grow", 2, [[BROKER_ID + 1]]) \
        == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _code(admin.add_partitions, "grow", 1, []) == ErrorCode.INVALID_PARTITIONS
    admin.add_partitions("grow", 3, [[BROKER_ID], [BROKER_ID]])
    assert store.get_partition("grow", 2) is not None
    assert _code(admin.set_configs, "grow", {"retention.ms": "x"}) == ErrorCode.INVALID_CONFIG
    admin.set_configs("grow", {"retention.ms": "1000"})
    assert {store.get_partition("grow", p).log.config.retention_ms  # type: ignore[union-attr]
            for p in range(3)} == {1000}
    # new broker defaults (dynamic broker configs) keep the topic's override
    defaults = store.configs.defaults.with_overrides({"segment.bytes": "2000000",
                                                      "retention.ms": "5"})
    store.update_default_config(defaults)
    part = store.get_partition("grow", 0)
    assert part is not None
    assert (part.log.config.segment_bytes, part.log.config.retention_ms) == (2000000, 1000)


def test_store_hosts_a_partition_at_the_leader_epoch_it_is_given(standalone: Standalone) -> None:
    store = standalone.store
    part = store.make_partition("replica", 0, store.configs.defaults, leader_epoch=4)
    assert part.leader_epoch == 4 and store.get_partition("replica", 0) is part
    store.remove_partition("replica", 0)
    assert store.get_partition("replica", 0) is None and store.logs_on_disk() == []
