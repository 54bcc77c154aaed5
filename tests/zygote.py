"""kafkactl processes for the tests, forked from a process that has kafkactl imported.

A `python -m kafkactl ...` spends ~0.12-0.18 s of CPU on the interpreter and its imports
before it does anything; the suite starts a few hundred brokers and several hundred CLI
commands on 2 cores. Each pytest-xdist worker starts one zygote (`python -m tests.zygote`,
single-threaded, no event loop) that imports the CLI and the broker once; a broker or a
command is a fork of it that runs `kafkactl <argv>` exactly as the command line would
(`kafkactl.cli.app.run`), with its own working directory, environment and standard
streams: a log file (`spawn`, brokers) or pipes the test reads and writes (`run`, the
counterpart of `subprocess.run([python, "-m", "kafkactl", ...], capture_output=True)`).
The zygote reaps its children and reports each exit status, so `Forked` answers like
`subprocess.Popen` (poll, wait, returncode, pid, signals). KAFKACTL_TEST_FORK=0 starts
every process with Popen instead, as a fresh interpreter.

Requests travel on a SOCK_SEQPACKET socket (the zygote's fd 0), one JSON request per
packet with the child's standard streams attached as file descriptors when it has pipes.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import locale
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

# -------------------------------------------------------------------- the zygote process

_MAX_REQUEST = 1 << 20
_REAP_EVERY_S = 0.5  # the zygote reaps its children at least this often


def _stdio(fd: int, like: Any) -> io.TextIOWrapper:
    """A standard stream on `fd` as a fresh interpreter makes it: text over a buffer,
    the zygote's encoding and errors, line-buffered for stderr and terminals only."""
    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    buffered: Any = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors,
                            line_buffering=fd == 2 or os.isatty(fd))


def _child(request: dict[str, Any], fds: list[int], close: list[int]) -> None:
    """In the forked child: become `kafkactl <argv>`. Ends with SystemExit, which unwinds
    the zygote's loop in this process: the interpreter then exits as a `python -m
    kafkactl ...` would (atexit handlers, threads joined, stdout flushed)."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        if fds:  # stdin, stdout, stderr: the test's pipes
            streams = fds
        else:  # a broker: its log
            null = os.open(os.devnull, os.O_RDONLY)
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            streams = [null, log, log]
        for target, fd in enumerate(streams):
            os.dup2(fd, target)
        for fd in set(streams):
            if fd > 2:
                os.close(fd)
        like = [sys.__stdin__ or sys.stdin, sys.__stdout__ or sys.stdout,
                sys.__stderr__ or sys.stderr]
        stdin, stdout, stderr = (_stdio(fd, like[fd]) for fd in range(3))
        if not fds:  # a broker's log is read while it runs: line by line
            stdout.reconfigure(line_buffering=True)
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        setattr(sys, "__stdin__", stdin)  # noqa: B010 - typeshed has them final
        setattr(sys, "__stdout__", stdout)  # noqa: B010
        setattr(sys, "__stderr__", stderr)  # noqa: B010
        os.chdir(request["cwd"])
        _python_path(os.environ.get("PYTHONPATH", ""), request["env"].get("PYTHONPATH", ""))
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()
        from kafkactl.cli.app import run

        sys.argv = ["kafkactl", *request["argv"]]
        code = run(request["argv"])
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - reported on stderr as Python would
        import traceback

        traceback.print_exc()
        code = 1
    raise SystemExit(code)


def _python_path(before: str, after: str) -> None:
    """sys.path as `python -m` makes it in the child's directory with its PYTHONPATH: the
    working directory first, then PYTHONPATH's entries (the zygote's own replaced)."""
    ours = [os.path.abspath(p) for p in before.split(os.pathsep) if p]
    rest = [p for p in sys.path[1:] if os.path.abspath(p) not in ours]
    sys.path[:] = [os.getcwd(), *(os.path.abspath(p) for p in after.split(os.pathsep) if p),
                   *rest]


def zygote_main() -> None:
    """Read one request per packet on fd 0 (a SOCK_SEQPACKET socket); answer {"pid": n} on
    stdout, and {"exit": pid, "code": returncode} when a child ends. Exits when the
    socket closes."""
    import kafkactl.broker.server  # noqa: F401 - imported once, shared by every fork
    from kafkactl.cli._help import load_help_rendering
    from kafkactl.cli.app import build_app

    build_app()  # every command's module
    load_help_rendering()  # rich, which a `kafkactl` process imports only to show --help
    gc.collect()
    gc.freeze()  # the imported objects stay out of the children's collections
    requests = socket.socket(fileno=0)
    rd, wr = os.pipe()
    os.set_blocking(wr, False)
    signal.set_wakeup_fd(wr)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    out = sys.stdout
    sel = selectors.DefaultSelector()
    sel.register(requests, selectors.EVENT_READ)
    sel.register(rd, selectors.EVENT_READ)
    children: set[int] = set()
    out.write("ready\n")
    out.flush()
    while True:
        # SIGCHLD wakes the loop when a child ends; the timeout reaps anyway, should a wakeup
        # be missed (seen once with py-spy attached to every test process: a SIGKILLed
        # broker's exit was never reported and its test waited out pytest's timeout)
        for key, _ in sel.select(_REAP_EVERY_S):
            if key.fd == rd:
                os.read(rd, 4096)
                _reap(children, out)
                continue
            data, fds, _flags, _addr = socket.recv_fds(requests, _MAX_REQUEST, 3)
            if not data:
                return
            pid = os.fork()
            if pid == 0:
                sel.close()
                _child(json.loads(data), fds, [requests.detach(), rd, wr])
            for fd in fds:
                os.close(fd)
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
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote"], stdin=theirs.fileno(),
                stdout=subprocess.PIPE, cwd=os.getcwd(), env=os.environ.copy())
        self.requests = ours
        assert self.proc.stdout is not None
        if self.proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the kafkactl zygote did not start")
        self.lock = threading.Lock()  # one fork at a time: its pid is the next answer
        self.changed = threading.Condition()
        self.exits: dict[int, int] = {}
        self.pids: list[int] = []
        threading.Thread(target=self._read, daemon=True, name="kafkactl-zygote").start()

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

    def fork(self, argv: list[str], *, log: str | None = None, fds: list[int] | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None) -> Forked:
        request = {"argv": argv, "log": log, "cwd": cwd or os.getcwd(),
                   "env": dict(os.environ if env is None else env)}
        with self.lock:
            with self.changed:
                self.pids.clear()
            socket.send_fds(self.requests, [json.dumps(request).encode()], fds or [])
            with self.changed:
                if not self.changed.wait_for(lambda: self.pids or self.dead, 30):
                    raise RuntimeError("the kafkactl zygote did not fork")
                if not self.pids:
                    raise RuntimeError("the kafkactl zygote exited")
                pid = self.pids.pop()
        return Forked(self, pid, argv)


class Forked:
    """The part of subprocess.Popen the tests use, for a process forked by the zygote."""

    def __init__(self, zygote: _Zygote, pid: int, argv: list[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self.args = ["kafkactl", *argv]

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
_zygote_lock = threading.Lock()


def _the_zygote() -> _Zygote | None:
    """This process's zygote (started on first use); None when forking is off or the
    zygote cannot run (start the process with Popen then)."""
    global _zygote, _zygote_pid
    if os.environ.get("KAFKACTL_TEST_FORK", "1") == "0" or not hasattr(os, "fork"):
        return None
    with _zygote_lock:
        if _zygote is None or _zygote_pid != os.getpid() or _zygote.proc.poll() is not None:
            try:
                _zygote, _zygote_pid = _Zygote(), os.getpid()
            except (OSError, RuntimeError):
                return None
        return _zygote


def spawn(argv: list[str], log: str) -> Forked | None:
    """`kafkactl <argv>` forked from this process's zygote, stdout and stderr appended to
    `log`, stdin /dev/null; None when forking is off (start it with Popen then)."""
    zygote = _the_zygote()
    return None if zygote is None else zygote.fork(argv, log=log)


KAFKACTL = [sys.executable, "-m", "kafkactl"]


def run(argv: list[str], *, input: bytes | str | None = None, text: bool = False,
        timeout: float | None = None, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        check: bool = False) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run([python, "-m", "kafkactl", *argv], capture_output=True, ...)`, the
    process forked from the zygote: stdin is `input` then end of file (no input: end of
    file at once), stdout and stderr are captured; with `text`, both ways are decoded as
    subprocess does (locale encoding, universal newlines). A timeout kills the process
    and raises subprocess.TimeoutExpired; `check` raises CalledProcessError for an exit
    status other than 0."""
    if isinstance(input, str) and not text:
        raise TypeError("a str input needs text=True")
    zygote = _the_zygote()
    if zygote is None:
        return subprocess.run([*KAFKACTL, *argv], input=input, capture_output=True,
                              text=text, timeout=timeout, env=env, cwd=cwd, check=check)
    data = (input.encode(locale.getpreferredencoding(False)) if isinstance(input, str)
            else input or b"")
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = zygote.fork(argv, fds=[in_r, out_w, err_w], env=env,
                            cwd=None if cwd is None else os.fspath(cwd))
    except BaseException:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        out, err = _communicate(in_w, out_r, err_r, data, deadline)
        code = child.wait(None if deadline is None else max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise subprocess.TimeoutExpired([*KAFKACTL, *argv], timeout or 0) from None
    done: subprocess.CompletedProcess[Any] = subprocess.CompletedProcess(
        [*KAFKACTL, *argv], code, _decode(out) if text else out, _decode(err) if text else err)
    if check:
        done.check_returncode()
    return done


def _communicate(in_w: int, out_r: int, err_r: int, data: bytes,
                 deadline: float | None) -> tuple[bytes, bytes]:
    """Write `data` to the child's stdin (then close it) while reading its stdout and
    stderr to their ends; raises subprocess.TimeoutExpired at `deadline`. Closes the three
    descriptors."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    view = memoryview(data)
    stdin_open = True
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        try:
            if view:
                os.set_blocking(in_w, False)
                sel.register(in_w, selectors.EVENT_WRITE)
            else:
                os.close(in_w)
                stdin_open = False
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired("kafkactl", 0)
                for key, _ in sel.select(left):
                    if key.fd == in_w:
                        try:
                            view = view[os.write(in_w, view[:65536]):]
                        except BrokenPipeError:  # the command stopped reading: as Popen
                            view = view[:0]
                        if not view:
                            sel.unregister(in_w)
                            os.close(in_w)
                            stdin_open = False
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        chunks[key.fd].append(chunk)
                    else:
                        sel.unregister(key.fd)
        finally:
            for fd in (in_w, out_r, err_r) if stdin_open else (out_r, err_r):
                os.close(fd)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r])


def _decode(data: bytes) -> str:
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


if __name__ == "__main__":
    zygote_main()
