"""The handler table (kafkactl.broker.handlers.HANDLERS), the advertised version ranges
(protocol.versions.SUPPORTED_VERSIONS) and a running broker's ApiVersions answer agree."""

from __future__ import annotations

import pytest

from kafkactl.broker.handlers import HANDLERS
from kafkactl.broker.request_handler import check_handler_table
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

from .wire import Wire


def test_every_supported_api_has_a_handler_and_every_handler_a_range() -> None:
    assert set(HANDLERS) == set(SUPPORTED_VERSIONS)
    check_handler_table(HANDLERS)


def test_a_table_that_differs_from_the_version_ranges_is_refused() -> None:
    missing = {k: h for k, h in HANDLERS.items() if k != ApiKey.DELETE_RECORDS}
    with pytest.raises(ValueError, match="no handler for \\['DELETE_RECORDS'\\]"):
        check_handler_table(missing)
    extra = dict(HANDLERS)
    extra[ApiKey.CREATE_DELEGATION_TOKEN] = HANDLERS[ApiKey.API_VERSIONS]
    with pytest.raises(ValueError, match="no version range for \\['CREATE_DELEGATION_TOKEN'\\]"):
        check_handler_table(extra)


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_advertises_exactly_the_handled_apis(module_broker, version: int) -> None:
    body = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    with Wire(module_broker.bootstrap) as w:
        r = w.request(ApiKey.API_VERSIONS, version, body)
    assert r["error_code"] == 0
    advertised = {e["api_key"]: (e["min_version"], e["max_version"]) for e in r["api_keys"]}
    assert [e["api_key"] for e in r["api_keys"]] == sorted(advertised)
    assert advertised == {int(k): SUPPORTED_VERSIONS[k] for k in HANDLERS}
