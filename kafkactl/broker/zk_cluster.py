"""A broker's membership of a ZooKeeper cluster (`zookeeper.connect` set).

- Registration: `/brokers/ids/[id]` (kept, and re-made after a session expiry, by
  ZkRegistration); its czxid is this broker's epoch.
- The controller: every broker runs a KafkaController; the one holding `/controller` acts.
- Fencing: requests from a controller older than the newest one seen are refused with
  STALE_CONTROLLER_EPOCH, and requests meant for an earlier registration of this broker
  with STALE_BROKER_EPOCH.
- Dynamic configs: a change made through any broker is written with a /config/changes
  notification (kafkactl.cluster.config_changes); every broker applies the notifications in
  order: a topic's overrides (`/config/topics/[t]`) to its hosted logs, the cluster-wide
  dynamic broker configs (`/config/brokers/<default>`) and its own (`/config/brokers/[id]`)
  to its DynamicBrokerConfig. Sensitive broker keys are not written to ZooKeeper (Kafka
  would need password.encoder.secret): they stay in the broker's data dir. A change that
  may turn unclean.leader.election.enable on goes to the controller too (Kafka's
  ConfigHandlers), which elects the offline partitions that may then have a leader.
- Adoption: topics of this broker's data dir that ZooKeeper does not know (a standalone
  broker joining a cluster) are registered with this broker as their only replica.
- Controlled shutdown: on SIGTERM the broker asks the controller to move its leaders away
  before it stops (Kafka's ControlledShutdown), retrying while replicated partitions remain.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.broker.zk_registration import ZkRegistration
from kafkactl.cluster import config_changes, zk_paths
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.broker_connection import PLAINTEXT, InterBrokerSecurity, request_once
from kafkactl.cluster.config_changes import ConfigChangeListener, EntityConfig
from kafkactl.cluster.controller import KafkaController
from kafkactl.cluster.controller_zk import UNCLEAN_KEY
from kafkactl.log.errors import ConfigError
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafkactl.broker.config import BrokerConfig

log = logging.getLogger("kafkactl.broker")

CONTROLLED_SHUTDOWN_VERSION = 3
JOIN_RETRY_S = 1.0
JOIN_WAIT_S = 5.0
PUBLISH_TIMEOUT_S = 10.0


def fetcher_settings(config: BrokerConfig) -> FetcherSettings:
    return FetcherSettings(
        max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
        min_bytes=config.get_int("replica.fetch.min.bytes"),
        max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        partition_max_bytes=config.get_int("replica.fetch.max.bytes"),
        backoff_ms=config.get_int("replica.fetch.backoff.ms"))


def _may_enable_unclean(config: dict[str, str] | None) -> bool:
    """A config layer that exists and does not set unclean.leader.election.enable false."""
    return config is not None and \
        config.get(UNCLEAN_KEY, "").strip().lower() != "false"


class ZkCluster:
    def __init__(self, config: BrokerConfig, registration: ZkRegistration,
                 controller: KafkaController, cache: ZkMetadataCache,
                 store: PartitionStore, inter_broker: InterBrokerSecurity = PLAINTEXT) -> None:
        assert registration.zk is not None
        self.config = config
        self.zk: KazooClient = registration.zk
        self.registration = registration
        self.controller = controller
        self.cache = cache
        self.store = store
        self.broker_id = config.broker_id
        self.inter_broker = inter_broker  # the listener and credentials to reach brokers
        self.controller_epoch_seen = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.config_changes = ConfigChangeListener(self.zk, self._on_config_change)
        self._loaded_topics: set[str] = set()  # configs read when it came to be hosted
        self.fetchers = ReplicaFetcherManager(config.broker_id, cache,
                                              fetcher_settings(config), inter_broker)
        self._local_topics: dict[str, tuple[int, dict[str, str]]] = {}
        self._topic_metadata: Path | None = None
        self._done: set[str] = set()  # join steps completed
        self._start_task: asyncio.Task[None] | None = None

    # ---- start / stop ------------------------------------------------------------------------
    async def start(self, local_topics: dict[str, tuple[int, dict[str, str]]],
                    topic_metadata: Path | None = None) -> None:
        """After this broker registered: adopt local topics, watch topic configs, and run
        the controller election. ZooKeeper going away meanwhile is not a start-up failure:
        the steps left are retried in the background until it is back."""
        self._loop = asyncio.get_running_loop()
        self._local_topics = local_topics
        self._topic_metadata = topic_metadata
        # A ZooKeeper that vanishes mid-way leaves kazoo calls waiting for it: start-up
        # does not wait past JOIN_WAIT_S (a SIGTERM must still stop the broker).
        first = self._loop.create_task(self._join_steps())
        await asyncio.wait({first}, timeout=JOIN_WAIT_S)
        if first.done() and not first.cancelled() and first.exception() is None:
            return
        if not first.done():
            log.warning("joining the cluster takes more than %g s (is ZooKeeper at %s "
                        "reachable?); going on in the background", JOIN_WAIT_S,
                        self.config.get("zookeeper.connect"))
        self._start_task = self._loop.create_task(self._finish_join(first))

    async def _finish_join(self, first: asyncio.Task[None]) -> None:
        try:
            await first
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("joining the cluster is not finished (%s: %s); retrying",
                        type(e).__name__, e)
        await self._retry_join()

    async def _join_steps(self) -> None:
        if "adopt" not in self._done:
            if self._local_topics:
                await asyncio.to_thread(self._adopt, self._local_topics)
            if self._topic_metadata is not None and self._topic_metadata.exists():
                # adopted once: from now on ZooKeeper alone says which topics exist
                os.replace(self._topic_metadata,
                           self._topic_metadata.with_name(self._topic_metadata.name +
                                                          ".adopted"))
            self._done.add("adopt")
        if "configs" not in self._done:
            await asyncio.to_thread(self._watch_configs)
            self._done.add("configs")
        if "controller" not in self._done:
            await self.controller.start()
            self._done.add("controller")

    async def _retry_join(self) -> None:
        while True:
            await asyncio.sleep(JOIN_RETRY_S)
            try:
                await self._join_steps()
                log.info("joined the cluster")
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("joining the cluster: %s: %s", type(e).__name__, e)

    def _adopt(self, local: dict[str, tuple[int, dict[str, str]]]) -> None:
        from kazoo.exceptions import NodeExistsError

        for name, (partitions, configs) in sorted(local.items()):
            found = zk_topics.read_assignment(self.zk, name)
            if found is not None:
                if any(self.broker_id not in r for r in found.partitions.values()):
                    log.warning("topic %s in ZooKeeper is assigned to brokers %s; this "
                                "broker's local logs of it are not served", name,
                                sorted({b for r in found.partitions.values() for b in r}))
                continue
            assignment = zk_topics.TopicAssignment(
                name, {p: [self.broker_id] for p in range(partitions)}, uuid.uuid4())
            try:
                zk_topics.create_topic(self.zk, assignment, configs)
                log.info("registered local topic %s (%d partitions) in ZooKeeper", name,
                         partitions)
            except NodeExistsError:
                pass

    # ---- dynamic configs --------------------------------------------------------------------
    def _watch_configs(self) -> None:
        """Blocking: this broker's dynamic broker configs as ZooKeeper has them, then the
        /config/changes listener (which applies the notifications already there too)."""
        for entity in (zk_paths.DEFAULT_BROKER_ENTITY, str(self.broker_id)):
            found = config_changes.read_entity_config(self.zk, config_changes.BROKERS, entity)
            if found.config is not None:
                self._call_soon(self._apply_broker_config, found)
        self.config_changes.start()

    def _on_config_change(self, change: EntityConfig) -> None:
        """The listener's thread: applied on the event loop, in notification order. The
        controller hears of a topic's config or this broker's dynamic broker config that
        does not set unclean.leader.election.enable false (the setting may be true now:
        it reads the effective one from ZooKeeper)."""
        if change.entity_type == config_changes.TOPICS:
            if _may_enable_unclean(change.config):
                self.controller.enable_topic_unclean_leader_election(change.name)
            self._call_soon(self._apply_topic_config, change)
        elif change.entity_type == config_changes.BROKERS:
            if change.name in (zk_paths.DEFAULT_BROKER_ENTITY, str(self.broker_id)) \
                    and _may_enable_unclean(change.config):
                self.controller.enable_default_unclean_leader_election()
            self._call_soon(self._apply_broker_config, change)

    def _call_soon(self, fn: Any, *args: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    def _apply_topic_config(self, change: EntityConfig) -> None:
        configs = self.store.zk_topic_config(change.name, change.config, change.zxid)
        if configs is None or change.name not in self.store.configs.overrides:
            return  # not known here: read from ZooKeeper when it is hosted or described
        if self.store.configs.overrides.get(change.name) == configs:
            return
        try:
            self.store.update_topic_config(change.name, configs)
            log.info("topic %s configs are now %s", change.name,
                     configs or "the broker defaults")
        except ValueError as e:
            log.warning("ignoring the configs of topic %s in ZooKeeper: %s", change.name, e)

    def _apply_broker_config(self, change: EntityConfig) -> None:
        """A dynamic broker config layer changed in ZooKeeper: the cluster default, or this
        broker's own (other brokers' layers are theirs)."""
        dyn = self.store.dynamic_config
        if dyn is None or change.config is None:
            return
        if change.name == zk_paths.DEFAULT_BROKER_ENTITY:
            rname = ""
        elif change.name == str(self.broker_id):
            rname = dyn.broker_id
        else:
            return
        current = dyn.layer(rname)
        wanted = dict(change.config)
        wanted.update({k: v for k, v in current.items() if self.config.is_sensitive(k)})
        if wanted == current:
            return
        try:
            dyn.update(rname, wanted)
        except (ConfigError, ValueError) as e:
            log.warning("ignoring the dynamic broker configs of %s in ZooKeeper: %s",
                        zk_paths.broker_config(change.name), e)

    async def publish_broker_config(self, resource_name: str, layer: dict[str, str]) -> None:
        """Write a dynamic broker config layer ("" = the cluster default) to ZooKeeper with
        its change notification (sensitive keys stay in this broker's data dir). Raises
        kazoo's errors, or TimeoutError when ZooKeeper does not answer in time."""
        entity = resource_name or zk_paths.DEFAULT_BROKER_ENTITY
        shared = {k: v for k, v in layer.items() if not self.config.is_sensitive(k)}
        await asyncio.wait_for(asyncio.to_thread(config_changes.write_entity_config, self.zk,
                                                 config_changes.BROKERS, entity, shared),
                               PUBLISH_TIMEOUT_S)

    async def load_topic_config(self, topic: str) -> None:
        """Before hosting a partition of `topic`: its overrides as ZooKeeper has them now
        (read again whenever the topic comes to be hosted here after it was not: it may
        have been deleted and re-created meanwhile)."""
        if topic in self._loaded_topics and topic in self.store.configs.overrides:
            return
        found = await asyncio.to_thread(config_changes.read_entity_config, self.zk,
                                        config_changes.TOPICS, topic)
        configs = self.store.zk_topic_config(topic, found.config, found.zxid) or {}
        try:
            self.store.update_topic_config(topic, configs)
        except ValueError as e:
            log.warning("ignoring the configs of topic %s in ZooKeeper: %s", topic, e)
            self.store.set_topic_overrides(topic, {})
        self._loaded_topics.add(topic)

    async def stop(self) -> None:
        self.config_changes.stop()
        self.fetchers.shutdown()
        if self._start_task is not None:
            self._start_task.cancel()
        await self.controller.stop()

    # ---- fencing -----------------------------------------------------------------------------
    def check_controller_request(self, controller_id: int, controller_epoch: int,
                                 broker_epoch: int) -> ErrorCode:
        if controller_epoch < self.controller_epoch_seen:
            log.warning("ignoring a request of controller %d at epoch %d (epoch %d is newer)",
                        controller_id, controller_epoch, self.controller_epoch_seen)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        own = self.registration.broker_epoch
        if 0 <= broker_epoch < own:
            return ErrorCode.STALE_BROKER_EPOCH
        self.controller_epoch_seen = controller_epoch
        return ErrorCode.NONE

    # ---- controlled shutdown -----------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaders away; retried (as Kafka's
        controlled.shutdown.max.retries / .retry.backoff.ms) while some remain."""
        from kazoo.protocol.states import KazooState

        if not self.config.get_bool("controlled.shutdown.enable"):
            return
        if self.registration.zk is None:
            return  # never registered (a refused start) or already left: nothing to move
        if self.zk.state != KazooState.CONNECTED:
            # no controller can act without ZooKeeper: do not hold the shutdown up
            log.warning("ZooKeeper is not reachable: stopping without a controlled shutdown")
            return
        retries = self.config.get_int("controlled.shutdown.max.retries")
        backoff = self.config.get_int("controlled.shutdown.retry.backoff.ms") / 1000
        for attempt in range(retries + 1):
            if self.controller.active:  # this broker is the controller: no round trip
                try:
                    remaining = await asyncio.wait_for(
                        self.controller.controlled_shutdown(self.broker_id), 10)
                    if not remaining:
                        log.info("controlled shutdown succeeded (this broker is the "
                                 "controller)")
                        return
                except Exception as e:
                    log.info("controlled shutdown: %s: %s", type(e).__name__, e)
                if attempt < retries:
                    await asyncio.sleep(backoff)
                continue
            controller = self.cache.broker(self.cache.controller_id())
            address = controller.endpoint(self.inter_broker.listener) if controller else None
            if controller is not None and address is not None:
                try:
                    resp = await request_once(
                        *address, ApiKey.CONTROLLED_SHUTDOWN,
                        CONTROLLED_SHUTDOWN_VERSION,
                        {"broker_id": self.broker_id,
                         "broker_epoch": self.registration.broker_epoch},
                        client_id=f"kafkactl-broker-{self.broker_id}", timeout_s=10,
                        security=self.inter_broker)
                    remaining = resp.get("remaining_partitions") or []
                    if resp["error_code"] == ErrorCode.NONE and not remaining:
                        log.info("controlled shutdown succeeded (controller %d)",
                                 controller.node_id)
                        return
                    log.info("controlled shutdown: controller %d answered %s with %d "
                             "partition(s) still led here", controller.node_id,
                             ErrorCode(resp["error_code"]).name, len(remaining))
                except (OSError, EOFError, TimeoutError) as e:
                    log.info("controlled shutdown: controller unreachable (%s: %s)",
                             type(e).__name__, e)
            if attempt < retries:
                await asyncio.sleep(backoff)
        log.warning("controlled shutdown did not complete; stopping anyway")
