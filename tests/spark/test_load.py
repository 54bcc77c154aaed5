"""The loader job: incremental runs, crashes at every step of the output commit, exit codes,
and one real `kafkactl spark-load` run killed (SIGKILL) while Spark writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kafkactl.spark import load
from tests.polling import wait_until
from tests.spark.conftest import create_topic, delete_records, jvm_confs, produce


class SimulatedCrash(BaseException):
    """Stands for a SIGKILL at one step (BaseException: no handler of the loader sees it)."""


def loaded(out: Path) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every published row, sorted (duplicates kept)."""
    import pyarrow.dataset as ds

    if not any(p.name.startswith("topic=") for p in out.iterdir()):
        return []
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table(
        columns=["topic", "partition", "offset"])
    return sorted(zip(table.column("topic").to_pylist(),
                      [int(p) for p in table.column("partition").to_pylist()],
                      table.column("offset").to_pylist(), strict=True))


def every(counts: dict[tuple[str, int], int]) -> list[tuple[str, int, int]]:
    return sorted((t, p, o) for (t, p), n in counts.items() for o in range(n))


def args(bootstrap: str, out: Path, *extra: str) -> Any:
    return load.parser().parse_args(["--bootstrap", bootstrap, "--pattern", r"load\..*",
                                     "--output", str(out), *extra])


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    produce(bootstrap, topic, [(p, f"k{i}".encode(), f"{tag}-{p}-{i}".encode(), None)
                               for p in range(partitions) for i in range(per_partition)])


def test_second_run_loads_only_new_records(spark: Any, broker: Any, tmp_path: Path) -> None:
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.a", 2)
    create_topic(b, "load.b", 1)
    create_topic(b, "skipped", 1)
    fill(b, "load.a", 2, 5, "r1")
    fill(b, "load.b", 1, 3, "r1")
    fill(b, "skipped", 1, 3, "r1")
    assert load.run(args(b, out), spark).startswith("loaded 13 records from 3 partitions")
    assert loaded(out) == every({("load.a", 0): 5, ("load.a", 1): 5, ("load.b", 0): 3})

    fill(b, "load.a", 2, 2, "r2")
    create_topic(b, "load.c", 1)  # a new topic matching the pattern is picked up
    fill(b, "load.c", 1, 4, "r2")
    # 4 partitions planned, 3 of them with new records
    assert load.run(args(b, out), spark).startswith("loaded 8 records from 3 partitions")
    assert loaded(out) == every({("load.a", 0): 7, ("load.a", 1): 7, ("load.b", 0): 3,
                                 ("load.c", 0): 4})
    manifest = json.loads((out / "_kafkactl" / "offsets.json").read_text())
    assert manifest["offsets"] == {"load.a": {"0": 7, "1": 7}, "load.b": {"0": 3},
                                   "load.c": {"0": 4}}
    assert manifest["run_start"]["load.a"] == {"0": 5, "1": 5}
    assert load.run(args(b, out), spark).startswith("nothing new")
    assert list((out / "_kafkactl" / "staging").iterdir()) == []

    # --partition-by date: topic=T/date=YYYY-MM-DD (UTC), same offsets commit
    produce(b, "load.b", [(0, None, b"dated", None)] * 2, timestamp_ms=1_700_000_000_000)
    dated = tmp_path / "dated"
    assert load.run(args(b, dated, "--partition-by", "date"), spark).startswith(
        "loaded 23 records")
    assert sorted(p.name for p in (dated / "topic=load.b").iterdir())[0] == "date=2023-11-14"
    assert len(list((dated / "topic=load.b" / "date=2023-11-14").glob("*.parquet"))) == 1

    # the values written are the records' values, in the right partition directories
    import pyarrow.parquet as pq

    files = sorted((out / "topic=load.c" / "partition=0").glob("*.parquet"))
    assert [v.as_py() for f in files for v in pq.read_table(f).column("value")] == \
        [f"r2-0-{i}".encode() for i in range(4)]


def test_crash_at_any_step_then_rerun_leaves_one_copy(spark: Any, broker: Any,
                                                      tmp_path: Path) -> None:
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.x", 3)
    fill(b, "load.x", 3, 6, "r0")
    assert load.run(args(b, out, "--max-records-per-partition", "4"), spark)
    for n, crash_at in enumerate(load.CRASH_POINTS, 1):
        fill(b, "load.x", 3, 5, f"r{n}")

        def crash(step: str, crash_at: str = crash_at) -> None:
            if step == crash_at:
                raise SimulatedCrash(step)

        with pytest.raises(SimulatedCrash):
            load.run(args(b, out, "--max-records-per-partition", "4"), spark, crash)
        assert load.run(args(b, out), spark)
        assert loaded(out) == every({("load.x", p): 6 + 5 * n for p in range(3)}), crash_at
        assert list((out / "_kafkactl" / "staging").iterdir()) == []


def test_exit_codes_and_one_line_reasons(spark: Any, broker: Any, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.d", 1)
    fill(b, "load.d", 1, 10, "r1")
    argv = ["--bootstrap", b, "--topic", "load.d", "--output", str(out)]
    assert load.main(argv, spark) == load.EXIT_OK
    fill(b, "load.d", 1, 10, "r2")
    delete_records(b, "load.d", 0, 15)  # records 10..14 go before the next run reads them

    assert load.main(argv, spark) == load.EXIT_DATA_LOSS
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("kafkactl spark-load: error: offsets out of range: topic load.d "
                       "partition 0: starting offset 10 is below the log start offset 15 "
                       "(records 10..14 are gone); run with --skip-data-loss to load what "
                       "is left")
    assert load.main(argv + ["--skip-data-loss"], spark) == load.EXIT_OK
    assert loaded(out) == [("load.d", 0, o) for o in [*range(10), *range(15, 20)]]

    # the driver's own check (spark-submit on a cluster): the same line as the CLI's
    down = ["--bootstrap", "127.0.0.1:1", "--topic", "load.d", "--output", str(out)]
    assert load.main(down, spark) == load.EXIT_BROKER
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "kafkactl spark-load: error: broker unreachable: no broker answered at 127.0.0.1:1")

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert load.main(["--bootstrap", b, "--topic", "load.d", "--output",
                      str(blocker / "out")], spark) == load.EXIT_OUTPUT
    assert "is not writable" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.slow  # spark-submit runs: tens of seconds
def test_cli_run_killed_mid_write_then_rerun(spark_installed: None, broker: Any,
                                              tmp_path: Path) -> None:
    """`kafkactl spark-load` through spark-submit: SIGKILL to the whole job while Spark
    writes its staging output, rerun: exactly one copy of every record; exit code 3 when
    the broker is unreachable."""
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.k", 2)
    fill(b, "load.k", 2, 400, "r1")
    cmd = [sys.executable, "-m", "kafkactl", "spark-load", "-b", b, "-p", r"load\..*",
           "-o", str(out), "--master", "local[2]", "--max-records-per-partition", "20",
           "--conf", "spark.ui.enabled=false", *jvm_confs()]
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.Popen(cmd, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    staging = out / "_kafkactl" / "staging"
    deadline = time.monotonic() + 240
    writing = None
    while writing is None and proc.poll() is None and time.monotonic() < deadline:
        writing = next(iter(staging.glob("*/data/_temporary")), None) if staging.exists() \
            else None
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    log_text = proc.communicate()[0].decode(errors="replace")
    assert writing is not None, f"the loader never started writing:\n{log_text[-3000:]}"
    committed = (out / "_kafkactl" / "offsets.json").exists()
    print(f"killed {'after' if committed else 'before'} the commit")

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert loaded(out) == every({("load.k", 0): 400, ("load.k", 1): 400})

    # a local master's driver runs here: an unreachable broker fails before spark-submit
    # (there is none at this SPARK_HOME: running it would exit 2, "cannot run ...")
    down = subprocess.run([*cmd[:5], "127.0.0.1:1", *cmd[6:]],
                          env=dict(env, SPARK_HOME=str(tmp_path / "no-spark")),
                          capture_output=True, text=True, timeout=300)
    assert down.returncode == load.EXIT_BROKER, down.stderr
    assert down.stderr.strip().splitlines()[-1].startswith(
        "kafkactl spark-load: error: broker unreachable: no broker answered at 127.0.0.1:1")


def _job_processes(out: Path) -> list[int]:
    """The pids of processes whose command line names `out` (the job's JVM and driver)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and d.name != str(os.getpid()):
            try:
                cmdline = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if str(out).encode() in cmdline:
                found.append(int(d.name))
    return found


@pytest.mark.slow  # spark-submit runs: tens of seconds
def test_sigterm_to_kafkactl_stops_the_spark_job(spark_installed: None, broker: Any,
                                                  tmp_path: Path) -> None:
    """SIGTERM to `kafkactl spark-load` alone (what a supervisor sends): the Spark job
    stops with it, exit 143 saying so, nothing left running and the output's lock free:
    the rerun loads each record once. (The job ran on orphaned, held the lock, so the
    next run exited 4, and committed later, after kafkactl had exited 143.)"""
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.s", 2)
    fill(b, "load.s", 2, 400, "r1")
    cmd = [sys.executable, "-m", "kafkactl", "spark-load", "-b", b, "-t", "load.s",
           "-o", str(out), "--master", "local[2]", "--max-records-per-partition", "20",
           "--conf", "spark.ui.enabled=false", *jvm_confs()]
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    staging = out / "_kafkactl" / "staging"
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline and not (
            staging.exists() and any(staging.glob("*/data"))):
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1].decode(errors="replace")[-3000:]
    proc.send_signal(signal.SIGTERM)  # kafkactl's pid only
    err = proc.communicate(timeout=120)[1].decode(errors="replace")
    if proc.returncode == 0:  # the job finished before the signal arrived: nothing to test
        pytest.skip("the load finished before SIGTERM reached it")
    assert proc.returncode == 143, err[-3000:]
    assert err.strip().splitlines()[-1].startswith(
        "kafkactl spark-load: stopped by SIGTERM: the Spark job was stopped with it"), err
    wait_until(lambda: not _job_processes(out), 60, "the Spark job's processes to end")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert loaded(out) == every({("load.s", 0): 400, ("load.s", 1): 400})


def test_commit_group_holds_the_offsets(spark: Any, broker: Any, tmp_path: Path) -> None:
    """--commit-group G: the group's committed offsets are the loader's, no manifest; a run
    killed after committing is finished (published) by the next run."""
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.g", 2)
    fill(b, "load.g", 2, 4, "r1")
    group = ["--commit-group", "etl"]
    assert load.run(args(b, out, *group), spark).startswith("loaded 8 records")
    fill(b, "load.g", 2, 3, "r2")

    def crash(step: str) -> None:
        if step == "committed":
            raise SimulatedCrash(step)

    with pytest.raises(SimulatedCrash):
        load.run(args(b, out, *group), spark, crash)
    client = KafkaClient(b)
    try:
        assert GroupAdmin(client).fetch_offsets("etl", [("load.g", 0), ("load.g", 1)]) == \
            {("load.g", 0): 7, ("load.g", 1): 7}
    finally:
        client.close()
    assert load.run(args(b, out, *group), spark).startswith("nothing new")
    assert loaded(out) == every({("load.g", 0): 7, ("load.g", 1): 7})
    assert not (out / "_kafkactl" / "offsets.json").exists()


def test_task_errors_map_to_exit_codes(spark: Any, broker: Any) -> None:
    """Records deleted after the loader planned: the Spark job fails, and the loader's exit
    code and one-line reason are those of data loss, not a generic failure."""
    b = broker.bootstrap
    create_topic(b, "load.t", 1)
    fill(b, "load.t", 1, 10, "r1")
    df = spark.read.format("kafkactl").option("bootstrap", b).option(
        "subscribe", "load.t").option("startingOffsets", '{"load.t": {"0": 0}}').load()
    df.count()  # planned (and read) while every record is there
    delete_records(b, "load.t", 0, 5)
    with pytest.raises(Exception) as failed:
        df.collect()
    reason, code = load.task_failure(failed.value)
    assert code == load.EXIT_DATA_LOSS, reason
    assert reason.startswith("offsets out of range: topic load.t partition 0"), reason


def test_nothing_to_load_from_is_an_error_unless_allowed(broker: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """A --topic that does not exist, a --pattern that matches no topic: exit 6 (a cron job
    goes red), or 0 with --allow-empty. Found before Spark starts (no session here)."""
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.e", 1)
    missing = ["--bootstrap", b, "--topic", "nosuchtopic", "--output", str(out)]
    assert load.main(missing) == load.EXIT_NOTHING_MATCHED == 6
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "kafkactl spark-load: error: --topic nosuchtopic: no such topic; nothing loaded "
        "(--allow-empty to exit 0 when there is nothing to load from)")
    assert load.main(missing + ["--allow-empty"]) == load.EXIT_OK
    assert "nothing to load" in capsys.readouterr().out

    nomatch = ["--bootstrap", b, "--pattern", r"nothing\..*", "--output", str(out)]
    assert load.main(nomatch) == load.EXIT_NOTHING_MATCHED
    assert "--pattern 'nothing\\..*' matches no topic" in capsys.readouterr().err
    assert load.main(nomatch + ["--allow-empty"]) == load.EXIT_OK
    assert "no topic matched" in capsys.readouterr().out

    # an existing topic with nothing new is not an error
    assert load.main(["--bootstrap", b, "--topic", "load.e", "--output", str(out)]) == 0
    assert capsys.readouterr().out.startswith("nothing new")

    # with a --status-file (kafkactl spark-load's) the line goes there, not to stderr: the
    # caller prints it, once
    status = tmp_path / "status"
    assert load.main(missing + ["--status-file", str(status)]) == 6
    assert capsys.readouterr().err == ""
    assert status.read_text().startswith("kafkactl spark-load: error: --topic nosuchtopic")


def test_cli_finds_an_unwritable_output_before_spark(spark_installed: None, broker: Any,
                                                    tmp_path: Path) -> None:
    """`kafkactl spark-load` with the driver on this machine: an output it cannot write is
    refused before spark-submit runs (there is none at this SPARK_HOME: running it would
    exit 2), exit 4, its line printed once."""
    from tests import zygote

    b = broker.bootstrap
    create_topic(b, "load.w", 1)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = dict(os.environ, SPARK_HOME=str(tmp_path / "no-spark"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = zygote.run(["spark-load", "-b", b, "-t", "load.w", "-o", str(blocker / "out")],
                      env=env, text=True, timeout=120)
    assert done.returncode == load.EXIT_OUTPUT, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len([ln for ln in lines if "is not writable" in ln]) == 1, lines
    assert lines[-1].startswith(f"kafkactl spark-load: error: output {blocker / 'out'} is "
                                "not writable")


def transaction(bootstrap: str, txn_id: str, topic: str, values: list[bytes],
                end: str | None) -> Any:
    """A transaction of `values` to partition 0, flushed, then committed, aborted or (end
    None) left open; returns the producer (open: to end the transaction later)."""
    from kafkactl.client.producer import Producer

    p = Producer(bootstrap, transactional_id=txn_id, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    for v in values:
        p.send(topic, v, partition=0)
    assert p.flush(30)
    if end == "commit":
        p.commit_transaction(30)
    elif end == "abort":
        p.abort_transaction(30)
    return p


def test_transactions_read_committed_by_default(spark: Any, broker: Any,
                                                tmp_path: Path) -> None:
    """The loader reads read_committed unless told otherwise: an aborted transaction's
    records never reach the output, and a run ends at the last stable offset, so the
    records of a transaction still open (and the records after them) are left for the run
    after it ends instead of being loaded, or skipped for good by the committed offsets."""
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.txn", 1)
    transaction(b, "load-c", "load.txn", [b"c0", b"c1", b"c2"], "commit").close()  # 0-2, 3
    transaction(b, "load-a", "load.txn", [b"ABORTED-0", b"ABORTED-1"], "abort").close()  # 4-6
    still_open = transaction(b, "load-o", "load.txn", [b"open-0", b"open-1"], None)  # 7-8
    try:
        produce(b, "load.txn", [(0, None, b"after", None)])  # 9, not transactional
        assert load.run(args(b, out), spark).startswith("loaded 3 records from 1 partition")
        import pyarrow.dataset as ds

        values = ds.dataset(str(out), format="parquet", partitioning="hive").to_table(
            columns=["value"]).column("value").to_pylist()
        assert sorted(values) == [b"c0", b"c1", b"c2"]
        manifest = json.loads((out / "_kafkactl" / "offsets.json").read_text())
        assert manifest["offsets"] == {"load.txn": {"0": 7}}  # the open transaction's start

        committed = {("load.txn", 0): 7}
        assert load.plan_run(args(b, out), committed) == (committed, committed)
        # read_uncommitted (the option the CLI's --isolation-level passes): the high
        # watermark, as before
        uncommitted = args(b, out, "--isolation-level", "read_uncommitted")
        assert load.plan_run(uncommitted, {})[1] == {("load.txn", 0): 10}
        # an offset a read_uncommitted run committed inside the open transaction is no
        # data loss: nothing to load there until the transaction ends
        assert load.plan_run(args(b, out), {("load.txn", 0): 9}) == (
            {("load.txn", 0): 9}, {("load.txn", 0): 9})
        still_open.commit_transaction(30)  # its marker: 10
    finally:
        still_open.close()
    # the next run starts at the offset of the transaction open before: its records and
    # the one after them are loaded now
    assert load.plan_run(args(b, out), committed) == (committed, {("load.txn", 0): 11})


def test_an_unexpected_failure_keeps_its_whole_error_in_a_file(
        spark: Any, broker: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A failure the loader does not know (here Parquet's codec refused at write time): one
    line on stderr, which names a file holding the whole error, the Java stack trace the
    quieted Spark loggers keep off the terminal included."""
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "load.u", 1)
    fill(b, "load.u", 1, 3, "r1")
    spark.conf.set("spark.sql.parquet.compression.codec", "lzo")
    try:
        code = load.main(["--bootstrap", b, "--topic", "load.u", "--output", str(out)], spark)
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    assert code == load.EXIT_FAILED
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("kafkactl spark-load: error: load failed: "), line
    saved = Path(line.rsplit("(the whole error: ", 1)[1].rstrip(")"))
    try:
        text = saved.read_text()
        assert "lzo" in text.lower() and "\tat org.apache." in text, text[:2000]
    finally:
        saved.unlink()
