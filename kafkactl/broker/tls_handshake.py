"""The server side of a TLS handshake that tells the client why it failed.

asyncio's SSLProtocol (loop.start_tls) closes the transport the moment its handshake fails,
without writing what OpenSSL left in its outgoing buffer: the TLS alert ("certificate
expired", "unknown ca", "certificate required", ...). The client then sees a bare EOF
("unexpected eof while reading") and cannot tell why it was refused. Kafka writes the alert
out before it closes (SslTransportLayer.handshakeFailure flushes its network buffer).

`start_tls_server` is loop.start_tls(server_side=True) with one change: when the handshake
fails with an SSL error, the bytes OpenSSL produced (the alert) are written to the socket
before asyncio closes it. The connection is otherwise asyncio's own TLS transport, read and
written as any other (kafkactl.broker.transfer's TLS path included). On a loop that is not
asyncio's (uvloop), or a Python whose SSLProtocol lacks what this relies on, it is
loop.start_tls unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from asyncio import sslproto
from typing import Any, cast

# what the subclass relies on (asyncio's SSLProtocol since Python 3.11)
_SUPPORTED = all(hasattr(sslproto.SSLProtocol, name) for name in (
    "_on_handshake_complete", "_get_app_transport"))


class _AlertingSSLProtocol(sslproto.SSLProtocol):
    """asyncio's SSLProtocol, writing out the TLS alert of a failed handshake first."""

    def _on_handshake_complete(self, handshake_exc: Any) -> None:
        if isinstance(handshake_exc, ssl.SSLError):
            transport = cast("asyncio.WriteTransport | None", self._transport)
            with contextlib.suppress(Exception):
                data = self._outgoing.read()  # type: ignore[attr-defined]
                if data and transport is not None and not transport.is_closing():
                    # written at once (nothing is buffered during a handshake), before
                    # SSLProtocol's _fatal_error aborts the transport
                    transport.write(data)
        super()._on_handshake_complete(handshake_exc)


async def start_tls_server(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                           protocol: asyncio.BaseProtocol, context: ssl.SSLContext,
                           handshake_timeout: float) -> asyncio.Transport | None:
    """loop.start_tls(transport, protocol, context, server_side=True), sending the TLS
    alert of a failed handshake to the client before the connection is closed."""
    if not (_SUPPORTED and isinstance(loop, asyncio.BaseEventLoop)
            and getattr(transport, "_start_tls_compatible", False)):
        return await loop.start_tls(transport, protocol, context, server_side=True,
                                    ssl_handshake_timeout=handshake_timeout)
    # what BaseEventLoop.start_tls does, with the subclass
    waiter = loop.create_future()
    tls = _AlertingSSLProtocol(loop, protocol, context, waiter, True, None,
                               ssl_handshake_timeout=handshake_timeout,  # type: ignore[arg-type]
                               call_connection_made=False)
    transport.pause_reading()
    transport.set_protocol(tls)
    made = loop.call_soon(tls.connection_made, transport)
    resumed = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resumed.cancel()
        raise
    return tls._app_transport
