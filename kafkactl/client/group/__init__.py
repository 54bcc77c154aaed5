"""Consumer groups on the client side: assignors, membership, the group consumer and the
group admin operations used by `kafkactl offsets` / `kafkactl rebalance`."""

from kafkactl.client.group.assignors import (
    ASSIGNORS,
    MemberSubscription,
    assign,
    range_assign,
    roundrobin_assign,
)
from kafkactl.client.group.consumer import GroupConsumer
from kafkactl.client.group.group_admin import GroupAdmin, GroupDescription, MemberDescription
from kafkactl.client.group.membership import CommitFailedError, ConsumerCoordinator

__all__ = ["ASSIGNORS", "CommitFailedError", "ConsumerCoordinator", "GroupAdmin",
           "GroupConsumer", "GroupDescription", "MemberDescription", "MemberSubscription",
           "assign", "range_assign", "roundrobin_assign"]
