"""IP connection rate quotas (KIP-612) on a standalone broker: AlterClientQuotas and
DescribeClientQuotas take the `ip` entity (an address, or null for the default) with its one
key connection_creation_rate, refuse what Kafka refuses (ip with user/client-id, a name that
is no IP address, another key, a fraction), keep them across a restart, and `kafkactl
quotas --ip/--ip-default` sets, lists and removes them.

Enforcement is counted, not timed: a rate is measured over quota.window.num (11) windows of
quota.window.size.seconds (1), at least 10 s, so a burst from one address gets exactly
rate x 10 connections accepted and the next ones refused (a refused connection is not
counted: the following ones are refused too). Sources are loopback addresses of their own
(127.0.0.2, ...); the test's own admin connections come from 127.0.0.1."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import request

INVALID_REQUEST = 42
RATE = "connection_creation_rate"


def kafkactl(*args: str) -> Any:
    return zygote.run(list(args), text=True, timeout=60)


def alter(port: int, entity: list[tuple[str, str | None]], key: str, value: float | None
          ) -> tuple[int, str | None]:
    """One AlterClientQuotas entry (value None: remove the key): (error code, message)."""
    resp = request(port, ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [{"key": key, "value": 0.0 if value is None else value,
                 "remove": value is None}]}], "validate_only": False})
    entry = resp["entries"][0]
    return entry["error_code"], entry["error_message"]


def describe(port: int, components: list[dict[str, Any]], strict: bool = False
             ) -> tuple[int, str | None, dict[str, dict[str, float]]]:
    """(error code, message, entity -> values), an entity written type=name,..."""
    resp = request(port, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1,
                   {"components": components, "strict": strict})
    out = {}
    for e in resp["entries"] or ():
        key = ",".join(f"{x['entity_type']}={x['entity_name'] or '<default>'}"
                       for x in e["entity"])
        out[key] = {v["key"]: v["value"] for v in e["values"]}
    return resp["error_code"], resp["error_message"], out


def answered(port: int, source: str) -> bool:
    """A new connection from `source` to the broker, one ApiVersions on it: True when it is
    answered, False when the broker closed the connection instead."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "ip-quota-test", {}))
        head = s.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return False
        (size,) = struct.unpack(">i", head)
        return len(s.recv(size, socket.MSG_WAITALL)) == size
    except (ConnectionResetError, BrokenPipeError):
        return False
    finally:
        s.close()


def burst(port: int, source: str, n: int) -> list[bool]:
    return [answered(port, source) for _ in range(n)]


def test_ip_quotas_are_altered_described_checked_and_kept(broker_factory: Any) -> None:
    b = broker_factory()
    assert alter(b.port, [("ip", "10.1.2.3")], RATE, 7) == (0, None)
    assert alter(b.port, [("ip", None)], RATE, 50) == (0, None)
    assert alter(b.port, [("ip", "::1")], RATE, 0) == (0, None)  # 0: none accepted
    want = {"ip=10.1.2.3": {RATE: 7.0}, "ip=<default>": {RATE: 50.0}, "ip=::1": {RATE: 0.0}}
    assert describe(b.port, [{"entity_type": "ip", "match_type": 2, "match": None}]) == \
        (0, None, want)
    assert describe(b.port, [{"entity_type": "ip", "match_type": 0, "match": "10.1.2.3"}]) \
        == (0, None, {"ip=10.1.2.3": {RATE: 7.0}})
    assert describe(b.port, [{"entity_type": "ip", "match_type": 1, "match": None}]) == \
        (0, None, {"ip=<default>": {RATE: 50.0}})
    assert describe(b.port, [])[2] == want  # not strict: every entity
    # a user's quota is not an ip's, and the other way round
    assert alter(b.port, [("user", "alice")], "producer_byte_rate", 1024) == (0, None)
    assert describe(b.port, [{"entity_type": "user", "match_type": 2, "match": None}])[2] \
        == {"user=alice": {"producer_byte_rate": 1024.0}}
    assert describe(b.port, [{"entity_type": "ip", "match_type": 2, "match": None}],
                    strict=True)[2] == want

    code, message, _ = describe(b.port, [{"entity_type": "ip", "match_type": 2, "match": None},
                                         {"entity_type": "user", "match_type": 2,
                                          "match": None}])
    assert code == INVALID_REQUEST and "IP filter component" in (message or ""), message
    refused = [
        ([("ip", "10.0.0.1"), ("user", "bob")], RATE, 5, "Invalid quota entity combination"),
        ([("ip", "not-an-ip")], RATE, 5, "not-an-ip is not a valid IP"),
        ([("ip", "10.0.0.1")], "producer_byte_rate", 5,
         "Invalid configuration key producer_byte_rate"),
        ([("user", "bob")], RATE, 5, f"Invalid configuration key {RATE}"),
        ([("ip", "10.0.0.1")], RATE, 1.5, "must be a INT value"),
        ([("ip", "10.0.0.1")], RATE, -1, "between 0 and"),
    ]
    for entity, key, value, msg in refused:
        code, message = alter(b.port, entity, key, value)
        assert code == INVALID_REQUEST and msg in (message or ""), (entity, key, message)

    b.restart()
    assert describe(b.port, [{"entity_type": "ip", "match_type": 2, "match": None}])[2] == want

    # kafkactl quotas --ip / --ip-default
    bs = ["-b", b.bootstrap]
    r = kafkactl("quotas", "add", "--ip", "10.9.9.9", "-c", f"{RATE}=3", *bs)
    assert r.returncode == 0 and f"Set {RATE}=3 for ip 10.9.9.9." in r.stdout, r.stderr
    r = kafkactl("quotas", "list", "--json", "--ip", "10.9.9.9", *bs)
    assert r.returncode == 0 and json.loads(r.stdout) == [
        {"entity": {"ip": "10.9.9.9"}, "values": {RATE: 3.0}}], r.stdout + r.stderr
    r = kafkactl("quotas", "list", *bs)
    assert r.returncode == 0 and "CONNECTION_CREATION_RATE" in r.stdout \
        and "10.9.9.9" in r.stdout and "alice" in r.stdout, r.stdout + r.stderr
    r = kafkactl("quotas", "remove", "--ip-default", *bs)
    assert r.returncode == 0 and f"Removed {RATE} of ip <default>." in r.stdout, \
        r.stdout + r.stderr
    for args, msg in ((["add", "--ip", "1.2.3.4", "--user", "u", "-c", f"{RATE}=1"],
                       "stands alone"),
                      (["add", "--ip", "1.2.3.4", "-c", "producer_byte_rate=1"], RATE),
                      (["add", "--ip", "host.example", "-c", f"{RATE}=1"],
                       "not a valid IP")):
        r = kafkactl("quotas", *args, *bs)
        assert r.returncode != 0 and msg in r.stderr, (args, r.stderr)


def test_connections_over_an_ip_rate_are_refused(broker_factory: Any) -> None:
    b = broker_factory()
    # the test's own connections (127.0.0.1) keep room under the default set next
    assert alter(b.port, [("ip", "127.0.0.1")], RATE, 100000) == (0, None)
    assert alter(b.port, [("ip", None)], RATE, 2) == (0, None)
    assert alter(b.port, [("ip", "127.0.0.2")], RATE, 1) == (0, None)
    assert alter(b.port, [("ip", "127.0.0.4")], RATE, 0) == (0, None)

    # rate 1 over a window of at least 10 s: 10 connections, then none (refused ones
    # are not counted: they do not use the quota up, and they do not free it either)
    assert burst(b.port, "127.0.0.2", 14) == [True] * 10 + [False] * 4
    # 127.0.0.3 has no quota of its own: the default's (2: 20 connections)
    assert burst(b.port, "127.0.0.3", 23) == [True] * 20 + [False] * 3
    assert not answered(b.port, "127.0.0.4")  # rate 0: none
    assert all(burst(b.port, "127.0.0.1", 30))  # its own quota, far above the burst

    # a quota removed: its address falls back to the default, measured as before (as
    # Kafka keeps an address's sensor and changes its quota): 10 more up to 20...
    assert alter(b.port, [("ip", "127.0.0.2")], RATE, None) == (0, None)
    assert burst(b.port, "127.0.0.2", 11) == [True] * 10 + [False]
    # ... and without a default, to no limit at all
    assert alter(b.port, [("ip", None)], RATE, None) == (0, None)
    assert all(burst(b.port, "127.0.0.3", 5))
    assert all(burst(b.port, "127.0.0.2", 5))
