"""max.poll.records as a mirror's source consumer property: checked before connecting, and a
mirror whose polls cut its source batches (the copy path takes whole batches only; the
part of a batch a poll hands out goes record by record) copies every record once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.mirror.config import MirrorConfig, MirrorConfigError, consumer_kwargs
from tests.mirror.helpers import (
    FAST,
    assert_same,
    create_topics,
    mirrored,
    produce,
    read_topic,
    run_mirror,
    start_mirror,
)
from tests.polling import wait_until


def test_the_property_is_a_positive_count() -> None:
    assert consumer_kwargs({"max.poll.records": "7"}) == {"max_poll_records": 7}
    for bad, why in (("0", "must be at least 1"), ("-2", "must be at least 1"),
                     ("seven", "needs an integer")):
        config = MirrorConfig("a:1", "b:1", topics=("t",),
                              consumer_properties={"max.poll.records": bad})
        with pytest.raises(MirrorConfigError, match=f"max.poll.records {why}"):
            config.validate()
    r = run_mirror("--source", "127.0.0.1:9", "--target", "127.0.0.1:9", "--topic", "t",
                   "--consumer-property", "max.poll.records=0")
    assert r.returncode == 2
    assert "consumer property max.poll.records must be at least 1" in r.stderr, r.stderr


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_polls_that_cut_batches_copy_every_record_once(broker_factory: Any, tmp_path: Path,
                                                       exactly_once: bool) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"cut": 2})
    produce(source.bootstrap, "cut", 0, 3000, partitions=2, value_size=200)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--topic", "cut",
                     "--consumer-property", "max.poll.records=7",
                     *(["--exactly-once"] if exactly_once else []))
    try:
        wait_until(lambda: mirrored(m, 3000), 120, f"the mirror copying:\n{m.log()}")
        assert m.terminate() == 0, m.log()
    finally:
        m.kill()
    assert_same(read_topic(source.bootstrap, "cut"),
                read_topic(target.bootstrap, "cut", read_committed=exactly_once))
