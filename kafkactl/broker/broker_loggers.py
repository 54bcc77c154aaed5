"""Broker loggers (KIP-412): the BROKER_LOGGER config resource, named by the broker's id,
whose configs are this broker's loggers and their log levels.

DescribeConfigs lists every logger of the broker process (Python's logging hierarchy,
the nodes no logger was made for too, and the root logger as `root`, Kafka's name for
it) with its effective level, in Kafka's names: TRACE, DEBUG, INFO, WARN, ERROR, FATAL
(source DYNAMIC_BROKER_LOGGER_CONFIG, not read-only, no synonyms). IncrementalAlterConfigs
SETs a logger's level or DELETEs it (the logger then follows its parent's), at once and
on this broker only: nothing goes to ZooKeeper or to disk, and a restart brings back the
levels of `kafkactl serve --log-level`, as Kafka's log4j levels come back from its
log4j.properties. As in Kafka's RuntimeLoggerManager, a resource's operations are all
checked before any is applied: an unknown logger or level is INVALID_CONFIG, APPEND,
SUBTRACT and a DELETE of the root logger are INVALID_REQUEST.

Kafka's levels are Python's: TRACE is 5 (below DEBUG; Python has no name for it), WARN
is WARNING and FATAL is CRITICAL. A level between two of them is shown as the next one
up (the least severe messages it lets through).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ROOT_LOGGER = "root"  # Kafka's (log4j 1's) name of the root logger
DYNAMIC_BROKER_LOGGER_CONFIG = 6
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
TRACE = 5
# Kafka's LogLevelConfig.VALID_LOG_LEVELS -> Python's level, least severe first
LEVELS: dict[str, int] = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                          "WARN": logging.WARNING, "ERROR": logging.ERROR,
                          "FATAL": logging.CRITICAL}
_VALID_LEVELS_TEXT = ", ".join(sorted(LEVELS))


class BrokerLoggerError(Exception):
    """A refused BROKER_LOGGER request: the Kafka error code and Kafka's message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def level_name(level: int) -> str:
    """Kafka's name of a Python level: the least severe of Kafka's levels it lets through
    (NOTSET, everything: TRACE; above CRITICAL, nothing: OFF)."""
    for name, value in LEVELS.items():
        if level <= value:
            return name
    return "OFF"


def _nodes() -> list[tuple[str, logging.Logger | logging.PlaceHolder]]:
    manager = logging.Logger.manager
    return [(name, node) for name, node in list(manager.loggerDict.items())
            if isinstance(node, (logging.Logger, logging.PlaceHolder))]


def _effective_level(name: str, nodes: Mapping[str, object]) -> int:
    """A logger's effective level; for a hierarchy node no logger was made for
    (`kafkactl` above `kafkactl.broker.server`), the level a logger made there would
    have: its nearest ancestor logger's."""
    while name:
        node = nodes.get(name)
        if isinstance(node, logging.Logger):
            return node.getEffectiveLevel()
        name = name.rpartition(".")[0]
    return logging.getLogger().getEffectiveLevel()


def loggers() -> dict[str, str]:
    """Every logger of this process -> its effective level, in Kafka's names (`root` the
    root logger), as Kafka's LoggingController.loggers."""
    nodes = dict(_nodes())
    out = {name: level_name(_effective_level(name, nodes)) for name in nodes
           if name != ROOT_LOGGER}
    out[ROOT_LOGGER] = level_name(logging.getLogger().level)
    return out


def logger_exists(name: str) -> bool:
    return name == ROOT_LOGGER or name in logging.Logger.manager.loggerDict


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def _check_broker_id(broker_id: int, resource_name: str, *, describe: bool) -> None:
    """Kafka's answers (INVALID_REQUEST) to a resource name that is not this broker's id."""
    what = "Broker" if describe else "Node"
    if describe and not resource_name:
        raise BrokerLoggerError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(resource_name)
    except ValueError:
        raise BrokerLoggerError(ErrorCode.INVALID_REQUEST, f"{what} id must be an integer, "
                                f"but it is: {resource_name}") from None
    if requested != broker_id:
        raise BrokerLoggerError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id} but received {resource_name}"
            if describe else
            f"Unexpected node id. Expected {broker_id}, but received {requested}")


def describe_broker_loggers(broker_id: int, resource_name: str) -> list[dict[str, Any]]:
    """DescribeConfigs' entries for BROKER_LOGGER `resource_name` (this broker's id)."""
    _check_broker_id(broker_id, resource_name, describe=True)
    return [{"name": name, "value": level, "read_only": False, "is_default": False,
             "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False,
             "synonyms": [], "config_type": 0, "documentation": None}
            for name, level in sorted(loggers().items())]


def _validate(configs: Iterable[Mapping[str, Any]]) -> None:
    """Kafka's checks of a BROKER_LOGGER resource's operations, all before any is applied
    (ConfigAdminManager.preprocess, RuntimeLoggerManager.validateLogLevelConfigs)."""
    configs = list(configs)
    names = [c["name"] for c in configs]
    if len(set(names)) != len(names):
        raise BrokerLoggerError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c["name"] for c in configs
             if c["config_operation"] != DELETE and c.get("value") is None]
    if nulls:
        raise BrokerLoggerError(ErrorCode.INVALID_REQUEST,
                                "Null value not supported for : " + ", ".join(nulls))
    for c in configs:
        name, op = c["name"], c["config_operation"]
        if op not in _OPERATIONS:
            raise BrokerLoggerError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} "
                                    "is not allowed for the BROKER_LOGGER resource")
        if op in (APPEND, SUBTRACT):
            raise BrokerLoggerError(ErrorCode.INVALID_REQUEST, f"{_OPERATIONS[op]} operation "
                                    "is not allowed for the BROKER_LOGGER resource")
        if not logger_exists(name):
            raise BrokerLoggerError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == SET and c["value"] not in LEVELS:
            raise BrokerLoggerError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {name} to {c['value']} as it is not a supported "
                f"log level. Valid log levels are {_VALID_LEVELS_TEXT}")
        if op == DELETE and name == ROOT_LOGGER:
            raise BrokerLoggerError(ErrorCode.INVALID_REQUEST, "Removing the log level of the "
                                    f"{ROOT_LOGGER} logger is not allowed")


def alter_broker_loggers(broker_id: int, resource_name: str,
                         configs: Iterable[Mapping[str, Any]], *,
                         validate_only: bool = False) -> None:
    """IncrementalAlterConfigs of BROKER_LOGGER `resource_name` (this broker's id): SET a
    logger's level, DELETE it (the logger follows its parent again); all or nothing."""
    _check_broker_id(broker_id, resource_name, describe=False)
    configs = list(configs)
    _validate(configs)
    if validate_only:
        return
    for c in configs:
        name = c["name"]
        if c["config_operation"] == SET:
            _logger(name).setLevel(LEVELS[c["value"]])
            log.warning("Updated the log level of %s to %s", name, c["value"])
        else:
            _logger(name).setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)
