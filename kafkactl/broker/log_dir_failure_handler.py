"""A cluster broker's log dir failures at runtime (Kafka's ReplicaManager.handleLogDirFailure).

A standalone broker keeps a failing dir online (kafkactl.log.manager): it has no other
replica to hand its partitions to, and a full disk works again once space is freed. A
broker of a ZooKeeper cluster does what Kafka does instead, at the first storage error in
a dir (the log manager's `storage_errors` calls `dir_failed`, from any thread):

- the dir goes offline until the broker restarts (LogManager.take_dir_offline): its
  partitions stop here at once (ReplicaStates.take_offline) and answer
  KAFKA_STORAGE_ERROR; nothing is made in it, nothing is checkpointed there, and the next
  start recovers it;
- the controller is told through ZooKeeper (/log_dir_event_notification, retried until
  written): it asks this broker which replicas it still hosts and moves the leadership of
  the others to in-sync replicas elsewhere, which leave this broker out of their ISR;
- a failure of the first dir (it holds the broker's own files) or of the last dir online
  stops the broker with status 1, as Kafka halts when all its log dirs are offline: its
  leaders move away and its registration goes at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kafkactl.cluster import log_dir_events

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafkactl.broker.replica_state import ReplicaStates
    from kafkactl.log.manager import LogManager

log = logging.getLogger("kafkactl.broker")

NOTIFY_RETRY_S = 1.0


class LogDirFailureHandler:
    def __init__(self, loop: asyncio.AbstractEventLoop, log_manager: LogManager,
                 replica_states: ReplicaStates, zk: KazooClient, broker_id: int,
                 stop_broker: Callable[[str], None]) -> None:
        self.loop = loop
        self.log_manager = log_manager
        self.replica_states = replica_states
        self.zk = zk
        self.broker_id = broker_id
        self.stop_broker = stop_broker
        self._failed: set[Path] = set()  # dirs handled (or being handed to the loop)
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopped = False

    def start(self) -> None:
        self.log_manager.storage_errors.listener = self.dir_failed
        if self.replica_states.fetchers is not None:  # followers' appends too
            self.replica_states.fetchers.storage_errors = self.log_manager.storage_errors

    def stop(self) -> None:
        """No more dirs taken offline (the broker stops: its own shutdown errors are only
        logged); notifications not written yet are given up."""
        self.stopped = True
        if self.log_manager.storage_errors.listener == self.dir_failed:
            self.log_manager.storage_errors.listener = None
        for task in self._tasks:
            task.cancel()

    def dir_failed(self, log_dir: Path, what: str) -> None:
        """(any thread) A storage error in `log_dir`: `what` failed."""
        if log_dir in self._failed or self.stopped:
            return
        self._failed.add(log_dir)
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._take_offline, log_dir, what)

    def _take_offline(self, log_dir: Path, what: str) -> None:
        lm = self.log_manager
        if self.stopped or log_dir in lm.offline:  # (two threads may both have called)
            return
        gone = lm.take_dir_offline(log_dir, f"storage error: {what}")
        self.replica_states.take_offline(gone)
        names = sorted(f"{t}-{p}" for t, p in gone)
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more"
                                         if len(names) > 10 else "")
        log.error("Log dir %s is offline after a storage error (%s): its %d replica(s) stop "
                  "here%s and other in-sync replicas take their leadership; restart the "
                  "broker with the dir repaired, or without it in log.dirs, to bring them "
                  "back.", log_dir, what, len(gone), f" ({shown})" if gone else "")
        if log_dir == lm.log_dirs[0] or not lm.online_dirs:
            why = "the first log dir (it holds the broker's own files)" \
                if log_dir == lm.log_dirs[0] else "every log dir"
            log.error("Stopping the broker: %s is offline.", why)
            self.stop_broker(f"{why} offline")
            return
        task = self.loop.create_task(self._notify(log_dir))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self, log_dir: Path) -> None:
        """Write the controller's notification, retried while ZooKeeper is away."""
        while not self.stopped:
            try:
                path = await asyncio.to_thread(log_dir_events.propagate, self.zk,
                                               self.broker_id)
                log.info("told the controller that log dir %s is offline (%s)", log_dir, path)
                return
            except Exception as e:
                log.warning("cannot tell the controller that log dir %s is offline yet "
                            "(%s: %s); retrying", log_dir, type(e).__name__, e)
                await asyncio.sleep(NOTIFY_RETRY_S)
