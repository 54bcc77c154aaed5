"""The contract of scripts/install.sh and scripts/test.sh, without a full install: they
parse, pip only ever runs from a virtual environment (Debian's python3 is externally
managed, PEP 668), and a failing step of test.sh is named and fails the run."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
SHELL_SCRIPTS = ["install.sh", "test.sh", "smoke_binary.sh", "venv.sh"]
IN_VENV = sys.prefix != sys.base_prefix

needs_venv = pytest.mark.skipif(not IN_VENV, reason="runs test.sh with this venv as KAFKACTL_VENV")


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_scripts_parse(name: str) -> None:
    r = subprocess.run(["bash", "-n", str(SCRIPTS / name)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["install.sh", "test.sh", "smoke_binary.sh"])
def test_scripts_are_executable(name: str) -> None:
    assert (SCRIPTS / name).stat().st_mode & stat.S_IXUSR


def _code_lines(path: Path) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_pip_runs_only_through_the_venvs_python(name: str) -> None:
    """Every pip call goes through venv_pip ("$VENV_PY" -m pip); nothing calls pip, pip3,
    `python3 -m pip` or --break-system-packages."""
    offenders = []
    for n, line in _code_lines(SCRIPTS / name):
        code = re.sub(r"\"[^\"]*\"|'[^']*'", "''", line)  # messages may say "pip"
        calls_pip = re.search(r"(^|[\s;&|(])(sudo\s+)?pip3?(\s|$)|-m\s+pip\b", code)
        if "break-system-packages" in line or (
            calls_pip and line.strip() != 'venv_pip() { "$VENV_PY" -m pip "$@"; }'
        ):
            offenders.append(f"{name}:{n}: {line.strip()}")
    assert offenders == []


def test_test_sh_runs_ruff_mypy_pytest_and_the_smoke_test_from_the_venv() -> None:
    text = (SCRIPTS / "test.sh").read_text()
    assert '"$VENV_PY" -m ruff check' in text
    assert '"$VENV_PY" -m mypy kafkactl' in text
    assert "STEPS=(apt clients venv ruff mypy pytest pure binary)" in text
    assert '"$VENV_PY" -m pytest' in text
    assert "venv_install '.[test]'" in text
    smoke = (SCRIPTS / "smoke_binary.sh").read_text()
    assert not re.search(r"(^|[\s(\"])python3 -", smoke), "smoke_binary.sh calls python3, not $PY"
    assert '"$PY" -m PyInstaller' in smoke


def _test_sh(*args: str, steps: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKACTL_")}
    # one xdist worker: the inner runs pick a test or none (each worker imports the suite)
    env.update(KAFKACTL_VENV=sys.prefix, KAFKACTL_TEST_STEPS=steps, KAFKACTL_TEST_WORKERS="1",
               KAFKACTL_TEST_JVM_ARCHIVE="0")
    return subprocess.run([str(SCRIPTS / "test.sh"), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@needs_venv
def test_a_failing_step_is_named_and_the_skipped_steps_listed() -> None:
    # pytest collects nothing (-k matches no test): exit 5, which is a failure.
    r = _test_sh("tests/distribution/test_scripts.py", "-k", "no_such_test_anywhere",
                 steps="pytest binary")
    assert r.returncode == 5, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == ("test.sh: FAILED at pytest (exit 5): pytest collected no tests; "
                    "skipped: binary (the binary build and smoke test)")
    assert "smoke_binary" not in r.stdout + r.stderr


@needs_venv
def test_pytest_arguments_pass_through_and_run_in_the_venv() -> None:
    r = _test_sh("tests/distribution/test_scripts.py", "-k", "runs_under_test_sh", "-rs",
                 steps="pytest")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout, r.stdout
    assert re.fullmatch(r"test\.sh: OK: pytest \(\d+ s\)", r.stderr.strip().splitlines()[-1])


@needs_venv
def test_the_mypy_step_type_checks_the_package_clean() -> None:
    """The mypy step runs the environment's mypy with pyproject.toml's [tool.mypy] and the
    tree has no type error (a new one fails this test and the step)."""
    r = _test_sh(steps="mypy")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout, r.stdout
    assert re.fullmatch(r"test\.sh: OK: mypy \(\d+ s\)", r.stderr.strip().splitlines()[-1])


def test_runs_under_test_sh() -> None:
    """Under test.sh (which exports KAFKACTL_VENV), pytest is the venv's python."""
    venv = os.environ.get("KAFKACTL_VENV")
    if not venv:
        pytest.skip("not run by scripts/test.sh")
    assert Path(sys.prefix).resolve() == Path(venv).resolve()
    assert shutil.which("python3") == str(Path(venv) / "bin" / "python3")


def test_an_unknown_step_is_refused() -> None:
    r = _test_sh(steps="pytset")
    assert r.returncode == 2
    assert "no step 'pytset'" in r.stderr


def test_install_sh_makes_a_venv_and_never_runs_the_system_pythons_pip(tmp_path: Path) -> None:
    """install.sh with a logging python3 first on the PATH and no package index: it makes
    the venv, fails at the install (no index), says so, and python3 itself never ran pip."""
    real = Path(getattr(sys, "_base_executable", sys.executable))
    probe = subprocess.run([str(real), "-c", "import ensurepip"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"{real} cannot make a venv (no ensurepip); install.sh would apt-get it")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "python3.log"
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >>"{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "KAFKACTL_"))}
    env.update(PATH=f"{bindir}:/usr/bin:/bin", KAFKACTL_VENV=str(tmp_path / "venv"),
               PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
    r = subprocess.run([str(SCRIPTS / "install.sh")], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode != 0, r.stderr
    assert "install.sh: FAILED" in r.stderr.strip().splitlines()[-1]
    assert (tmp_path / "venv" / "bin" / "python").exists()
    calls = log.read_text().splitlines()
    assert any(c.startswith("-m venv ") for c in calls), calls
    assert not [c for c in calls if "pip" in c.split()[:2]], calls


def test_the_install_digest_changes_when_the_kernels_can_be_built(tmp_path: Path) -> None:
    """A pure-Python install (no C compiler, or KAFKACTL_NO_EXTENSIONS) is not "up to date"
    once a compiler is there: install.sh run again builds the kernels."""
    real = Path(getattr(sys, "_base_executable", sys.executable))
    bare = tmp_path / "bare"  # the tools install_digest uses, and no cc/gcc
    bare.mkdir()
    for tool in ("bash", "cat", "sha256sum", "cut", "tr"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bare / tool).symlink_to(found)
    (bare / "python3").symlink_to(real)
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("no C compiler here to compare with")

    def digest(path: str, **extra: str) -> str:
        env = {"PATH": path, "HOME": str(tmp_path), **extra}
        r = subprocess.run(["bash", "-c", f'. scripts/venv.sh; VENV_PY="{real}"; '
                            "install_digest"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    with_compiler = digest(os.environ["PATH"])
    assert digest(os.environ["PATH"]) == with_compiler  # stable
    assert digest(str(bare)) != with_compiler
    assert digest(os.environ["PATH"], KAFKACTL_NO_EXTENSIONS="1") != with_compiler
