"""Log dir failure notifications (Kafka's /log_dir_event_notification, KIP-112).

A broker of a cluster that takes a log dir offline while it runs (a storage error there)
writes a sequential znode naming itself (`propagate`). The controller watches their parent;
for each broker named it sends a LeaderAndIsr for every replica the broker has, whose
KAFKA_STORAGE_ERROR answers name the replicas now offline (the controller's
ReplicasOffline: other in-sync replicas take their leadership), then deletes the
notifications (`read`, `delete`, fenced by the controller epoch).

Blocking kazoo calls, run in worker threads.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, NamedTuple

from kafkactl.cluster import zk_paths
from kafkactl.cluster.controller_zk import commit_fenced

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.controller")

VERSION = 1
LOG_DIR_FAILURE = 1  # the event kind Kafka defines (the only one)


class LogDirEvent(NamedTuple):
    znode: str  # its name under LOG_DIR_EVENTS
    broker_id: int | None  # None: a notification that cannot be read (deleted all the same)


def propagate(zk: KazooClient, broker_id: int) -> str:
    """Tell the controller that `broker_id` took a log dir offline; the znode's path."""
    data = json.dumps({"version": VERSION, "broker": broker_id, "event": LOG_DIR_FAILURE})
    path: str = zk.create(f"{zk_paths.LOG_DIR_EVENTS}/{zk_paths.LOG_DIR_EVENT_PREFIX}",
                          data.encode(), sequence=True, makepath=True)
    return path


def read(zk: KazooClient) -> list[LogDirEvent]:
    """The pending notifications, oldest first."""
    from kazoo.exceptions import NoNodeError

    try:
        names = zk.get_children(zk_paths.LOG_DIR_EVENTS)
    except NoNodeError:
        return []
    events = []
    for name in sorted(n for n in names if n.startswith(zk_paths.LOG_DIR_EVENT_PREFIX)):
        try:
            data, _stat = zk.get(f"{zk_paths.LOG_DIR_EVENTS}/{name}")
        except NoNodeError:
            continue
        broker: int | None = None
        try:
            found = json.loads(data)
            broker = int(found["broker"])
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring the log dir event %s/%s: not {\"version\":1,\"broker\":id,"
                        "\"event\":1} (%r)", zk_paths.LOG_DIR_EVENTS, name, data[:100])
        events.append(LogDirEvent(name, broker))
    return events


def delete(zk: KazooClient, epoch_version: int, events: list[LogDirEvent]) -> None:
    """Delete the notifications handled (each on its own: one deleted meanwhile does not
    keep the others); ControllerMovedError when this controller was deposed."""
    if events:
        commit_fenced(zk, epoch_version, [[("delete", f"{zk_paths.LOG_DIR_EVENTS}/{e.znode}")]
                                          for e in events])
