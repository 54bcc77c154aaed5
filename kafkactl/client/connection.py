"""BrokerConnection: one TCP connection to one broker, with pipelined requests.

Design (measured, see bench/client_connection.py): plain blocking sockets driven by the
thread that owns the connection, no asyncio. Requests are written as soon as they are sent
(many in flight); responses arrive in request order and complete the in-flight entries
first-in first-out. A connection negotiates API versions (ApiVersions v3, falling back to
v0 on UNSUPPORTED_VERSION) before anything else and then picks, per API, the highest
version both sides speak.

Security (kafkactl.client.security): on SSL / SASL_SSL the socket is wrapped in TLS before
ApiVersions; on SASL_* the SASL exchange (SaslHandshake v1, SaslAuthenticate) follows
ApiVersions, before any other request. When the broker's SaslAuthenticate answers a
session lifetime (its `connections.max.reauth.ms`), the first request sent past a random
85-95 % of it re-authenticates first, as Kafka's clients do (KIP-368,
SaslClientAuthenticator): the responses in flight are read (their handlers run), then
SaslHandshake + SaslAuthenticate go again on the same connection, then the request; the
broker would otherwise close the connection at the session's end. What it costs a request
otherwise: one comparison (two with a session lifetime).

Not thread-safe: one thread owns a connection (the producer's sender thread, or the caller
of a consumer/admin client).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kafkactl import __version__
from kafkactl.client import wire
from kafkactl.client.errors import (
    AuthenticationFailedError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kafkactl.client.security import ClientSecurity, sasl_authenticate
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.codec import encode_request_parts
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    import ssl  # imported by a TLS connection only: a plaintext client never loads it

_SIZE = struct.Struct(">i")
_RECV_CHUNK = 1 << 20
_OWN_BUFFER = 1 << 18  # a response this long is received into a buffer of its own

# added to "closed the connection" when the broker did so before answering any request but
# ApiVersions (which a SASL listener answers before authentication): most likely a client
# speaking the wrong security protocol (plaintext to an SSL or SASL listener) or a client
# certificate refused; as kcat hints
CLOSED_EARLY_HINT = ("the broker closed the connection before answering: check "
                     "security.protocol (it may require SSL or SASL) and the client "
                     "certificate")

ResponseHandler = Callable[[dict[str, Any] | None, BaseException | None], None]


class InFlightRequest:
    __slots__ = ("correlation_id", "api_key", "version", "handler", "sent_at", "response",
                 "error", "done")

    def __init__(self, correlation_id: int, api_key: int, version: int,
                 handler: ResponseHandler | None) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.handler = handler
        self.sent_at = time.monotonic()
        self.response: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.done = False

    def complete(self, response: dict[str, Any] | None, error: BaseException | None) -> None:
        self.response, self.error, self.done = response, error, True
        if self.handler is not None:
            self.handler(response, error)


class BrokerConnection:
    """A connection to `host:port` (node `node_id`, -1 for a bootstrap server)."""

    def __init__(self, host: str, port: int, *, node_id: int = -1,
                 client_id: str = "kafkactl", connect_timeout: float = 10.0,
                 request_timeout: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.security = security or ClientSecurity()
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.sock: socket.socket | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._correlation_id = 0
        self._in_flight: deque[InFlightRequest] = deque()
        self._rbuf = bytearray()
        # a large response being received into (its size first), and how much is in
        self._frame: memoryview | None = None
        self._frame_got = 0
        self._closed_error: BaseException | None = None
        self._tls = False  # the socket is an ssl.SSLSocket
        # responses other than ApiVersions received since connect() (CLOSED_EARLY_HINT)
        self._answered = 0
        # what a non-blocking read raises when there is nothing to read (TLS adds its own)
        self._would_block: tuple[type[OSError], ...] = (BlockingIOError,)
        # time.monotonic() past which the next send re-authenticates first (KIP-368)
        self._reauth_at: float | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.sock is not None

    def connect(self, timeout: float | None = None) -> None:
        """Open the socket and negotiate API versions; raises KafkaConnectionError. With
        `timeout` below the request timeout, the whole setup (TCP connect, TLS, ApiVersions,
        SASL) is given at most that long: a broker that takes the connection but does not
        answer costs the caller no more; the connection's own timeouts apply afterwards."""
        if self.sock is not None:
            return
        if timeout is None or timeout >= self.request_timeout:
            self._connect()
            return
        request_timeout, connect_timeout = self.request_timeout, self.connect_timeout
        self.request_timeout = max(timeout, 0.1)
        self.connect_timeout = min(connect_timeout, self.request_timeout)
        try:
            self._connect()
        finally:
            self.request_timeout, self.connect_timeout = request_timeout, connect_timeout
            if self.sock is not None:
                self.sock.settimeout(request_timeout)

    def _connect(self) -> None:
        try:
            # an ASCII host name goes as bytes: getaddrinfo encodes a str one with the idna
            # codec, whose import (encodings.idna, stringprep, unicodedata: ~2 ms) nothing
            # else in a client needs
            host: Any = self.host.encode() if self.host.isascii() else self.host
            sock = socket.create_connection((host, self.port), timeout=self.connect_timeout)
        except OSError as e:
            raise KafkaConnectionError(
                f"cannot connect to broker {self.host}:{self.port}: {e.strerror or e}") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        sock.settimeout(self.request_timeout)
        ctx = self.security.ssl_context
        self._tls = ctx is not None
        if ctx is not None:
            import ssl

            self._would_block = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
            try:
                sock = ctx.wrap_socket(sock, server_hostname=self.host)
            except OSError as e:  # ssl.SSLError too
                sock.close()
                raise KafkaConnectionError(
                    f"TLS handshake with {self.host}:{self.port} failed: {e}") from e
        self.sock = sock
        self._rbuf = bytearray()
        self._frame = None
        self._closed_error = None
        self._answered = 0
        self._reauth_at = None
        try:
            self._negotiate_versions()
            if self.security.uses_sasl:
                self._login()
        except (KafkaConnectionError, AuthenticationFailedError) as e:
            self.close(e)
            raise
        except BaseException:
            self.close(KafkaConnectionError(f"ApiVersions failed on {self.host}:{self.port}"))
            raise

    def _login(self) -> None:
        """The SASL exchange; with a session lifetime, when to re-authenticate: at a
        random 85-95 % of it (Kafka's SaslClientAuthenticator: room for latency, and the
        connections of many clients do not all re-authenticate at once)."""
        self._reauth_at = None
        lifetime_ms = sasl_authenticate(self.request, self.security,
                                        f"{self.host}:{self.port}")
        if lifetime_ms > 0:
            import random

            self._reauth_at = time.monotonic() + \
                lifetime_ms * random.uniform(0.85, 0.95) / 1000

    def _reauthenticate(self) -> None:
        """Re-authenticate on this connection (its session is about to expire): the
        requests in flight are answered first (the broker takes nothing but SaslHandshake
        and SaslAuthenticate until the exchange completes; requests their handlers send
        meanwhile go out at once and are waited for too), then the SASL exchange. Raises
        what a send raises, the connection closed."""
        self._reauth_at = None
        while self._in_flight and self.sock is not None:
            self.poll(1.0)  # closes the connection past request_timeout
        if self.sock is None:
            raise self._closed_error or KafkaConnectionError(
                f"connection to {self.host}:{self.port} closed")
        try:
            self._login()
        except (KafkaConnectionError, AuthenticationFailedError) as e:
            self.close(e)
            raise
        except BaseException:
            self.close(KafkaConnectionError(
                f"SASL re-authentication with {self.host}:{self.port} failed"))
            raise

    def _negotiate_versions(self) -> None:
        version = wire.API_VERSIONS_FIRST
        for _ in range(3):
            body = wire.api_versions_request(version, "kafkactl", __version__)
            resp = self.request(ApiKey.API_VERSIONS, body, version=version)
            code = resp.get("error_code", 0)
            table = {e["api_key"]: (e["min_version"], e["max_version"])
                     for e in resp.get("api_keys") or ()}
            if code == ErrorCode.UNSUPPORTED_VERSION:  # retry with what the broker offers
                lo_hi = table.get(int(ApiKey.API_VERSIONS))
                version = min(version - 1, lo_hi[1]) if lo_hi else 0
                continue
            if code:
                raise KafkaConnectionError(
                    f"broker {self.host}:{self.port} refused ApiVersions (error {code})")
            self.api_versions = table
            return
        raise KafkaConnectionError(f"no ApiVersions version agreed with {self.host}:{self.port}")

    def close(self, error: BaseException | None = None) -> None:
        """Close the socket; every in-flight request fails with `error`."""
        sock, self.sock = self.sock, None
        self._reauth_at = None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
        err = error or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        self._closed_error = err
        pending, self._in_flight = self._in_flight, deque()
        for req in pending:
            req.complete(None, err)

    # -- versions ----------------------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The highest version of `api_key` that both we and the broker speak."""
        ours = wire.CLIENT_VERSIONS.get(int(api_key))
        theirs = self.api_versions.get(int(api_key))
        if ours is None:
            raise ValueError(f"the client does not implement API {api_key}")
        if theirs is None:
            if api_key == ApiKey.API_VERSIONS:
                return wire.API_VERSIONS_FIRST
            raise KafkaConnectionError(
                f"broker {self.host}:{self.port} does not support {ApiKey(api_key).name}")
        hi = min(ours[1], theirs[1])
        lo = max(ours[0], theirs[0])
        if hi < lo:
            raise KafkaConnectionError(
                f"no common version of {ApiKey(api_key).name}: client {ours}, broker {theirs}")
        return hi

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except (KafkaConnectionError, ValueError):
            return False
        return True

    # -- requests ----------------------------------------------------------------------------

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def send(self, api_key: int, body: dict[str, Any], *, version: int | None = None,
             handler: ResponseHandler | None = None,
             expect_response: bool = True) -> InFlightRequest:
        """Write a request now; its response completes the returned entry (FIFO)."""
        if self.sock is None:
            raise self._closed_error or KafkaConnectionError(
                f"not connected to {self.host}:{self.port}")
        if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            try:
                self._reauthenticate()
            except Exception as e:
                # as a failed write: the request's handler learns it, then the caller
                if handler is not None and expect_response:
                    InFlightRequest(0, int(api_key), version or 0, handler).complete(None, e)
                raise
        if version is None:
            version = self.version_for(api_key)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        # a Produce's batches stay where they are: written with the header by sendmsg
        frame = encode_request_parts(int(api_key), version, cid, self.client_id, body)
        req = InFlightRequest(cid, int(api_key), version, handler)
        if expect_response:
            self._in_flight.append(req)
        try:
            if isinstance(frame, list):
                if self._tls:  # no sendmsg on TLS
                    self.sock.sendall(b"".join(frame))
                else:
                    _send_parts(self.sock, frame)
            else:
                self.sock.sendall(frame)
        except OSError as e:
            err = KafkaConnectionError(f"send to {self.host}:{self.port} failed: {e}")
            if not expect_response:
                req.complete(None, err)
            self.close(err)
            raise err from e
        if not expect_response:
            req.complete(None, None)
        return req

    def poll(self, timeout: float = 0.0) -> int:
        """Read whatever responses are available (waiting up to `timeout` for the first);
        returns how many requests completed. Connection errors close the connection."""
        if self.sock is None or not self._in_flight:
            return 0
        try:
            pending = self._tls and cast("ssl.SSLSocket", self.sock).pending() > 0
            ready = [self.sock] if pending else \
                select.select([self.sock], [], [], max(timeout, 0.0))[0]
            if not ready:
                self._check_timeouts()
                return 0
            return self._read_available()
        except (OSError, KafkaConnectionError) as e:
            err = e if isinstance(e, KafkaConnectionError) else KafkaConnectionError(
                self._with_hint(f"connection to {self.host}:{self.port} lost: {e}"))
            self.close(err)
            return 0

    def _check_timeouts(self) -> None:
        if self._in_flight and time.monotonic() - self._in_flight[0].sent_at > \
                self.request_timeout:
            self.close(KafkaTimeoutError(
                f"broker {self.host}:{self.port} did not answer within "
                f"{self.request_timeout:g} s"))

    def _read_available(self) -> int:
        """Read what the socket has and complete the requests whose responses are whole.
        A large response (a Fetch's batches) is received straight into a buffer of its
        own, which the decoded response's records are views of: no copy after recv."""
        assert self.sock is not None
        sock = self.sock
        peek = not self._tls  # TLS takes no recv flags
        would_block = self._would_block
        sock.setblocking(False)
        done = 0
        try:
            while self.sock is sock:
                frame = self._frame
                if frame is None and peek and not self._rbuf:
                    # the next response's size, to receive a large one where it stays
                    try:
                        head = sock.recv(4, socket.MSG_PEEK)
                    except BlockingIOError:
                        break
                    if len(head) == 4 and _SIZE.unpack(head)[0] >= _OWN_BUFFER:
                        frame = self._frame = memoryview(bytearray(4 + _SIZE.unpack(head)[0]))
                        self._frame_got = 0
                if frame is not None:
                    try:
                        got = sock.recv_into(frame[self._frame_got:])
                    except would_block:
                        break
                    if not got:
                        raise KafkaConnectionError(self._with_hint(
                            f"broker {self.host}:{self.port} closed the connection"))
                    self._frame_got += got
                    if self._frame_got == frame.nbytes:
                        self._frame = None
                        done += self._complete(frame[4:])
                    continue
                try:
                    chunk = sock.recv(_RECV_CHUNK)
                except would_block:
                    break
                if not chunk:
                    raise KafkaConnectionError(self._with_hint(
                        f"broker {self.host}:{self.port} closed the connection"))
                self._rbuf += chunk
                done += self._process_frames()
                if len(chunk) < _RECV_CHUNK and self._frame is None:
                    break
        finally:
            if self.sock is not None:
                self.sock.settimeout(self.request_timeout)
        return done

    def _with_hint(self, message: str) -> str:
        """`message` (the broker closed or reset the connection), with CLOSED_EARLY_HINT
        when nothing but ApiVersions was answered on it and the broker still takes
        connections (one that no longer does was stopped or killed: no hint to check
        the security settings)."""
        if self._answered:
            return message
        if not self._still_listening():
            return f"{message}; it no longer accepts connections (stopped or restarting)"
        return f"{message}; {CLOSED_EARLY_HINT}"

    def _still_listening(self) -> bool:
        """Whether a TCP connection to the broker's address opens (a short probe, a moment
        after the close: a killed process's connections close before its listener)."""
        time.sleep(0.1)
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _process_frames(self) -> int:
        """Complete the requests whose responses are whole in the read buffer; a large
        one begun there goes on in a buffer of its own (`_frame`)."""
        buf = self._rbuf
        pos = 0
        done = 0
        n = len(buf)
        while n - pos >= 4 and self.sock is not None:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 4:
                raise KafkaConnectionError(f"bad response size {size} from {self.host}")
            if n - pos - 4 < size:
                if size >= _OWN_BUFFER:
                    frame = memoryview(bytearray(4 + size))
                    with memoryview(buf) as mv:
                        frame[:n - pos] = mv[pos:n]
                    self._frame, self._frame_got = frame, n - pos
                    pos = n
                break
            with memoryview(buf) as mv:
                frame = memoryview(mv[pos + 4:pos + 4 + size].tobytes())
            pos += 4 + size
            done += self._complete(frame)
        if pos:
            del buf[:pos]
        return done

    def _complete(self, frame: memoryview) -> int:
        """Decode a response frame (without its size) and complete its request."""
        if not self._in_flight:
            raise KafkaConnectionError(f"unexpected response from {self.host}:{self.port}")
        req = self._in_flight.popleft()
        cid, body = wire.decode_response(req.api_key, req.version, frame)
        if cid != req.correlation_id:
            raise KafkaConnectionError(
                f"correlation id mismatch from {self.host}:{self.port}: expected "
                f"{req.correlation_id}, got {cid}")
        if req.api_key != ApiKey.API_VERSIONS:
            self._answered += 1
        req.complete(body, None)
        return 1

    def wait(self, req: InFlightRequest, timeout: float | None = None) -> dict[str, Any]:
        """Poll until `req` completes (earlier in-flight requests complete first)."""
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        while not req.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                err = KafkaTimeoutError(
                    f"broker {self.host}:{self.port} did not answer "
                    f"{ApiKey(req.api_key).name} in time")
                self.close(err)
                raise err
            if self.sock is None:
                raise self._closed_error or KafkaConnectionError("connection closed")
            self.poll(min(remaining, 1.0))
        if req.error is not None:
            raise req.error
        assert req.response is not None
        return req.response

    def request(self, api_key: int, body: dict[str, Any], *, version: int | None = None,
                timeout: float | None = None) -> dict[str, Any]:
        """Send and wait for one response."""
        return self.wait(self.send(api_key, body, version=version), timeout)


_IOV_MAX = 512  # buffers per sendmsg (Linux takes 1024)


def _send_parts(sock: socket.socket, parts: list[Any]) -> None:
    """sendall for a frame in parts, without joining them: sendmsg until every byte is
    written (a call may write part of a buffer; the socket's timeout applies to each)."""
    views = [memoryview(p) for p in parts]
    first = 0
    while first < len(views):
        sent = sock.sendmsg(views[first:first + _IOV_MAX])
        while first < len(views) and sent >= views[first].nbytes:
            sent -= views[first].nbytes
            first += 1
        if sent:
            views[first] = views[first][sent:]
