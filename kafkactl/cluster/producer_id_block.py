"""Producer ids in a ZooKeeper cluster come in blocks that no two brokers share (Kafka's
ZkProducerIdManager): `/latest_producer_id_block` holds the last block handed out
({"version":1,"broker":id,"block_start":"s","block_end":"e"}, ends inclusive), and a
broker takes the next one with a conditional write. Without this, two brokers (or one
after a restart elsewhere) could give two producers one id, and the second producer's
first batches would be taken for the first one's retries and dropped. Blocking calls."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json

if TYPE_CHECKING:
    from kazoo.client import KazooClient

BLOCK_SIZE = 1000


def allocate_block(zk: KazooClient, broker_id: int, floor: int = 0,
                   size: int = BLOCK_SIZE) -> tuple[int, int]:
    """The next free block [start, end] (end inclusive), never starting below `floor`."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    while True:
        try:
            data, stat = zk.get(zk_paths.PRODUCER_ID_BLOCK)
            version: int | None = stat.version
        except NoNodeError:
            data, version = b"", None
        last_end = -1
        value = decode_json(data, zk_paths.PRODUCER_ID_BLOCK)
        if isinstance(value, dict):
            try:
                last_end = int(value.get("block_end", -1))
            except (TypeError, ValueError):
                last_end = -1
        start = max(last_end + 1, floor)
        end = start + size - 1
        new = encode_json({"version": 1, "broker": broker_id, "block_start": str(start),
                           "block_end": str(end)})
        try:
            if version is None:
                zk.create(zk_paths.PRODUCER_ID_BLOCK, new, makepath=True)
            else:
                zk.set(zk_paths.PRODUCER_ID_BLOCK, new, version=version)
            return start, end
        except (BadVersionError, NodeExistsError):
            continue  # another broker took a block meanwhile: take the next one

