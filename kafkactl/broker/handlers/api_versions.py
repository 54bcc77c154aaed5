"""ApiVersions (key 18): the advertised table (only APIs with a registered handler)."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode


def handle_api_versions(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    return {"error_code": ErrorCode.NONE, "api_keys": apis.advertised(), "throttle_time_ms": 0}


def register(apis: Any) -> None:
    apis.register(ApiKey.API_VERSIONS, handle_api_versions)
