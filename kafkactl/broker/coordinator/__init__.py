"""The group coordinator and offset manager (`__consumer_offsets`)."""

from kafkactl.broker.coordinator.group import GroupMetadata, GroupState, MemberMetadata
from kafkactl.broker.coordinator.group_coordinator import GroupCoordinator
from kafkactl.broker.coordinator.group_metadata_manager import (
    OFFSETS_TOPIC,
    GroupMetadataManager,
    java_string_hash,
    partition_for,
)
from kafkactl.broker.coordinator.offset_manager import OffsetManager

__all__ = ["GroupCoordinator", "GroupMetadata", "GroupMetadataManager", "GroupState",
           "MemberMetadata", "OFFSETS_TOPIC", "OffsetManager", "java_string_hash",
           "partition_for"]
