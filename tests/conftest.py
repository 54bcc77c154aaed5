"""Shared fixtures: a real `kafkactl serve` subprocess on a free port with a temp data dir."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import hypothesis_profiles, ports, zygote

# Before any test module is imported: @settings(...) objects inherit the profile loaded
# when they are made. Derandomized unless HYPOTHESIS_PROFILE=random (tests/hypothesis_profiles.py).
hypothesis_profiles.load()


free_port = ports.free_port  # one allocator for both copies of this module (tests/ports.py)


@dataclass
class BrokerProcess:
    """A `kafkactl serve` child process. `bootstrap` is "127.0.0.1:<port>"."""

    data_dir: Path
    port: int
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    extra_args: list[str] = field(default_factory=list)  # e.g. ["--config", "server.properties"]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        args = [
            sys.executable, "-m", "kafkactl", "serve",
            "--data-dir", str(self.data_dir),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
        ]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        args += self.extra_args
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"
        forked = zygote.spawn(args[3:], str(self.log_path))
        if forked is not None:
            self.proc = forked  # type: ignore[assignment]
        else:
            log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            log.close()
        deadline = time.monotonic() + timeout
        waiting = [self.port, *self._other_listener_ports()]
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", waiting[0]), timeout=0.2):
                    waiting.pop(0)
                if not waiting:
                    return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not listen within {timeout}s:\n{self.log()}")

    def _other_listener_ports(self) -> list[int]:
        """The loopback ports of a `listeners` override besides `port`: the broker opens its
        listeners one after another, so listening on `port` does not mean on these."""
        ports = []
        for endpoint in self.overrides.get("listeners", "").split(","):
            host, _, port = endpoint.rpartition("://")[2].rpartition(":")
            if port.isdigit() and int(port) not in (0, self.port) and \
                    host in ("", "127.0.0.1", "localhost", "0.0.0.0"):
                ports.append(int(port))
        return ports

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (clean shutdown) and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL: an unclean stop (no clean-shutdown marker)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        if self.log_path and self.log_path.exists():
            return self.log_path.read_text(errors="replace")[-20000:]
        return ""


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    """Call with optional overrides (server.properties keys) to start a broker;
    `extra_args=[...]` adds raw `kafkactl serve` arguments."""
    started: list[BrokerProcess] = []

    def make(extra_args: list[str] | None = None, **overrides: str) -> BrokerProcess:
        data = tmp_path / f"data-{len(started)}"
        data.mkdir()
        b = BrokerProcess(data, free_port(), {k.replace("_", "."): v for k, v in overrides.items()},
                          extra_args=list(extra_args or []))
        b.start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def broker(broker_factory: object) -> BrokerProcess:
    return broker_factory()  # type: ignore[operator]


@pytest.fixture(scope="module")
def _module_broker_process(request: pytest.FixtureRequest,
                           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("module-broker") / "data"
    data.mkdir()
    # a module may set MODULE_BROKER_OVERRIDES = {"server.properties.key": "value"}
    overrides = dict(getattr(request.module, "MODULE_BROKER_OVERRIDES", {}))
    b = BrokerProcess(data, free_port(), overrides)
    b.start()
    yield b
    b.kill()


@pytest.fixture
def module_broker(_module_broker_process: BrokerProcess) -> BrokerProcess:
    """One default broker shared by every test of a module that asks for it: for tests that
    only create their own (distinct) topics and groups, and read. A test that changes the
    broker itself (restart, kill, broker configs, ACLs, quotas, disk) uses `broker`."""
    b = _module_broker_process
    assert b.proc is not None and b.proc.poll() is None, \
        f"the module's shared broker died (an earlier test of this module?):\n{b.log()}"
    return b


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`, as scripts/test.sh runs it), a module-scoped
    fixture is made once per worker that runs a test of the module: the tests that use one
    (a module broker, a built probe) share one worker, and so do the tests of the one
    SparkSession (session-scoped, seconds to start). A test can also ask for a worker of
    its own group with @pytest.mark.xdist_group("name")."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        scopes = {name: defs[-1].scope for name, defs in info.name2fixturedefs.items() if defs}
        if "spark" in scopes:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif "module" in scopes.values():
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    if getattr(config.option, "loadgroup", False):  # set in xdist's workers (dist is "no")
        # xdist hands out work in collection order: the packages whose tests run longest
        # (Spark jobs, clusters waiting out ZooKeeper sessions) go first, so that the many
        # short tests fill the workers at the end instead of one long test running alone
        items.sort(key=lambda item: _LONG_FIRST.get(item.nodeid.split("/", 2)[1], 99))


# The test packages that take longest per test, in the order to start them under xdist.
_LONG_FIRST = {"spark": 0, "cluster": 1, "mirror": 2, "groups": 3}


@pytest.hookimpl(tryfirst=True)  # before the xdist worker reports its collection
def pytest_collection_finish(session: pytest.Session) -> None:
    """pytest-xdist's loadgroup sends a worker "<node id>@<group>" names, renaming each
    grouped test through `item._nodeid`, which pytest 9 no longer reads (the id is
    `item._id`): the groups would be silently ignored. Rename them here when it did not."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId

    for item in session.items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                 for m in item.iter_markers("xdist_group")}
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        old = getattr(item, "_id", None)
        if item.nodeid.endswith(suffix) or not isinstance(old, NodeId):
            continue
        renamed = NodeId(path=old.path, names=old.names, params=old.params)
        object.__setattr__(renamed, "_str_cache", str(old) + suffix)
        item._id = renamed
