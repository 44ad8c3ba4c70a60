"""What request handlers may use: the broker's services, each built with what it needs.

Handlers reach these through `RequestContext.services` and nothing else: never the `Broker`
(the process's wiring, listeners and lifecycle). Each service is constructed with its own
collaborators (constructor injection, see `Broker.start`), so none of them knows the broker
either.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.acl import Authorizer
from broker.config import BrokerConfig
from broker.config.dynamic import DynamicBrokerConfig
from broker.coordinator.coordinator import GroupCoordinator
from broker.partition_metadata_client import PartitionMetadataClient
from broker.producer_ids import ProducerIdManager
from broker.quotas import ClientQuotas
from broker.replication.leader_client import BrokerClients
from broker.replication.replica_manager import ReplicaManager
from broker.share.persister import SharePersister
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_fetch import SharePartitionManager
from broker.topic_creation import AutoTopicCreator
from broker.txn.coordinator import TransactionCoordinator
from controller.interface import Controller
from controller.security_store import SecurityStore
from protocol.types import BrokerId

FORWARDING_CLIENT_ID = "samsa-forwarding"
"""The client id of requests a broker forwards to the active controller (`controller_channel`)."""


@dataclass(frozen=True, slots=True)
class BrokerServices:
    broker_id: BrokerId
    dynamic_config: DynamicBrokerConfig
    """The broker's configuration with the dynamic broker configs applied."""
    controller: Controller
    """The cluster metadata image and the admin writes (topics, partitions, configs)."""
    replica_manager: ReplicaManager
    """The partitions this broker hosts: produce, fetch, offsets, records deletion."""
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    """Transactional ids on __transaction_state: InitProducerId, AddPartitionsToTxn, EndTxn..."""
    producer_ids: ProducerIdManager
    topic_creator: AutoTopicCreator
    """Topics created on first use (Metadata with auto-creation)."""
    quotas: ClientQuotas
    """Client quota enforcement (the network layer throttles with it)."""
    authorizer: Authorizer
    """Whether a principal may do an operation on a resource (ctx.authorized)."""
    security_store: SecurityStore
    """ACLs and SCRAM credentials (the ACL and SCRAM credential APIs)."""
    controller_channel: BrokerClients | None = None
    """Clients of the other brokers on the inter-broker listener, to forward controller-bound
    admin requests to the active controller (broker/handlers/_forward.py)."""
    share_coordinator: ShareCoordinator | None = None
    """The share-group state of the `__share_group_state` partitions led here (the state RPCs)."""
    share_partitions: SharePartitionManager | None = None
    """Share sessions and the share partitions led here (ShareFetch, ShareAcknowledge)."""
    share_persister: SharePersister | None = None
    """The share-group state of any share partition, wherever its share coordinator is (the
    share group offsets admin APIs, keys 90-92)."""
    partition_metadata: PartitionMetadataClient | None = None
    """The latest offset of any partition from its leader (a share group's lag, key 90)."""

    @property
    def config(self) -> BrokerConfig:
        """The broker's configuration as it is now (read only; dynamic configs change it)."""
        return self.dynamic_config.current
