"""How the controller tells the brokers (a base of KafkaController): UpdateMetadata,
LeaderAndIsr and StopReplica, built as pure functions over its view
(controller_requests.py) and queued on its channel (controller_channel.py), one FIFO per
broker. An error a broker answers with is logged with its name.

UpdateMetadata is incremental (Kafka's controller): each carries the partitions whose
leader, ISR, replicas or offline replicas changed, the topics deleted since the last one
and the live brokers; a broker that joins gets a full one, and so does every broker from a
newly elected controller. Because every broker must see every change, each is sent to
every live broker on the same per-broker FIFO as the LeaderAndIsr that follows it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from typing import Any

from kafkactl.cluster import controller_requests as build
from kafkactl.cluster.controller_channel import ControllerChannel
from kafkactl.cluster.controller_events import (
    ControllerEvent,
    ReplicasOffline,
    ReplicaStopped,
)
from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger("kafkactl.controller")

TopicPartition = tuple[str, int]


class BrokerNotices:
    view: ClusterView
    channel: ControllerChannel | None

    def _enqueue(self, event: ControllerEvent) -> None:
        raise NotImplementedError

    def announce(self, partitions: set[TopicPartition], *, is_new: bool,
                 metadata: Iterable[TopicPartition] = ()) -> None:
        """LeaderAndIsr for `partitions` to their replicas, then UpdateMetadata for them and
        `metadata` (partitions without a leader yet: in the metadata, not in a
        LeaderAndIsr) to every broker, in Kafka's order (sendRequestsToBrokers): on each
        broker's FIFO its LeaderAndIsr comes first, so a broker's metadata never names it
        the leader of a partition it does not host yet."""
        for b in self.view.brokers:
            parts = [tp for tp in partitions if b in self.view.assignments[tp[0]][tp[1]]]
            self._send_leader_and_isr(b, parts, is_new=is_new)
        self.send_update_metadata(set(partitions).union(metadata))

    def send_update_metadata(self, partitions: Iterable[TopicPartition] = (), *,
                             full_to: Collection[int] = ()) -> None:
        """UpdateMetadata to every live broker: `partitions` (those whose state changed)
        and the topics deleted since the last one; the brokers in `full_to` get every
        partition instead."""
        if self.channel is None:
            return
        deleted = self.view.take_deleted()
        bodies: dict[bool, dict[str, Any]] = {}
        for b in self.view.brokers:
            full = b in full_to
            if full not in bodies:  # built once; only the broker epoch differs
                bodies[full] = build.update_metadata(self.view, b) if full else \
                    build.update_metadata(self.view, b, partitions, deleted)
            body = dict(bodies[full], broker_epoch=self.view.broker_epoch(b))
            self.channel.send(b, ApiKey.UPDATE_METADATA, build.UPDATE_METADATA_VERSION, body,
                              self._checker("UpdateMetadata", b))

    def _send_leader_and_isr(self, broker_id: int, partitions: Iterable[TopicPartition], *,
                             is_new: bool = False, full: bool = False) -> None:
        if self.channel is None:
            return
        body = build.leader_and_isr(self.view, broker_id, partitions, is_new=is_new,
                                       full=full, adding=self.adding_replicas())
        if body is not None:
            check = self._checker("LeaderAndIsr", broker_id)
            names = {t["topic_id"]: t["topic_name"] for t in body["topic_states"]}
            epoch = self.view.broker_epoch(broker_id)

            def answered(response: dict[str, Any]) -> None:
                check(response)
                offline = frozenset(
                    (names[t["topic_id"]], e["partition_index"])
                    for t in response.get("topics", []) if t.get("topic_id") in names
                    for e in t.get("partition_errors", [])
                    if e["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR)
                if offline:
                    self._enqueue(ReplicasOffline(broker_id, epoch, offline))

            self.channel.send(broker_id, ApiKey.LEADER_AND_ISR,
                              build.LEADER_AND_ISR_VERSION, body, answered)

    def adding_replicas(self) -> dict[TopicPartition, list[int]]:
        """The replicas reassignments are adding (new replicas: LeaderAndIsr's is_new)."""
        return {}

    @staticmethod
    def _checker(what: str, broker_id: int) -> Callable[[dict[str, Any]], None]:
        def check(response: dict[str, Any]) -> None:
            code = response.get("error_code", 0)
            failed = [e for t in response.get("topics", [])
                      for e in t.get("partition_errors", []) if e["error_code"]]
            if code or failed:
                try:
                    name: object = ErrorCode(code).name
                except ValueError:
                    name = code
                log.warning("broker %d answered %s with %s%s", broker_id, what, name,
                            f" ({len(failed)} partition error(s))" if failed else "")
        return check

    def send_stop_replica(self, broker_id: int, name: str, parts: dict[int, list[int]], *,
                           deleting_topic: bool = True) -> None:
        """StopReplica with deletion of `broker_id`'s replicas among `parts`; for a topic
        being deleted its answer counts towards finishing the deletion."""
        if self.channel is None:
            return
        mine = [p for p, reps in parts.items() if broker_id in reps]
        body = build.stop_replica(self.view, broker_id, {name: mine}, delete=True)
        self.channel.send(broker_id, ApiKey.STOP_REPLICA, build.STOP_REPLICA_VERSION, body,
                          (lambda resp: self._enqueue(ReplicaStopped(name, broker_id, resp)))
                          if deleting_topic else self._checker("StopReplica", broker_id))
