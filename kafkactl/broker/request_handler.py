"""Request dispatch (Kafka's KafkaApis): frame -> header -> body -> handler -> response parts.

A handler is `fn(services: BrokerServices, ctx: RequestContext, request: dict) -> dict |
None | Awaitable[dict | None]` (None = no response, e.g. Produce with acks=0). The table
(kafkactl.broker.handlers.HANDLERS) must cover exactly protocol.versions.SUPPORTED_VERSIONS,
the table ApiVersions advertises: KafkaApis refuses any other.

Bad input, decided per Kafka: an API Kafka has and we do not serve gets a well-formed error
response in its own shape where one can carry the error (kafkactl.protocol.refusal:
UNSUPPORTED_VERSION), so the client keeps its connection, as KafkaApis answers an API it has
but does not enable (ConsumerGroupHeartbeat with the classic group coordinator:
`getErrorResponse(UNSUPPORTED_VERSION)`). An API key Kafka does not define, a version outside
our table (or Kafka's), or an API whose response has no top-level error code closes the
connection, as Kafka's SocketServer does for a request it cannot parse or has not enabled,
except a too-new ApiVersions request, which gets the v0-format UNSUPPORTED_VERSION reply
clients need to retry lower. tests/broker/test_unsupported_apis.py sends every key and
version of Kafka's specs. A body that
fails to decode (truncated, bad UTF-8, absurd lengths) also closes the connection; each is
logged at WARNING, aggregated per peer (the first of a kind in full, then a count a minute:
kafkactl.broker.peer_log).
"""

from __future__ import annotations

import inspect
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactl.broker.log_context import current_request
from kafkactl.broker.network import CloseConnection, ConnectionInfo, HandlerResult
from kafkactl.broker.quota_manager import MUTATIONS, RequestQuota
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import KafkaError, ProtocolEncodeError
from kafkactl.protocol.refusal import refusal_frame
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">hhi")
_API_NAMES = {int(k): k.spec_name for k in ApiKey}


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: ConnectionInfo
    # the client's quotas while quotas are enforced (a Fetch decides its throttle with it,
    # a topic handler records its mutations): kafkactl.broker.quota_manager.RequestQuota
    quota: RequestQuota | None = None


Handler = Callable[[BrokerServices, RequestContext, dict[str, Any]],
                   dict[str, Any] | None | Awaitable[dict[str, Any] | None]]


# a version's (request frame decoder, response encoder)
_Codecs = tuple[Callable[[Any], tuple[str | None, Any]], Callable[[int, Any], list[Any]]]


def _codecs_of(table: dict[int, _Codecs], api_key: int, version: int) -> _Codecs:
    """The codecs of one served version, resolved on its first request."""
    found = table[version] = (codec.request_frame_decoder(api_key, version),
                              codec.response_encoder(api_key, version))
    return found


def check_handler_table(handlers: Mapping[ApiKey, Handler]) -> None:
    """ValueError unless `handlers` has exactly the keys of SUPPORTED_VERSIONS (the table
    ApiVersions advertises)."""
    unranged = sorted(k.name for k in handlers.keys() - SUPPORTED_VERSIONS.keys())
    unhandled = sorted(k.name for k in SUPPORTED_VERSIONS.keys() - handlers.keys())
    if unranged or unhandled:
        raise ValueError(
            "the handler table must cover exactly protocol.versions.SUPPORTED_VERSIONS: "
            f"no version range for {unranged}, no handler for {unhandled}")


class KafkaApis:
    """Dispatches each request to its handler in `handlers`, with `services`."""

    def __init__(self, services: BrokerServices, handlers: Mapping[ApiKey, Handler]) -> None:
        check_handler_table(handlers)
        self.services = services
        self.handlers: dict[int, Handler] = {int(k): h for k, h in handlers.items()}
        # api key -> (lowest version, highest version, handler, version -> (request
        # decoder, response encoder) as they are first used): one lookup per request
        self._routes: dict[int, tuple[int, int, Handler, dict[int, _Codecs]]] = {
            int(k): (*SUPPORTED_VERSIONS[k], h, {}) for k, h in handlers.items()}
        # metrics.listen: (api key, version, response body) for each response encoded, to
        # count its error codes (set by kafkactl.broker.metrics.MeteredHandler)
        self.count_errors: Callable[[int, int, dict[str, Any]], None] | None = None

    # ---- the network layer's entry point ----------------------------------------------------
    def handle(self, conn: ConnectionInfo, frame: bytearray) -> HandlerResult:
        if len(frame) < 8:
            raise CloseConnection(f"request of {len(frame)} bytes is shorter than a header")
        api_key, api_version, correlation_id = _HEADER.unpack_from(frame)
        route = self._routes.get(api_key)
        if route is None or not route[0] <= api_version <= route[1]:
            return self._refuse(conn, api_key, api_version, correlation_id)
        codecs = route[3].get(api_version) or _codecs_of(route[3], api_key, api_version)
        try:
            client_id, request = codecs[0](frame)
        except KafkaError as e:
            raise CloseConnection(
                f"malformed {ApiKey(api_key).name} v{api_version} request: {e}; closing") from e
        ctx = RequestContext(api_key, api_version, correlation_id, client_id, conn)
        token = current_request.set((_API_NAMES[api_key], api_version, correlation_id,
                                     client_id, conn))
        quotas = self.services.quotas
        enforcing = quotas is not None and not quotas.store.empty()  # no quota: no clock
        meter: _Meter | None = None
        if enforcing:
            assert quotas is not None
            meter = _Meter()
            ctx.quota = RequestQuota(quotas, conn.principal.name, client_id or "",
                                     meter.so_far)
            if api_key in MUTATIONS:  # the topic handlers check and record it per topic
                ctx.quota.before_mutation(api_key, api_version)
            meter.step_started = time.perf_counter()
        elif quotas is not None and not quotas.idle():
            quotas.maybe_sweep()  # what quotas since removed left is forgotten in time
        try:
            body = route[2](self.services, ctx, request)
        finally:
            current_request.reset(token)
        if body is not None and body.__class__ is not dict and inspect.isawaitable(body):
            if meter is None:
                return self._finish(ctx, body, None, len(frame), codecs[1])
            meter.stop()
            return self._finish(ctx, _Busy(body, meter), request, len(frame), codecs[1])
        if meter is not None:
            meter.stop()
            self._throttle(ctx, request, body, len(frame), meter.busy_s)
        if body is None:
            return None
        if self.count_errors is not None:
            self.count_errors(api_key, api_version, body)
        return codecs[1](correlation_id, body)

    def _throttle(self, ctx: RequestContext, request: dict[str, Any],
                  body: dict[str, Any] | None, size: int, busy_s: float) -> None:
        """Client quotas: a client over one gets the throttle time in its response and its
        connection muted that long once the response is sent (KIP-219; an acks=0 Produce,
        with no response, is muted all the same)."""
        quota = ctx.quota
        assert quota is not None
        ms = quota.finish(ctx.api_key, request, body, size, busy_s)
        if ms <= 0:
            return
        if body is not None and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(int(body["throttle_time_ms"] or 0), ms)
        ctx.connection.throttle_ms = max(ctx.connection.throttle_ms, ms)

    def _refuse(self, conn: ConnectionInfo, api_key: int, api_version: int,
                correlation_id: int) -> HandlerResult:
        """An API key we do not serve, or a version outside our range."""
        if api_key not in self.handlers:
            known = api_key in ApiKey._value2member_map_
            name = ApiKey(api_key).spec_name if known else f"API key {api_key}"
            try:
                refusal = refusal_frame(api_key, api_version, correlation_id,
                                        f"{name} is not supported by this broker (kafkactl)")
            except ProtocolEncodeError as e:  # a table the encoder cannot write: close
                raise CloseConnection(f"{name} v{api_version} is not supported and its "
                                      f"error response could not be written ({e}); "
                                      "closing") from None
            if refusal is not None:
                log.debug("answered %s v%d from %s with an error: not implemented", name,
                          api_version, conn.peer)
                return [refusal]
            raise CloseConnection(f"unknown or unsupported API key {api_key}; closing")
        lo, hi = SUPPORTED_VERSIONS[ApiKey(api_key)]
        if api_key == ApiKey.API_VERSIONS and api_version > hi:
            return [codec.encode_api_versions_unsupported(correlation_id)]
        raise CloseConnection(
            f"{ApiKey(api_key).name} v{api_version} is not supported (v{lo}-v{hi}); closing")

    async def _finish(self, ctx: RequestContext, pending: Awaitable[dict[str, Any] | None],
                      request: dict[str, Any] | None, size: int,
                      encode: Callable[[int, Any], list[Any]]) -> list[Any] | None:
        """The awaited rest of a handler; `request` is given when quotas are enforced."""
        token = current_request.set((_API_NAMES[ctx.api_key], ctx.api_version,
                                     ctx.correlation_id, ctx.client_id, ctx.connection))
        try:
            body = await pending
        finally:
            current_request.reset(token)
        if request is not None and isinstance(pending, _Busy):
            self._throttle(ctx, request, body, size, pending.busy_s)
        if body is None:
            return None
        if self.count_errors is not None:
            self.count_errors(ctx.api_key, ctx.api_version, body)
        return encode(ctx.correlation_id, body)


class _Meter:
    """A handler's busy time (what a request_percentage quota charges): the time its steps
    run, not the waits between them; `so_far` counts the step running now too."""

    __slots__ = ("busy_s", "step_started")

    def __init__(self) -> None:
        self.busy_s = 0.0
        self.step_started: float | None = None

    def stop(self) -> None:
        if self.step_started is not None:
            self.busy_s += time.perf_counter() - self.step_started
            self.step_started = None

    def so_far(self) -> float:
        started = self.step_started
        return self.busy_s + (0.0 if started is None else time.perf_counter() - started)


class _Busy:
    """A handler's awaitable that adds up the time its steps run into `meter` (from the
    time the handler took before returning it): what a request_percentage quota charges.
    The waits between the steps (acks=all, a long poll, a transaction marker) are not busy
    time; the work before and after them (the append, the read of a completed fetch) is,
    as Kafka charges its handler threads' time."""

    __slots__ = ("inner", "meter")

    def __init__(self, inner: Awaitable[Any], busy: _Meter | float) -> None:
        self.inner = inner
        if not isinstance(busy, _Meter):  # the time the handler took, seconds
            busy_s, busy = busy, _Meter()
            busy.busy_s = busy_s
        self.meter = busy

    @property
    def busy_s(self) -> float:
        return self.meter.busy_s

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self.inner.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        clock = time.perf_counter
        meter = self.meter
        while True:
            meter.step_started = clock()
            try:
                yielded = steps.send(sent) if thrown is None else steps.throw(thrown)
            except StopIteration as done:
                meter.stop()
                return done.value
            meter.stop()
            try:
                sent, thrown = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as e:  # a cancellation (or what the Task throws) goes in
                sent, thrown = None, e
