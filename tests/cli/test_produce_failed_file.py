"""`kafkactl produce --failed-file FILE` tells this run only: FILE is replaced at the end
of every run (atomically: written beside it, then renamed), empty when every record was
acknowledged, so a retry script never resends an earlier run's records; a FILE that is the
input is refused; a link's target is replaced and a file keeps its mode. And the error
line's words: the serialized size, a missing topic's hint, one punctuation mark between
clauses, a flag's value as given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import zygote
from tests.conftest import BrokerProcess, free_port
from tests.mirror.helpers import create_topics

# (a missing topic is not made by the broker: its hint is told)
MODULE_BROKER_OVERRIDES = {"auto.create.topics.enable": "false"}


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker  # every test uses topics of its own


def _produce(bootstrap: str, topic: str, data: bytes, *args: str,
             cwd: Path | None = None) -> tuple[int, str]:
    r = zygote.run(["produce", "-b", bootstrap, "-t", topic, *args], input=data,
                   timeout=120, cwd=cwd)
    return r.returncode, r.stderr.decode()


def test_a_run_that_succeeds_empties_the_failed_file(broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    ff = tmp_path / "ff.txt"
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, err = _produce(dead, "ff-x", b"a\nb\n", "--failed-file", str(ff))
    assert code == 1, err
    assert ff.read_bytes() == b"a\nb\n"
    # the double punctuation: the cause's final period is not followed by ';'
    assert "to point elsewhere; all 2 are in" in err, err
    create_topics(broker.bootstrap, {"ff-x": 1})
    code, err = _produce(broker.bootstrap, "ff-x", b"ok\n", "--failed-file", str(ff))
    assert code == 0, err
    assert ff.read_bytes() == b""  # (was: a, b of the earlier run, for a retry to resend)
    assert [p.name for p in tmp_path.iterdir()] == ["ff.txt"]  # no temporary left


def test_a_failed_run_replaces_the_file_with_its_own_records(tmp_path: Path) -> None:
    ff = tmp_path / "ff.txt"
    ff.write_bytes(b"old 1\nold 2\nold 3\n")
    ff.chmod(0o640)
    link = tmp_path / "link"
    link.symlink_to(ff)
    dead = f"127.0.0.1:{free_port()}"
    code, err = _produce(dead, "ff-y", b"new\n", "--failed-file", str(link))
    assert code == 1, err
    assert f"; it is in {link}; stopped reading" in err, err
    assert link.is_symlink() and ff.read_bytes() == b"new\n"
    assert ff.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("how", ["stdin", "--file"])
def test_the_input_itself_is_refused(broker: BrokerProcess, tmp_path: Path,
                                     how: str) -> None:
    """A run stopped early would replace the input with the records it read, losing the
    ones after (exit 2, nothing read or sent)."""
    ff = tmp_path / "ff.txt"
    ff.write_bytes(b"r1\nr2\n")
    given = f"-f {ff}" if how == "--file" else f"< {ff}"
    r = subprocess.run(f"{sys.executable} -m kafkactl produce -b {broker.bootstrap} "
                       f"-t ff-same --failed-file {ff} {given}", shell=True,
                       capture_output=True, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert f"error: --failed-file {ff} is the input" in err, err
    assert ff.read_bytes() == b"r1\nr2\n"


def test_an_unwritable_failed_file_directory_is_refused_at_once(broker: BrokerProcess,
                                                                tmp_path: Path) -> None:
    code, err = _produce(broker.bootstrap, "ff-dir", b"a\n", "--failed-file",
                         str(tmp_path / "no" / "such" / "dir" / "ff"))
    assert code == 2, err
    assert "No such file or directory" in err, err



def test_a_missing_topic_tells_how_to_create_it(broker: BrokerProcess) -> None:
    code, err = _produce(broker.bootstrap, "ff-missing", b"a\n")
    assert code == 1, err
    assert ("topic 'ff-missing' does not exist (create it with `kafkactl topics create`)"
            in err), err


def test_a_float_flag_is_echoed_as_given(broker: BrokerProcess) -> None:
    code, err = _produce(broker.bootstrap, "ff-linger", b"a\n", "--linger-ms", "10",
                         "-X", "linger.ms=5")
    assert code == 2, err
    assert "error: --linger-ms 10 and -X linger.ms=5 disagree: give one" in err, err


def test_a_descriptor_is_written_in_place_a_directory_refused(tmp_path: Path) -> None:
    """--failed-file /dev/stdout writes to the open stdout (here a file), never replaces
    the file it leads to; a directory is refused at once (exit 2)."""
    out = tmp_path / "out.txt"
    dead = f"127.0.0.1:{free_port()}"
    r = subprocess.run(f"{sys.executable} -m kafkactl produce -b {dead} -t ff-fd "
                       f"--failed-file /dev/stdout > {out}", shell=True, input=b"x\ny\n",
                       capture_output=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert out.read_bytes() == b"x\ny\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    code, err = _produce(dead, "ff-fd", b"x\n", "--failed-file", str(tmp_path))
    assert code == 2, err
    assert f"error: --failed-file {tmp_path}: a directory, not a file" in err, err
