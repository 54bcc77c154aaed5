"""Followers fetch from their leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One asyncio fetcher per leader broker fetches all the partitions this broker follows there,
with the Fetch API and `replica_id` set to this broker (the leader then knows how far each
follower is). Before fetching a partition it just started following, the fetcher asks the
leader where its own latest leader epoch ended (OffsetForLeaderEpoch, KIP-101) and cuts
its log there, so it never keeps records the leader does not have. Batches are appended
as the leader wrote them (offsets, epochs, CRCs); the leader's high watermark and log start
offset come with each response: the follower's log start follows the leader's up (Kafka's
ReplicaFetcherThread.processPartitionData), so records removed on the leader by
DeleteRecords or retention do not come back when this replica leads. Each fetch sends this
replica's log start offset, which the leader's DeleteRecords waits on. A fetch offset below
the leader's log start (OFFSET_OUT_OF_RANGE: this replica was away while the leader's log
start passed its end) starts this replica's log over at the leader's start.

A partition error the leader answers that is not a leadership change's moment (its
authorizer refusing this broker, a deleted topic, a disk error) is logged, as Kafka's
AbstractFetcherThread does ("Retrying leaderEpoch request for partition ...", "Error for
partition ... at offset ..."): the first of each kind (topic and error) per leader at once,
then a count a minute (kafkactl.broker.peer_log), however often it is retried.

Each fetch remembers, per partition, what it was sent for: the entry it was sent for
(re-added by a LeaderAndIsr: a new entry), the leader epoch and the fetch offset. A
response part for a partition that has changed meanwhile (removed, re-added for a new
leader epoch, made leader, truncated) is dropped, never appended (Kafka's
AbstractFetcherThread checks the same before processing a partition's data).

Each fetcher keeps a fetch session with its leader (KIP-227, Kafka's FetchSessionHandler):
a full fetch first (session 0, epoch 0) lists every partition; once the leader has given a
session id, each fetch of the session lists only the partitions added or whose fetch offset,
log start offset, leader epoch or max bytes changed, and forgets the ones no longer fetched
(unfollowed, being truncated, throttled); the leader answers only the partitions with
something new. An answer FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH (the
leader restarted or evicted the session), session id 0, or a failed request starts over
with a full fetch.

With `follower.replication.throttled.rate` set, a throttled partition (this broker's replica
in its topic's `follower.replication.throttled.replicas`) that is not in sync is left out of
the fetch while the follower quota is exceeded (kafkactl/broker/replication_quota.py).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import Any

from kafkactl.broker import log_io
from kafkactl.broker.partition import Partition
from kafkactl.broker.peer_log import PeerLogLimiter
from kafkactl.broker.replication_quota import ReplicationQuota
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.cluster.broker_connection import (
    CONNECTION_ERRORS,
    PLAINTEXT,
    AuthenticationFailed,
    BrokerConnection,
    InterBrokerSecurity,
)
from kafkactl.log.errors import KafkaStorageError, LogError
from kafkactl.log.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from kafkactl.log.log_dir_failure import RepeatedErrorLog, StorageErrorLog
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_name

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 7
LATEST, EARLIEST = -1, -2
TopicPartition = tuple[str, int]
FETCH_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, KafkaError, LookupError)
# A partition error of the leader's that a leadership change makes for a moment (the leader
# has not taken the partition's new state yet, or this replica has not): retried quietly.
# Any other (an authorizer's refusal, a deleted topic, a disk error on the leader) is told
# in the log (see ReplicaFetcher._refused).
TRANSIENT_ERRORS = frozenset((
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE))
# ... and OffsetForLeaderEpoch's before a fetch: the leader may not know the partition yet
TRANSIENT_TRUNCATE_ERRORS = TRANSIENT_ERRORS | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
# Fetch errors Kafka's AbstractFetcherThread says at WARNING (the topic is gone or was
# re-created); every other one at ERROR ("Error for partition ... at offset ...")
WARNED_FETCH_ERRORS = frozenset((
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID))


@dataclass
class FetcherSettings:
    """replica.fetch.* keys."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000


@dataclass(eq=False)
class _Followed:
    part: Partition
    truncate_first: bool = True
    in_sync: bool = False  # caught up to the leader's high watermark at the last response
    lag: int = 0  # records behind the leader's high watermark at the last response
    key: TopicPartition = ("", -1)  # (topic, partition), set from `part`

    def __post_init__(self) -> None:
        self.key = (self.part.topic, self.part.partition)


@dataclass(frozen=True, slots=True)
class _Sent:
    """What one partition of a fetch was sent for (and, in a fetch session, what the
    leader's session holds for it: the fetch told it, or an earlier one)."""

    followed: _Followed
    leader_epoch: int
    fetch_offset: int
    log_start_offset: int = -1
    max_bytes: int = 0

    def request(self) -> dict[str, Any]:
        part = self.followed.part
        return {"partition": part.partition, "current_leader_epoch": self.leader_epoch,
                "fetch_offset": self.fetch_offset, "last_fetched_epoch": -1,
                "log_start_offset": self.log_start_offset,
                "partition_max_bytes": self.max_bytes}

    def still_current(self, now: _Followed | None) -> bool:
        part = self.followed.part
        return (now is self.followed and not now.truncate_first and not part.is_leader
                and part.leader_epoch == self.leader_epoch
                and part.log_end_offset == self.fetch_offset)


INVALID_SESSION_ID, INITIAL_EPOCH = 0, 0
FETCH_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                        ErrorCode.INVALID_FETCH_SESSION_EPOCH)


class FetchSessionHandler:
    """The follower's side of one fetch session with a leader (Kafka's
    FetchSessionHandler): what the leader's session holds, and the next request's id and
    epoch (epoch 0: a full fetch, which also closes the session named, if any)."""

    def __init__(self, source_id: int = -1) -> None:
        self.source_id = source_id  # the leader broker
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TopicPartition, _Sent] = {}
        self.full_fetches = 0  # sent (the first, and each start-over)
        self.incremental_fetches = 0

    def build(self, ready: list[_Followed], max_bytes: int
              ) -> tuple[dict[TopicPartition, _Sent], list[_Sent],
                         dict[str, list[int]], bool]:
        """The next fetch: (every partition it fetches, as sent; the ones to list; the
        ones to forget, by topic; whether it is a full fetch)."""
        full = self.epoch == INITIAL_EPOCH
        previous = self.partitions
        session: dict[TopicPartition, _Sent] = {}
        listed: list[_Sent] = []
        for f in ready:
            part = f.part
            key = f.key
            log_ = part.log
            offset, start = log_.log_end_offset, log_.log_start_offset
            sent = previous.get(key)
            if sent is None or sent.followed is not f or sent.fetch_offset != offset or \
                    sent.leader_epoch != part.leader_epoch or \
                    sent.log_start_offset != start or sent.max_bytes != max_bytes:
                sent = _Sent(f, part.leader_epoch, offset, start, max_bytes)
                listed.append(sent)
            elif full:
                listed.append(sent)
            session[key] = sent
        forgotten: dict[str, list[int]] = {}
        if not full:
            for topic, partition in previous.keys() - session.keys():
                forgotten.setdefault(topic, []).append(partition)
        return session, listed, forgotten, full

    def sent(self, session: dict[TopicPartition, _Sent], full: bool) -> None:
        if full:
            self.full_fetches += 1
        else:
            self.incremental_fetches += 1

    def answered(self, resp: dict[str, Any], session: dict[TopicPartition, _Sent],
                 full: bool) -> bool:
        """The leader answered the fetch built as `session`: the next one's id and epoch.
        False when the answer is a session error (no partition data in it)."""
        code = resp.get("error_code", ErrorCode.NONE)
        if code != ErrorCode.NONE:
            # INFO as Kafka's FetchSessionHandler.handleError: a leader restarted or
            # evicted the session (rare; each costs one full fetch)
            log.info("fetch session %d (epoch %d) with broker %d: the leader answered %s; "
                     "starting over with a full fetch", self.session_id, self.epoch,
                     self.source_id, ErrorCode(code).name)
            if code in FETCH_SESSION_ERRORS:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        new_id = resp.get("session_id", INVALID_SESSION_ID)
        if new_id == INVALID_SESSION_ID:  # no session (no slot, or it was closed)
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif full or new_id != self.session_id:
            self.session_id, self.epoch = new_id, 1
        else:
            self.epoch = 1 if self.epoch == 2**31 - 1 else self.epoch + 1
        self.partitions = session
        return True

    def failed(self) -> None:
        """The request failed (connection lost, timed out): whether the leader saw it is
        unknown, so the next fetch is a full one closing this session."""
        self.epoch = INITIAL_EPOCH


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, cache: ZkMetadataCache,
                 settings: FetcherSettings, security: InterBrokerSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.cache = cache
        self.settings = settings
        self.security = security  # leaders are fetched from on the inter-broker listener
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.quota: ReplicationQuota | None = None  # follower.replication.throttled.rate
        # appends of the leader's records that fail (retried every backoff): per log dir
        # for a disk error (all its partitions fail alike), else per partition
        self.append_errors = RepeatedErrorLog(log)
        # a disk error in a follower's append takes its dir offline (a cluster's brokers)
        self.storage_errors: StorageErrorLog | None = None
        # record bytes fetched from leaders (the metrics' ReplicationBytesInPerSec)
        self.replication_bytes_in = 0

    def follow(self, part: Partition) -> None:
        """Fetch `part` from its leader (after truncating to where the leader agrees)."""
        key = (part.topic, part.partition)
        for source, other in list(self.fetchers.items()):
            if source != part.leader_id:
                other.remove(key)
        fetcher = self.fetchers.get(part.leader_id)
        if fetcher is None:
            fetcher = self.fetchers[part.leader_id] = ReplicaFetcher(part.leader_id, self)
        fetcher.add(part)

    def unfollow(self, key: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(key)

    def max_lag(self) -> int:
        """The largest lag of a followed partition behind its leader's high watermark at
        the last fetch, in records (Kafka's ReplicaFetcherManager MaxLag)."""
        return max((f.lag for fetcher in list(self.fetchers.values())
                    for f in list(fetcher.partitions.values())), default=0)

    def following(self) -> dict[TopicPartition, int]:
        return {key: source for source, f in self.fetchers.items() for key in f.partitions}

    def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()


class ReplicaFetcher:
    def __init__(self, source_id: int, manager: ReplicaFetcherManager) -> None:
        self.source_id = source_id
        self.manager = manager
        self.partitions: dict[TopicPartition, _Followed] = {}
        self._wakeup = asyncio.Event()
        self._connection: BrokerConnection | None = None
        self.stale_dropped = 0  # response parts dropped: their partition changed meanwhile
        # a leader this broker cannot authenticate to (credentials, certificates) stops
        # replication until fixed: said at ERROR at once, then every minute, as Kafka's
        # NetworkClient logs a failed authentication (other fetch errors stay at DEBUG)
        self._auth_errors = RepeatedErrorLog(log, repeat_s=60.0)
        # partition errors the leader answers (an authorizer refusing this broker, ...):
        # the first of each kind (topic and error) at once, then a count a minute, so a
        # refusal repeated every fetch backoff for every partition does not flood the log
        self._refusals = PeerLogLimiter(log, logging.WARNING,
                                        "partition errors from the leader")
        self.session = FetchSessionHandler(source_id)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, part: Partition) -> None:
        self.partitions[(part.topic, part.partition)] = _Followed(part)
        self._wakeup.set()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    def stop(self) -> None:
        self._task.cancel()
        if self._connection is not None:
            self._connection.close()
        self._refusals.close()

    def _refused(self, message: str, level: int) -> None:
        """A partition error of the leader's that is not a leadership change's moment
        (Kafka's AbstractFetcherThread: "Retrying leaderEpoch request for partition ... as
        the leader reported an error", "Error for partition ... at offset ..."): logged at
        `level`, aggregated per kind by kafkactl.broker.peer_log."""
        self._refusals.event(f"broker {self.source_id}", message, level)

    # ---- the loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        settings = self.manager.settings
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                conn = self._connect()
                truncating = [f for f in self.partitions.values() if f.truncate_first]
                if truncating:
                    await self._truncate(conn, truncating)
                await self._fetch(conn)
                if self._auth_errors.failing:
                    self._auth_errors.recovered(
                        self.source_id, "replica fetcher: authenticated to broker %d again",
                        self.source_id)
            except asyncio.CancelledError:
                raise
            except FETCH_ERRORS as e:
                if isinstance(e, (AuthenticationFailed, ssl.SSLError)):
                    self._auth_errors.failed(
                        self.source_id, "replica fetcher: connection to broker %d failed "
                        "authentication (%s); the partitions it leads are not replicated "
                        "here until this is fixed", self.source_id, e)
                else:
                    log.debug("fetch from broker %d failed: %s: %s", self.source_id,
                              type(e).__name__, e)
                await asyncio.sleep(settings.backoff_ms / 1000)
            except Exception:
                log.exception("replica fetcher for broker %d failed; retrying", self.source_id)
                await asyncio.sleep(settings.backoff_ms / 1000)

    def _connect(self) -> BrokerConnection:
        leader = self.manager.cache.broker(self.source_id)
        security = self.manager.security
        address = leader.endpoint(security.listener) if leader is not None else None
        if address is None:
            raise LookupError(f"broker {self.source_id} is not live on listener "
                              f"{security.listener}")
        conn = self._connection
        if conn is None or (conn.host, conn.port) != address:
            if conn is not None:
                conn.close()
            conn = self._connection = BrokerConnection(
                *address, client_id=f"kafkactl-replica-fetcher-{self.manager.broker_id}",
                security=security)
        return conn

    # ---- truncation (KIP-101) -----------------------------------------------------------------
    async def _truncate(self, conn: BrokerConnection, followed: list[_Followed]) -> None:
        asks: dict[str, list[dict[str, Any]]] = {}
        for ask in followed:
            asks.setdefault(ask.part.topic, []).append({
                "partition": ask.part.partition,
                "current_leader_epoch": ask.part.leader_epoch,
                "leader_epoch": ask.part.epochs.latest_epoch})
        body = {"replica_id": self.manager.broker_id, "topics": [
            {"topic": t, "partitions": ps} for t, ps in asks.items()]}
        resp = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                  OFFSET_FOR_LEADER_EPOCH_VERSION, body, 30)
        for t in resp["topics"]:
            for r in t["partitions"]:
                f = self.partitions.get((t["topic"], r["partition"]))
                if f is None or not f.truncate_first:
                    continue
                code = r["error_code"]
                if code != ErrorCode.NONE:  # asked again next round
                    if code not in TRANSIENT_TRUNCATE_ERRORS:
                        self._refused(
                            f"replica fetcher: retrying the leader epoch request for "
                            f"partition {t['topic']}-{r['partition']} as the leader (broker "
                            f"{self.source_id}) reported an error: {error_name(code)}; the "
                            "partition is not replicated here meanwhile", logging.WARNING)
                    else:
                        log.debug("%s-%d: the leader (broker %d) is not ready: %s",
                                  t["topic"], r["partition"], self.source_id, error_name(code))
                    continue
                part = f.part
                epoch, end = r["leader_epoch"], r["end_offset"]
                if epoch == UNDEFINED_EPOCH or end == UNDEFINED_OFFSET:
                    target = part.high_watermark
                else:
                    _e, local_end = part.epochs.end_offset_for(epoch, part.log_end_offset)
                    target = min(end, local_end if local_end >= 0 else part.log_end_offset)
                await part.truncate_off_loop(target, log_io.run)  # the scan: off the loop
                f.truncate_first = False

    # ---- fetching ----------------------------------------------------------------------------
    async def _fetch(self, conn: BrokerConnection) -> None:
        settings = self.manager.settings
        quota = self.manager.quota
        if quota is None or quota.bound() is None:  # no throttling: one test a partition
            ready = [f for f in self.partitions.values() if not f.truncate_first]
        else:
            ready = [f for f in self.partitions.values() if not f.truncate_first and
                     not quota.should_throttle(f.part.topic, f.part.partition, f.in_sync)]
        if not ready:
            await asyncio.sleep(settings.backoff_ms / 1000)
            return
        handler = self.session
        sent, listed, forgotten, full = handler.build(ready, settings.partition_max_bytes)
        topics: dict[str, list[dict[str, Any]]] = {}
        for item in listed:
            topics.setdefault(item.followed.part.topic, []).append(item.request())
        body = {"replica_id": self.manager.broker_id, "max_wait_ms": settings.max_wait_ms,
                "min_bytes": settings.min_bytes, "max_bytes": settings.max_bytes,
                "isolation_level": 0, "session_id": handler.session_id,
                "session_epoch": handler.epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                          for t, ps in forgotten.items()],
                "rack_id": ""}
        handler.sent(sent, full)
        try:
            resp = await conn.request(ApiKey.FETCH, FETCH_VERSION, body,
                                      settings.max_wait_ms / 1000 + 30)
        except BaseException:
            handler.failed()
            raise
        if not handler.answered(resp, sent, full):
            if resp.get("error_code") not in FETCH_SESSION_ERRORS:
                await asyncio.sleep(settings.backoff_ms / 1000)
            return
        backoff = False
        for t in resp["responses"]:
            for r in t["partitions"]:
                key = (t["topic"], r["partition_index"])
                f = self.partitions.get(key)
                asked = sent.get(key)
                if f is None or asked is None or not asked.still_current(f):
                    if asked is not None:
                        self.stale_dropped += 1
                        log.debug("%s-%d: dropping a fetch response sent for leader epoch "
                                  "%d at offset %d: the partition changed meanwhile", *key,
                                  asked.leader_epoch, asked.fetch_offset)
                    continue
                if not await self._handle(conn, f, r):
                    backoff = True
                elif r.get("records") and self.partitions.get(key) is f:
                    # as Kafka's fetcher threads (updateAndMoveToEnd): a partition that
                    # got data goes last, so busy partitions early in the request cannot
                    # take every fetch's bytes from the ones after them
                    self.partitions[key] = self.partitions.pop(key)
        if backoff:
            await asyncio.sleep(settings.backoff_ms / 1000)

    async def _handle(self, conn: BrokerConnection, f: _Followed, r: dict[str, Any]) -> bool:
        part = f.part
        code = r["error_code"]
        if code == ErrorCode.NONE:
            records = r.get("records") or b""
            self.manager.replication_bytes_in += len(records)
            errors = self.manager.append_errors
            try:
                size = part.append_as_follower(memoryview(records), r["high_watermark"])
            except (OSError, LogError) as e:
                _append_failed(errors, part, e, self.manager.storage_errors)
                return False
            if errors.failing:
                _append_worked(errors, part)
            f.lag = max(r["high_watermark"] - part.log_end_offset, 0)
            f.in_sync = f.lag == 0
            # the leader's log start moved (DeleteRecords, retention): one comparison when not
            leader_start = r["log_start_offset"]
            if leader_start > part.log_start_offset:
                try:
                    part.follow_leader_log_start(leader_start)
                except (OSError, LogError) as e:  # asked again with the next response
                    log.error("%s: cannot move the log start to the leader's %d: %s", part,
                              leader_start, e)
            if self.manager.quota is not None:
                self.manager.quota.record(part.topic, part.partition, size)
            return True
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._reset_out_of_range(conn, part)
            return True
        if code in TRANSIENT_ERRORS:
            log.debug("%s: fetch from broker %d answered %s", part, self.source_id,
                      error_name(code))
        else:
            self._refused(
                f"replica fetcher: error for partition {part.topic}-{part.partition} at "
                f"offset {part.log_end_offset}: the leader (broker {self.source_id}) "
                f"answered {error_name(code)}; retrying",
                logging.WARNING if code in WARNED_FETCH_ERRORS else logging.ERROR)
        return False

    async def _reset_out_of_range(self, conn: BrokerConnection, part: Partition) -> None:
        """The fetch offset is outside the leader's log: past its end (cut ours back to
        it) or before its start (restart ours at its start)."""
        ends = {}
        for ts in (LATEST, EARLIEST):
            body = {"replica_id": self.manager.broker_id, "isolation_level": 0, "topics": [
                {"name": part.topic, "partitions": [{
                    "partition_index": part.partition, "current_leader_epoch":
                    part.leader_epoch, "timestamp": ts}]}]}
            resp = await conn.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, 30)
            p = resp["topics"][0]["partitions"][0]
            if p["error_code"] != ErrorCode.NONE:
                return
            ends[ts] = p["offset"]
        if part.log_end_offset > ends[LATEST]:
            await part.truncate_off_loop(ends[LATEST], log_io.run)
        elif part.log_end_offset < ends[EARLIEST]:
            log.warning("%s: the leader's log starts at %d, after this replica's end %d: "
                        "starting over there", part, ends[EARLIEST], part.log_end_offset)
            part.restart_at(ends[EARLIEST])


def _append_failed(errors: RepeatedErrorLog, part: Partition, e: Exception,
                   storage_errors: StorageErrorLog | None = None) -> None:
    """A follower's append failed: told per log dir for a disk error (to `storage_errors`
    when given: its dir goes offline), else per partition (rate-limited: the fetch is
    retried every replica.fetch.backoff.ms)."""
    if isinstance(e, KafkaStorageError | OSError):
        log_dir = e.log_dir if isinstance(e, KafkaStorageError) else part.log.dir.parent
        if storage_errors is not None and storage_errors.listener is not None:
            storage_errors.failed(log_dir, f"{part}: cannot append the leader's records: {e}")
            return
        errors.failed(log_dir, "%s: cannot append the leader's records to log dir %s: %s",
                      part, log_dir, e)
    else:
        errors.failed((part.topic, part.partition),
                      "%s: cannot append the leader's records: %s", part, e)


def _append_worked(errors: RepeatedErrorLog, part: Partition) -> None:
    """A follower's append worked: its log dir and partition are reported once again."""
    log_dir = part.log.dir.parent
    errors.recovered(log_dir, "%s: appends of the leader's records to log dir %s work again",
                     part, log_dir)
    errors.recovered((part.topic, part.partition),
                     "%s: appends of the leader's records work again", part)
