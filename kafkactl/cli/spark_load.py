"""`kafkactl spark-load`: build and run the spark-submit line of the loader job.

pyspark is located, never imported, here: `kafkactl --help` stays fast and works without it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand

from kafkactl.cli._client_options import (
    SECURITY_PROPERTIES,
    bootstrap_option,
    client_properties,
    command_config_option,
    property_option,
)

T = TypeVar("T")

# every failure of spark-load says which command it is, as the driver's line does
# (load.py: `kafkactl spark-load: error: ...`, often after pages of Spark's output)
PREFIX = "kafkactl spark-load: "


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `kafkactl spark-load: error: MESSAGE` on stderr and return an Exit to raise."""
    typer.echo(f"{PREFIX}error: {message}", err=True)
    return typer.Exit(code)


def prefixed_errors(call: Callable[[], T]) -> T:
    """`call()`, a shared option helper that reports a bad option as `error: ...` on
    stderr (and raises typer.Exit): its lines say `kafkactl spark-load: error: ...`."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            return call()
    finally:
        for line in buf.getvalue().splitlines():
            typer.echo(PREFIX + line if line.startswith("error: ") else line, err=True)


class SparkLoadCommand(TyperCommand):
    """spark-load's command: the argument errors found while its arguments are parsed
    (click's usage errors, -b's host:port check, and the `error: ...` lines of the shared
    -b / --command-config callbacks: a bad bootstrap.servers in the file, a bad
    $KAFKACTL_BOOTSTRAP) say `kafkactl spark-load: error: ...` too, as its own do; the
    shared helpers, and so the other commands' lines, stay as they are."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from kafkactl.cli.app import CLICK_EXCEPTION, _show_usage_error

        parse = super().parse_args
        try:
            return prefixed_errors(lambda: parse(ctx, args))
        except CLICK_EXCEPTION as e:  # usage, hint and the error line, as app.run shows them
            error = e
        prefixed_errors(lambda: _show_usage_error(error))
        raise typer.Exit(int(getattr(error, "exit_code", 2)))


def spark_submit_path() -> str:
    """pyspark's own bin/spark-submit (SPARK_HOME's when set)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return str(Path(home) / "bin" / "spark-submit")
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise fail("pyspark is not installed (pip install 'kafkactl[spark]') and SPARK_HOME "
                   "is not set", 2)
    return str(Path(spec.origin).parent / "bin" / "spark-submit")


def build_command(*, master: str, loader_args: list[str], py_files: Path,
                  confs: list[str]) -> list[str]:
    load_py = Path(__file__).resolve().parent.parent / "spark" / "load.py"
    cmd = [spark_submit_path(), "--master", master, "--name", "kafkactl-spark-load",
           "--conf", f"spark.pyspark.python={sys.executable}",
           "--conf", f"spark.pyspark.driver.python={sys.executable}",
           "--conf", "spark.ui.showConsoleProgress=false", "--conf", "spark.log.level=WARN"]
    for c in confs:
        cmd += ["--conf", c]
    return cmd + ["--py-files", str(py_files), str(load_py), *loader_args]


def loader_args(servers: str, output: str, topics: list[str], pattern: str | None,
                commit_group: str | None, fail_on_data_loss: bool,
                max_records_per_partition: int | None, partition_by: str,
                allow_empty: bool = False,
                isolation_level: str = "read_committed") -> list[str]:
    """The arguments of kafkactl/spark/load.py for these options."""
    args = ["--bootstrap", servers, "--output", os.path.abspath(output),
            "--fail-on-data-loss", "true" if fail_on_data_loss else "false"]
    if allow_empty:
        args.append("--allow-empty")
    for t in topics:
        args += ["--topic", t]
    if pattern:
        args += ["--pattern", pattern]
    if commit_group:
        args += ["--commit-group", commit_group]
    if max_records_per_partition:
        args += ["--max-records-per-partition", str(max_records_per_partition)]
    if partition_by != "partition":
        args += ["--partition-by", partition_by]
    if isolation_level != "read_committed":  # the loader's default
        args += ["--isolation-level", isolation_level]
    return args


ISOLATION_PROPERTY = "isolation.level"


def isolation_of(prop: list[str], option: str | None) -> tuple[str, list[str]]:
    """(the isolation level, the -X items left): --isolation-level and -X isolation.level
    (Kafka's consumer property, as `kafkactl consume` takes it), read_committed when
    neither is given; a one-line error (exit 2) for a value that is neither level, or for
    the two disagreeing."""
    from kafkactl.cli._properties import ISOLATION_LEVELS, one_of

    names = {v: k for k, v in ISOLATION_LEVELS.items()}
    parse = one_of(ISOLATION_LEVELS)
    rest: list[str] = []
    given: str | None = None
    for item in prop:
        key, sep, value = item.partition("=")
        if not sep or key.strip() != ISOLATION_PROPERTY:
            rest.append(item)
            continue
        try:
            given = names[parse(value)]
        except ValueError as e:
            raise fail(f"-X {ISOLATION_PROPERTY}={value}: {e}", 2) from None
    level = given
    if option is not None:
        try:
            level = names[parse(option)]
        except ValueError as e:
            raise fail(f"--isolation-level {option}: {e}", 2) from None
        if given is not None and given != level:
            raise fail(f"--isolation-level {option} and -X {ISOLATION_PROPERTY}={given} "
                       "disagree: give one", 2)
    return level or "read_committed", rest


def check_output(output: str) -> None:
    """The driver runs here (a local master, or client deploy mode): an output directory it
    cannot write (or another loader holds) fails now, before spark-submit, with the
    driver's line and exit code."""
    from kafkactl.spark import load
    from kafkactl.spark.manifest import OutputDir

    try:
        with OutputDir(output).locked():
            pass
    except Exception as e:  # noqa: BLE001 - mapped to one line and an exit code
        reason, code = load.failure(e)
        raise fail(reason, code) from None


def driver_runs_here(confs: list[str]) -> bool:
    """spark-submit's default deploy mode (client) runs the driver on this machine."""
    return not any(c.replace(" ", "") == "spark.submit.deployMode=cluster" for c in confs)


def check_local_broker(servers: str, security: dict[str, str],
                       topics: list[str] | None = None,
                       commit_group: str | None = None) -> None:
    """With a local master the driver runs here: a broker it cannot reach (or that refuses
    the credentials, or a --topic to them), or a --commit-group with active members, fails
    now, not after the JVM started (~5 s), with the driver's line and exit code."""
    from kafkactl.spark import load

    try:
        load.check_broker(servers, security, topics or (), commit_group)
    except Exception as e:  # noqa: BLE001 - mapped to one line and an exit code
        reason, code = load.failure(e)
        raise fail(reason, code) from None


# Spark's master URLs (SparkSubmit and SparkContext take these forms, and refuse others)
LOCAL_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(\s*,\s*[1-9]\d*)?\])?"
                          r"|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]")
MASTER_FORMS = ("local, local[N], local[*], local[N,F], local-cluster[N,C,M], "
                "spark://HOST:PORT, yarn or k8s://URL")


def argument_problem(*, pattern: str | None, max_records_per_partition: int | None,
                     master: str, confs: list[str]) -> str | None:
    """What is wrong with the arguments that spark-submit, or Spark's driver once it has
    started (seconds, then a traceback), would refuse; None when nothing is."""
    if max_records_per_partition is not None and max_records_per_partition <= 0:
        return f"--max-records-per-partition must be > 0 (got {max_records_per_partition})"
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            return f"--pattern {pattern!r} is not a valid regex: {e}"
    if not (master == "yarn" or master.startswith(("spark://", "k8s://"))
            or LOCAL_MASTER.fullmatch(master)):
        return f"--master {master!r} is not a Spark master URL: give {MASTER_FORMS}"
    for c in confs:
        key, sep, _value = c.partition("=")
        if not sep or not key.strip():
            return f"--conf {c!r}: expected key=value (a Spark property)"
    return None


def register(app: typer.Typer) -> None:
    @app.command("spark-load", cls=SparkLoadCommand)
    def spark_load(
        output: str = typer.Option(..., "--output", "-o", help="Output directory (Parquet, "
                                   "partitioned by topic and partition)."),
        topic: list[str] = typer.Option([], "--topic", "-t", help="Topic (repeatable)."),
        pattern: str | None = typer.Option(None, "--pattern", "-p",
                                           help="Regex of topic names (fully matched)."),
        commit_group: str | None = typer.Option(
            None, "--commit-group", help="Commit end offsets to this consumer group (and "
            "start from its offsets) instead of the output's offsets manifest."),
        fail_on_data_loss: bool = typer.Option(
            True, "--fail-on-data-loss/--skip-data-loss",
            help="Fail (exit 5) when offsets to load were deleted (or their topic), or "
            "skip what is gone."),
        allow_empty: bool = typer.Option(
            False, "--allow-empty", help="Exit 0 when a --topic does not exist or the "
            "--pattern matches no topic (default: exit 6, nothing loaded)."),
        max_records_per_partition: int | None = typer.Option(
            None, "--max-records-per-partition", help="Split bigger ranges into tasks."),
        partition_by: str = typer.Option(
            "partition", "--partition-by", help="Output directories topic=T/partition=P, "
            "or topic=T/date=YYYY-MM-DD (the records' UTC date) with 'date'."),
        isolation_level: str | None = typer.Option(
            None, "--isolation-level", metavar="LEVEL", show_default="read_committed",
            help="read_committed: only committed transactions' records; each run ends at "
            "the last stable offset, so an open transaction's records (and all after them) "
            "wait for a later run. read_uncommitted: every record up to the high "
            "watermark, aborted transactions' included (-X isolation.level)."),
        master: str = typer.Option("local[*]", "--master",
                                   help="Spark master: local[*], spark://host:7077, yarn..."),
        conf: list[str] = typer.Option([], "--conf", "-c",
                                       help="Extra spark-submit --conf key=value."),
        py_files: str | None = typer.Option(
            None, "--py-files", help="Ship this zip/wheel instead of kafkactl's own sources."),
        print_command: bool = typer.Option(False, "--print-command",
                                           help="Print the spark-submit line, run nothing."),
        bootstrap: str | None = bootstrap_option(),
        prop: list[str] = property_option(
            "Client property key=value, librdkafka's names (repeatable): "
            f"{SECURITY_PROPERTIES}; and isolation.level (--isolation-level)."),
        command_config: Path | None = command_config_option(),
    ) -> None:
        """Load topics into Parquet with Spark, one task per topic-partition range.

        Reads read_committed by default: no aborted transaction's records, and
        each run ends at the last stable offset, so the records of a transaction
        still open (and all after them) are loaded by a later run.

        Exit codes: 0 loaded (or nothing new), 1 the Spark job failed,
        2 bad arguments, 3 broker unreachable (or refusing the credentials),
        4 output not writable (or locked by another loader, or a
        --commit-group with active members), 5 data lost or damaged: offsets
        out of range or a topic deleted while it was read (with
        --fail-on-data-loss), or a batch that fails its CRC check, 6 nothing
        to load from: a --topic that does not exist or a --pattern that
        matches no topic (without --allow-empty).
        """
        if bool(topic) == bool(pattern):
            raise fail("give either --topic (repeatable) or --pattern", 2)
        if partition_by not in ("partition", "date"):
            raise fail("--partition-by takes partition or date", 2)
        problem = argument_problem(pattern=pattern, master=master, confs=conf,
                                   max_records_per_partition=max_records_per_partition)
        if problem:
            raise fail(problem, 2)
        level, prop = isolation_of(prop, isolation_level)
        security = prefixed_errors(lambda: client_properties(prop, command_config))
        if any("\n" in v or "\r" in v for v in security.values()):
            raise fail("a -X value must be one line", 2)
        if print_command and prop:
            raise fail("--print-command does not print -X properties (secrets on a command "
                       "line): put them in a --command-config file", 2)
        servers = bootstrap or os.environ.get("KAFKACTL_BOOTSTRAP") or "127.0.0.1:9092"
        args = loader_args(servers, output, topic, pattern, commit_group, fail_on_data_loss,
                           max_records_per_partition, partition_by, allow_empty, level)
        import tempfile  # here, not at the top: `kafkactl --help` imports this module

        from kafkactl.spark.package import package_zip  # hashlib, zipfile

        zip_path = Path(py_files) if py_files else package_zip()
        cmd = build_command(master=master, loader_args=args, py_files=zip_path, confs=conf)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable)
        if print_command:
            if command_config is not None:
                cmd += ["--command-config", str(command_config.resolve())]
            typer.echo(f"PYSPARK_PYTHON={shlex.quote(sys.executable)} {shlex.join(cmd)}")
            return
        if master.startswith("local") or driver_runs_here(conf):
            check_output(output)
        if master.startswith("local"):
            check_local_broker(servers, security, topic, commit_group)
        with tempfile.TemporaryDirectory(prefix="kafkactl-spark-load-") as tmp:
            status = Path(tmp) / "status"
            if security:  # a file only this user reads, not the command line
                config = Path(tmp) / "client.properties"
                config.touch(mode=0o600)
                config.write_text("".join(f"{k}={v}\n" for k, v in security.items()))
                cmd += ["--command-config", str(config)]
            try:
                code, stopped_by = run_job(cmd + ["--status-file", str(status)], env)
            except OSError as e:
                raise fail(f"cannot run {cmd[0]}: {e.strerror}", 2) from None
            reason = status.read_text("utf-8").strip() if status.exists() else ""
        if code and stopped_by is not None:
            typer.echo(f"kafkactl spark-load: stopped by {signal.Signals(stopped_by).name}: "
                       "the Spark job was stopped with it (a run stopped before its commit "
                       "loaded nothing; the next run removes its partial output)", err=True)
            raise typer.Exit(128 + stopped_by)
        if code:
            # the driver's own line, last on stderr (spark-submit printed it on stdout)
            typer.echo(reason or f"kafkactl spark-load: error: spark-submit exited with "
                       f"{code} (see its output above)", err=True)
            raise typer.Exit(code)


def _die_with_parent() -> None:
    """In the spark-submit child, before exec: SIGTERM when kafkactl itself dies (a
    SIGKILL too), so the job never runs on, orphaned, holding the output's lock."""
    import ctypes

    # (not Linux: no prctl; the signal forwarding of run_job still stops the job)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def run_job(cmd: list[str], env: dict[str, str]) -> tuple[int, int | None]:
    """Run spark-submit in a process group of its own and wait for it; SIGINT and SIGTERM
    sent to kafkactl go to that whole group (the JVM and the Python driver it starts), a
    second one as SIGKILL. (exit status, the first signal received or None). Before, only
    kafkactl stopped: the job ran on, held the output's lock and committed later."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True,
                            preexec_fn=_die_with_parent)
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum if len(received) == 1 else signal.SIGKILL)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code, (received[0] if received else None)
