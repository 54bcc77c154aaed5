"""The metrics listener (`metrics.listen=HOST:PORT`, `serve --metrics`): a small HTTP server
on threads of its own, never on the event loop that serves Kafka requests.

- GET /metrics: Prometheus's text format (prometheus_client), the broker's metrics
  (kafkactl.broker.metrics) and the process's (CPU seconds, resident memory, open fds);
- GET /health: 200 while the process serves (liveness);
- GET /ready: 200 once the logs are loaded and, in a cluster, the broker is registered in
  ZooKeeper, has the controller's metadata and is caught up: every partition it follows
  (a replica here, led by another live broker) has it in its ISR; 503 before, saying
  which partitions are behind (and again once shutdown starts);
- anything else: 404 (405 for another method). Request lines and headers are bounded by
  http.server (64 KiB, 100 headers); a request body is never read; a client silent for
  CLIENT_TIMEOUT_S is dropped.
"""

from __future__ import annotations

import concurrent.futures
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from kafkactl.broker.metrics import BrokerMetrics, exposition

if TYPE_CHECKING:
    from kafkactl.broker.services import BrokerServices

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 5.0  # the event loop's answer to /ready; none in time: not ready
SHOWN_BEHIND = 5  # partitions named in a 503's reason
# Prometheus's text format 0.0.4: what every Prometheus 2.x reads (only classic names here)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Scrapes and probes at once; more wait in the listen backlog.
MAX_THREADS = 8


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 metrics: BrokerMetrics, registry: Any) -> None:
        self.metrics = metrics
        self.registry = registry
        self.slots = threading.BoundedSemaphore(MAX_THREADS)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """An exception out of a request's handling. socketserver prints its traceback on
        stderr, past the broker's logging (--log-format json): a client gone mid-request or
        mid-answer (a scraper that timed out, closed or reset) is a DEBUG line here, anything
        else an ERROR with its traceback, both through the broker's logging."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            log.debug("metrics %s: the client went away (%s: %s)", _peer(client_address),
                      type(error).__name__, error)
        else:
            log.error("metrics %s: error answering the request", _peer(client_address),
                      exc_info=error)


def _peer(client_address: Any) -> str:
    try:
        return f"{client_address[0]}:{client_address[1]}"
    except (TypeError, IndexError):
        return str(client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = CLIENT_TIMEOUT_S
    server_version = "kafkactl-metrics"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def _method_not_allowed(self) -> None:
        self._send(405, b"only GET and HEAD\n", "text/plain; charset=utf-8", True,
                   {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed  # noqa: N815

    def _answer(self, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        metrics = self.server.metrics
        if path == "/metrics":
            from prometheus_client import generate_latest

            try:
                text = exposition(metrics).encode() + generate_latest(self.server.registry)
            except Exception as e:
                log.exception("metrics: the scrape failed")
                self._send(500, f"scrape failed: {type(e).__name__}\n".encode(),
                           "text/plain; charset=utf-8", body)
                return
            self._send(200, text, CONTENT_TYPE, body)
        elif path == "/health":
            self._send(200, b"ok\n", "text/plain; charset=utf-8", body)
        elif path == "/ready":
            behind = not_ready(metrics)
            if behind is None:
                self._send(200, b"ready\n", "text/plain; charset=utf-8", body)
            else:
                self._send(503, f"not ready: {behind}\n".encode(),
                           "text/plain; charset=utf-8", body)
        else:
            self._send(404, b"not found: this listener serves /metrics, /health and /ready\n",
                       "text/plain; charset=utf-8", body)

    def _send(self, code: int, payload: bytes, content_type: str, body: bool,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's
        log.debug("metrics %s: " + format, self.address_string(), *args)


def not_ready(metrics: BrokerMetrics) -> str | None:
    """Why the broker is not ready, None when it is (read on the event loop)."""
    if not metrics.ready:
        return "loading logs or joining the cluster"
    loop, services = metrics.loop, metrics.services
    if services is None or services.cluster is None:
        return None  # standalone: started is ready
    if loop is None or loop.is_closed():
        return "stopping"
    fut: concurrent.futures.Future[str | None] = concurrent.futures.Future()

    def check() -> None:
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(behind_reason(services))
            except Exception as e:
                fut.set_exception(e)

    try:
        loop.call_soon_threadsafe(check)
        return fut.result(READY_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        return f"the event loop did not answer within {READY_TIMEOUT_S:g} s"
    except RuntimeError:  # the loop closed meanwhile
        return "stopping"


def behind_reason(services: BrokerServices) -> str | None:
    """A cluster broker's catching up, from the controller's metadata: None when every
    partition it follows (it is a replica, another live broker leads) has it in the ISR;
    else which do not. A replica this broker could not make or open (its log dir offline
    since the start, KIP-112, or after a storage error, or failing when the replica came)
    is not catching up: it cannot until the broker restarts with the dir repaired, which
    is said instead."""
    cache = services.metadata_cache
    if not getattr(cache, "updated", True):
        return "no metadata from the controller yet"
    me = services.broker_id
    offline = services.partitions.offline
    behind: list[str] = []
    stuck: list[str] = []
    for name in cache.topic_names():
        topic = cache.topic(name)
        if topic is None:
            continue
        for p in topic.partitions.values():
            if me in p.replicas and p.leader >= 0 and p.leader != me and me not in p.isr:
                (stuck if (name, p.partition) in offline or me in p.offline_replicas
                 else behind).append(f"{name}-{p.partition}")
    if behind:
        return (f"catching up: {len(behind)} followed partition(s) not in the ISR yet "
                f"({_shown(behind)})")
    if stuck:
        lm = services.log_manager
        at_start = set(lm.offline) - lm.went_offline
        failing = lm.offline_dirs() - set(lm.offline)
        where = " and ".join(
            f"{what} ({', '.join(sorted(map(str, dirs)))})" for what, dirs in (
                ("offline since the start", at_start),
                ("offline after a storage error", lm.went_offline),
                ("with storage errors", failing)) if dirs) or "that failed"
        return (f"log dir(s) {where}: {len(stuck)} replica(s) there cannot rejoin their ISR "
                f"until the broker restarts with the dir repaired ({_shown(stuck)})")
    return None


def _shown(names: list[str]) -> str:
    names = sorted(names)
    return ", ".join(names[:SHOWN_BEHIND]) + (
        f" and {len(names) - SHOWN_BEHIND} more" if len(names) > SHOWN_BEHIND else "")


class MetricsServer:
    """The metrics listener of one broker."""

    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, ProcessCollector

        self.metrics = metrics
        registry = CollectorRegistry(auto_describe=False)  # the process's CPU, memory, fds
        ProcessCollector(registry=registry)
        self._server = _Server((host or "0.0.0.0", port), _Handler, metrics, registry)
        self.address: tuple[str, int] = self._server.server_address[:2]  # type: ignore[assignment]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.5},
                                        name="metrics-http", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("metrics on http://%s:%d/metrics (and /health, /ready)", *self.address)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
