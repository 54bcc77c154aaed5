"""A mirror whose source and target are one cluster (compared by cluster id, whatever the
addresses say) never reads its own output back: a topic that would be copied onto itself
is refused before anything is copied (10 records became 3090 in 5 s), and the topics
renamed to are left out of the selection (`--whitelist 'x.*' --rename x:x.copy` read
x.copy back and copied it onto itself). Real brokers, a real `kafkactl mirror`."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.mirror.config import MirrorConfig
from kafkactl.mirror.maker import MirrorMaker
from tests.mirror.helpers import FAST, copied, count, create_topics, produce, run_mirror
from tests.polling import wait_until


def test_a_topic_mirrored_onto_itself_is_refused(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    create_topics(b.bootstrap, {"y": 1, "x": 1, "xy": 1})
    produce(b.bootstrap, "y", 0, 10)
    # another address of the same broker: the cluster id says it is the same cluster
    r = run_mirror("--source", b.bootstrap, "--target", f"localhost:{b.port}", "-t", "y",
                   "-G", "loop", "-q", timeout=30)
    assert r.returncode == 2, r.stderr
    assert "--source and --target are the same cluster" in r.stderr, r.stderr
    assert "topic y would be copied onto itself" in r.stderr, r.stderr
    assert count(b.bootstrap, "y") == 10
    # a whitelist matching a topic with no --rename: the same
    r = run_mirror("--source", b.bootstrap, "--target", b.bootstrap, "--whitelist", "x.*",
                   "--rename", "x:x.copy", "-G", "loop2", "-q", timeout=30)
    assert r.returncode == 2, r.stderr
    assert "topic xy would be copied onto itself" in r.stderr, r.stderr
    # naming the topic another one is renamed to
    r = run_mirror("--source", b.bootstrap, "--target", b.bootstrap, "-t", "x", "-t", "xy",
                   "--rename", "x:xy", "--rename", "xy:xz", "-G", "loop3", "-q", timeout=30)
    assert r.returncode == 2, r.stderr
    assert "topic xy is where it copies topic x" in r.stderr, r.stderr


def test_the_topics_renamed_to_are_not_read_back(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    create_topics(b.bootstrap, {"x": 1})
    produce(b.bootstrap, "x", 0, 10)
    maker = MirrorMaker(MirrorConfig(source=b.bootstrap, target=b.bootstrap, whitelist="x.*",
                                     renames={"x": "x.copy"}, group="copy",
                                     topic_refresh_ms=200, commit_interval_ms=200))
    maker.start()
    try:
        wait_until(lambda: copied(b.bootstrap, "x.copy", 10) or maker.stopped.is_set(), 60,
                   "x copied into x.copy")
        assert maker.source_topics is not None and not maker.stopped.is_set(), maker.error
        # x.copy exists now and matches the whitelist: it is still not selected
        assert maker.source_topics.refresh() == ["x"]
        assert maker.error is None and maker.failure is None
    finally:
        maker.close()
    assert count(b.bootstrap, "x.copy") == 10
    assert count(b.bootstrap, "x") == 10


def test_different_clusters_are_not_one(broker_factory: Any) -> None:
    from kafkactl.mirror.maker import MirrorLoopError

    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"y": 1})
    maker = MirrorMaker(MirrorConfig(source=source.bootstrap, target=target.bootstrap,
                                     topics=("y",)))
    maker.check()  # no MirrorLoopError: another cluster
    one = MirrorMaker(MirrorConfig(source=source.bootstrap, target=source.bootstrap,
                                   topics=("y",)))
    with pytest.raises(MirrorLoopError):
        one.check()
