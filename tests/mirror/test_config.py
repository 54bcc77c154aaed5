"""MirrorConfig checks what it can before connecting."""

from __future__ import annotations

import pytest

from kafkactl.mirror.config import (
    MirrorConfig,
    MirrorConfigError,
    consumer_kwargs,
    parse_renames,
    producer_kwargs,
)


def test_renames_and_target_names() -> None:
    config = MirrorConfig("a:1", "b:1", topics=("x",), renames=parse_renames(["x:y"]))
    config.validate()
    assert config.target_topic("x") == "y" and config.target_topic("z") == "z"
    with pytest.raises(MirrorConfigError, match="two targets"):
        parse_renames(["x:y", "x:z"])


def test_the_topic_filter_takes_whitelist_topics_and_blacklist() -> None:
    f = MirrorConfig("a:1", "b:1", topics=("plain",), whitelist=r"dc\..*",
                     blacklist=r".*\.tmp").topic_filter()
    assert f.matches("plain") and f.matches("dc.orders")
    assert not f.matches("dc.orders.tmp") and not f.matches("other")
    assert not f.matches("dc.internal", internal=True)


def test_properties_keep_the_no_loss_settings() -> None:
    assert producer_kwargs({"linger.ms": "20", "acks": "all"}) | {} == {
        "linger_ms": 20, "acks": "all", "enable_idempotence": True}
    with pytest.raises(MirrorConfigError, match="enable.idempotence=true"):
        producer_kwargs({"enable.idempotence": "false"})
    with pytest.raises(MirrorConfigError, match="set by the mirror"):
        consumer_kwargs({"enable.auto.commit": "true"})
    assert consumer_kwargs({"auto.offset.reset": "latest", "fetch.min.bytes": "10",
                            "isolation.level": "read_committed"}) == {
        "auto_offset_reset": "latest", "fetch_min_bytes": 10, "isolation_level": 1}
