"""A topic's config reaches a broker's event loop from three places in any order (the
/config/changes listener, the LeaderAndIsr read, the broker that took the change): the
PartitionStore keeps the newest by ZooKeeper's zxid."""

from __future__ import annotations

from pathlib import Path

from kafkactl.broker.config import BROKER_DEFAULTS, BrokerConfig
from kafkactl.broker.partition_store import PartitionStore, TopicLogConfigs
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.log.config import LogConfig
from kafkactl.log.manager import LogManager


def _store(data: Path) -> PartitionStore:
    config = BrokerConfig({**BROKER_DEFAULTS, "broker.id": "1"})
    defaults = LogConfig.from_properties({k: v for k, v in config.props.items() if v != ""})
    configs = TopicLogConfigs(defaults)
    log_manager = LogManager([data], defaults, topic_config=configs.for_topic)
    log_manager.load()
    return PartitionStore(log_manager, configs, FetchPurgatory())


def test_the_newest_config_by_zxid_wins_whatever_the_order(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.zk_topic_config("t", {"retention.ms": "2"}, 20) == {"retention.ms": "2"}
    # an older read arriving late (a LeaderAndIsr read before the change) changes nothing
    assert store.zk_topic_config("t", {"retention.ms": "1"}, 10) == {"retention.ms": "2"}
    assert store.zk_topic_config("t", {"retention.ms": "3"}, 30) == {"retention.ms": "3"}
    # the same zxid read twice (the notification after the write) is the same config
    assert store.zk_topic_config("t", {"retention.ms": "3"}, 30) == {"retention.ms": "3"}
    # no config znode (deleted) at a later zxid: forgotten; a re-created topic starts anew
    assert store.zk_topic_config("t", None, 40) is None
    assert store.zk_topic_config("t", {}, 50) == {}
    # a deletion seen at an older zxid than the newest config is stale
    assert store.zk_topic_config("t", None, 45) == {}
