"""Client-side errors. Broker error codes arrive as kafkactl.protocol KafkaError subclasses;
these cover what happens on the client's side of the wire, and the sets of error codes the
client handles alike."""

from __future__ import annotations

from kafkactl.protocol.errors import RETRIABLE_CODES, ErrorCode


class ClientError(Exception):
    """Base class for errors raised by kafkactl.client."""


class KafkaConnectionError(ClientError):
    """A broker connection could not be made or was lost."""


class ClosedBeforeDelivery(KafkaConnectionError):
    """The producer was closed (a stop, close's timeout) while the record waited for the
    broker's answer: not known to be written, not refused either."""


class AuthenticationFailedError(ClientError):
    """The broker refused the SASL mechanism or the credentials (Kafka's
    SaslAuthenticationException): fatal, so no connection error the clients retry; the
    message names Kafka's error."""


class NoBrokersAvailable(ClientError):
    """None of the bootstrap servers answered."""


SERVE_ADVICE = ("Is `kafkactl serve` running there? Use -b/--bootstrap-server or "
                "KAFKACTL_BOOTSTRAP to point elsewhere.")


def without_advice(error: BaseException) -> str:
    """The error's text without the advice on where to point the client (SERVE_ADVICE):
    for a cluster that answered before (an outage, not a wrong address), and for
    commands without -b (mirror's --source/--target)."""
    return str(error).replace(". " + SERVE_ADVICE, "").replace(SERVE_ADVICE, "").rstrip()


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


# -- error codes by what the client does about them ------------------------------------------
# Whether a code is retriable at all comes from one table, protocol.errors.RETRIABLE_CODES
# (Kafka's RetriableException family); each set below is the part of it one request handles
# in one way, checked against that table at import.

def _retriable(*codes: ErrorCode) -> frozenset[ErrorCode]:
    """A named subset of RETRIABLE_CODES (a code Kafka does not retry is a bug here)."""
    wrong = [c.name for c in codes if c not in RETRIABLE_CODES]
    if wrong:
        raise AssertionError(f"not retriable in protocol.errors.RETRIABLE_CODES: {wrong}")
    return frozenset(codes)


# Topic metadata not ready yet (a new topic, a leader being elected): ask again.
METADATA_NOT_READY = _retriable(
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE)

# A Fetch or ListOffsets partition error saying the client's leader is stale: refresh the
# metadata and ask again.
STALE_LEADER = _retriable(
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH)

# A Produce error after which the sender refreshes metadata: a stale leader, or a lost
# connection (reported as NETWORK_EXCEPTION).
PRODUCE_REFRESH_METADATA = STALE_LEADER | _retriable(ErrorCode.NETWORK_EXCEPTION)

# A Produce error after which the sender sends the batch again (within retries and
# delivery.timeout.ms): the retriable codes a Produce can meet, plus two that Kafka does not
# mark retriable: OUT_OF_ORDER_SEQUENCE_NUMBER (an earlier batch of the partition is being
# retried, so this one arrived early) and UNSUPPORTED_COMPRESSION_TYPE (retried as the
# sender always has).
PRODUCE_RETRIABLE = PRODUCE_REFRESH_METADATA | _retriable(
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.KAFKA_STORAGE_ERROR,
) | {ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}

# The group coordinator is loading, gone or moved: find it again (after a pause) and retry.
COORDINATOR_RETRIABLE = _retriable(
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR)

# The group rebalanced under the member: join again (not retriable as such).
# FENCED_INSTANCE_ID is not among them: another member took over the group.instance.id,
# and joining again would only fence that one in turn (fatal, as in Java's consumer).
REJOIN_GROUP = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                          ErrorCode.UNKNOWN_MEMBER_ID})
