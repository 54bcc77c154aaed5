"""`kafkactl produce --partitioner crc32` is librdkafka's `consistent` on every path: a key
goes to crc32(key) % n, an empty and a null key (a line without the separator) to
crc32("") % n, partition 0, batch after batch (not to a sticky random partition)."""

from __future__ import annotations

import zlib

import pytest

from tests import zygote
from tests.conftest import BrokerProcess
from tests.mirror.helpers import create_topics, read_topic


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker  # every test uses topics of its own


@pytest.mark.parametrize("extra", [[], ["-H", "h=1"], ["--sync"]],
                         ids=["lines", "headers", "sync"])
def test_crc32_sends_empty_and_null_keys_to_partition_0(broker: BrokerProcess,
                                                        extra: list[str]) -> None:
    topic = f"crc32-{len(extra) and extra[0].strip('-')}"
    create_topics(broker.bootstrap, {topic: 4})
    keyed = [b"k%d:v" % i for i in range(40)]
    n = 40 if "--sync" in extra else 3000
    lines = [b":empty key %d" % i for i in range(n)] + [b"null key %d" % i for i in range(n)]
    r = zygote.run(["produce", "-b", broker.bootstrap, "-t", topic, "-K", ":",
                    "--partitioner", "crc32", "--batch-size", "2000", *extra],
                   input=b"\n".join(keyed + lines) + b"\n", timeout=120)
    assert r.returncode == 0, r.stderr
    got = read_topic(broker.bootstrap, topic)
    for p, rows in got.items():
        for key, value, _h, _t in rows:
            if key is None or key == b"":
                assert p == 0, (key, value)
            else:
                assert p == zlib.crc32(key) % 4, (key, p)
    assert sum(map(len, got.values())) == len(keyed) + len(lines)
