"""Kafka's internal topics (Topic.java's INTERNAL_TOPICS / isInternal): the only names that
Metadata calls internal. Another name starting with `__` (Debezium's `__debezium-heartbeat.*`,
a user's `__custom`) is an ordinary topic: listed, matched by patterns, mirrored."""

from __future__ import annotations

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # Kafka 4's; internal there, none here
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC,
                             SHARE_GROUP_STATE_TOPIC})


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS
