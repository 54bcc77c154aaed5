"""Topic deletion as the controller runs it (Kafka's TopicDeletionManager).

An operator's DeleteTopics writes `/admin/delete_topics/<name>`. The active controller
forgets the topic (the next UpdateMetadata announces it deleted, leader -2), sends
StopReplica with deletion to every broker holding a replica, and removes the topic's
znodes once each of them has confirmed. A broker that was down is asked again when it
rejoins; a new controller starts over from the requests still in ZooKeeper.

A topic with a partition reassignment in progress is not deleted yet (Kafka's
markTopicIneligibleForDeletion, "topic reassignment in progress"): it stays queued, served
as before (but no longer moved elsewhere: controller_admin.check_target), until its last
reassignment completes, then its deletion starts (Kafka's resumeDeletionForTopics).
Deleting it at once would leave the controller moving replicas of a topic that is gone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import controller_zk
from kafkactl.cluster import topic_state as zk_topics

if TYPE_CHECKING:
    from kafkactl.cluster.controller_context import ControllerContext

log = logging.getLogger("kafkactl.controller")


class TopicDeletionManager:
    def __init__(self, controller: ControllerContext) -> None:
        self.controller = controller
        # topic -> (partitions, brokers that have not confirmed the deletion yet)
        self._pending: dict[str, tuple[dict[int, list[int]], set[int]]] = {}
        # topics queued for deletion that wait for their reassignments to complete
        self._ineligible: set[str] = set()

    def __contains__(self, name: str) -> bool:
        """`name` is queued for deletion: under way, or waiting for its reassignments
        (Kafka's isTopicQueuedUpForDeletion)."""
        return name in self._pending or name in self._ineligible

    def waits_for_reassignment(self, name: str) -> bool:
        """`name` is queued for deletion until its partition reassignments complete (any
        thread: a set lookup)."""
        return name in self._ineligible

    def clear(self) -> None:
        """Forget every deletion under way (this broker is no longer the controller)."""
        self._pending.clear()
        self._ineligible.clear()

    def _reassigning(self, name: str) -> bool:
        return any(t == name for t, _p in self.controller.reassignments)

    def resumable(self) -> bool:
        """A topic queued for deletion waited for reassignments that are all done now: the
        next `on_requests` starts its deletion."""
        return any(not self._reassigning(n) for n in self._ineligible)

    async def on_requests(self) -> None:
        """The deletion requests in ZooKeeper changed: start the new ones."""
        c = self.controller
        names = await asyncio.to_thread(zk_topics.topics_to_delete, c.zk)
        c.check_active()
        self._ineligible.intersection_update(names)  # a request withdrawn meanwhile
        for name in names:
            if name in self._pending:
                continue
            parts = c.view.assignments.get(name)
            if parts is None:  # nothing to delete (or gone already): drop the request
                self._ineligible.discard(name)
                await asyncio.to_thread(controller_zk.remove_topic, c.zk, c.epoch_zk_version,
                                        name)
                c.check_active()
                continue
            if self._reassigning(name):
                if name not in self._ineligible:
                    self._ineligible.add(name)
                    log.info("topic %s is queued for deletion: it is deleted once the "
                             "reassignment of its partitions completes", name)
                continue
            self._ineligible.discard(name)
            replicas = {r for reps in parts.values() for r in reps}
            self._pending[name] = (dict(parts), set(replicas))
            c.forget_topic(name)
            log.info("deleting topic %s from brokers %s", name, sorted(replicas))
            c.send_update_metadata()
            for b in replicas:
                c.send_stop_replica(b, name, parts)

    def resume_for(self, joined: set[int]) -> None:
        """Ask brokers that (re)joined again for the deletions they have not confirmed."""
        for name, (parts, waiting) in self._pending.items():
            for b in waiting & joined:
                self.controller.send_stop_replica(b, name, parts)

    async def on_replica_stopped(self, name: str, broker_id: int,
                                 response: dict[str, Any]) -> None:
        """A broker answered the StopReplica of a deletion."""
        entry = self._pending.get(name)
        if entry is None:
            return
        errors = [e for e in response.get("partition_errors", []) if e["error_code"]]
        if response.get("error_code") or errors:
            log.warning("broker %d could not delete %s yet (%s); it will be asked again when "
                        "it restarts", broker_id, name, response)
            return
        entry[1].discard(broker_id)
        if not entry[1]:
            c = self.controller
            await asyncio.to_thread(controller_zk.remove_topic, c.zk, c.epoch_zk_version, name)
            c.check_active()
            self._pending.pop(name, None)
            log.info("deleted topic %s", name)
