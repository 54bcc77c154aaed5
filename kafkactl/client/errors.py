"""Client-side errors. Broker error codes arrive as kafkactl.protocol KafkaError subclasses;
these cover what happens on the client's side of the wire."""

from __future__ import annotations


class ClientError(Exception):
    """Base class for errors raised by kafkactl.client."""


class KafkaConnectionError(ClientError):
    """A broker connection could not be made or was lost."""


class NoBrokersAvailable(ClientError):
    """None of the bootstrap servers answered."""


class KafkaTimeoutError(ClientError):
    """An operation did not complete within its timeout."""


class ProducerClosedError(ClientError):
    """send() after close()."""


class RecordTooLargeError(ClientError):
    """A single record does not fit in max.request.size."""


class UnknownTopicError(ClientError):
    """The topic does not exist (and was not auto-created)."""


class ConfigError(ClientError, ValueError):
    """A bad configuration property (name or value)."""
