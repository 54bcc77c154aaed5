"""KIP-612's broker-side connection creation rates: `max.connection.creation.rate`
(broker-wide, every listener but the inter-broker one) and
`listener.name.<listener>.max.connection.creation.rate` (one listener; unset there, the
broker-wide value), unbounded by default, dynamic per broker and cluster-wide.

A connection over a rate is not refused: it waits, accepted but unread, as Kafka's acceptor
waits, and the connections of its listener that come after it wait behind it. Checked by
counting, not by timing luck: with rate 2 over quota.window.num=2 windows of
quota.window.size.seconds=1, ten connections opened at once cannot all be answered within a
second (at most ~rate x the windows are), every one is answered in the end, and the
throttle time given is counted per listener in the metric
kafka_server_socket_server_metrics_connection_accept_throttle_time_ms (0: nobody waited).
Waits only make the permissive side of each bound more likely: a slow machine answers fewer
connections before a deadline, never more."""

from __future__ import annotations

import selectors
import socket
import ssl
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from kafkactl.broker import connection_quotas
from kafkactl.broker.config import BROKER_DEFAULTS
from kafkactl.broker.connection_quotas import ConnectionQuotas
from kafkactl.broker.dynamic_config import _check_dynamic, is_stored_only
from kafkactl.log.errors import ConfigError
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.conftest import BrokerProcess, free_port

from .test_metrics import sample, scrape

THROTTLE = "kafka_server_socket_server_metrics_connection_accept_throttle_time_ms_total"
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RATE_KEY = "max.connection.creation.rate"


# ---- units ---------------------------------------------------------------------------------

def test_creation_rates_are_read_as_kafka_reads_them() -> None:
    creation_rates = connection_quotas.creation_rates
    both = ["PLAINTEXT", "EXTERNAL"]
    assert creation_rates({}, both) == (None, {})
    assert creation_rates({RATE_KEY: str(2**31 - 1)}, both) == (None, {})
    # a listener without its own key takes the broker-wide one (Kafka's prefix override)
    assert creation_rates({RATE_KEY: "5", f"listener.name.external.{RATE_KEY}": "2"},
                          both) == (5, {"PLAINTEXT": 5, "EXTERNAL": 2})
    assert creation_rates({RATE_KEY: "5", f"listener.name.external.{RATE_KEY}":
                           str(2**31 - 1)}, both) == (5, {"PLAINTEXT": 5})
    assert creation_rates({f"listener.name.external.{RATE_KEY}": "3"}, both) == \
        (None, {"EXTERNAL": 3})


def _no_clock() -> float:
    raise AssertionError("the clock was read with no rate set")


def test_connection_quotas_rates() -> None:
    now = [100.0]
    q = ConnectionQuotas(0, 0)
    q.configure_rates(["PLAINTEXT", "EXTERNAL"], "PLAINTEXT", 2, 1.0, clock=_no_clock)
    q.update_rates(dict(BROKER_DEFAULTS))  # nothing set: nothing measured
    assert not q.rates_on and not q.rated("PLAINTEXT") and not q.rated("EXTERNAL")
    assert q.admit("10.0.0.1", "EXTERNAL") is None  # and admit reads no clock either

    q.configure_rates(["PLAINTEXT", "EXTERNAL"], "PLAINTEXT", 2, 1.0, clock=lambda: now[0])
    q.update_rates({RATE_KEY: "2"})
    assert q.rates_on and q.rated("PLAINTEXT") and q.rated("EXTERNAL")
    assert [q.creation_throttle_ms("EXTERNAL") for _ in range(3)] == [0, 0, 500]
    # the inter-broker listener is not held to the broker-wide rate (its own listener's
    # rate, the broker-wide value by default, still holds it)
    assert [q.creation_throttle_ms("PLAINTEXT") for _ in range(3)] == [0, 0, 500]
    assert q.accept_throttle_ms == {"EXTERNAL": 500, "PLAINTEXT": 500}

    # with one listener, it is held to the broker-wide rate, inter-broker or not
    alone = ConnectionQuotas(0, 0)
    alone.configure_rates(["PLAINTEXT"], "PLAINTEXT", 2, 1.0, clock=lambda: now[0])
    alone.update_rates({RATE_KEY: "2", f"listener.name.plaintext.{RATE_KEY}": "100"})
    assert [alone.creation_throttle_ms("PLAINTEXT") for _ in range(3)] == [0, 0, 500]


def test_an_address_refused_by_its_rate_is_counted_out_of_the_listener_rates() -> None:
    class OneAddressThrottled:
        def connection_throttle_ms(self, ip: str) -> int:
            return 700 if ip == "10.0.0.9" else 0

    now = [5.0]
    q = ConnectionQuotas(0, 0, rate_source=OneAddressThrottled())
    q.configure_rates(["EXTERNAL"], None, 2, 1.0, clock=lambda: now[0])
    q.update_rates({RATE_KEY: "2"})
    assert q.creation_throttle_ms("EXTERNAL") == 0
    assert q.admit("10.0.0.1", "EXTERNAL") is None
    for _ in range(3):  # refused by its address: counted out again each time
        assert q.creation_throttle_ms("EXTERNAL") == 0
        refusal = q.admit("10.0.0.9", "EXTERNAL")
        assert refusal is not None and refusal.close_after_ms == 700
    # only the first one counted: 2 more fit in
    assert [q.creation_throttle_ms("EXTERNAL") for _ in range(2)] == [0, 500]


def test_the_rates_are_dynamic_and_acted_on() -> None:
    for key in (RATE_KEY, f"listener.name.external.{RATE_KEY}"):
        assert not is_stored_only(key), key
        _check_dynamic(key, "3", cluster_default=True)  # per broker and cluster-wide
        with pytest.raises(ConfigError, match="at least 0"):
            _check_dynamic(key, "-1", cluster_default=False)
    # max.connections too (tests/broker/test_max_connections.py)
    assert not is_stored_only("listener.name.external.max.connections")


# ---- brokers -------------------------------------------------------------------------------

def _open(port: int, n: int) -> list[socket.socket]:
    """n connections, each with one ApiVersions request written (the kernel completes a
    connect the broker has not accepted yet: nothing here waits for the broker)."""
    out = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, i + 1, "rate-test", {}))
        out.append(s)
    return out


def _answers(socks: list[socket.socket], t0: float, timeout: float = 60.0
             ) -> list[float | None]:
    """When each connection's answer came (seconds after t0), None for one the broker
    closed unanswered (refused) or that got no answer within `timeout`."""
    sel = selectors.DefaultSelector()
    bufs: dict[socket.socket, bytes] = {}
    times: dict[socket.socket, float | None] = dict.fromkeys(socks)
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        bufs[s] = b""
    pending = set(socks)
    while pending and time.monotonic() < t0 + timeout:
        for key, _ in sel.select(0.05):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            done = not data
            bufs[s] += data
            if len(bufs[s]) >= 4 and len(bufs[s]) >= 4 + struct.unpack(">i", bufs[s][:4])[0]:
                times[s] = time.monotonic() - t0
                done = True
            if done:
                pending.discard(s)
                sel.unregister(s)
    sel.close()
    for s in socks:
        s.close()
    return [times[s] for s in socks]


def _throttled_burst(port: int, n: int = 10) -> list[float]:
    """n connections at once on a listener held to 2 a second: how they were answered."""
    t0 = time.monotonic()
    times = _answers(_open(port, n), t0)
    assert None not in times, f"refused or unanswered: {times}"
    got = sorted(t for t in times if t is not None)
    # rate 2 over windows of 1 s (2 of them): in the first second, the first 2 or 3 are
    # answered (at most rate x the windows and one more, with every margin: 5)
    assert sum(1 for t in got if t < 1.0) <= 5, got
    # and ten at 2 a second cannot all be in before 2 s (in fact ~4 s)
    assert got[-1] >= 2.0, got
    return got


def _throttle_ms(metrics_port: int, listener: str) -> float:
    value = sample(scrape(metrics_port), THROTTLE, listener=listener)
    assert value is not None, f"no {THROTTLE} for {listener}"
    return value


def _broker(tmp_path: Path, overrides: dict[str, str], port: int | None = None
            ) -> tuple[BrokerProcess, int]:
    data = tmp_path / "data"
    data.mkdir()
    metrics_port = free_port()
    b = BrokerProcess(data, port or free_port(), {
        **WINDOWS, "metrics.listen": f"127.0.0.1:{metrics_port}", **overrides})
    return b, metrics_port


def _age_out_startup_connections() -> None:
    """The start-up check connected to each listener: let the 2 windows of 1 s roll past
    it (a longer wait only ages it more)."""
    time.sleep(2.2)


def test_broker_wide_rate_makes_new_connections_wait_refusing_none(tmp_path: Path) -> None:
    b, metrics_port = _broker(tmp_path, {RATE_KEY: "2"})
    b.start()
    try:
        _age_out_startup_connections()
        old = socket.create_connection(("127.0.0.1", b.port), timeout=30)
        first = _answers_on(old, 1)
        assert first is not None  # an open connection, answered (it waited or not)
        t0 = time.monotonic()
        socks = _open(b.port, 10)
        # an already open connection is served while the new ones wait
        old_answered = _answers_on(old, 2)
        old.close()
        times = _answers(socks, t0)
        assert None not in times, f"refused or unanswered: {times}"
        got = sorted(t for t in times if t is not None)
        assert sum(1 for t in got if t < 1.0) <= 5, got
        assert got[-1] >= 2.0, got
        assert old_answered is not None and old_answered - t0 < got[-1], (old_answered, got)
        assert _throttle_ms(metrics_port, "PLAINTEXT") > 0
    finally:
        b.kill()


def _answers_on(sock: socket.socket, correlation_id: int) -> float | None:
    """One ApiVersions on an open connection: when its answer came (monotonic time)."""
    sock.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, correlation_id, "old", {}))
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">i", head)
    body = sock.recv(size, socket.MSG_WAITALL)
    return time.monotonic() if len(body) == size else None


def _two_listeners(tmp_path: Path, overrides: dict[str, str]
                   ) -> tuple[BrokerProcess, int, int, int]:
    plain, external, admin = free_port(), free_port(), free_port()
    b, metrics_port = _broker(tmp_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},EXTERNAL://127.0.0.1:{external},"
                     f"ADMIN://127.0.0.1:{admin}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,"
                                          "ADMIN:PLAINTEXT",
        **overrides}, plain)
    return b, metrics_port, external, admin


def test_a_listener_rate_holds_its_listener_only(tmp_path: Path) -> None:
    b, metrics_port, external, admin = _two_listeners(
        tmp_path, {f"listener.name.external.{RATE_KEY}": "2"})
    b.start()
    try:
        _age_out_startup_connections()
        t0 = time.monotonic()
        ext = _open(external, 10)
        others = _open(b.port, 5) + _open(admin, 5)  # no rate of theirs
        other_times = _answers(others, t0)
        ext_times = _answers(ext, t0)
        assert None not in other_times and None not in ext_times, (other_times, ext_times)
        got = sorted(t for t in ext_times if t is not None)
        assert sum(1 for t in got if t < 1.0) <= 5, got
        assert got[-1] >= 2.0, got
        assert _throttle_ms(metrics_port, "EXTERNAL") > 0
        assert _throttle_ms(metrics_port, "PLAINTEXT") == 0
        assert _throttle_ms(metrics_port, "ADMIN") == 0
    finally:
        b.kill()


def test_the_inter_broker_listener_is_not_held_to_the_broker_wide_rate(tmp_path: Path
                                                                        ) -> None:
    # PLAINTEXT is the inter-broker listener (Kafka's default: the one named after
    # security.inter.broker.protocol=PLAINTEXT)
    b, metrics_port, external, admin = _two_listeners(tmp_path, {RATE_KEY: "2"})
    b.start()
    try:
        _age_out_startup_connections()
        t0 = time.monotonic()
        ext = _open(external, 10)  # the broker-wide rate, all used up and more
        inter = _open(b.port, 2)  # within its own listener's rate: not held
        adm = _open(admin, 2)  # another listener: held to the broker-wide rate
        times = _answers(ext + inter + adm, t0)
        assert None not in times, times
        assert max(t for t in times[:10] if t is not None) >= 2.0, times
        assert _throttle_ms(metrics_port, "EXTERNAL") > 0
        assert _throttle_ms(metrics_port, "ADMIN") > 0
        assert _throttle_ms(metrics_port, "PLAINTEXT") == 0
    finally:
        b.kill()


def _configs(b: BrokerProcess, *args: str) -> Any:
    return zygote.run(["configs", "alter", "--entity-type", "brokers", *args,
                       "-b", b.bootstrap], text=True, timeout=60)


def test_the_rate_changes_without_a_restart(tmp_path: Path) -> None:
    b, metrics_port = _broker(tmp_path, {})
    b.start()
    try:
        # unset: nobody waits
        t0 = time.monotonic()
        assert None not in _answers(_open(b.port, 10), t0)
        unset_waited = sample(scrape(metrics_port), THROTTLE, listener="PLAINTEXT")

        r = _configs(b, "--entity-name", "0", "--add-config", f"{RATE_KEY}=2")
        assert r.returncode == 0, r.stdout + r.stderr
        _throttled_burst(b.port)
        assert unset_waited == 0
        waited = _throttle_ms(metrics_port, "PLAINTEXT")
        assert waited > 0

        # the broker's value removed: unbounded again, nobody waits
        r = _configs(b, "--entity-name", "0", "--delete-config", RATE_KEY)
        assert r.returncode == 0, r.stdout + r.stderr
        waited = _throttle_ms(metrics_port, "PLAINTEXT")  # (the command's may have)
        t0 = time.monotonic()
        assert None not in _answers(_open(b.port, 10), t0)
        assert _throttle_ms(metrics_port, "PLAINTEXT") == waited

        # the cluster-wide default holds too
        r = _configs(b, "--entity-default", "--add-config", f"{RATE_KEY}=2")
        assert r.returncode == 0, r.stdout + r.stderr
        t0 = time.monotonic()
        assert None not in _answers(_open(b.port, 4), t0)  # 4 at once, 2 a second
        assert _throttle_ms(metrics_port, "PLAINTEXT") > waited
    finally:
        b.kill()


def test_a_tls_listener_waits_before_the_handshake(tmp_path: Path) -> None:
    """On a TLS listener the wait comes first (as Kafka's acceptor, before the processor
    makes the handshake): the handshakes of the waiting connections complete later, and
    every one is answered."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.broker.security.certs import OPENSSL, make_certs
    from tests.broker.security.conftest import start_secure

    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    certs = make_certs(tmp_path / "certs")
    metrics_port = free_port()
    sb = start_secure(tmp_path, certs, **WINDOWS, **{
        "metrics.listen": f"127.0.0.1:{metrics_port}",
        f"listener.name.ssl.{RATE_KEY}": "2"})
    try:
        _age_out_startup_connections()
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
        t0 = time.monotonic()

        def one(i: int) -> float | None:
            with socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=30) as raw, \
                    ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, i, "tls", {}))
                head = b""
                while len(head) < 4:
                    chunk = s.recv(4 - len(head))
                    if not chunk:
                        return None
                    head += chunk
                return time.monotonic() - t0

        with ThreadPoolExecutor(5) as pool:
            times = list(pool.map(one, range(1, 6)))
        assert None not in times, times
        # 5 at 2 a second: not all within the first second
        assert max(t for t in times if t is not None) >= 1.0, times
        assert _throttle_ms(metrics_port, "SSL") > 0
        assert _throttle_ms(metrics_port, "PLAINTEXT") == 0
    finally:
        sb.broker.kill()
