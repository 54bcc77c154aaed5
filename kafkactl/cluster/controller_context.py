"""What the controller's helpers (controller_admin.py, topic_deletion.py) may use of it: a
narrow Protocol instead of the controller itself (Kafka's ControllerContext plus its
request batch), and the records they share. No import of the controller here, so no
cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.topic_state import PartitionState

if TYPE_CHECKING:
    from kazoo.client import KazooClient

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request."""

    topic: str
    partition: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int


@dataclass
class Reassignment:
    target: list[int]
    original: list[int]

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        return [r for r in self.original if r not in self.target]


class TopicNames(Protocol):
    """Topic names that can be asked about (the topics being deleted)."""

    def __contains__(self, name: str) -> bool: ...


class ControllerContext(Protocol):
    """The active controller as its helpers see it; they run on its event task."""

    zk: KazooClient
    view: ClusterView
    epoch: int
    epoch_zk_version: int
    shutting_down: set[int]
    reassignments: dict[TopicPartition, Reassignment]

    @property
    def deletions(self) -> TopicNames:
        """The topics whose deletion is under way (no leader is elected for them)."""
        ...

    def check_active(self) -> None: ...

    async def write_states(self, states: dict[TopicPartition, PartitionState], *,
                           create: bool) -> None: ...

    def announce(self, partitions: set[TopicPartition], *, is_new: bool) -> None: ...

    def send_update_metadata(self) -> None: ...

    def send_stop_replica(self, broker_id: int, name: str, parts: dict[int, list[int]], *,
                          deleting_topic: bool = True) -> None: ...

    def forget_topic(self, name: str) -> None: ...

