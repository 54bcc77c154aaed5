"""One module per API family. `register_all(apis)` installs every handler we implement;
ApiVersions advertises exactly the registered APIs."""

from __future__ import annotations

from typing import Any


def register_all(apis: Any) -> None:
    from kafkactl.broker.handlers import (
        acls,
        api_versions,
        cluster,
        configs,
        fetch,
        groups,
        leader_epoch,
        list_offsets,
        metadata,
        offsets,
        produce,
        producer_id,
        records,
        topics,
    )

    for module in (api_versions, metadata, produce, fetch, list_offsets, topics, configs,
                   records, producer_id, leader_epoch, cluster, groups, offsets, acls):
        module.register(apis)
