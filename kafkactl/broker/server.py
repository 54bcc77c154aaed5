"""KafkaServer: wires config, LogManager, partition store, topic admin, replica manager,
coordinators (one BrokerServices), the handler table and the network layer together; runs
background flush/retention/checkpoint work; stops gracefully.

Shutdown order (SIGTERM/SIGINT): stop accepting, complete long polls, wait (bounded) for
in-flight requests, close connections, snapshot producer state, then LogManager.shutdown()
(flush, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkactl.broker.client_quotas import STORE_FILE, ClientQuotaStore
from kafkactl.broker.config import BrokerConfig, ConfigError, log_default_props
from kafkactl.broker.coordinator import GroupCoordinator
from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.coordinator.transaction_coordinator import TransactionCoordinator
from kafkactl.broker.coordinator.transaction_state_manager import TXN_TOPIC
from kafkactl.broker.dynamic_config import FILE_NAME as DYNAMIC_CONFIG_FILE
from kafkactl.broker.dynamic_config import DynamicBrokerConfig
from kafkactl.broker.handlers import HANDLERS
from kafkactl.broker.isr_changer import IsrChanger
from kafkactl.broker.log_dir_failure_handler import LogDirFailureHandler
from kafkactl.broker.metadata_cache import BrokerEndpoint, StandaloneMetadataCache
from kafkactl.broker.metrics import BrokerMetrics, MeteredHandler
from kafkactl.broker.network import SocketServer
from kafkactl.broker.open_files import check_start_limit
from kafkactl.broker.partition_store import PartitionStore, TopicLogConfigs
from kafkactl.broker.producer_id_manager import ProducerIdManager
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.broker.quota_manager import WINDOW_NUM, WINDOW_SIZE_S, QuotaManager
from kafkactl.broker.replica_manager import ReplicaManager
from kafkactl.broker.replica_state import ReplicaStates
from kafkactl.broker.request_handler import KafkaApis
from kafkactl.broker.security.channel import channel_builder, tls_failure_reporter
from kafkactl.broker.security.gate import AuthenticationGate
from kafkactl.broker.security.inter_broker import inter_broker_listener, inter_broker_security
from kafkactl.broker.security.listener_reconfig import (
    ListenerTlsReconfigurer,
    with_stored_dynamic_configs,
)
from kafkactl.broker.security.listeners import (
    ListenerSecurity,
    SecurityConfigError,
    check_broker_security,
    warn_if_exposed,
)
from kafkactl.broker.security.store_file import StoreFileError
from kafkactl.broker.security.stores import security_stores
from kafkactl.broker.services import BrokerServices
from kafkactl.broker.standalone_topic_admin import METADATA_FILE, StandaloneTopicAdmin
from kafkactl.broker.zk_cluster import ZkCluster
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.broker.zk_topic_admin import ZkTopicAdmin
from kafkactl.cluster.broker_connection import PLAINTEXT, InterBrokerSecurity
from kafkactl.cluster.broker_registry import new_cluster_id
from kafkactl.cluster.controller import KafkaController
from kafkactl.cluster.metadata_store import LocalMetadataStore
from kafkactl.cluster.producer_id_block import allocate_block
from kafkactl.log.kernels import STATUS as KERNELS_STATUS
from kafkactl.log.manager import LogDirUnusableError, LogManager

if TYPE_CHECKING:
    from kafkactl.broker.metrics_http import MetricsServer
    from kafkactl.broker.zk_registration import ZkRegistration

log = logging.getLogger(__name__)

FLUSH_CHECK_INTERVAL_S = 1.0
SHUTDOWN_DRAIN_TIMEOUT_S = 10.0


class BrokerStartupError(Exception):
    """The broker cannot start; the message says why and what to do."""


def read_meta_properties(path: Path) -> dict[str, str]:
    """meta.properties as a dict; {} when absent or damaged (not UTF-8 text, a broker.id
    or version that is not a number): a damaged file is logged and rewritten."""
    from kafkactl.protocol.properties import parse_properties

    try:
        meta = parse_properties(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as e:
        problem = f"byte {e.start} is not UTF-8"
    else:
        bad = [k for k in ("broker.id", "node.id", "version")
               if k in meta and not meta[k].lstrip("-").isdigit()]
        if not bad and all(v.isprintable() for v in meta.values()):
            return meta
        problem = f"{', '.join(bad) or 'a value'} is not readable"
    log.warning("%s is damaged (%s): treating it as absent and writing it again.", path,
                problem)
    return {}


def ensure_meta_properties(log_dirs: list[Path], broker_id: int, cluster_id: str | None) -> str:
    """Read (or write) meta.properties in each log dir; all must agree. Returns the cluster id."""
    found: dict[str, str] = {}
    for d in log_dirs:
        meta = read_meta_properties(d / "meta.properties")
        if meta:
            if "broker.id" in meta and int(meta["broker.id"]) != broker_id:
                raise BrokerStartupError(
                    f"{d / 'meta.properties'} belongs to broker.id={meta['broker.id']}, but this "
                    f"broker is {broker_id}; use --broker-id {meta['broker.id']} or another "
                    "data dir")
            if meta.get("cluster.id"):
                found[str(d)] = meta["cluster.id"]
    ids = set(found.values())
    if len(ids) > 1:
        raise BrokerStartupError(f"log dirs belong to different clusters: {found}")
    cid = cluster_id or (ids.pop() if ids else new_cluster_id())
    for d in log_dirs:
        path = d / "meta.properties"
        if str(d) in found:
            continue
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
                       f"version=0\nbroker.id={broker_id}\ncluster.id={cid}\n")
        os.replace(tmp, path)
    return cid


def check_supported_security(
        cfg: BrokerConfig) -> tuple[dict[str, ListenerSecurity], InterBrokerSecurity]:
    """Every listener's security (kafkactl.broker.security.listeners) and, in a ZooKeeper
    cluster, how this broker reaches the others; BrokerStartupError naming the first key
    this broker cannot honour (never a silent downgrade)."""
    try:
        listeners = check_broker_security(cfg)
        return listeners, (inter_broker_security(cfg, listeners)
                           if cfg.get("zookeeper.connect") else PLAINTEXT)
    except SecurityConfigError as e:
        raise BrokerStartupError(str(e)) from None


def inter_broker_listener_name(cfg: BrokerConfig, listeners: dict[str, ListenerSecurity],
                               inter_broker: InterBrokerSecurity) -> str | None:
    """The inter-broker listener (not held to the broker-wide max.connections and
    max.connection.creation.rate): a cluster's; standalone, the one Kafka would take (None
    when none fits)."""
    if cfg.get("zookeeper.connect"):
        return inter_broker.listener
    try:
        return inter_broker_listener(cfg, listeners)
    except SecurityConfigError:
        return None


def socket_server_settings(cfg: BrokerConfig) -> dict[str, Any]:
    """SocketServer keyword arguments from the network keys (ConfigError names a bad key)."""
    from kafkactl.broker.connection_quotas import parse_per_ip_overrides

    try:
        overrides = parse_per_ip_overrides(cfg.get("max.connections.per.ip.overrides"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    for key in ("socket.request.max.bytes", "socket.request.read.timeout.ms",
                "connections.max.idle.ms"):
        if cfg.get_int(key) <= 0:
            raise ConfigError(f"{key}={cfg.get(key)} must be positive")
    delay = failed_authentication_delay_ms(cfg)
    return {
        "max_request_size": cfg.get_int("socket.request.max.bytes"),
        "idle_timeout_ms": cfg.get_int("connections.max.idle.ms"),
        "read_timeout_ms": cfg.get_int("socket.request.read.timeout.ms"),
        "max_queued_bytes": cfg.get_int("queued.max.request.bytes"),
        "max_connections": cfg.get_int("max.connections"),
        "max_connections_per_ip": cfg.get_int("max.connections.per.ip"),
        "per_ip_overrides": overrides,
        "failed_auth_delay_ms": delay,
    }


FAILED_AUTH_DELAY_KEY = "connection.failed.authentication.delay.ms"
FAILED_AUTH_DELAY_DEFAULT_MS = 100  # Kafka's default


def failed_authentication_delay_ms(cfg: BrokerConfig) -> int:
    """Kafka's connection.failed.authentication.delay.ms: how long a failed authentication's
    answer and close wait. At least 0 and, as Kafka requires, less than
    connections.max.idle.ms (else the idle reaper would close the connection first)."""
    raw = cfg.get(FAILED_AUTH_DELAY_KEY).strip() or str(FAILED_AUTH_DELAY_DEFAULT_MS)
    try:
        delay = int(raw)
    except ValueError:
        raise ConfigError(f"{FAILED_AUTH_DELAY_KEY}={raw!r} is not an integer") from None
    if delay < 0:
        raise ConfigError(f"{FAILED_AUTH_DELAY_KEY}={delay} must be at least 0")
    idle = cfg.get_int("connections.max.idle.ms")
    if delay >= idle:
        raise ConfigError(
            f"{FAILED_AUTH_DELAY_KEY}={delay} must be less than connections.max.idle.ms="
            f"{idle}, so that failed authentication answers are not cut off by the idle "
            "timeout")
    return delay


def highest_producer_id(partitions: PartitionStore, full: bool) -> int:
    """The highest producer id in the hosted partitions' producer states (and, when
    `full`, in every batch header of their logs); -1 when there is none."""
    from kafkactl.log.producer_ids import max_producer_id

    best = -1
    for part in list(partitions.partitions.values()):
        producers = part.producer_state.producers
        if producers:
            best = max(best, max(producers))
        if full:
            best = max(best, max_producer_id(part.log))
    return best


def local_topics(metadata: LocalMetadataStore,
                 store: PartitionStore) -> dict[str, tuple[int, dict[str, str]]]:
    """The topics of a standalone broker's data dir joining a cluster (name -> partition
    count, config overrides): those of its topic-metadata.json and the logs on disk. None
    when there is no topic-metadata.json: a cluster member's data dir, or one adopted
    already (ZooKeeper is then the only truth: a log of a deleted topic is never revived)."""
    if not metadata.path.exists():
        return {}
    out = {name: (len(t.partitions), metadata.read_topic_config(name))
           for name, t in metadata.topics.items() if name not in metadata.deleting}
    for topic, partition in store.logs_on_disk():
        if topic in metadata.deleting:
            continue
        count, configs = out.get(topic, (0, {}))
        out[topic] = (max(count, partition + 1), configs)
    return out


class KafkaServer:
    """One broker: `startup()` builds its parts in dependency order (log manager, partition
    store, topic admin, replica manager, coordinators) into one BrokerServices, then
    listens; `shutdown()` stops whatever a (possibly failed) start-up made."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.auto_create_topics = config.get_bool("auto.create.topics.enable")
        self.explicit_broker_keys: set[str] = set()
        self.bound: list[tuple[str, int]] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.log_manager: LogManager | None = None
        self.purgatory: FetchPurgatory | None = None
        self.partitions: PartitionStore | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.zk_registration: ZkRegistration | None = None
        self.cluster: ZkCluster | None = None
        self.isr_changer: IsrChanger | None = None
        self.log_dir_failures: LogDirFailureHandler | None = None
        self.exit_code = 0  # 1 once it stops because its log dirs failed
        self._local_topics: dict[str, tuple[int, dict[str, str]]] = {}
        self._topic_metadata_path: Path | None = None
        self.services: BrokerServices | None = None
        self.socket_server: SocketServer | None = None
        self.metrics: BrokerMetrics | None = None  # metrics.listen: kafkactl.broker.metrics
        self.metrics_server: MetricsServer | None = None

    # ---- start -----------------------------------------------------------------------------
    # C901: the start order in one sequence; branches are checks and standalone/ZK
    async def startup(self) -> None:  # noqa: C901
        from kafkactl.log import producer_state
        from kafkactl.log.config import LogConfig
        from kafkactl.log.errors import LogDirInUseError

        cfg = self.config
        # the listeners' security: server.properties with the stored dynamic configs over it
        listener_security, inter_broker = check_supported_security(with_stored_dynamic_configs(
            cfg, cfg.log_dirs[0].resolve() / DYNAMIC_CONFIG_FILE))
        self.listener_protocols = {n: s.protocol for n, s in listener_security.items()}
        network_settings = socket_server_settings(cfg)
        self._start_metrics()  # /health answers, /ready says 503, while the logs load
        log_dirs = [d.resolve() for d in cfg.log_dirs]
        if len(set(log_dirs)) != len(log_dirs):  # it would lock itself out ("in use")
            raise BrokerStartupError(
                "Duplicate log directory found: " + ", ".join(map(str, cfg.log_dirs)))
        for d in log_dirs[:1]:  # the others are the LogManager's (offline if it fails)
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise BrokerStartupError(f"cannot create log dir {d}: {e.strerror}") from e
        props = log_default_props(cfg.props)
        try:
            default_log_config = LogConfig.from_properties(props)
        except ValueError as e:
            raise ConfigError(str(e)) from e
        producer_state.configure(cfg.get_int("producer.id.expiration.ms"),
                                 cfg.get_int("producer.id.expiration.check.interval.ms"))
        purgatory = self.purgatory = FetchPurgatory()
        topic_metadata = LocalMetadataStore(log_dirs[0] / METADATA_FILE)
        try:
            topic_metadata.read()
        except RuntimeError as e:
            raise BrokerStartupError(str(e)) from e
        log_configs = TopicLogConfigs(
            default_log_config, dict(topic_metadata.configs))
        check_start_limit(log_dirs)
        try:
            log_manager = self.log_manager = LogManager(log_dirs, default_log_config,
                                                        topic_config=log_configs.for_topic)
            log_manager.load()
        except LogDirInUseError as e:
            raise BrokerStartupError(
                f"{e} Another broker is using this data dir; stop it or pick another "
                "--data-dir.") from e
        except LogDirUnusableError as e:
            raise BrokerStartupError(str(e)) from None
        zk_cluster_id: str | None = None
        if cfg.get("zookeeper.connect"):
            from kafkactl.broker.zk_registration import ZkRegistration, ZkRegistrationError

            self.zk_registration = ZkRegistration(cfg)
            try:
                zk_cluster_id = await asyncio.to_thread(
                    self.zk_registration.connect_and_check, log_manager.online_dirs)
            except ZkRegistrationError as e:
                raise BrokerStartupError(str(e)) from None
        cluster_id = ensure_meta_properties(
            log_manager.online_dirs, cfg.broker_id, zk_cluster_id or cfg.get("cluster.id") or None)

        endpoints = cfg.listeners
        advertised = cfg.advertised_listeners[0]
        me = BrokerEndpoint(cfg.broker_id, advertised.host, advertised.port,
                            listeners=tuple((e.listener, e.host, e.port)
                                            for e in cfg.advertised_listeners))
        partitions = self.partitions = PartitionStore(log_manager, log_configs, purgatory)
        cache: StandaloneMetadataCache | ZkMetadataCache
        topic_admin: StandaloneTopicAdmin | ZkTopicAdmin
        if self.zk_registration is None:
            cache = StandaloneMetadataCache(cluster_id, me)
            topic_admin = StandaloneTopicAdmin(
                partitions, cache, topic_metadata, config=cfg, broker_id=cfg.broker_id,
                default_partitions=cfg.get_int("num.partitions"),
                delete_enabled=cfg.get_bool("delete.topic.enable"))
        else:  # a ZooKeeper cluster: the controller decides what this broker hosts
            assert self.zk_registration.zk is not None
            cache = ZkMetadataCache(cluster_id, me)
            controller = KafkaController(
                self.zk_registration.zk, cfg.broker_id, inter_broker=inter_broker,
                unclean_leader_election=cfg.get_bool("unclean.leader.election.enable"),
                leader_rebalance_interval_s=(
                    cfg.get_int("leader.imbalance.check.interval.seconds")
                    if cfg.get_bool("auto.leader.rebalance.enable") else None),
                leader_imbalance_percent=cfg.get_int("leader.imbalance.per.broker.percentage"))
            topic_admin = ZkTopicAdmin(self.zk_registration.zk, cache, partitions, controller,
                                       config=cfg, broker_id=cfg.broker_id)
            self.cluster = ZkCluster(cfg, self.zk_registration, controller, cache, partitions,
                                     inter_broker)
            self._local_topics = local_topics(topic_metadata, partitions)
            self._topic_metadata_path = topic_metadata.path
        replica_manager = ReplicaManager(
            partitions, topic_admin, purgatory, cache,
            auto_create=self.auto_create_topics and self.cluster is None)
        replica_manager.fetch_max_bytes = cfg.get_int("fetch.max.bytes")
        # the one partition lifecycle: a cluster's LeaderAndIsr/StopReplica, or the
        # standalone broker's own controller in process
        replica_states = ReplicaStates(cfg.broker_id, partitions, replica_manager, purgatory)
        if self.cluster is not None:
            replica_states.fetchers = self.cluster.fetchers
            replica_states.load_topic_config = self.cluster.load_topic_config
            registration = self.zk_registration
            assert registration is not None and isinstance(cache, ZkMetadataCache)
            self.isr_changer = IsrChanger(cfg.broker_id, cache,
                                          lambda: registration.broker_epoch,
                                          replica_manager.high_watermark_moved, inter_broker)
            replica_manager.isr_changes = self.isr_changer
            self.log_dir_failures = LogDirFailureHandler(
                asyncio.get_running_loop(), log_manager, replica_states,
                registration.zk, cfg.broker_id, self._stop_after_failure)
            self.log_dir_failures.start()
            # replication throttling: the live broker props (dynamic configs land there)
            # and each topic's overrides say what is throttled, and how much
            from kafkactl.broker.replication_quota import ReplicationQuota

            overrides = partitions.configs.overrides.get
            replica_manager.leader_quota = ReplicationQuota.leader(cfg.broker_id, cfg.props,
                                                                   overrides)
            self.cluster.fetchers.quota = ReplicationQuota.follower(cfg.broker_id, cfg.props,
                                                                    overrides)
        group_coordinator = self.group_coordinator = GroupCoordinator(
            cfg, cache, topic_admin, partitions, replica_manager)
        # it coordinates the groups of the __consumer_offsets partitions this broker leads
        replica_states.listeners[OFFSETS_TOPIC] = group_coordinator
        # it coordinates the transactional ids of the __transaction_state partitions this
        # broker leads (its producer ids come once the hosted logs are loaded)
        txn_coordinator = self.txn_coordinator = TransactionCoordinator(
            cfg, cache, topic_admin, partitions, replica_manager, None,
            broker_id=cfg.broker_id, inter_broker=inter_broker,
            group_coordinator=group_coordinator)
        replica_states.listeners[TXN_TOPIC] = txn_coordinator
        if isinstance(topic_admin, StandaloneTopicAdmin):
            topic_admin.replicas = replica_states
            topic_admin.load()  # every partition of the data dir, through the lifecycle
        allocate: Callable[[int], tuple[int, int]] | None = None
        if self.zk_registration is not None and self.zk_registration.zk is not None:
            zk = self.zk_registration.zk
            allocate = functools.partial(allocate_block, zk, cfg.broker_id)
        producer_ids = ProducerIdManager(  # above every id in the hosted logs
            log_dirs[0] / "producer-id-block",
            lambda full: highest_producer_id(partitions, full), allocate)
        txn_coordinator.producer_ids = producer_ids
        dynamic_config = DynamicBrokerConfig(
            cfg, self.explicit_broker_keys, log_dirs[0] / DYNAMIC_CONFIG_FILE, partitions)
        dynamic_config.load()
        zk = self.zk_registration.zk if self.zk_registration is not None else None
        try:
            credentials, authorizer = await asyncio.to_thread(
                security_stores, cfg, log_dirs[0], zk)
        except StoreFileError as e:
            raise BrokerStartupError(str(e)) from None
        except Exception as e:
            if zk is None:
                raise
            raise BrokerStartupError(f"cannot load the ACLs and SCRAM credentials from "
                                     f"ZooKeeper ({type(e).__name__}: {e})") from None
        quotas = _quota_manager(cfg, zk)
        if zk is not None:  # the quotas of the cluster, read before serving
            try:
                await asyncio.to_thread(quotas.store.start)
            except Exception as e:
                raise BrokerStartupError(f"cannot load the client quotas from ZooKeeper "
                                         f"({type(e).__name__}: {e})") from None
        self.services = BrokerServices(
            broker_id=cfg.broker_id, config=cfg, dynamic_config=dynamic_config,
            metadata_cache=cache, topic_admin=topic_admin, partitions=partitions,
            replica_states=replica_states,
            replica_manager=replica_manager, fetch_purgatory=purgatory,
            group_coordinator=group_coordinator, txn_coordinator=txn_coordinator,
            producer_ids=producer_ids,
            log_manager=log_manager, auto_create_topics=self.auto_create_topics,
            cluster=self.cluster,
            authorizer=authorizer, credentials=credentials, quotas=quotas,
            listener_endpoints={e.listener: (e.host, e.port) for e in cfg.advertised_listeners})
        apis = KafkaApis(self.services, HANDLERS)
        handler: Any = AuthenticationGate(apis) if any(
            s.uses_sasl for s in listener_security.values()) else apis
        if self.metrics is not None:
            handler = MeteredHandler(handler, self.metrics)

        self.socket_server = SocketServer(handler, **network_settings)
        connection_quotas = self.socket_server.quotas
        connection_quotas.rate_source = quotas  # connection_creation_rate per IP
        # max.connections and max.connection.creation.rate, broker-wide and per listener,
        # live on every change
        connection_quotas.configure_rates(
            [ep.listener for ep in endpoints],
            inter_broker_listener_name(cfg, listener_security, inter_broker),
            quotas.window_num, quotas.window_size_s)
        connection_quotas.update(cfg.props)
        dynamic_config.reconfigurables.append(connection_quotas.update)
        if self.metrics is not None:
            self.metrics.attach(self.services, self.socket_server)
        self.socket_server.log_limiters.extend(
            s.failure_log for s in listener_security.values()
            if s.uses_sasl or s.ssl_context is not None)
        self.socket_server.tls_failed = tls_failure_reporter(
            listener_security, None if self.metrics is None else self.metrics.count_failed_auth)
        warn_if_exposed(cfg, listener_security)
        # dynamic TLS settings reach the listeners' new connections (acceptors: as started)
        # and, the inter-broker listener's, this broker's new connections to the others
        ListenerTlsReconfigurer(
            listener_security, self.socket_server.acceptors,
            inter_broker_listener=inter_broker_listener_name(cfg, listener_security,
                                                             inter_broker),
            inter_broker=inter_broker).register(dynamic_config)
        for ep in endpoints:
            sec = listener_security[ep.listener]
            try:
                host, port = await self.socket_server.start(
                    ep.host, ep.port, listener=ep.listener, ssl_context=sec.ssl_context,
                    setup=channel_builder(sec, credentials))
            except OSError as e:
                raise BrokerStartupError(
                    f"cannot listen on {ep.host or '*'}:{ep.port}: {e.strerror}; is another "
                    "broker running? Pick another port with --listen HOST:PORT") from e
            self.bound.append((host, port))
            if ep.port == 0 and not cfg.get("advertised.listeners"):
                advertised_host = self.services.listener_endpoints[ep.listener][0]
                self.services.listener_endpoints[ep.listener] = (advertised_host, port)
                me = dataclasses.replace(me, listeners=tuple(
                    (n, h, port if n == ep.listener else p) for n, h, p in me.listeners))
                if ep.listener == cfg.advertised_listeners[0].listener:
                    me = dataclasses.replace(me, port=port)
                cache.update_broker(me)
        await group_coordinator.startup()
        await txn_coordinator.startup()
        if self.zk_registration is not None and self.cluster is not None:
            await self._join_cluster(self.zk_registration, self.cluster, me)
        self._start_background(log_manager, partitions, replica_manager)
        # What start-up made (logs, partitions, metadata) lives as long as the broker: out of
        # the cyclic GC's sight, a full collection stays short (10,000 partitions: ~300 ms).
        gc.freeze()
        if self.metrics is not None:
            self.metrics.ready = True
        log.info("kafkactl broker %d started: cluster %s, listening on %s, data in %s, %s",
                 cfg.broker_id, cluster_id, ", ".join(f"{h}:{p}" for h, p in self.bound),
                 ", ".join(f"{d} (offline)" if d in log_manager.offline else str(d)
                           for d in log_dirs),
                 f"ZooKeeper {cfg.get('zookeeper.connect')}" if self.cluster is not None
                 else f"{len(cache.topic_names())} topic(s)")
        log.info("kafkactl broker %d: %s", cfg.broker_id, KERNELS_STATUS)

    def _start_metrics(self) -> None:
        """The metrics listener (metrics.listen), when configured."""
        from kafkactl.broker.metrics import parse_listen
        from kafkactl.broker.metrics_http import MetricsServer

        value = self.config.get("metrics.listen").strip()
        if not value:
            return
        try:
            host, port = parse_listen(value)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        wildcard = ("", "0.0.0.0", "::")
        for ep in self.config.listeners:
            if port and ep.port == port and (
                    host == ep.host or host in wildcard or ep.host in wildcard):
                raise ConfigError(
                    f"metrics.listen={value!r} is the address of the {ep.listener} listener "
                    f"({ep.host or '*'}:{ep.port}): give the metrics endpoint a port of its own")
        self.metrics = BrokerMetrics(self.config.broker_id,
                                     [e.listener for e in self.config.listeners])
        try:
            self.metrics_server = MetricsServer(self.metrics, host, port)
        except OSError as e:
            raise BrokerStartupError(
                f"cannot listen for metrics on {host or '*'}:{port}: {e.strerror}; pick "
                "another port with --metrics HOST:PORT (metrics.listen)") from e
        self.metrics_server.start()

    async def _join_cluster(self, registration: ZkRegistration, cluster: ZkCluster,
                            me: BrokerEndpoint) -> None:
        """/brokers/ids/[id] with the advertised address (kept after session expiries),
        this data dir's own topics, then the controller election."""
        from kafkactl.broker.zk_registration import ZkRegistrationError

        try:
            await asyncio.to_thread(registration.register, list(me.listeners),
                                    self.listener_protocols)
        except ZkRegistrationError as e:
            raise BrokerStartupError(str(e)) from None
        registration.start_sync()
        await cluster.start(self._local_topics, self._topic_metadata_path)

    # ---- background work -------------------------------------------------------------------
    def _start_background(self, log_manager: LogManager, partitions: PartitionStore,
                          replica_manager: ReplicaManager) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        from kafkactl.log.cleaner import LogCleaner

        def flush() -> None:
            log_manager.flush_dirty()

        def retention() -> None:
            deleted = log_manager.run_retention()
            if deleted:
                log.info("retention removed %s segment(s)", deleted)

        async def checkpoint() -> None:
            from kafkactl.broker import log_io

            # producer snapshots encoded here, written and fsynced on the log-io threads
            jobs = [job for part in list(partitions.partitions.values())
                    if (job := part.snapshot_job()) is not None]
            if jobs:
                await log_io.run(log_io.run_all, jobs)
            # formatting and fsyncing thousands of entries: off the event loop
            await asyncio.to_thread(log_manager.write_checkpoints,
                                    log_manager.checkpoint_values())
            await partitions.checkpoint_high_watermarks_off_loop(log_io.run)

        def expire_producers() -> None:
            # on the loop, as the produce path that also changes the producer state
            # (Kafka's removeExpiredProducers, scheduled over every log)
            for part in list(partitions.partitions.values()):
                part.producer_state.remove_expired_producers()

        self.log_cleaner = LogCleaner()
        self._tasks = [
            loop.create_task(self._every(FLUSH_CHECK_INTERVAL_S, flush, "flush")),
            loop.create_task(self._every(
                cfg.get_int("log.retention.check.interval.ms") / 1000, retention,
                "retention")),
            loop.create_task(self._every(
                cfg.get_int("log.flush.offset.checkpoint.interval.ms") / 1000, checkpoint,
                "checkpoint")),
            loop.create_task(self._every(
                cfg.get_int("producer.id.expiration.check.interval.ms") / 1000,
                expire_producers, "producer id expiration")),
        ]
        if cfg.get_bool("log.cleaner.enable"):
            self._tasks.append(loop.create_task(self.log_cleaner.run_periodically(
                lambda: log_manager.logs.values(),
                int(cfg.get("log.cleaner.backoff.ms") or 15000) / 1000)))
        else:  # (Kafka's: compacted topics, __consumer_offsets too, are not compacted)
            log.warning("log.cleaner.enable=false: compacted topics (__consumer_offsets "
                        "included) are not cleaned and grow without bound")
        if self.cluster is not None:
            max_lag = cfg.get_int("replica.lag.time.max.ms")
            self._tasks.append(loop.create_task(self._every(
                max_lag / 2000, lambda: replica_manager.shrink_isrs(max_lag), "ISR check")))

    async def _every(self, interval: float, fn: Callable[[], Awaitable[None] | None],
                     what: str) -> None:
        """Run fn every `interval` seconds until cancelled; a failure is logged and the
        next round runs as usual (disk errors in one line, without a traceback: the log
        manager already reports them per log dir)."""
        interval = max(interval, 0.01)
        while True:
            await asyncio.sleep(interval)
            try:
                done = fn()
                if done is not None:
                    await done
            except OSError as e:
                log.error("background %s failed: %s; will retry", what, e)
            except Exception:
                log.exception("background %s failed; will retry", what)

    # ---- run / stop ------------------------------------------------------------------------
    def request_stop(self, signame: str = "") -> None:
        if not self._stop.is_set():
            log.info("received %s: shutting down", signame or "stop request")
            self._stop.set()

    def _stop_after_failure(self, why: str) -> None:
        self.exit_code = 1
        self.request_stop(why)

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop, sig.name)

    async def startup_unless_stopped(self) -> bool:
        """startup(); False if a stop is requested first (a start-up step can wait on
        ZooKeeper for as long as it is away): the start-up is cancelled, and shutdown()
        stops what it started."""
        starting = asyncio.ensure_future(self.startup())
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            stopping.cancel()
            starting.result()  # start-up errors are raised here
            return True
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        return False

    async def serve_forever(self) -> None:
        await self._stop.wait()
        await self.shutdown()

    async def _leave_zookeeper(self) -> None:
        if self.zk_registration is None:
            return
        # Leave the registry first, so ZooKeeper consumers move away at once.
        await asyncio.to_thread(self.zk_registration.close)
        if self.services is not None and isinstance(self.services.topic_admin, ZkTopicAdmin):
            self.services.topic_admin.close()  # its calls ended with the session

    async def shutdown(self) -> None:
        if self.metrics is not None:
            self.metrics.ready = False
        if self.log_dir_failures is not None:  # its own errors from now on are only logged
            self.log_dir_failures.stop()
        try:
            await self._shutdown()
        finally:
            if self.metrics is not None:
                self.metrics.detach()
            if self.metrics_server is not None:  # its accept loop polls: off the loop
                await asyncio.to_thread(self.metrics_server.stop)
                self.metrics_server = None

    async def _shutdown(self) -> None:
        if self.cluster is not None:
            # Leaders move away while this broker still serves; then leave the controller
            # role, so another broker takes it at once.
            await self.cluster.controlled_shutdown()
            await self.cluster.stop()
            if self.isr_changer is not None:
                self.isr_changer.stop()
        await self._leave_zookeeper()
        ss = self.socket_server
        if ss is None and self.log_manager is None:
            return  # start-up stopped before anything ran: nothing to stop
        if ss is not None:
            ss.stop_accepting()
        if self.services is not None and isinstance(self.services.topic_admin,
                                                    StandaloneTopicAdmin):
            await self.services.topic_admin.stop_background_work()  # the next start finishes it
        if self.purgatory is not None:
            self.purgatory.shutdown()
        if self.services is not None:
            self.services.replica_manager.produce_purgatory.shutdown()
            self.services.replica_manager.delete_records_purgatory.shutdown()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()  # parked joins/syncs answer now
        if self.txn_coordinator is not None:
            await self.txn_coordinator.shutdown()
        if ss is not None:
            await ss.drain(SHUTDOWN_DRAIN_TIMEOUT_S)
            await ss.close()
        for task in self._tasks:
            task.cancel()
        if self.log_manager is not None:
            if self.partitions is not None:
                for part in list(self.partitions.partitions.values()):
                    part.take_snapshot()
                with contextlib.suppress(OSError):
                    self.partitions.checkpoint_high_watermarks()
            self.log_manager.shutdown()
        log.info("broker stopped cleanly")


def _quota_manager(cfg: Any, zk: Any = None) -> QuotaManager:
    """Client quotas, kept in the first log dir (client-quotas.json), or in ZooKeeper in a
    cluster (not loaded yet: its store's start()); the windows are quota.window.num samples
    of quota.window.size.seconds, as in Kafka."""
    store: ClientQuotaStore
    if zk is not None:
        from kafkactl.broker.zk_client_quotas import ZkQuotaStore

        store = ZkQuotaStore(zk, adopt=Path(cfg.log_dirs[0]) / STORE_FILE)
    else:
        store = ClientQuotaStore(Path(cfg.log_dirs[0]) / STORE_FILE)
    return QuotaManager(store, window_num=max(1, cfg.get_int_or("quota.window.num", WINDOW_NUM)),
                        window_size_s=max(0.001, float(cfg.get_int_or(
                            "quota.window.size.seconds", int(WINDOW_SIZE_S)))))
