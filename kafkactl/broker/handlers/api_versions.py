"""ApiVersions (key 18): the advertised table, protocol.versions.SUPPORTED_VERSIONS (the
KafkaApis refuses a handler table whose keys differ from it)."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.versions import api_versions_entries


def handle_api_versions(services: BrokerServices, ctx: RequestContext,
                        request: dict[str, Any]) -> dict[str, Any]:
    return {"error_code": ErrorCode.NONE, "api_keys": api_versions_entries(), "throttle_time_ms": 0}
