"""The request a log line was written for, and the JSON lines `serve --log-format json` writes.

KafkaApis sets `current_request` while a request is handled (its synchronous part, and the
awaited rest of an asynchronous handler), so any log line written meanwhile, by any module,
can say which request it was for. `JsonFormatter` writes one JSON object per line: time
(ISO 8601, UTC, milliseconds), level, logger, message, the exception when there is one, and
the request (api, version, correlation id, client id, peer, listener, principal) when the
line was written for one. Log shippers (Fluent Bit, Vector, Filebeat, Promtail) read it
without a parsing rule.
"""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar
from typing import Any

# (api name, api version, correlation id, client id, connection) of the request being handled
current_request: ContextVar[tuple[str, int, int, str | None, Any] | None] = ContextVar(
    "kafkactl_request", default=None)


def request_fields() -> dict[str, Any] | None:
    """The request being handled, as the JSON log line's `request` object (None: none)."""
    found = current_request.get()
    if found is None:
        return None
    api, version, correlation_id, client_id, conn = found
    out: dict[str, Any] = {"api": api, "version": version, "correlation_id": correlation_id,
                           "client_id": client_id}
    if conn is not None:
        out["peer"] = getattr(conn, "peer", None)
        out["listener"] = getattr(conn, "listener", None)
        principal = getattr(conn, "principal", None)
        if principal is not None:
            out["principal"] = str(principal)
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        t = time.gmtime(record.created)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(record.msecs):03d}Z"
        out: dict[str, Any] = {"time": stamp, "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}
        request = request_fields()
        if request is not None:
            out["request"] = request
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)
