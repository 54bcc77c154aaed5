"""`kafkactl serve`: run a Kafka broker in the foreground."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kafkactl.cli._output import error

if TYPE_CHECKING:
    import asyncio

LOG_LEVELS = ("debug", "info", "warning", "error")


LOG_FORMATS = ("text", "json")
# after "broker stopped cleanly": how long the process may take to exit (_exit_watchdog)
EXIT_GRACE_S = 3.0


def setup_logging(level: str, log_format: str = "text") -> None:
    root = logging.getLogger()
    root.setLevel(level.upper())
    for h in list(root.handlers):
        root.removeHandler(h)
    if log_format == "json":
        from kafkactl.broker.log_context import JsonFormatter

        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
    elif sys.stderr.isatty():
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(stderr=True), show_path=False,
                              rich_tracebacks=False)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)


def serve(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="A Kafka server.properties file.", dir_okay=False),
    override: list[str] = typer.Option(
        [], "--override", "-o", help="key=value, overrides the config file (repeatable)."),
    listen: str | None = typer.Option(
        None, "--listen", "-l", help="HOST:PORT to listen on (default 127.0.0.1:9092)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", "-d", help="Log directory (default ./kafkactl-data)."),
    broker_id: int | None = typer.Option(None, "--broker-id", help="broker.id (default 0)."),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="zookeeper.connect: register this broker, its cluster id and its topics in "
             "ZooKeeper (default: standalone, no ZooKeeper)."),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    log_format: str = typer.Option(
        "text", "--log-format", envvar="KAFKACTL_LOG_FORMAT", show_envvar=False,
        help="text, or json: one JSON object per line (time, level, logger, message, and the "
             "request a line was written for) for log shippers."),
    metrics: str | None = typer.Option(
        None, "--metrics", metavar="HOST:PORT",
        help="metrics.listen: serve Prometheus /metrics, /health and /ready over HTTP on "
             "HOST:PORT (default: off)."),
) -> None:
    """Run a Kafka broker in the foreground (Ctrl-C or SIGTERM stops it cleanly)."""
    import asyncio

    from kafkactl.broker.config import BrokerConfig, ConfigError

    if log_level.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"must be one of {', '.join(LOG_LEVELS)}",
                                 param_hint="--log-level")
    if log_format.lower() not in LOG_FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(LOG_FORMATS)}",
                                 param_hint="--log-format")
    setup_logging(log_level, log_format.lower())
    flags: dict[str, str] = {}
    if listen is not None:
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit():
            raise typer.BadParameter("expected HOST:PORT, e.g. 127.0.0.1:9092",
                                     param_hint="--listen")
        flags["listeners"] = f"PLAINTEXT://{host}:{port}"
    if data_dir is not None:
        flags["log.dirs"] = str(data_dir)
    if broker_id is not None:
        flags["broker.id"] = str(broker_id)
    if zookeeper is not None:
        flags["zookeeper.connect"] = zookeeper
    if metrics is not None:
        host, sep, port = metrics.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise typer.BadParameter("expected HOST:PORT, e.g. 0.0.0.0:9308",
                                     param_hint="--metrics")
        flags["metrics.listen"] = metrics
    try:
        cfg = BrokerConfig.build(config_file=config, flags=flags, overrides=override)
    except ConfigError as e:
        error(str(e))
        raise typer.Exit(2) from None
    created = _dirs_to_create(cfg.log_dirs)
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        code = runner.run(_run(cfg, explicit=_explicit_keys(config, flags, override)))
    if code != 0:
        _remove_created(created)
    raise typer.Exit(code)


def _dirs_to_create(log_dirs: list[Path]) -> list[Path]:
    """For each log dir that does not exist yet, the outermost of it and its parents that
    does not exist: what starting the broker will create (and a failed start removes)."""
    out: list[Path] = []
    for d in log_dirs:
        d = d.absolute()
        if d.exists() or d.is_symlink():
            continue
        top = d
        while not top.parent.exists() and top.parent != top:
            top = top.parent
        if top not in out:
            out.append(top)
    return out


def _remove_created(dirs: list[Path]) -> None:
    """After a failed start: remove the data directories this start created (a log dir
    that existed before is never touched). A directory that cannot be removed is left
    as it is, with a warning."""
    import shutil

    for d in dirs:
        if d.is_dir() and not d.is_symlink():
            try:
                shutil.rmtree(d)
            except OSError as e:
                logging.getLogger("kafkactl.serve").warning(
                    "could not remove %s, created by this failed start: %s", d,
                    e.strerror or e)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """asyncio's own loop (None), or uvloop's with KAFKACTL_EVENT_LOOP=uvloop when it is
    installed. Not the default: its gain per request is within noise here
    (bench/small_requests.py) and tests/broker/test_network_limits.py's memory-cap test
    fails under it."""
    if os.environ.get("KAFKACTL_EVENT_LOOP", "").lower() != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _explicit_keys(config: Path | None, flags: dict[str, str], override: list[str]) -> set[str]:
    from kafkactl.broker.config import parse_override
    from kafkactl.protocol.properties import parse_properties

    keys = set(flags)
    if config is not None:
        keys |= set(parse_properties(config.read_text()))
    keys |= {parse_override(o)[0] for o in override}
    return keys


async def _run(cfg: object, explicit: set[str]) -> int:
    from kafkactl.broker.config import ConfigError
    from kafkactl.broker.server import BrokerStartupError, KafkaServer

    log = logging.getLogger("kafkactl.serve")
    server = KafkaServer(cfg)  # type: ignore[arg-type]
    server.explicit_broker_keys = explicit
    server.install_signal_handlers()
    try:
        started = await server.startup_unless_stopped()
    except (BrokerStartupError, ConfigError) as e:
        error(_startup_error(e))
        await _release(server)
        return 1
    except OSError as e:  # a file in a log dir that cannot be read or written
        from kafkactl.log.manager import describe_os_error

        where = f"{e.filename}: " if e.filename else ""
        error(f"the broker cannot start: {where}{describe_os_error(e)}")
        await _release(server)
        return 1
    except Exception:
        log.exception("the broker failed to start")
        await _release(server)
        return 1
    if not started:  # stopped (SIGTERM) while starting
        await server.shutdown()
        return 0
    await server.serve_forever()
    _exit_watchdog(EXIT_GRACE_S)
    return server.exit_code


def _exit_watchdog(grace_s: float) -> None:
    """After a clean stop nothing is left to write: should the process not have exited
    `grace_s` later (a thread blocked in a ZooKeeper call or a file operation keeps the
    interpreter's exit waiting for it), say so, print every thread's stack to stderr and
    exit with status 1 rather than hang until someone kills the broker."""
    import faulthandler
    import threading

    def fire() -> None:
        names = sorted(t.name for t in threading.enumerate()
                       if t is not threading.current_thread() and t.is_alive())
        logging.getLogger("kafkactl.serve").error(
            "the broker stopped cleanly but has not exited %g s later; still running: %s; "
            "their stacks follow, then exiting with status 1", grace_s, ", ".join(names))
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(grace_s, fire)
    timer.name = "exit-watchdog"
    timer.daemon = True
    timer.start()


def _startup_error(e: Exception) -> str:
    """The one sentence to print: a log dir locked by another process is already said in
    full by the log layer (the broker's wrapper repeats it in other words)."""
    from kafkactl.log.errors import LogDirInUseError

    cause = e.__cause__
    if isinstance(cause, LogDirInUseError):
        return str(cause)
    return str(e)


class _NotStoppedCleanly(logging.Filter):
    """A broker that never started did not "stop cleanly": drop that line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "broker stopped cleanly"


async def _release(server: object) -> None:
    """Undo a failed start-up (close what was opened, unlock log dirs) without claiming
    that a broker stopped."""
    server_log = logging.getLogger("kafkactl.broker.server")
    quiet = _NotStoppedCleanly()
    server_log.addFilter(quiet)
    try:
        await server.shutdown()  # type: ignore[attr-defined]
    finally:
        server_log.removeFilter(quiet)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
