"""Hypothesis in CI is not a lottery: the default profile draws the same examples every run,
HYPOTHESIS_PROFILE=random draws new ones and more of them (tests/hypothesis_profiles.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import hypothesis_profiles
from tests.hypothesis_profiles import examples

REPO = Path(__file__).resolve().parents[2]
# A fast property test with @settings(max_examples=examples(300)).
PROBE = "tests/client/test_partitioner.py::test_murmur2_matches_java_formula"
PROBE_EXAMPLES = 300

default_profile_only = pytest.mark.skipif(
    (os.environ.get("HYPOTHESIS_PROFILE") or hypothesis_profiles.DEFAULT)
    != hypothesis_profiles.DEFAULT,
    reason="checks the default (derandomized) profile",
)


@default_profile_only
def test_the_default_profile_is_derandomized_and_untimed() -> None:
    s = settings.default
    assert s.derandomize is True
    assert s.database is None
    assert s.print_blob is True
    assert s.deadline is None
    assert examples(60) == 60


@default_profile_only
def test_a_property_test_draws_the_same_examples_twice_in_one_process() -> None:
    drawn: list[bytes] = []

    @settings(max_examples=examples(50))
    @given(st.binary(max_size=32))
    def probe(value: bytes) -> None:
        drawn.append(value)

    probe()
    first = list(drawn)
    drawn.clear()
    probe()
    assert len(set(first)) > 10
    assert drawn == first


def _test_cases(profile: str | None) -> list[str]:
    """Run PROBE in a fresh pytest process; return the examples it tried, in order."""
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    if profile:
        env["HYPOTHESIS_PROFILE"] = profile
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "--hypothesis-verbosity=verbose", PROBE],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return re.findall(r"^Test case: .*?^\)$", r.stdout, flags=re.M | re.S)


def test_separate_runs_draw_the_same_examples_and_random_draws_new_ones() -> None:
    first = _test_cases(None)
    second = _test_cases(None)
    assert len(first) >= PROBE_EXAMPLES // 2
    assert first == second
    randomized = _test_cases("random")
    # examples(300) under "random" is 3000; Hypothesis counts only distinct valid examples.
    assert len(randomized) > PROBE_EXAMPLES * 2
    assert randomized[:PROBE_EXAMPLES] != first[:PROBE_EXAMPLES]


def test_every_max_examples_in_tests_goes_through_examples() -> None:
    """A bare @settings(max_examples=N) would not grow under the random profile, and a
    profile loaded by a test module would replace the derandomized one for every module
    imported after it."""
    offenders: list[str] = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name == "hypothesis_profiles.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            bare = re.search(r"max_examples\s*=\s*(?!examples\()", line)
            profile = re.search(r"\b(load_profile|register_profile|derandomize\s*=)", line)
            if (bare or profile) and not line.lstrip().startswith("#") and path != Path(__file__):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert offenders == []
