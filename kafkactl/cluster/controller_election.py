"""Who is the controller: the broker whose session holds the ephemeral `/controller`
znode ({"version":1,"brokerid":id,"timestamp":ms}). The winner bumps `/controller_epoch` in
the same transaction; its znode version then fences every controller write
(controller_zk.py), and brokers ignore requests from a controller with an older epoch.
Blocking kazoo calls."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json

if TYPE_CHECKING:
    from kazoo.client import KazooClient

NO_CONTROLLER = -1


@dataclass(frozen=True)
class Election:
    won: bool
    controller_id: int
    epoch: int  # ours when won; otherwise the epoch in ZooKeeper (0 if none)
    epoch_zk_version: int = -1  # /controller_epoch's version when won: every write checks it


def parse_controller(value: Any) -> int:
    if isinstance(value, dict) and isinstance(value.get("brokerid"), int):
        return int(value["brokerid"])
    if isinstance(value, int):  # the oldest layout held the bare id
        return value
    return NO_CONTROLLER


def current_controller(zk: KazooClient) -> tuple[int, bool]:
    """(controller id, whether this session holds the znode); (-1, False) if none."""
    from kazoo.exceptions import NoNodeError

    try:
        data, stat = zk.get(zk_paths.CONTROLLER)
    except NoNodeError:
        return NO_CONTROLLER, False
    return parse_controller(decode_json(data, zk_paths.CONTROLLER)), \
        stat.ephemeralOwner == zk.client_id[0]


def read_epoch(zk: KazooClient) -> tuple[int, int]:
    """(controller epoch, znode version); (0, -1) when there is none yet."""
    from kazoo.exceptions import NoNodeError

    try:
        data, stat = zk.get(zk_paths.CONTROLLER_EPOCH)
    except NoNodeError:
        return 0, -1
    try:
        return int(data.decode().strip() or 0), stat.version
    except (UnicodeDecodeError, ValueError):
        return 0, stat.version


def try_elect(zk: KazooClient, broker_id: int) -> Election:
    """Create /controller if nobody holds it and bump /controller_epoch, in one ZooKeeper
    transaction (Kafka's registerControllerAndIncrementControllerEpoch): either both
    happen or neither. When this session holds /controller already (a retry after a lost
    reply, or an election event while we are the controller), the epoch in ZooKeeper is
    ours."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, RolledBackError

    value = encode_json({"version": 1, "brokerid": broker_id,
                         "timestamp": str(int(time.time() * 1000))})
    while True:
        epoch, version = read_epoch(zk)
        tx = zk.transaction()
        tx.create(zk_paths.CONTROLLER, value, ephemeral=True)
        if version < 0:
            tx.create(zk_paths.CONTROLLER_EPOCH, b"1")
        else:
            tx.set_data(zk_paths.CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)
        results = tx.commit()
        errors = [r for r in results if isinstance(r, Exception)
                  and not isinstance(r, RolledBackError)]
        if not errors:
            return Election(True, broker_id, epoch + 1, version + 1)
        if isinstance(results[0], NodeExistsError):
            holder, ours = current_controller(zk)
            if ours:
                epoch, version = read_epoch(zk)
                return Election(True, broker_id, epoch, version)
            if holder == NO_CONTROLLER:  # gone meanwhile: stand again
                continue
            return Election(False, holder, read_epoch(zk)[0])
        if isinstance(results[1], (BadVersionError, NodeExistsError)):
            continue  # the epoch moved under us: read it again
        raise errors[0]


def resign(zk: KazooClient) -> None:
    """Give up /controller if this session holds it (a clean shutdown)."""
    from kazoo.exceptions import NoNodeError

    _, ours = current_controller(zk)
    if ours:
        with contextlib.suppress(NoNodeError):
            zk.delete(zk_paths.CONTROLLER)
