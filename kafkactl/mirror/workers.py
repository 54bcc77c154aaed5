"""MirrorWorkers: a mirror as N worker processes, each one member of the same consumer group
(the group spreads the partitions over them), so copying uses N cores instead of sharing
one interpreter lock.

Same interface as MirrorMaker (start, wait, stop, close, status). The parent checks that
both clusters answer before starting the workers (`kafkactl.mirror.worker`), aggregates the
status lines they write on their stdout, forwards stop() to them as SIGTERM, and stops them
all when one fails or dies; the mirror then fails naming it. A worker whose parent dies
sees its stdin close and stops the way SIGTERM stops it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from typing import IO

from kafkactl.mirror.config import MirrorConfig, suffixed_client_id
from kafkactl.mirror.maker import MirrorMaker
from kafkactl.mirror.status import MirrorStatus, TopicStatus

WORKER_MODULE = "kafkactl.mirror.worker"


class Worker:
    """One worker process and the last status it reported."""

    def __init__(self, index: int, proc: subprocess.Popen[str]) -> None:
        self.index = index
        self.proc = proc
        self.status: MirrorStatus | None = None
        self.reader = threading.Thread(target=self._read, name=f"mirror-worker-{index}",
                                       daemon=True)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError, TypeError):
                self.status = MirrorStatus.from_json(json.loads(line))
        self.proc.wait()

    def done(self) -> bool:
        return not self.reader.is_alive()

    def failure(self) -> str | None:
        """Why this (finished) worker failed, or None."""
        if self.status is not None and self.status.error is not None:
            return self.status.error
        code = self.proc.returncode
        if code is not None and code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            return f"mirror worker {self.index} (pid {self.proc.pid}) {how}"
        return None


class MirrorWorkers:
    """`config.num_streams` worker processes, each a MirrorMaker with one stream."""

    def __init__(self, config: MirrorConfig, status_interval: float = 1.0) -> None:
        config.validate()
        self.config = config
        self.processes = config.num_streams
        self.status_interval = status_interval
        self.workers: list[Worker] = []
        self.stopping = False
        self._lock = threading.Lock()
        self._done = threading.Event()

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Check both clusters (ClusterUnreachable, UnknownTopicError as MirrorMaker.start
        raises them), then start the workers."""
        MirrorMaker(self.config).check()
        procs = [subprocess.Popen([sys.executable, "-m", WORKER_MODULE],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1) for _ in range(self.processes)]
        for i, proc in enumerate(procs):
            # each worker is stream i of the mirror (its transactional.id with
            # --exactly-once), its consumer and its producer with client.ids of their own
            stream = self.config.stream_base + i
            request = json.dumps({
                "config": replace(self.config, num_streams=1, stream_base=stream,
                                  consumer_properties=stream_properties(
                                      self.config.consumer_properties, stream),
                                  producer_properties=stream_producer_properties(
                                      self.config.producer_properties, stream)).to_json(),
                "status_interval": min(self.status_interval, 1.0)})
            assert proc.stdin is not None
            proc.stdin.write(request + "\n")
            proc.stdin.flush()  # stdin stays open: its end tells the worker we are gone
            worker = Worker(i, proc)
            self.workers.append(worker)
            worker.reader.start()
        threading.Thread(target=self._watch, name="mirror-workers", daemon=True).start()

    def _watch(self) -> None:
        """Stop every worker once one has finished (failed, killed, or stopped)."""
        while not any(w.done() for w in self.workers):
            time.sleep(0.05)
        self.stop()
        for w in self.workers:
            w.reader.join()
        self._done.set()

    def stop(self) -> None:
        """SIGTERM to every worker: each finishes its records in flight, commits, exits."""
        with self._lock:
            if self.stopping:
                return
            self.stopping = True
        for w in self.workers:
            if w.proc.poll() is None:
                with contextlib.suppress(OSError):
                    w.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def close(self) -> None:
        self.stop()
        if self.workers and not self._done.wait(90.0):
            for w in self.workers:
                if w.proc.poll() is None:
                    w.proc.kill()
        for w in self.workers:
            _close(w.proc.stdin)

    # ---- status -------------------------------------------------------------------------

    def status(self) -> MirrorStatus:
        """The workers' statuses added up per topic; the first failure is the error."""
        out = MirrorStatus("starting", self.config.source, self.config.target,
                           self.config.group, updated_ms=int(time.time() * 1000))
        reports = [w.status for w in self.workers if w.status is not None]
        lags: dict[str, list[int]] = {}
        for st in reports:
            for name, t in st.topics.items():
                agg = out.topics.get(name)
                if agg is None:
                    agg = out.topics[name] = TopicStatus(name, t.target_topic)
                agg.partitions += t.partitions
                agg.mirrored += t.mirrored
                agg.skipped += t.skipped
                agg.records_per_sec = round(agg.records_per_sec + t.records_per_sec, 1)
                if t.lag is not None:
                    lags.setdefault(name, []).append(t.lag)
        for name, values in lags.items():
            out.topics[name].lag = sum(values)
        out.topics = dict(sorted(out.topics.items()))
        out.mirrored = sum(t.mirrored for t in out.topics.values())
        out.skipped = sum(t.skipped for t in out.topics.values())
        out.records_per_sec = round(sum(t.records_per_sec for t in out.topics.values()), 1)
        known = [t.lag for t in out.topics.values() if t.lag is not None]
        out.lag = sum(known) if known else None
        failing = max(reports, key=lambda st: st.source_lookup_failures, default=None)
        if failing is not None and failing.source_lookup_failures:
            out.source_lookup_failures = failing.source_lookup_failures
            out.source_lookup_error = failing.source_lookup_error
        out.error = next((f for f in (w.failure() for w in self.workers if w.done())
                          if f is not None), None)
        if self._done.is_set():
            out.state = "failed" if out.error is not None else "stopped"
        elif self.stopping:
            out.state = "stopping"
        elif len(reports) == len(self.workers) and all(st.state == "running"
                                                       for st in reports):
            out.state = "running"
        return out


def _close(stream: IO[str] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()


def stream_properties(props: dict[str, str], stream: int) -> dict[str, str]:
    """The consumer properties of stream `stream` of several: a group.instance.id is
    suffixed with the stream's number (`ID-0`, `ID-1`, ...: each stream is a member of
    its own, as Kafka Streams' threads are), or the streams would fence each other; so is
    the client.id (kafkactl-mirror-0, -1, ... by default), as Kafka's MirrorMaker named
    each stream's consumer GROUP-0, GROUP-1, ...: each worker's is its own in the group's
    description, the brokers' logs and quotas."""
    out = {**props, "client.id": suffixed_client_id(props, stream)}
    instance = props.get("group.instance.id")
    if instance:
        out["group.instance.id"] = f"{instance}-{stream}"
    return out


def stream_producer_properties(props: dict[str, str], stream: int) -> dict[str, str]:
    """The producer properties of worker process `stream`: its client.id suffixed as its
    consumer's (kafkactl-mirror-0, -1, ... by default), each worker's producer its own in
    the target brokers' logs and quotas, as each Connect task's producer is."""
    return {**props, "client.id": suffixed_client_id(props, stream)}


def new_mirror(config: MirrorConfig, status_interval: float = 1.0) -> MirrorMaker | MirrorWorkers:
    """One stream: a MirrorMaker in this process; more: that many worker processes."""
    if config.num_streams == 1:
        return MirrorMaker(config)
    return MirrorWorkers(config, status_interval)
