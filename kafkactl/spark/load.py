"""The parallel loader job: topics -> Parquet partitioned by topic and partition.

    spark-submit kafkactl/spark/load.py --bootstrap HOST:PORT --pattern 'events\\..*' \\
        --output /data/events

(or `kafkactl spark-load ...`, which builds that line). One Spark task per topic-partition
offset range; the end offsets reached are committed with the output (see
kafkactl.spark.manifest), so the next run starts where the last committed run ended and a
killed run, rerun, leaves exactly one copy of every record. It reads read_committed unless
told otherwise (--isolation-level): no aborted transaction's records, and each run ends at
the last stable offset, so an open transaction's records wait for a later run.

Exit codes: 0 loaded (or nothing new), 1 the Spark job failed, 2 bad arguments, 3 broker
unreachable (or refusing the credentials), 4 output not writable (or locked by another
loader, or a --commit-group with active members), 5 data lost or damaged: offsets out of
range or a topic deleted while it was read (without --skip-data-loss), or a batch that
fails its CRC check (always), 6 nothing to load from: a --topic that does not exist or a
--pattern that matches no topic (without --allow-empty). A failure prints one line
`kafkactl spark-load: error: ...` (written to --status-file instead when one is given: the
caller prints it); Spark's own ERROR log of the failed tasks is kept off the terminal
(QUIET_LOGGERS).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit: import the package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from kafkactl.client.consumer import SimpleConsumer  # noqa: E402
from kafkactl.client.errors import (  # noqa: E402
    AuthenticationFailedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
)
from kafkactl.client.security import SECURITY_KEYS, ClientSecurity  # noqa: E402
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_name  # noqa: E402
from kafkactl.spark.manifest import OutputDir, OutputError, StagedRun, new_run_id  # noqa: E402
from kafkactl.spark.options import (  # noqa: E402
    DATA_LOSS_HINT,
    DataLossError,
    OptionError,
    ReadOptions,
    TopicPartition,
    UnauthorizedTopicError,
    UnknownTopicError,
    security_from,
)
from kafkactl.spark.partition_reader import (  # noqa: E402
    CHECK_CRCS_HINT,
    DamagedDataError,
    FetchRefusedError,
    TopicDeletedError,
)
from kafkactl.spark.planner import resolve_offsets, topic_partitions  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BROKER, EXIT_OUTPUT, EXIT_DATA_LOSS = 0, 1, 2, 3, 4, 5
EXIT_NOTHING_MATCHED = 6
# kafka.isolation.level's values; the loader's default is the first: a warehouse gets no
# aborted transaction's records
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
SKIP_HINT = "run with --skip-data-loss to load what is left"
GROUP_METADATA = "kafkactl-spark-load"
# Fault injection for the tests of the commit protocol: crash (SIGKILL) at this point.
CRASH_ENV = "KAFKACTL_SPARK_LOAD_CRASH_AT"
CRASH_POINTS = ("staged", "committed", "published-one")
# The states of a group --commit-group may commit to (kafka-consumer-groups' "inactive"
# groups: no member whose own commits the loader's would overwrite, or be overwritten by;
# a group that does not exist is Dead)
INACTIVE_GROUP_STATES = ("Empty", "Dead")
# What OffsetCommit answers a commit without a generation when the group has members
GROUP_ACTIVE_CODES = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.FENCED_INSTANCE_ID})
# Spark's loggers that log a failed task's exception with its Java stack trace (each task
# several times over): the loader reports the failure itself, in one line. Turned off in
# the loader's session (the driver; with a local master the executors too).
QUIET_LOGGERS = ("org.apache.spark.executor.Executor",
                 "org.apache.spark.scheduler.TaskSetManager",
                 "org.apache.spark.sql.execution.datasources.FileFormatWriter",
                 "org.apache.spark.util.Utils")

log = logging.getLogger("kafkactl.spark")


class LoadError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kafkactl spark-load",
        description="Load Kafka topics into Parquet (partitioned by topic and partition).")
    ap.add_argument("--bootstrap", "-b", default=os.environ.get("KAFKACTL_BOOTSTRAP"),
                    help="broker(s) host:port[,host:port]")
    ap.add_argument("--topic", "-t", action="append", default=[], help="topic (repeatable)")
    ap.add_argument("--pattern", "-p", help="regex of topic names (fully matched)")
    ap.add_argument("--output", "-o", required=True, help="output directory")
    ap.add_argument("--commit-group", help="commit the end offsets to this consumer group "
                    "(and start from its committed offsets) instead of the manifest")
    ap.add_argument("--fail-on-data-loss", default="true", choices=("true", "false"))
    ap.add_argument("--skip-data-loss", dest="fail_on_data_loss", action="store_const",
                    const="false", help="load what is left when offsets were deleted "
                    "(--fail-on-data-loss false)")
    ap.add_argument("--allow-empty", action="store_true",
                    help="exit 0 when a --topic does not exist or the --pattern matches no "
                    "topic (default: exit 6)")
    ap.add_argument("--max-records-per-partition", type=int, default=None)
    ap.add_argument("--isolation-level", choices=ISOLATION_LEVELS, default="read_committed",
                    help="read_committed (default): only committed transactions' records, "
                    "each run ending at the last stable offset (an open transaction's "
                    "records, and all after them, wait for a later run); read_uncommitted: "
                    "every record up to the high watermark, aborted transactions' included")
    ap.add_argument("--partition-by", choices=("partition", "date"), default="partition",
                    help="output directories topic=T/partition=P (default) or "
                    "topic=T/date=YYYY-MM-DD (the record timestamp's UTC date)")
    ap.add_argument("--command-config", metavar="FILE",
                    help="client properties file: its security ones (security.protocol, "
                    "sasl.*, ssl.*) reach the driver's and the executors' connections")
    ap.add_argument("--status-file", help="also write the outcome line here (spark-submit "
                    "merges the driver's stderr into its stdout; `kafkactl spark-load` "
                    "reads this file to print the reason on its own stderr)")
    return ap


def crash_from_env(name: str) -> None:
    """The step hook of `main`: SIGKILL this process at the step named by $CRASH_ENV."""
    if os.environ.get(CRASH_ENV) == name:
        import signal

        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


# -- committed offsets: the manifest or a consumer group ----------------------------------------

def security_properties(path: str | None) -> dict[str, str]:
    """The security properties of a --command-config file (other keys are ignored)."""
    if not path:
        return {}
    from kafkactl.protocol.properties import parse_properties

    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as e:
        raise LoadError(EXIT_USAGE, f"--command-config {path}: {e.strerror or e}") from None
    return {k: v for k, v in props.items() if k in SECURITY_KEYS}


def group_offsets(bootstrap: str, group: str, tps: list[TopicPartition] | None,
                  security: ClientSecurity | None = None) -> dict[TopicPartition, int]:
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap, client_id="kafkactl-spark-load", security=security)
    try:
        got = GroupAdmin(client).fetch_offsets(group, tps)
    finally:
        client.close()
    return {tp: off for tp, off in got.items() if off >= 0}


def check_commit_group(bootstrap: str, group: str,
                       security: ClientSecurity | None = None) -> None:
    """Refuse (LoadError, exit 4) a --commit-group that has active members, before any
    record is read: the loader commits without a generation, which the coordinator refuses
    (UNKNOWN_MEMBER_ID) while the group has members, and which would fight their own
    commits. kafka-consumer-groups refuses to reset such a group's offsets the same way."""
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap, client_id="kafkactl-spark-load", security=security)
    try:
        desc = GroupAdmin(client).describe_group(group)
    finally:
        client.close()
    if desc.state not in INACTIVE_GROUP_STATES:
        members = len(desc.members)
        raise LoadError(EXIT_OUTPUT, f"--commit-group {group}: offsets can only be committed "
                        f"if the group '{group}' is inactive, but the current state is "
                        f"{desc.state} ({members} member{'' if members == 1 else 's'}). "
                        "Stop its consumers first, or use another group; nothing loaded")


def commit_group(bootstrap: str, group: str, offsets: dict[TopicPartition, int],
                 run: str, security: ClientSecurity | None = None) -> None:
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap, client_id="kafkactl-spark-load", security=security)
    try:
        errors = GroupAdmin(client).commit_offsets(group, offsets,
                                                   metadata=f"{GROUP_METADATA} run={run}")
    finally:
        client.close()
    bad = {tp: c for tp, c in errors.items() if c}
    if bad:
        codes = set(bad.values())
        why, code = "", EXIT_FAILED
        if codes <= GROUP_ACTIVE_CODES:
            why, code = (f"; the group '{group}' got active members during the run (it must "
                         "be inactive: stop its consumers first, or use another group)",
                         EXIT_OUTPUT)
        elif all(error_name(c).endswith("_AUTHORIZATION_FAILED") for c in codes):
            code = EXIT_BROKER
        raise LoadError(code, f"committing offsets to group {group!r} failed: "
                        + ", ".join(f"{t}-{p}: {error_name(c)} (error {c})"
                                    for (t, p), c in sorted(bad.items()))
                        + why + ("; nothing committed" if len(bad) == len(errors)
                                 else "; the other partitions' offsets were committed"))


# -- the run ------------------------------------------------------------------------------------

def isolation_level(args: argparse.Namespace) -> str:
    """--isolation-level: read_committed unless read_uncommitted is asked for."""
    level = getattr(args, "isolation_level", None) or ISOLATION_LEVELS[0]
    return str(level)


def read_committed(args: argparse.Namespace) -> bool:
    return isolation_level(args) == "read_committed"


def plan_run(args: argparse.Namespace, committed: dict[TopicPartition, int]
             ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(start, end) per partition: start at the committed offsets, else earliest; end at
    the last stable offset (read_committed, the default: ListOffsets with isolation level 1),
    or the high watermark (read_uncommitted)."""
    ro = ReadOptions(bootstrap=args.bootstrap, subscribe=tuple(args.topic),
                     pattern=args.pattern, fail_on_data_loss=args.fail_on_data_loss == "true",
                     security_properties=security_properties(args.command_config))
    sc = SimpleConsumer(args.bootstrap, client_id="kafkactl-spark-load",
                        security=ro.client_security(),
                        isolation_level=int(read_committed(args)))
    try:
        try:
            tps = topic_partitions(sc, ro, missing_ok=args.allow_empty)
        except UnknownTopicError as e:
            raise LoadError(EXIT_NOTHING_MATCHED, f"--topic {', '.join(e.topics)}: no such "
                            f"topic{'s' if len(e.topics) > 1 else ''}; nothing loaded "
                            "(--allow-empty to exit 0 when there is nothing to load "
                            "from)") from None
        except UnauthorizedTopicError as e:  # refused credentials, even with --allow-empty
            raise LoadError(EXIT_BROKER, unauthorized_line(e)) from None
        if not tps and args.pattern is not None and not args.allow_empty:
            raise LoadError(EXIT_NOTHING_MATCHED, f"--pattern '{args.pattern}' matches no "
                            "topic; nothing loaded (--allow-empty to exit 0 when there is "
                            "nothing to load from)")
        starting = {tp: committed[tp] for tp in tps if tp in committed}
        waiting = past_stable_offset(sc, starting) if read_committed(args) else {}
        ro.starting = {tp: off for tp, off in starting.items() if tp not in waiting}
        start, end = resolve_offsets(sc, ro, [tp for tp in tps if tp not in waiting])
        for tp, off in waiting.items():  # nothing to load there until the transaction ends
            start[tp] = end[tp] = off
        return start, end
    finally:
        sc.close()


def past_stable_offset(sc: SimpleConsumer, starting: dict[TopicPartition, int]
                       ) -> dict[TopicPartition, int]:
    """The partitions (and committed offsets) whose committed offset is past the last
    stable offset but not past the high watermark: a read_uncommitted run (or a kafkactl
    from before read_committed was the default) ended inside a transaction still open.
    Such a partition has nothing committed to load until that transaction ends; it is not
    data loss (resolve_offsets, comparing with the last stable offset, would call it
    that)."""
    from kafkactl.client.fetcher import LATEST

    if not starting:
        return {}
    stable = sc.list_offsets({tp: LATEST for tp in starting})
    ahead = {tp: off for tp, off in starting.items() if off > stable[tp][0]}
    if not ahead:
        return {}
    level, sc.isolation_level = sc.isolation_level, 0  # the high watermark
    try:
        high = sc.list_offsets({tp: LATEST for tp in ahead})
    finally:
        sc.isolation_level = level
    waiting = {tp: off for tp, off in ahead.items() if off <= high[tp][0]}
    for (t, p), off in sorted(waiting.items()):
        log.warning("topic %s partition %s: the committed offset %s is past the last stable "
                    "offset %s (a transaction open there): nothing loaded from it until "
                    "that transaction ends", t, p, off, stable[(t, p)][0])
    return waiting


def unauthorized_line(e: UnauthorizedTopicError) -> str:
    return (f"--topic {', '.join(e.topics)}: TOPIC_AUTHORIZATION_FAILED (these credentials "
            f"may not Describe {'them' if len(e.topics) > 1 else 'it'}); nothing loaded")


def check_arguments(args: argparse.Namespace) -> None:
    """What the arguments alone say is wrong, before any broker or Spark is asked: raises
    LoadError(EXIT_USAGE)."""
    if not args.bootstrap:
        raise LoadError(EXIT_USAGE, "--bootstrap is required (or set KAFKACTL_BOOTSTRAP)")
    if bool(args.topic) == bool(args.pattern):
        raise LoadError(EXIT_USAGE, "give either --topic (repeatable) or --pattern")
    if args.max_records_per_partition is not None and args.max_records_per_partition <= 0:
        raise LoadError(EXIT_USAGE, "--max-records-per-partition must be > 0 (got "
                        f"{args.max_records_per_partition})")
    if args.pattern is not None:
        reason = bad_pattern(args.pattern)
        if reason:
            raise LoadError(EXIT_USAGE, reason)


def bad_pattern(pattern: str) -> str | None:
    """Why --pattern is not a regex (None when it is one)."""
    import re

    try:
        re.compile(pattern)
    except re.error as e:
        return f"--pattern {pattern!r} is not a valid regex: {e}"
    return None


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.appName("kafkactl-spark-load")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    quiet_task_failures(spark)
    return spark


def quiet_task_failures(spark: Any) -> None:
    """Turn QUIET_LOGGERS off: a failed task's error (a data loss, a damaged batch, a
    broker gone) is otherwise logged with its Java stack trace by each of them, hundreds
    of lines before the loader's own one-line reason. (Spark 4 logs with log4j2; with
    another logging backend nothing changes.)"""
    import contextlib

    jvm = spark.sparkContext._jvm
    with contextlib.suppress(Exception):  # py4j: no such class (not log4j2)
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in QUIET_LOGGERS:
            configurator.setLevel(name, off)


def write_staging(spark: Any, args: argparse.Namespace, out: OutputDir,
                  staged: StagedRun) -> None:
    from kafkactl.spark.manifest import offsets_to_json
    from kafkactl.spark.source import register

    register(spark)
    ranges = {tp: off for tp, off in staged.start.items() if staged.end[tp] > off}
    reader = (spark.read.format("kafkactl").option("kafka.bootstrap.servers", args.bootstrap)
              .option("assign", json.dumps({t: sorted(p for tt, p in ranges if tt == t)
                                            for t, _ in ranges}))
              .option("startingOffsets", json.dumps(offsets_to_json(ranges)))
              .option("endingOffsets", json.dumps(offsets_to_json(
                  {tp: staged.end[tp] for tp in ranges})))
              .option("failOnDataLoss", args.fail_on_data_loss)
              .option("kafka.isolation.level", isolation_level(args))
              .option("includeHeaders", "true"))
    if args.max_records_per_partition:
        reader = reader.option("maxRecordsPerPartition", str(args.max_records_per_partition))
    for key, value in security_properties(args.command_config).items():
        reader = reader.option(f"kafka.{key}", value)
    df = reader.load()
    if args.partition_by == "date":  # the UTC day, whatever the session's time zone
        from pyspark.sql import functions as F  # noqa: N812

        df = df.withColumn("date", F.date_from_unix_date(
            F.floor(F.unix_micros("timestamp") / 86_400_000_000).cast("int")))
    df.write.mode("errorifexists").partitionBy("topic", args.partition_by).parquet(
        str(out.data_dir(staged.run)))


def count_rows(out: OutputDir, staged: StagedRun) -> int:
    import pyarrow.parquet as pq

    data = out.data_dir(staged.run)
    return sum(pq.ParquetFile(data / f).metadata.num_rows for f in staged.files)


def run(args: argparse.Namespace, spark: Any = None,
        step: Callable[[str], None] = lambda name: None) -> str:
    """Load once; returns the summary line. Raises LoadError. `step` is called after each
    step of the output commit (CRASH_POINTS), for fault injection."""
    check_arguments(args)
    security = security_from(security_properties(args.command_config))
    out = OutputDir(args.output)
    t0 = time.monotonic()
    with out.locked():
        if args.commit_group:
            check_commit_group(args.bootstrap, args.commit_group, security)
            committed = group_offsets(args.bootstrap, args.commit_group, None, security)
        else:
            committed = out.committed_offsets()
        for note in out.recover(committed):
            log.warning("%s", note)
        start, end = plan_run(args, committed)
        todo = sum(max(0, end[tp] - start[tp]) for tp in start)
        if not start:  # --allow-empty
            return f"nothing to load into {out.root}: no topic matched"
        if todo == 0:
            return f"nothing new to load into {out.root} ({len(start)} partitions)"
        staged = StagedRun(new_run_id(), start, end)
        write_staging(spark or spark_session(), args, out, staged)
        out.list_files(staged)
        staged.records = count_rows(out, staged)
        out.seal(staged)
        step("staged")
        if args.commit_group:
            commit_group(args.bootstrap, args.commit_group, end, staged.run, security)
        else:
            out.write_manifest(staged)
        step("committed")
        out.publish(staged, on_first=lambda: step("published-one"))
    secs = time.monotonic() - t0
    with_records = sum(1 for tp in start if end[tp] > start[tp])
    return (f"loaded {staged.records} records from {with_records} partition"
            f"{'' if with_records == 1 else 's'} into {out.root} in {secs:.1f} s "
            f"(run {staged.run})")


def main(argv: Sequence[str] | None = None, spark: Any = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="kafkactl spark-load: %(message)s")
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else EXIT_OK
    try:
        summary = run(args, spark, crash_from_env)
        print(summary, flush=True)
        write_status(args.status_file, summary)
        return EXIT_OK
    except Exception as e:  # noqa: BLE001 - every failure ends as one line and an exit code
        reason, code = failure(e)
        if code == EXIT_FAILED:  # unexpected: the quieted loggers' stack traces are kept
            reason += f" (the whole error: {save_error(e)})"
    line = f"kafkactl spark-load: error: {reason}"
    if args.status_file:  # the caller (kafkactl spark-load) prints it: once
        write_status(args.status_file, line)
    else:
        print(line, file=sys.stderr, flush=True)
    return code


def failure(e: Exception) -> tuple[str, int]:
    """(one-line reason, exit code) of a failed load."""
    if isinstance(e, LoadError):
        return str(e), e.code
    if isinstance(e, NoBrokersAvailable | KafkaConnectionError | KafkaTimeoutError):
        return f"broker unreachable: {e}", EXIT_BROKER
    if isinstance(e, AuthenticationFailedError):
        return str(e), EXIT_BROKER
    if isinstance(e, UnauthorizedTopicError):
        return unauthorized_line(e), EXIT_BROKER
    if isinstance(e, KafkaError) and e.code.name.endswith("_AUTHORIZATION_FAILED"):
        return f"{e.code.name}: {e}", EXIT_BROKER  # e.g. --commit-group's group
    if isinstance(e, OutputError):
        return str(e), EXIT_OUTPUT
    if isinstance(e, DamagedDataError):
        return damaged_line(str(e)), EXIT_DATA_LOSS
    if isinstance(e, FetchRefusedError):
        return refused_line(str(e))
    if isinstance(e, TopicDeletedError):
        return f"data loss: {loader_hint(str(e))}", EXIT_DATA_LOSS
    if isinstance(e, DataLossError):
        return f"offsets out of range: {loader_hint(str(e))}", EXIT_DATA_LOSS
    if isinstance(e, OptionError):
        return str(e), EXIT_USAGE
    return task_failure(e)  # the Spark job (a task failed its retries) or anything else


def check_broker(bootstrap: str, security_properties: dict[str, str],
                 topics: Sequence[str] = (), commit_group: str | None = None) -> None:
    """Connect (and authenticate) to the bootstrap servers as the driver will, and ask for
    the metadata of `topics` (a --topic list): raises what `failure` maps to exit 3 (2 for
    a bad security property), UnauthorizedTopicError for a topic these credentials may not
    Describe; and a LoadError (exit 4) for a `commit_group` with active members
    (check_commit_group). (A topic that does not exist is left to the driver:
    --allow-empty.)"""
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.spark.planner import refuse_unauthorized

    client = KafkaClient(bootstrap, client_id="kafkactl-spark-load",
                         security=security_from(security_properties))
    try:
        client.bootstrap()
        if topics:
            refuse_unauthorized(client.refresh_metadata(list(topics)).topics, topics)
    finally:
        client.close()
    if commit_group:
        check_commit_group(bootstrap, commit_group, security_from(security_properties))


def loader_hint(message: str) -> str:
    """A data loss message with the loader's option in place of the data source's."""
    at = message.find("; " + DATA_LOSS_HINT)
    return message if at < 0 else f"{message[:at]}; {SKIP_HINT}"


def damaged_line(message: str) -> str:
    """A damaged data message (DamagedDataError) as the loader says it: without the data
    source's kafka.check.crcs hint (the loader has no such option)."""
    at = message.find("; " + CHECK_CRCS_HINT)
    return f"{message if at < 0 else message[:at]}; nothing loaded"


def refused_line(message: str) -> tuple[str, int]:
    """(reason, exit code) of a FetchRefusedError: the broker answered an error code; exit 3
    for an authorization failure (refused credentials), else 1."""
    return message, EXIT_BROKER if "_AUTHORIZATION_FAILED (" in message else EXIT_FAILED


# The Python errors a failed Spark job's text may relay (a traceback from a Python worker:
# the data source's reader, planned again in a worker, or a task), by class name: the
# prefix of the loader's line and the exit code.
PYTHON_ERRORS = {
    "DataLossError": ("offsets out of range: ", EXIT_DATA_LOSS),
    "TopicDeletedError": ("data loss: ", EXIT_DATA_LOSS),
    "FetchError": ("broker unreachable: ", EXIT_BROKER),
    "NoBrokersAvailable": ("broker unreachable: ", EXIT_BROKER),
    "KafkaConnectionError": ("broker unreachable: ", EXIT_BROKER),
    "KafkaTimeoutError": ("broker unreachable: ", EXIT_BROKER),
    "AuthenticationFailedError": ("", EXIT_BROKER),
    "UnauthorizedTopicError": ("", EXIT_BROKER),
    "UnknownTopicError": ("", EXIT_NOTHING_MATCHED),
    "OptionError": ("", EXIT_USAGE),
}
TRACEBACK = "Traceback (most recent call last):"
MAX_REASON = 400


def innermost_error(text: str) -> tuple[str, str] | None:
    """(class name, message) of the error a failed Spark job's text comes down to: the
    exception line (`module.Class: message`, not indented) that ends the last Python
    traceback in it, else the last Java `Caused by: Class: message`, else its first Java
    exception line; None when there is none of these."""
    import re

    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.rstrip().endswith(TRACEBACK)]
    if starts:
        for ln in lines[starts[-1] + 1:]:
            if not ln.strip() or ln[:1].isspace():
                continue  # the frames (indented), blank lines
            m = re.match(r"([A-Za-z_][\w.]*)(?::\s?(.*))?$", ln.strip())
            if m:
                return m.group(1).rpartition(".")[2], (m.group(2) or "").strip()
            break
    # (py4j puts ": " before the Java exception: "An error occurred while calling o1.x.\n: ")
    java = re.compile(r"(?:Caused by: |: )?((?:[\w$]+\.)+[\w$]*(?:Exception|Error)): (.*)$")
    found = [m for m in map(java.match, (ln.strip() for ln in lines)) if m]
    caused = [m for m in found if m.group(0).startswith("Caused by: ")]
    for m in caused[-1:] or found[:1]:
        return m.group(1).rpartition(".")[2], m.group(2).strip()
    return None


def task_failure(e: Exception) -> tuple[str, int]:
    """(one-line reason, exit code) for a failed Spark job or another unexpected error:
    the innermost error its text relays (innermost_error), not its first line (which
    for a Python data source error is a cut-off "Traceback (most recent call last):")."""
    found = innermost_error(str(e))
    if found is None:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        first = lines[0] if lines else ""
        return f"load failed: {type(e).__name__}: {first[:MAX_REASON]}", EXIT_FAILED
    name, message = found
    if name == DamagedDataError.__name__:
        return damaged_line(message)[:MAX_REASON], EXIT_DATA_LOSS
    if name == FetchRefusedError.__name__:
        reason, code = refused_line(message)
        return reason[:MAX_REASON], code
    known = PYTHON_ERRORS.get(name)
    if known is not None:
        prefix, code = known
        return prefix + loader_hint(message)[:MAX_REASON], code
    return f"load failed: {name}: {message[:MAX_REASON]}", EXIT_FAILED


def save_error(e: BaseException) -> str:
    """Write an unexpected failure's whole text (the Python traceback and the Java stack
    traces it relays, which QUIET_LOGGERS keep off the terminal) to a file of its own in
    the temp dir; its path (or why there is none)."""
    import tempfile
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix="kafkactl-spark-load-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write("".join(traceback.format_exception(e)))
    except OSError as err:
        return f"not saved: {err.strerror or err}"
    return path


def write_status(path: str | None, line: str) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(line.replace("\n", " ") + "\n")


if __name__ == "__main__":
    sys.exit(main())
