"""BrokerServices: everything a request handler may use, built once by the KafkaServer
after all of it exists (kafkactl.broker.server constructs the parts in dependency order).

Handlers are `fn(services: BrokerServices, ctx: RequestContext, request: dict)`; they reach
the broker only through these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.coordinator.group_coordinator import GroupCoordinator
from kafkactl.broker.coordinator.transaction_coordinator import TransactionCoordinator
from kafkactl.broker.dynamic_config import DynamicBrokerConfig
from kafkactl.broker.fetch_session import FetchSessionCache
from kafkactl.broker.metadata_cache import MetadataCache
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.producer_id_manager import ProducerIdManager
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.broker.quota_manager import QuotaManager
from kafkactl.broker.replica_manager import ReplicaManager
from kafkactl.broker.replica_state import ReplicaStates
from kafkactl.broker.security.authorizer import AclAuthorizer
from kafkactl.broker.security.credential_store import CredentialStore
from kafkactl.broker.topic_admin import TopicAdmin
from kafkactl.broker.zk_cluster import ZkCluster
from kafkactl.log.manager import LogManager


@dataclass(frozen=True, slots=True)
class BrokerServices:
    broker_id: int
    config: BrokerConfig
    dynamic_config: DynamicBrokerConfig  # KIP-226 layers over `config`
    metadata_cache: MetadataCache
    topic_admin: TopicAdmin  # what a controller decides about topics
    partitions: PartitionStore  # the partitions this broker hosts
    replica_manager: ReplicaManager
    replica_states: ReplicaStates  # the one partition lifecycle (LeaderAndIsr/StopReplica)
    fetch_purgatory: FetchPurgatory
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator  # __transaction_state, markers
    producer_ids: ProducerIdManager
    log_manager: LogManager
    auto_create_topics: bool  # auto.create.topics.enable
    cluster: ZkCluster | None = None  # ZooKeeper mode: registration, controller, fencing
    authorizer: AclAuthorizer | None = None  # authorizer.class.name; None: allow everything
    credentials: CredentialStore | None = None  # SCRAM credentials (salted, never passwords)
    quotas: QuotaManager | None = None  # client quotas (DescribeClientQuotas, throttling)
    # This broker's advertised (host, port) per listener name (filled in as ports bind).
    listener_endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)
    # incremental fetch sessions (KIP-227): built from the config unless given
    fetch_sessions: FetchSessionCache | None = None

    def __post_init__(self) -> None:
        if self.fetch_sessions is None:
            object.__setattr__(self, "fetch_sessions", FetchSessionCache(
                self.config.get_int("max.incremental.fetch.session.cache.slots"),
                self.config.get_int("min.incremental.fetch.session.eviction.ms")))
