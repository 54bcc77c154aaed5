"""max.connections and listener.name.<listener>.max.connections as Kafka enforces them
(KIP-402, ConnectionQuotas in SocketServer.scala): over the broker's or the listener's
limit a new connection is not refused, its listener stops accepting and the connection
waits in the listen backlog until a connection closes or the limit is raised (dynamic);
the inter-broker listener, with others beside it, is not held to the broker-wide limit: an
inter-broker connection at the limit is served, and the least recently active connection
of another listener is closed to make room. max.connections.per.ip still refuses.

"Not answered" is never a timed assertion: the waiting connection's request is written
before the open connections make round trips of their own, and the check that nothing came
back on it (a poll that does not wait) comes after those answers, so the broker has
demonstrably read and answered later requests meanwhile; under the old refusal the waiting
connection is closed, not answered, when a slot frees."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.broker.connection_quotas import (
    UNBOUNDED,
    ConnectionQuotas,
    connection_limits,
)
from kafkactl.broker.dynamic_config import is_stored_only
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

from .wire import Wire

BROKER = 4  # ConfigResource type
SET = 0  # IncrementalAlterConfigs' operation


# ---- units ---------------------------------------------------------------------------------

def test_the_limits_are_read_as_kafka_reads_them() -> None:
    both = ["PLAINTEXT", "EXTERNAL"]
    assert connection_limits({}, both) == (None, {})
    assert connection_limits({"max.connections": "5"}, both) == (5, {})
    assert connection_limits({"max.connections": str(2**31 - 1)}, both) == (UNBOUNDED, {})
    assert connection_limits({"max.connections": "0"}, both) == (UNBOUNDED, {})
    # a listener's own key; without it the listener takes the broker-wide value
    assert connection_limits({"max.connections": "5",
                              "listener.name.external.max.connections": "2"}, both) == \
        (5, {"EXTERNAL": 2})
    assert not is_stored_only("max.connections")  # dynamic and acted on
    assert not is_stored_only("listener.name.external.max.connections")


def test_slots_the_limits_and_the_protected_listener() -> None:
    woken: list[int] = []
    q = ConnectionQuotas(3, 0)
    q.configure_rates(["PLAINTEXT", "EXTERNAL"], "PLAINTEXT")
    q.slot_freed = lambda: woken.append(q.total)
    q.update_limits({"max.connections": "3", "listener.name.external.max.connections": "2"})
    assert woken == [0]  # a changed limit wakes the acceptors
    assert q.listener_limit("EXTERNAL") == 2 and q.listener_limit("PLAINTEXT") == 3
    for _ in range(2):
        assert q.slot_available("EXTERNAL")
        assert q.admit("10.0.0.1", "EXTERNAL") is None
    assert not q.slot_available("EXTERNAL")  # its own limit
    assert q.slot_available("PLAINTEXT")
    assert q.admit("10.0.0.2", "PLAINTEXT") is None
    # the broker is at max.connections: not a refusal, no slot (the acceptor waits)
    assert q.total == 3 and q.excess() == 0
    # the inter-broker listener (there are others) is held to its own limit only
    assert q.slot_available("PLAINTEXT")
    assert q.admit("10.0.0.2", "PLAINTEXT") is None
    assert q.excess() == 1  # one of EXTERNAL's is to be closed
    q.release("10.0.0.1", "EXTERNAL")
    assert woken == [0, 3] and q.excess() == 0
    assert not q.slot_available("EXTERNAL")  # broker-wide: 3 of 3
    q.update_limits({"max.connections": "4"})  # its own key gone: the broker-wide one
    assert q.listener_limit("EXTERNAL") == 4 and q.slot_available("EXTERNAL")
    assert woken == [0, 3, 3]
    q.update_limits({"max.connections": "4"})  # unchanged: nobody woken
    assert woken == [0, 3, 3]

    # with one listener, the inter-broker one is held to the broker-wide limit
    alone = ConnectionQuotas(1, 0)
    alone.configure_rates(["PLAINTEXT"], "PLAINTEXT")
    assert alone.admit("10.0.0.1", "PLAINTEXT") is None
    assert not alone.slot_available("PLAINTEXT")


def test_the_per_ip_limits_still_refuse() -> None:
    q = ConnectionQuotas(10, 1, {"10.0.0.9": 0})
    assert q.admit("10.0.0.1", "PLAINTEXT") is None
    refusal = q.admit("10.0.0.1", "PLAINTEXT")
    assert refusal is not None and "max.connections.per.ip is 1" in refusal.reason
    refusal = q.admit("10.0.0.9", "PLAINTEXT")
    assert refusal is not None and "max.connections.per.ip.overrides is 0" in refusal.reason
    assert q.total == 1


# ---- brokers -------------------------------------------------------------------------------

def _served(w: Wire) -> None:
    assert w.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def _wire(addr: tuple[str, int], source: str) -> Wire:
    """A Wire connection from the loopback address `source`."""
    w = Wire.__new__(Wire)
    w.sock = socket.create_connection(addr, timeout=30, source_address=(source, 0))
    w.correlation_id = 0
    return w


def _waiting(addr: tuple[str, int], source: str = "127.0.0.1") -> Wire:
    """A new connection with an ApiVersions request written on it (the kernel completes the
    connect whether the broker accepts it or not)."""
    w = _wire(addr, source)
    w.correlation_id = 1
    w.send_raw(codec.encode_request(ApiKey.API_VERSIONS, 0, w.correlation_id, "wire", {}))
    return w


def _nothing_back(w: Wire) -> bool:
    """At this moment nothing has come back on `w`: no answer, not closed (a poll that
    does not wait: readable means bytes, EOF or a reset)."""
    readable, _, _ = select.select([w.sock], [], [], 0)
    return not readable


def _answered(w: Wire) -> None:
    """The request `_waiting` wrote is answered (closed instead: ConnectionError)."""
    frame = w.recv_frame()
    assert codec.peek_correlation_id(frame) == w.correlation_id
    assert codec.decode_response(ApiKey.API_VERSIONS, 0, frame)["error_code"] == 0


def _closed_by_broker(w: Wire) -> bool:
    w.sock.settimeout(30)
    try:
        return w.sock.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def _set_max_connections(w: Wire, value: str) -> None:
    resp = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER, "resource_name": "0", "configs": [
            {"name": "max.connections", "config_operation": SET, "value": value}]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp


def _close_all(wires: list[Any]) -> None:
    for w in wires:
        w.close()


def test_a_connection_over_max_connections_waits_and_is_served_when_one_closes(
        broker_factory) -> None:
    b = broker_factory(max_connections="3")
    addr = ("127.0.0.1", b.port)
    open_ = [Wire(b.bootstrap, timeout=30) for _ in range(3)]
    extra: Wire | None = None
    try:
        for w in open_:
            _served(w)  # all three in (the start-up check's connection is gone)
        extra = _waiting(addr)
        for _ in range(2):  # later requests than extra's, answered
            for w in open_:
                _served(w)
        assert _nothing_back(extra), "a connection over max.connections was not held back"
        wait_until(lambda: "listener PLAINTEXT stops accepting new connections: 3 "
                   "connections are open" in b.log(), 30, "the line saying so")
        open_.pop(0).close()  # a slot frees: extra is accepted and answered
        _answered(extra)
        _served(extra)
        for w in open_:
            _served(w)
    finally:
        _close_all([*open_, *([extra] if extra else [])])


def test_max_connections_per_ip_still_closes_the_new_connection(broker_factory) -> None:
    # (sources other than 127.0.0.1, the start-up check's)
    b = broker_factory(max_connections="3", max_connections_per_ip="2")
    addr = ("127.0.0.1", b.port)
    local = [_wire(addr, "127.0.0.4") for _ in range(2)]
    waiting: Wire | None = None
    try:
        for w in local:
            _served(w)
        third = _waiting(addr, "127.0.0.4")  # the broker has room, the address not: closed
        try:
            assert _closed_by_broker(third)
        finally:
            third.close()
        wait_until(lambda: "127.0.0.4 already has 2 connection(s) and "
                   "max.connections.per.ip is 2" in b.log(), 30, "the refusal line")
        other = _waiting(addr, "127.0.0.5")
        local.append(other)
        _answered(other)  # the broker's third
        waiting = _waiting(addr, "127.0.0.6")  # the fourth: waits, not refused
        for w in local:
            _served(w)
        assert _nothing_back(waiting)
        local.pop(0).close()
        _answered(waiting)
    finally:
        _close_all([*local, *([waiting] if waiting else [])])


def test_raising_max_connections_lets_a_waiting_connection_in_and_lowering_closes(
        broker_factory) -> None:
    b = broker_factory(max_connections="2")
    addr = ("127.0.0.1", b.port)
    idle, admin = Wire(b.bootstrap, timeout=30), Wire(b.bootstrap, timeout=30)
    extra: Wire | None = None
    try:
        _served(idle)
        _served(admin)
        extra = _waiting(addr)
        _served(idle)
        _served(admin)
        assert _nothing_back(extra)
        _set_max_connections(admin, "3")  # on an open connection: no new one fits
        _answered(extra)
        # lowered below the open connections: the least recently active ones are closed
        # until the broker is within it (Kafka's Processor.closeExcessConnections)
        _served(idle)
        _served(extra)
        _set_max_connections(admin, "1")
        assert _closed_by_broker(idle)
        assert _closed_by_broker(extra)
        _served(admin)
    finally:
        _close_all([idle, admin, *([extra] if extra else [])])


@pytest.fixture
def two_listeners(tmp_path: Path) -> Iterator[Callable[..., tuple[BrokerProcess, int]]]:
    """start(overrides): a broker listening on PLAINTEXT (b.port; the inter-broker
    listener, named after security.inter.broker.protocol) and EXTERNAL (the port
    returned)."""
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str]) -> tuple[BrokerProcess, int]:
        plain, external = free_port(), free_port()
        data = tmp_path / f"data-{len(started)}"
        data.mkdir()
        b = BrokerProcess(data, plain, {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},EXTERNAL://127.0.0.1:{external}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            **overrides})
        started.append(b)
        b.start()
        return b, external

    yield start
    for b in started:
        b.kill()


def test_the_inter_broker_listener_is_served_at_max_connections_and_an_lru_one_closes(
        two_listeners) -> None:
    b, external = two_listeners({"max.connections": "2"})
    ext_bootstrap = f"127.0.0.1:{external}"
    ext = [Wire(ext_bootstrap, timeout=30) for _ in range(2)]
    waiting: Wire | None = None
    inter: Wire | None = None
    try:
        for w in ext:
            _served(w)
        waiting = _waiting(("127.0.0.1", external))  # EXTERNAL is held to the limit
        _served(ext[0])  # ext[0], then ext[1]: ext[0] is the least recently active
        _served(ext[1])
        assert _nothing_back(waiting)
        inter = Wire(b.bootstrap, timeout=30)  # PLAINTEXT, the inter-broker listener
        _served(inter)  # served at the broker-wide limit
        assert _closed_by_broker(ext[0])  # and EXTERNAL's LRU connection closed for it
        _served(ext[1])
        assert _nothing_back(waiting)  # 2 of 2 again: EXTERNAL still waits
        inter.close()
        _answered(waiting)
    finally:
        _close_all([*ext, *([waiting] if waiting else []), *([inter] if inter else [])])


def test_a_listener_limit_holds_its_listener_only(two_listeners) -> None:
    b, external = two_listeners({"listener.name.external.max.connections": "1"})
    first = Wire(f"127.0.0.1:{external}", timeout=30)
    waiting: Wire | None = None
    others: list[Wire] = []
    try:
        _served(first)
        waiting = _waiting(("127.0.0.1", external))
        others = [Wire(b.bootstrap, timeout=30) for _ in range(3)]  # PLAINTEXT: no limit
        for w in others:
            _served(w)
        _served(first)
        assert _nothing_back(waiting)
        first.close()
        _answered(waiting)
    finally:
        _close_all([first, *others, *([waiting] if waiting else [])])

