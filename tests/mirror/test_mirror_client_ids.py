"""Each `--num-streams` worker's clients have a client.id of their own (kafkactl-mirror-0,
-1, ...), its producer's too, with --exactly-once as without: brokers tell producers apart
by it in their logs and quotas, as Kafka's MirrorMaker and Connect give each task's
clients an id of their own. With --exactly-once each worker's transactional.id is its own
as well. Seen on the wire: the target is reached through a proxy that notes the client.id
(and transactional.id) of every Produce request; the source group describes its members."""

from __future__ import annotations

import contextlib
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.metadata_proxy import MetadataProxy, _read_frame
from tests.mirror.helpers import (
    FAST,
    assert_same,
    create_topics,
    mirrored,
    produce,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until


class ProduceWatcher(MetadataProxy):
    """A proxy in front of the target (brokers in Metadata answers are the proxy, so every
    Produce passes it) noting (client.id, transactional.id) of each Produce request."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.producers: set[tuple[str | None, str | None]] = set()
        super().__init__(upstream, "", [])

    def _requests(self, client: socket.socket, server: socket.socket,
                  pending: dict[int, tuple[int, int]]) -> None:
        while (frame := _read_frame(client)) is not None:
            header, pos = codec.decode_request_header(frame)
            pending[header.correlation_id] = (header.api_key, header.api_version)
            if header.api_key == ApiKey.PRODUCE:
                body = codec.decode_request(header.api_key, header.api_version, frame, pos)
                with self._lock:
                    self.producers.add((header.client_id, body.get("transactional_id")))
            try:
                server.sendall(struct.pack(">i", len(frame)) + frame)
            except OSError:
                break
        with contextlib.suppress(OSError):
            server.close()

    def seen(self) -> set[tuple[str | None, str | None]]:
        with self._lock:
            return {p for p in self.producers if (p[0] or "").startswith("kafkactl-mirror")}


def _member_client_ids(bootstrap: str, group: str) -> list[str] | None:
    client = KafkaClient(bootstrap)
    try:
        described = GroupAdmin(client).describe_group(group)
    finally:
        client.close()
    # Stable is not enough: a worker that has not yet subscribed to the topic (its topic
    # look-up comes after it joined) holds nothing until the next rebalance
    if described.state != "Stable" or len(described.members) != 2 or \
            any(len(member.assignment) != 1 for member in described.members):
        return None
    return sorted(member.client_id for member in described.members)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "exactly-once"])
def test_each_workers_producer_has_a_client_id_of_its_own(
        broker_factory: Any, tmp_path: Path, exactly_once: bool) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    proxy = ProduceWatcher(("127.0.0.1", target.port))
    try:
        create_topics(source.bootstrap, {"ids": 2})
        group = "ids-eos" if exactly_once else "ids"
        m = start_mirror(tmp_path, source.bootstrap, proxy.bootstrap, "--whitelist", "ids",
                         "--num-streams", "2", "-G", group,
                         *(["--exactly-once"] if exactly_once else []))
        # both workers in the group, one partition each: then each copies records
        ids = wait_until(lambda: _member_client_ids(source.bootstrap, group), 90,
                         f"both workers in the group, a partition each:\n{m.log()}")
        assert ids == ["kafkactl-mirror-0", "kafkactl-mirror-1"]
        produce(source.bootstrap, "ids", 0, 40, partitions=2)
        # every record acknowledged by the target: each Produce of the copy passed
        wait_until(lambda: mirrored(m, 40), 90, f"40 records mirrored:\n{m.log()}")
        seen = proxy.seen()
        if exactly_once:
            # each worker's producer: its own client.id and its own transactional.id
            assert seen == {("kafkactl-mirror-0", f"{group}-mirror-0"),
                            ("kafkactl-mirror-1", f"{group}-mirror-1")}, seen
        else:
            assert seen == {("kafkactl-mirror-0", None), ("kafkactl-mirror-1", None)}, seen
        assert m.terminate() == 0, m.log()
        assert_same(read_topic(source.bootstrap, "ids", read_committed=exactly_once),
                    read_topic(target.bootstrap, "ids", read_committed=exactly_once))
    finally:
        proxy.close()


def test_a_client_id_given_is_suffixed_per_worker_and_per_stream() -> None:
    from kafkactl.mirror.config import stream_client_id
    from kafkactl.mirror.workers import stream_producer_properties

    assert stream_producer_properties({"client.id": "dc1", "linger.ms": "5"}, 1) == {
        "client.id": "dc1-1", "linger.ms": "5"}
    assert stream_producer_properties({}, 0) == {"client.id": "kafkactl-mirror-0"}
    # in one process: the id given as is with one stream, suffixed with several
    assert stream_client_id({"client.id": "dc1"}, 0, 1) == "dc1"
    assert stream_client_id({"client.id": "dc1"}, 1, 2) == "dc1-1"
    assert stream_client_id({}, 3, 1) == "kafkactl-mirror-3"
