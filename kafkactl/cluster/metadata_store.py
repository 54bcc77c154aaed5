"""Where a controller keeps what it decided about topics: the metadata-store seam.

A topic's decisions are its id, its replica assignment (partition -> brokers), its config
overrides, and whether its deletion is decided. Two stores keep them:

- `ZkMetadataStore` (kafkactl.cluster.zk_metadata_store): a ZooKeeper cluster's znodes
  (`/brokers/topics/[t]`, `/config/topics/[t]` with its `/config/changes` notification,
  `/admin/delete_topics/[t]`); the controller acts on them through its watches.
- `LocalMetadataStore` (here): a standalone broker, a cluster of one, keeps them in
  `<first log dir>/topic-metadata.json` (written to a temp file, fsynced, renamed); its
  controller acts on them in process. The file's layout is the one standalone brokers have
  always written (version 1: id, partition count, configs per topic, and the topics whose
  deletion is decided), so existing data dirs start unchanged; every replica is this broker.

The topic admins (kafkactl.broker.topic_admin) decide through the same checks and write
through this seam; what differs between the two is only how the decision reaches the
partitions (watches and LeaderAndIsr over the wire, or the same partition states in
process: kafkactl.broker.replica_state).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kafkactl.cluster.topic_state import TopicAssignment


class TopicExistsError(Exception):
    """The topic exists (or its deletion is not finished)."""


class ConcurrentChangeError(Exception):
    """The topic changed since it was read: read it again and retry."""


class MetadataStore(Protocol):
    def read_assignment(self, name: str) -> TopicAssignment | None:
        """The topic's id and replica assignment; None when there is no such topic."""

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """A new topic with its overrides, in one durable step (TopicExistsError)."""

    def set_assignment(self, assignment: TopicAssignment) -> None:
        """Replace the assignment read before (ConcurrentChangeError if it changed)."""

    def read_topic_config(self, name: str) -> dict[str, str]:
        """The topic's config overrides ({} for none)."""

    def write_topic_config(self, name: str, configs: Mapping[str, str]) -> int:
        """Replace the topic's overrides; the change's sequence (a ZooKeeper zxid, or the
        local store's change count), so that an older change never replaces a newer."""

    def mark_for_deletion(self, name: str) -> None:
        """Decide the topic's deletion, durably."""


class LocalMetadataStore:
    """topic-metadata.json: a cluster of one's topics (this broker holds every replica), and
    the topics whose deletion is decided (persisted) while their log dirs may remain."""

    def __init__(self, path: Path, broker_id: int = 0) -> None:
        self.path = path
        self.broker_id = broker_id
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.deleting: set[str] = set()
        self.changes = 0

    # ---- the file ------------------------------------------------------------------------------
    def read(self) -> None:
        """Read the persisted topic list (before the LogManager opens logs); RuntimeError
        says what to do with an unreadable file."""
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text())
            saved = doc.get("topics", {})
            self.deleting = {str(n) for n in doc.get("deleting", [])}
            for name, info in saved.items():
                self.topics[name] = self._assignment(name, uuid.UUID(info["topic_id"]),
                                                     int(info["partitions"]))
                self.configs[name] = {str(k): str(v)
                                      for k, v in dict(info.get("configs", {})).items()}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"{self.path} is unreadable ({e}); move it away "
                               "to rebuild the topic list from the log directories") from e

    def write(self) -> None:
        """Persist the whole list: a temp file, fsynced, renamed over the old one, and the
        directory fsynced (raises OSError: the caller undoes its change)."""
        data: dict[str, Any] = {"version": 1, "topics": {
            name: {"topic_id": str(a.topic_id), "partitions": len(a.partitions),
                   "configs": self.configs.get(name, {})}
            for name, a in self.topics.items()}}
        if self.deleting:
            data["deleting"] = sorted(self.deleting)
        tmp = self.path.with_suffix(".json.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        with contextlib.suppress(OSError):
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _assignment(self, name: str, topic_id: uuid.UUID | None, count: int
                    ) -> TopicAssignment:
        return TopicAssignment(name, {p: [self.broker_id] for p in range(count)}, topic_id)

    def adopt(self, name: str, count: int) -> TopicAssignment:
        """A topic whose logs are on disk but not in the file (an older data dir), or a
        partition beyond its known count: known from now on (in memory; `write` keeps it)."""
        known = self.topics.get(name)
        if known is None:
            known = self.topics[name] = self._assignment(name, uuid.uuid4(), count)
        elif count > len(known.partitions):
            known.partitions.update((p, [self.broker_id])
                                    for p in range(len(known.partitions), count))
        return known

    # ---- MetadataStore -------------------------------------------------------------------------
    def read_assignment(self, name: str) -> TopicAssignment | None:
        return self.topics.get(name)

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        if assignment.name in self.topics or assignment.name in self.deleting:
            raise TopicExistsError(assignment.name)
        if assignment.topic_id is None:
            assignment.topic_id = uuid.uuid4()
        self.topics[assignment.name] = assignment
        self.configs[assignment.name] = dict(configs)
        try:
            self.write()
        except OSError:
            self.topics.pop(assignment.name, None)
            self.configs.pop(assignment.name, None)
            raise

    def set_assignment(self, assignment: TopicAssignment) -> None:
        if assignment.name not in self.topics:
            raise ConcurrentChangeError(assignment.name)
        old = self.topics[assignment.name]
        self.topics[assignment.name] = assignment
        try:
            self.write()
        except OSError:
            self.topics[assignment.name] = old
            raise

    def read_topic_config(self, name: str) -> dict[str, str]:
        return dict(self.configs.get(name, {}))

    def write_topic_config(self, name: str, configs: Mapping[str, str]) -> int:
        old = self.configs.get(name)
        self.configs[name] = dict(configs)
        try:
            self.write()
        except OSError:
            if old is None:
                self.configs.pop(name, None)
            else:
                self.configs[name] = old
            raise
        self.changes += 1
        return self.changes

    def mark_for_deletion(self, name: str) -> None:
        """The topic leaves the list and joins `deleting` in one write: a crash from here
        on finishes the deletion at the next start instead of adopting the remaining log
        dirs as a topic again."""
        assignment = self.topics.pop(name, None)
        configs = self.configs.pop(name, None)
        self.deleting.add(name)
        try:
            self.write()
        except OSError:
            self.deleting.discard(name)
            if assignment is not None:
                self.topics[name] = assignment
                self.configs[name] = configs or {}
            raise

    def remove_topic(self, name: str) -> None:
        """Forget a topic whose creation was undone (nothing of it is hosted)."""
        self.topics.pop(name, None)
        self.configs.pop(name, None)
        with contextlib.suppress(OSError):
            self.write()

    def finish_deletion(self, name: str) -> None:
        """Every log dir of the deleted topic is gone: its mark goes too."""
        if name in self.deleting:
            self.deleting.discard(name)
            self.write()
