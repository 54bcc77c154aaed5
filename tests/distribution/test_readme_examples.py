"""The README's shell examples run as written.

Every ```sh block of README.md is read when the tests run, cut into examples (one logical
line each: backslash continuations joined, comment-only lines left out) and run with
bash (`-e -o pipefail`) in a temp working directory, against a real `kafkactl serve`
started for the block (tests/conftest.py's BrokerProcess on a free port) whose data dir
is `./kafkactl-data` there, as the README's default. Client commands find it through
`$KAFKACTL_BOOTSTRAP`, as the README says they do; `kafkactl` on the PATH is a shim for
`python -m kafkactl` of this interpreter. The examples of one block run in order, each
block against a broker of its own.

An example must exit 0, or the code listed for it in EXIT_CODES. What is not run is
listed in SKIP with the reason (a cluster, ZooKeeper, Spark, kcat, hosts that do not
exist, the machine's packages): a new example is run unless someone lists it there.
Examples that run until they are stopped (a broker in the foreground, a group member)
are in LONG_RUNNING: each is started, must show that it works, and is then stopped with
Ctrl-C (SIGINT to its process group). What an example presumes exists (a group with
offsets, a running group member, a topic with records, an authorizer, a stopped broker,
an input file, a typed password) is made beforehand, listed in SETUP, BACKGROUND,
BROKER_OVERRIDES, STOP_BROKER_FIRST, FILES and STDIN; nothing here edits an example, except
that the README's default address 127.0.0.1:9092, where written out, means the test's
broker. `kafkactl serve` examples run in a network namespace of their own (unshare), where
127.0.0.1:9092 is theirs. HOME is a temp dir: nothing is installed for the user.

KNOWN_BROKEN lists the examples that fail today, each with why: the test fails when one
of them starts to pass, so the list only shrinks. It must be empty for the README's
examples to "run as written".
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TIMEOUT_S = 120.0  # for one example that is meant to finish by itself


# ------------------------------------------------------------------ reading the README


@dataclass(frozen=True)
class Example:
    line: int  # where it starts in README.md
    command: str  # as written (continuation lines kept)
    section: str  # the heading it is under, e.g. "### consume"

    @property
    def key(self) -> str:
        """The command without its trailing comment, blanks collapsed: how the lists below
        name it."""
        return " ".join(strip_comment(self.command.replace("\\\n", " ")).split())


@dataclass
class Block:
    line: int  # the opening fence's line
    section: str
    examples: list[Example] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"README.md:{self.line} {self.section.lstrip('# ')}"


def strip_comment(command: str) -> str:
    """`command` up to a `#` that starts a shell word outside quotes."""
    quote = ""
    escaped = False
    for i, ch in enumerate(command):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.rstrip()


def read_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    section = "(top)"
    block: Block | None = None
    fence = False
    pending: list[str] = []
    pending_line = 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if not fence:
                fence = True
                if line.strip() == "```sh":
                    block = Block(n, section)
                    blocks.append(block)
            else:
                fence = False
                block = None
            continue
        if not fence:
            if line.startswith("#"):
                section = line.strip()
            continue
        if block is None:
            continue
        if not pending:
            if not line.strip() or line.lstrip().startswith("#"):
                continue  # a blank line, a comment or the shebang
            pending_line = n
        pending.append(line)
        if line.endswith("\\"):
            continue
        block.examples.append(Example(pending_line, "\n".join(pending), section))
        pending = []
    return blocks


# ---------------------------------------------------------------- the reviewed lists

_ZK = "needs a ZooKeeper ensemble at zk1:2181 (tests/cluster/ runs these against a real one)"
_CLUSTER = "needs the three-machine cluster (kafka1.example.com ...): tests/cluster/test_cluster.py"
_MIRROR = "needs a second cluster (and hosts dc1-kafka, central): tests/mirror/ runs mirror"
_SECURE = "needs a SASL_SSL listener on host:9093 with certificates: tests/broker/security/"
_INSTALL = "installs packages (apt-get, pip, npm) and builds: .ci/run runs it"
_KCAT = "kcat, not kafkactl (tests/compat/ runs kcat against the broker)"
_REPLAY = ("replays a plan of moves: one broker has nothing to move, and an empty plan is "
           "refused, as kafka-reassign-partitions refuses it "
           "(tests/cluster/test_rebalance_partitions.py replays one on three brokers)")

SKIP: dict[str, str] = {
    "./scripts/install.sh && .venv/bin/kafkactl serve": _INSTALL,
    "kcat -b 127.0.0.1:9092 -C -t greetings -e": _KCAT,
    "kafkactl mirror --source dc1-kafka:9092 --target central:9092 "
    "--whitelist 'orders\\..*'": _MIRROR,
    "kafkactl mirror --source-zookeeper zk1:2181/kafka --target central:9092 --topic events "
    "--rename events:dc1.events --json-status /var/run/mirror.json": _MIRROR,
    "kafkactl mirror --source dc1-kafka:9092 --target central:9092 --whitelist 'orders' "
    "--exactly-once": _MIRROR,
    "kafkactl spark-load --bootstrap-server kafka1:9092 --pattern 'events\\..*' "
    "--output /data/warehouse/events --master \"${SPARK_MASTER:-local[*]}\"":
        "needs Spark and the host kafka1: tests/spark/ runs spark-load",
    "kafkactl serve --config server.properties": _CLUSTER,
    "kafkactl cluster describe -b kafka1.example.com:9092": _CLUSTER,
    "kafkactl topics create -b kafka1.example.com:9092 -t events --partitions 12": _CLUSTER,
    "kcat -P -b kafka1.example.com:9092,kafka2.example.com:9092 -t events < lines.txt": _CLUSTER,
    "kafkactl consume --zookeeper zk1:2181/kafka -G billing -t events": _ZK,
    "kafkactl produce --zookeeper zk1:2181/kafka -t events < lines.txt": _ZK,
    "kafkactl rebalance --zookeeper zk1:2181/kafka -G billing": _ZK,
    "kafkactl offsets migrate --zookeeper zk1:2181/kafka -b kafka1:9092 -G billing --dry-run": _ZK,
    "kafkactl offsets migrate --zookeeper zk1:2181/kafka -b kafka1:9092 -G billing": _ZK,
    "kafkactl consume -b kafka1:9092 -G billing -t events": _ZK,
    "kcat -b host:9093 -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 "
    "-X sasl.username=alice -X sasl.password=... -X ssl.ca.location=ca.pem -C -t orders": _SECURE,
    "kafkactl produce -t orders -b host:9093 -X security.protocol=SASL_SSL -X sasl.mechanism=PLAIN "
    "-X sasl.username=alice -X sasl.password=... -X ssl.ca.location=ca.pem < lines.txt": _SECURE,
    "kafkactl rebalance --partitions --plan-in plan.json --execute": _REPLAY,
    "kafkactl rebalance --partitions --verify --plan-in plan.json": _REPLAY,
    "kafkactl log-dirs move -t events -p 0 --broker 0 --dir /disk2/kafka --wait":
        "needs a broker with a second log dir: tests/broker/test_alter_replica_log_dirs.py "
        "moves replicas between two",
    "./scripts/test.sh": _INSTALL,
    "HYPOTHESIS_PROFILE=random .venv/bin/python -m pytest tests": "runs the whole test suite",
    ".venv/bin/pyinstaller --noconfirm --clean build.spec":
        "builds the one-file binary: scripts/smoke_binary.sh in .ci/run",
    "./scripts/smoke_binary.sh --no-build": "needs the built binary: .ci/run runs it",
}

# the exit code an example documents, when not 0
EXIT_CODES: dict[str, int] = {}


@dataclass(frozen=True)
class Probe:
    """How to see that an example that runs until stopped works."""

    ready: str  # a regex its stdout or stderr must show
    feed: str = ""  # a command run again while waiting (records for a consumer)
    own_port_9092: bool = False  # a broker on the README's default address
    exit_codes: tuple[int, ...] = (0,)  # after Ctrl-C


_BROKER_UP = Probe(r"broker \d+ started: .*listening on 127\.0\.0\.1:9092", own_port_9092=True)
LONG_RUNNING: dict[str, Probe] = {
    "kafkactl serve": _BROKER_UP,
    "kafkactl serve --config server.properties --override log.retention.hours=24": _BROKER_UP,
    # a group member with no committed offsets starts at the end: it prints a record sent
    # after it joined (Ctrl-C: 0, or the shell's 130)
    "kafkactl consume --topic-pattern 'logs\\..*' -G archiver": Probe(
        r"(?m)^GET /", feed="printf 'GET /index.html 200\\n' | kafkactl produce -t logs.web -q",
        exit_codes=(0, 130)),
}

# What the examples of a section presume exists, made before its first example.
SETUP: dict[str, list[str]] = {
    "### consume": ["seq 1 100 | kafkactl produce -t events -q",
                    "printf 'GET / 200\\n' | kafkactl produce -t logs.web -q"],
    "### offsets": ["seq 1 100 | kafkactl produce -t events -q",
                    "kafkactl consume -t events -G billing --from-beginning -c 10 > /dev/null"],
    "### delete-records": ["seq 1 100 | kafkactl produce -t events -q"],
    "### rebalance": ["seq 1 100 | kafkactl produce -t events -q",
                      "kafkactl consume -t events -G billing --from-beginning -c 10 > /dev/null"],
    "### dump-log": ["seq 1 100 | kafkactl produce -t events -q"],
    "### recover": ["seq 1 100 | kafkactl produce -t events -q"],
    "### configs": ["kafkactl topics create -t events"],
    "### cluster": ["seq 1 100 | kafkactl produce -t events -q"],
}

# Group members a section's examples presume are running (`rebalance --trigger`), started
# after SETUP; `check` is run until its stdout matches `ready`.
@dataclass(frozen=True)
class Background:
    command: str
    check: str
    ready: str


BACKGROUND: dict[str, list[Background]] = {
    "### rebalance": [Background("kafkactl consume -t events -G billing > /dev/null",
                                 check="kafkactl rebalance -G billing --json",
                                 ready=r'"state": "Stable"(?s:.*)"member_id"')],
}

# What a user types when an example asks: a regex over the example, and the input
# (`users add` without --password prompts for it)
STDIN: dict[str, str] = {
    r"^kafkactl users add (?!.*--password)": "alice-secret\n",
}


def typed(example: Example) -> str:
    return "".join(text for pattern, text in STDIN.items() if re.search(pattern, example.key))


# Broker settings a section's examples need (server.properties keys).
_AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
               "super.users": "User:ANONYMOUS"}
BROKER_OVERRIDES: dict[str, dict[str, str]] = {
    "### acls and users": _AUTHORIZER,
    "## Security": _AUTHORIZER,
}

# `recover` works on a stopped broker's data dir (the README says so)
STOP_BROKER_FIRST = {"kafkactl recover --dry-run kafkactl-data", "kafkactl recover kafkactl-data"}

# input files the examples read, made in the working directory
FILES: dict[str, str] = {
    "keyed-lines.txt": "".join(f"user{i % 7}:clicked {i}\n" for i in range(100)),
    "lines.txt": "".join(f"line {i}\n" for i in range(100)),
    "changes.txt": "u1|alice\nu2|bob\nu1|NULL\n",
    "server.properties": "# a user's server.properties: the defaults\n",
}

# the checkout's directories the examples read (`cp completions/...`), linked into the
# working directory; HOME is a temp dir, so nothing is installed for the user running this
CHECKOUT_PATHS = ("completions", "man")

# The examples that fail today, and why. Remove an entry once its example runs.
_SYNOPSIS = ("a synopsis, not a command: bash passes the [...] as arguments and the command "
             "exits 2 ('Got unexpected extra argument(s)'); write the variants out")
KNOWN_BROKEN: dict[str, str] = {}


# -------------------------------------------------------------------------- running


@dataclass
class Outcome:
    code: int | None  # None: still running after the timeout (then killed)
    out: str
    err: str


def shell(command: str) -> list[str]:
    return ["bash", "-e", "-o", "pipefail", "-c", command]


def run_to_end(command: str, cwd: Path, env: dict[str, str], timeout: float = TIMEOUT_S,
               stdin: str = "") -> Outcome:
    """Run `command` to its end (killed after `timeout`), `stdin` on its standard input."""
    proc = subprocess.Popen(shell(command), cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin.encode(), timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Outcome(code, out.decode(errors="replace"), err.decode(errors="replace"))


def _ctrl_c_default() -> None:
    """(in the child, before exec) SIGINT as a terminal's Ctrl-C finds it: default and not
    blocked, whatever this test process inherited (an ignored or blocked SIGINT survives
    exec: a CI run's worker once had `echo started; exec sleep 60` ignore it for 30 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_until_stopped(command: str, probe: Probe, cwd: Path, env: dict[str, str],
                      ready_timeout: float = 60.0) -> Outcome:
    """Start `command`, wait for `probe.ready` in its output (running `probe.feed` while
    waiting), then Ctrl-C its process group and wait for it to exit."""
    argv = shell(command)
    if probe.own_port_9092:
        argv = own_network(argv)
    out_path, err_path = cwd / ".example.out", cwd / ".example.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True,
                                preexec_fn=_ctrl_c_default)

    def output() -> str:
        return out_path.read_text(errors="replace") + err_path.read_text(errors="replace")

    def ready() -> bool:
        if re.search(probe.ready, output()) or proc.poll() is not None:
            return True
        if probe.feed:
            run_to_end(probe.feed, cwd, env, timeout=30)
        return False

    with contextlib.suppress(AssertionError):  # reported below: never ready
        wait_until(ready, timeout=ready_timeout, what=f"{command!r} to show {probe.ready!r}",
                   interval=1.0 if probe.feed else 0.1)
    was_ready = proc.poll() is None and re.search(probe.ready, output()) is not None
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            # Ctrl-C did not stop it within 30 s: killed, and reported as such, "never
            # showed" included
            out_text, err_text = read_both(out_path, err_path)
            if not was_ready:
                err_text += f"\n[never showed {probe.ready!r} while running]"
            return Outcome(None, out_text, err_text + "\n[killed: Ctrl-C did not stop it]")
    out_text, err_text = read_both(out_path, err_path)
    if not was_ready:
        err_text += f"\n[never showed {probe.ready!r} while running]"
        return Outcome(-1 if proc.returncode in probe.exit_codes else proc.returncode,
                       out_text, err_text)
    return Outcome(proc.returncode, out_text, err_text)


def read_both(out: Path, err: Path) -> tuple[str, str]:
    return out.read_text(errors="replace"), err.read_text(errors="replace")


_NAMESPACE_OK: bool | None = None


def own_network(argv: list[str]) -> list[str]:
    """`argv` in a network namespace of its own (an unprivileged user namespace), where
    127.0.0.1:9092 is free whatever else runs on this machine."""
    return ["unshare", "--user", "--map-root-user", "--net", "bash", "-c",
            'ip link set lo up && exec "$@"', "own-network", *argv]


def can_have_own_network() -> bool:
    global _NAMESPACE_OK
    if _NAMESPACE_OK is None:
        try:
            tools = shutil.which("unshare") is not None and shutil.which("ip") is not None
            _NAMESPACE_OK = tools and subprocess.run(
                own_network(["true"]), capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _NAMESPACE_OK = False
    return _NAMESPACE_OK


def port_9092_free() -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 9092))
        except OSError:
            return False
    return True


# ---------------------------------------------------------------------------- tests

BLOCKS = read_blocks(README.read_text(encoding="utf-8"))
KAFKACTL_COMMAND = re.compile(r"(^|[\s|;&(])kafkactl\s")  # an example that runs kafkactl


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="readme-") as name:
        root = Path(name)
        (root / "home").mkdir()
        (root / "bin").mkdir()
        shim = root / "bin" / "kafkactl"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kafkactl "$@"\n')
        shim.chmod(0o755)
        yield root


def make_cwd(root: Path, name: str) -> Path:
    cwd = root / name
    cwd.mkdir()
    for file, text in FILES.items():
        (cwd / file).write_text(text)
    for path in CHECKOUT_PATHS:
        (cwd / path).symlink_to(REPO / path)
    return cwd


def environment(root: Path, bootstrap: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACTL_")}
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(root / "home")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("COLUMNS", None)
    if bootstrap:
        env["KAFKACTL_BOOTSTRAP"] = bootstrap
    return env


def describe(example: Example, outcome: Outcome, want: tuple[int, ...]) -> str:
    code = "no exit within the timeout" if outcome.code is None else f"exit {outcome.code}"
    tail = "\n".join((outcome.out.strip()[-1500:], outcome.err.strip()[-1500:])).strip()
    wanted = " or ".join(map(str, want))
    return (f"README.md:{example.line}: {example.key}\n  {code} (want {wanted})"
            + ("\n  " + tail.replace("\n", "\n  ") if tail else ""))


@dataclass
class Session:
    """A block's run: its working directory, environment and broker."""

    root: Path
    cwd: Path
    env: dict[str, str]
    broker: BrokerProcess | None
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def setup(self, section: str) -> None:
        for command in SETUP.get(section, []):
            got = run_to_end(command, self.cwd, self.env)
            assert got.code == 0, f"setup {command!r}: exit {got.code}\n{got.out}\n{got.err}"
        for member in BACKGROUND.get(section, []):
            self.background.append(subprocess.Popen(
                shell(member.command), cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
            self.wait_ready(member)

    def wait_ready(self, member: Background) -> None:
        def ready() -> bool:
            shown = run_to_end(member.check, self.cwd, self.env).out
            return re.search(member.ready, shown) is not None

        wait_until(ready, timeout=60, what=f"{member.command!r} to be ready", interval=0.5)

    def run(self, example: Example) -> tuple[Outcome | None, tuple[int, ...]]:
        """The example's outcome and the exit codes it may end with; None: it cannot run
        on this machine."""
        command = example.command
        if self.broker is not None:  # the README's default address is the test's broker
            command = command.replace("127.0.0.1:9092", self.broker.bootstrap)
        if example.key in STOP_BROKER_FIRST and self.broker is not None:
            self.broker.stop()
        probe = LONG_RUNNING.get(example.key)
        if probe is None:
            return (run_to_end(command, self.cwd, self.env, stdin=typed(example)),
                    (EXIT_CODES.get(example.key, 0),))
        if probe.own_port_9092 and not can_have_own_network() and not port_9092_free():
            return None, probe.exit_codes
        cwd = make_cwd(self.root, f"own-{example.line}") if probe.own_port_9092 else self.cwd
        return run_until_stopped(command, probe, cwd, self.env), probe.exit_codes

    def close(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if self.broker is not None:
            self.broker.kill()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_readme_examples(block: Block, workdir: Path) -> None:
    runnable = [e for e in block.examples if e.key not in SKIP]
    if not runnable:
        pytest.skip("; ".join(sorted({SKIP[e.key] for e in block.examples})) or "no examples")
    cwd = make_cwd(workdir, "work")
    broker = None
    if any(KAFKACTL_COMMAND.search(e.key) and (e.key not in LONG_RUNNING
                                               or not LONG_RUNNING[e.key].own_port_9092)
           for e in runnable):
        (cwd / "kafkactl-data").mkdir()
        broker = BrokerProcess(cwd / "kafkactl-data", free_port(),
                               {"group.initial.rebalance.delay.ms": "0",
                                **BROKER_OVERRIDES.get(block.section, {})})
    session = Session(workdir, cwd, environment(workdir, broker.bootstrap if broker else None),
                      broker)
    failures: list[str] = []
    now_running: list[str] = []
    not_run: list[str] = []
    try:
        if broker is not None:
            broker.start()
            session.setup(block.section)
        for example in runnable:
            outcome, want = session.run(example)
            if outcome is None:
                not_run.append(f"README.md:{example.line}: {example.key}")
            elif example.key in KNOWN_BROKEN:
                if outcome.code in want:
                    now_running.append(f"README.md:{example.line}: {example.key}")
            elif outcome.code not in want:
                failures.append(describe(example, outcome, want))
    finally:
        session.close()
    problems = []
    if failures:
        problems.append("README examples that do not run as written:\n\n" + "\n\n".join(failures))
        if broker is not None:
            problems.append("the broker's log (tail):\n" + broker.log()[-3000:])
    if now_running:
        problems.append("these run now: remove them from KNOWN_BROKEN\n" + "\n".join(now_running))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
    if not_run:
        pytest.skip("127.0.0.1:9092 is taken and no network namespace of its own can be made "
                    "(unshare --user --net) for: " + "; ".join(not_run))


def test_the_lists_name_examples_that_exist() -> None:
    """An entry whose example changed or went away must be reviewed again (its new text is
    then run, unless listed anew)."""
    keys = {e.key for b in BLOCKS for e in b.examples}
    sections = {b.section for b in BLOCKS}
    stale = [k for table in (SKIP, EXIT_CODES, LONG_RUNNING, KNOWN_BROKEN) for k in table
             if k not in keys] + [k for k in STOP_BROKER_FIRST if k not in keys]
    stale += [p for p in STDIN if not any(re.search(p, k) for k in keys)]
    stale += [s for table in (SETUP, BACKGROUND, BROKER_OVERRIDES) for s in table
              if s not in sections]
    assert stale == []
    assert sum(len(b.examples) for b in BLOCKS) > 20, "the README's ```sh blocks were not found"


def test_reading_the_examples() -> None:
    text = ("# t\n\n## Run\n\n```sh\n# a comment\nkafkactl a   # note\n"
            "kafkactl b \\\n    --c 'x # y'\n\n```\n\n```python\nkafkactl no\n```\n")
    [block] = read_blocks(text)
    assert block.section == "## Run"
    assert [(e.line, e.key) for e in block.examples] == [
        (7, "kafkactl a"), (8, "kafkactl b --c 'x # y'")]
    assert block.examples[1].command == "kafkactl b \\\n    --c 'x # y'"
    assert strip_comment("printf 'a#b' #c") == "printf 'a#b'"
    assert strip_comment("echo a\\#b") == "echo a\\#b"


def test_the_runner_reports_what_fails(workdir: Path) -> None:
    cwd = make_cwd(workdir, "runner")
    env = environment(workdir, None)
    assert run_to_end("true | false", cwd, env).code == 1  # pipefail
    assert run_to_end("false ; true", cwd, env).code == 1  # -e
    got = run_to_end("read line && echo \"got $line\" && ls keyed-lines.txt completions/",
                     cwd, env, stdin="typed\n")
    assert got.code == 0 and got.out.startswith("got typed\n"), got
    assert run_to_end("sleep 60", cwd, env, timeout=0.5).code is None
    never = run_until_stopped("sleep 60", Probe("never shown"), cwd, env, ready_timeout=0.5)
    assert never.code not in (0,) and "never showed" in never.err
    shown = run_until_stopped("echo started; exec sleep 60", Probe("started", exit_codes=(-2,)),
                              cwd, env)
    assert shown.code == -2, shown
