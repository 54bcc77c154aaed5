"""Broker processes for the tests, forked from a process that has kafkactl imported.

A `python -m kafkactl serve` spends ~0.18 s of CPU on the interpreter and its imports
before it serves; the suite starts a few hundred brokers on 2 cores. Each pytest-xdist
worker starts one zygote (`python -m tests.broker_zygote`, single-threaded, no event
loop) that imports the CLI and the broker once; a broker is a fork of it that runs
`kafkactl serve ...` exactly as the command line would (`kafkactl.cli.app.run`), with its
own stdout/stderr file, working directory and environment. The zygote reaps its children
and reports each exit status, so `ForkedBroker` answers like `subprocess.Popen` (poll,
wait, returncode, pid, signals). KAFKACTL_TEST_FORK=0 starts every broker with Popen.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

# -------------------------------------------------------------------- the zygote process


def _child(request: dict[str, Any], close: list[int]) -> None:
    """In the forked child: become `kafkactl serve ...`. Ends with SystemExit, which
    unwinds the zygote's loop in this process: the interpreter then exits as a
    `python -m kafkactl serve` would (atexit handlers, threads joined)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()
        from kafkactl.cli.app import run

        sys.argv = ["kafkactl", *request["argv"]]
        code = run(request["argv"])
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - reported in the broker's log as Python would
        import traceback

        traceback.print_exc()
        code = 1
    raise SystemExit(code)


def zygote_main() -> None:
    """Read one JSON request per line on stdin; answer {"pid": n} on stdout, and
    {"exit": pid, "code": returncode} when a child ends. Exits when stdin closes."""
    import kafkactl.broker.server  # noqa: F401 - imported once, shared by every fork
    import kafkactl.cli.serve  # noqa: F401
    from kafkactl.cli.app import build_app

    build_app(("serve",))
    gc.collect()
    gc.freeze()  # the imported objects stay out of the children's collections
    rd, wr = os.pipe()
    os.set_blocking(wr, False)
    signal.set_wakeup_fd(wr)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    out = sys.stdout
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    sel.register(rd, selectors.EVENT_READ)
    pending = b""
    children: set[int] = set()
    out.write("ready\n")
    out.flush()
    while True:
        for key, _ in sel.select():
            if key.fd == rd:
                os.read(rd, 4096)
                _reap(children, out)
                continue
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    _child(json.loads(line), [rd, wr])
                children.add(pid)
                out.write(json.dumps({"pid": pid}) + "\n")
                out.flush()
        _reap(children, out)


def _reap(children: set[int], out: IO[str]) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            out.write(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)})
                      + "\n")
            out.flush()


# ------------------------------------------------------------------- the tests' side


class _Zygote:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.broker_zygote"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, cwd=os.getcwd(), env=os.environ.copy())
        assert self.proc.stdout is not None and self.proc.stdin is not None
        if self.proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the broker zygote did not start")
        self.lock = threading.Lock()  # one spawn at a time
        self.changed = threading.Condition()
        self.exits: dict[int, int] = {}
        self.pids: list[int] = []
        threading.Thread(target=self._read, daemon=True, name="broker-zygote").start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.changed:
                if "pid" in msg:
                    self.pids.append(msg["pid"])
                else:
                    self.exits[msg["exit"]] = msg["code"]
                self.changed.notify_all()
        with self.changed:  # the zygote is gone: its children are nobody's to report
            self.dead = True
            self.changed.notify_all()

    dead = False

    def spawn(self, argv: list[str], log: str) -> ForkedBroker:
        request = {"argv": argv, "log": log, "cwd": os.getcwd(), "env": dict(os.environ)}
        with self.lock:
            with self.changed:
                self.pids.clear()
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            with self.changed:
                if not self.changed.wait_for(lambda: self.pids or self.dead, 30):
                    raise RuntimeError("the broker zygote did not fork")
                if not self.pids:
                    raise RuntimeError("the broker zygote exited")
                pid = self.pids.pop()
        return ForkedBroker(self, pid)


class ForkedBroker:
    """The part of subprocess.Popen the tests use, for a broker forked by the zygote."""

    def __init__(self, zygote: _Zygote, pid: int) -> None:
        self._zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self.args = ["kafkactl", "serve"]

    def poll(self) -> int | None:
        if self.returncode is None:
            with self._zygote.changed:
                self.returncode = self._zygote.exits.get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._zygote.changed:
            while self.pid not in self._zygote.exits:
                if self._zygote.dead and not _alive(self.pid):  # nobody left to tell us
                    self._zygote.exits[self.pid] = -signal.SIGKILL
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                self._zygote.changed.wait(0.05 if self._zygote.dead else
                                          1.0 if left is None else min(left, 1.0))
            self.returncode = self._zygote.exits[self.pid]
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_zygote: _Zygote | None = None
_zygote_pid = 0


def spawn(argv: list[str], log: str) -> ForkedBroker | None:
    """`kafkactl <argv>` forked from this process's zygote, its output appended to `log`;
    None when forking is off or the zygote cannot run (start it with Popen then)."""
    global _zygote, _zygote_pid
    if os.environ.get("KAFKACTL_TEST_FORK", "1") == "0" or not hasattr(os, "fork"):
        return None
    if _zygote is None or _zygote_pid != os.getpid() or _zygote.proc.poll() is not None:
        try:
            _zygote, _zygote_pid = _Zygote(), os.getpid()
        except (OSError, RuntimeError):
            return None
    return _zygote.spawn(argv, log)


if __name__ == "__main__":
    zygote_main()
