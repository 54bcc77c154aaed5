"""The import layering of /work/shared/ARCHITECTURE.md, checked on the source with `ast`
(nothing is imported or executed):

    cli > spark, mirror > client > broker > cluster > log > protocol > record

A package imports only packages below it, with two cuts the order alone does not make:
`client/` talks to a broker over the wire and never imports `broker/`, and `spark/` and
`mirror/` are built on `client/` (never on the server side: broker, cluster, log).
`record/` and `protocol/` are sans-IO: no sockets, event loops, threads, processes or
files. Every import counts wherever it is written: inside functions, under
`if TYPE_CHECKING:`, and `importlib.import_module("kafkactl....")`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kafkactl"

# Height of each layer; a package may import only strictly lower ones (and `kafkactl`
# itself, which holds the version and imports nothing).
LAYERS: dict[str, int] = {
    "record": 0,
    "protocol": 1,
    "log": 2,
    "cluster": 3,
    "broker": 4,
    "client": 5,
    "spark": 6,
    "mirror": 6,
    "cli": 7,
    "__main__": 8,
}
# Downward by height, but still not allowed.
FORBIDDEN: dict[str, set[str]] = {
    "client": {"broker"},
    "spark": {"broker", "cluster", "log"},
    "mirror": {"broker", "cluster", "log"},
}

# What sans-IO code must not import (a prefix matches its submodules too).
IO_MODULES = {
    "socket", "socketserver", "ssl", "select", "selectors", "asyncio", "threading",
    "_thread", "multiprocessing", "concurrent", "subprocess", "signal", "os", "shutil",
    "tempfile", "mmap", "fcntl", "glob", "fileinput", "pathlib", "http", "urllib",
    "kazoo", "kafka", "confluent_kafka", "aiokafka", "pyspark", "py4j",
}
# Calls that open or read files whatever module they come from (gzip.open, io.open,
# lz4.frame.open, Path.read_text, ...). `io` and `gzip` themselves stay allowed: the
# codecs use them on bytes in memory (io.BytesIO, gzip.compress).
IO_CALLS = {"open", "FileIO", "read_text", "read_bytes", "write_text", "write_bytes"}
SANS_IO = ("record", "protocol")
# Files of record/ and protocol/ that do touch files, each with the reason it is allowed.
SANS_IO_EXCEPTIONS: dict[str, str] = {
    "kafkactl/protocol/specjson.py": (
        "load_spec() reads one of Kafka's protocol JSON spec files; only "
        "scripts/gen_protocol_tables.py and tests/protocol/test_spec_conformance.py call "
        "it, never the codec at run time"
    ),
    "kafkactl/record/_accel.py": (
        "reads one environment variable (KAFKACTL_NO_EXTENSIONS) once at import: the switch "
        "between the compiled kernels and pure Python; no file or socket"
    ),
}


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(module: str) -> str:
    """The layer a kafkactl module belongs to: `kafkactl.log.segment` -> `log`;
    `kafkactl` and `kafkactl.__version__` -> `kafkactl`."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] == "__version__":
        return "kafkactl"
    return parts[1]


def _dynamic_target(call: ast.Call) -> str | None:
    """The module (or its constant prefix) of importlib.import_module / __import__."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if (isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant)
            and isinstance(arg.values[0].value, str)):
        return arg.values[0].value.rstrip(".")
    return None


def imports(rel: Path, source: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in a module, relative ones resolved;
    `from a import b` yields both `a` and `a.b` (b may be a submodule)."""
    package = _module_name(rel).split(".")
    if rel.name != "__init__.py":
        package.pop()
    for node in ast.walk(ast.parse(source, filename=str(rel))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{module}.{alias.name}"
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node)
            if target:
                yield node.lineno, target


def layering_violations(rel: Path, source: str) -> list[str]:
    """Imports of `rel` (a path like kafkactl/log/log.py) that point up or sideways."""
    here = _package_of(_module_name(rel))
    out: list[str] = []
    seen: set[tuple[int, str]] = set()
    for line, module in imports(rel, source):
        if module.split(".")[0] != "kafkactl":
            continue
        there = _package_of(module)
        if there == here or (line, there) in seen:
            continue
        seen.add((line, there))
        if here == "kafkactl":
            out.append(f"{rel}:{line}: the top-level package imports {module}")
        elif there == "kafkactl":
            continue  # the version
        elif there not in LAYERS:
            out.append(f"{rel}:{line}: imports {module} from a package ARCHITECTURE.md "
                       f"does not place")
        elif LAYERS[there] >= LAYERS[here] or there in FORBIDDEN.get(here, set()):
            out.append(f"{rel}:{line}: {here} imports {module} ({there} is not below it)")
    return sorted(set(out))


def io_violations(rel: Path, source: str) -> list[str]:
    """I/O imports and file-opening calls of a sans-IO module."""
    out: list[str] = []
    for line, module in imports(rel, source):
        top = module.split(".")[0]
        if top in IO_MODULES:
            out.append(f"{rel}:{line}: imports {module}")
    for node in ast.walk(ast.parse(source, filename=str(rel))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in IO_CALLS:
                out.append(f"{rel}:{node.lineno}: calls {ast.unparse(func)}()")
    return sorted(set(out))


def _sources() -> list[tuple[Path, str]]:
    return [(p.relative_to(ROOT), p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE.rglob("*.py"))]


SOURCES = _sources()


def test_every_package_is_placed_in_a_layer() -> None:
    on_disk = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert on_disk, "no packages found under kafkactl/"
    assert on_disk - set(LAYERS) == set(), "place the new package in ARCHITECTURE.md's order"


@pytest.mark.parametrize("package", sorted(set(LAYERS) | {"kafkactl"}))
def test_imports_point_downward(package: str) -> None:
    checked = [(rel, src) for rel, src in SOURCES
               if _package_of(_module_name(rel)) == package]
    if not checked and package in ("mirror",):
        pytest.skip(f"kafkactl/{package}/ does not exist yet")
    assert checked, f"no modules found for {package}"
    found = [v for rel, src in checked for v in layering_violations(rel, src)]
    assert found == [], "upward imports (ARCHITECTURE.md's layers):\n" + "\n".join(found)


@pytest.mark.parametrize("package", SANS_IO)
def test_sans_io_packages_do_no_io(package: str) -> None:
    checked = [(rel, src) for rel, src in SOURCES if rel.parts[1] == package]
    assert checked
    found = [v for rel, src in checked if str(rel.as_posix()) not in SANS_IO_EXCEPTIONS
             for v in io_violations(rel, src)]
    assert found == [], f"I/O in sans-IO {package}/:\n" + "\n".join(found)


def test_the_sans_io_exceptions_still_need_their_exception() -> None:
    """An exception whose file became pure again (or went away) is removed from the list."""
    sources = {rel.as_posix(): src for rel, src in SOURCES}
    for path in SANS_IO_EXCEPTIONS:
        assert path in sources, f"{path} is gone: drop its exception"
        assert io_violations(Path(path), sources[path]), f"{path} does no I/O any more"


# --- the checks themselves fail on what they are meant to catch ------------------------

@pytest.mark.parametrize(("path", "source"), [
    ("kafkactl/record/batch.py", "from kafkactl.protocol.errors import ErrorCode\n"),
    ("kafkactl/log/log.py", "import kafkactl.broker.server\n"),
    ("kafkactl/log/log.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from kafkactl.cluster.paths import BROKERS\n"),
    ("kafkactl/cluster/controller.py", "def f():\n    from kafkactl.client import admin\n"),
    ("kafkactl/client/producer.py", "from kafkactl.broker.partition import Partition\n"),
    ("kafkactl/broker/server.py", "from ..client.connection import BrokerConnection\n"),
    ("kafkactl/broker/server.py", "from kafkactl import cli\n"),
    ("kafkactl/spark/load.py", "from kafkactl.log.log import Log\n"),
    ("kafkactl/spark/load.py", "import importlib\nimportlib.import_module('kafkactl.cli.app')\n"),
    ("kafkactl/protocol/codec.py", "from kafkactl.newpkg import thing\n"),
    ("kafkactl/__init__.py", "from kafkactl.cli.app import main\n"),
])
def test_an_upward_import_is_caught(path: str, source: str) -> None:
    assert layering_violations(Path(path), source) != []


@pytest.mark.parametrize(("path", "source"), [
    ("kafkactl/cli/app.py", "from kafkactl.broker.server import KafkaServer\n"),
    ("kafkactl/broker/server.py", "from kafkactl.log.manager import LogManager\n"),
    ("kafkactl/client/connection.py", "from kafkactl import __version__\n"),
    ("kafkactl/log/log.py", "from .segment import LogSegment\nfrom ..record import batch\n"),
])
def test_a_downward_import_passes(path: str, source: str) -> None:
    assert layering_violations(Path(path), source) == []


@pytest.mark.parametrize("source", [
    "import socket\n",
    "from asyncio import StreamReader\n",
    "def f():\n    import threading\n",
    "import os.path\n",
    "from pathlib import Path\n",
    "import subprocess\n",
    "with open('x', 'rb') as f:\n    pass\n",
    "import gzip\ngzip.open('x')\n",
    "import io\nio.FileIO('x')\n",
])
def test_io_in_a_sans_io_module_is_caught(source: str) -> None:
    assert io_violations(Path("kafkactl/record/codecs.py"), source) != []


def test_in_memory_codecs_are_not_io() -> None:
    source = "import gzip\nimport io\nimport zlib\ngzip.compress(b'')\nio.BytesIO(b'')\n"
    assert io_violations(Path("kafkactl/record/codecs.py"), source) == []
