"""Hypothesis profiles: CI and plain `pytest` are derandomized, HYPOTHESIS_PROFILE=random is not.

- "derandomized" (the default): every run draws the same examples (the seed comes from each
  test's own code), so a failure found once fails every run, and CI is not a lottery. No
  example database (a run does not depend on an earlier run's files); a failure prints its
  reproduction blob.
- Neither has a deadline or the too_slow health check: those fail by timing luck.
- "random" (`HYPOTHESIS_PROFILE=random pytest tests`): fresh random examples every run, and
  RANDOM_SCALE times as many: the search for new failures. Failures are saved in
  .hypothesis/ and replayed first by the next run.
- "seeded" (`HYPOTHESIS_PROFILE=seeded pytest tests --hypothesis-seed=N`): CI's number of
  examples, drawn from seed N: the suite under another seed, the same every run with N.

A test's `@settings(max_examples=N)` overrides the profile, so every such line in tests/
says `max_examples=examples(N)`: N scaled by the loaded profile's max_examples against
Hypothesis' default of 100 (N under the default profile, N * RANDOM_SCALE under "random").
The profile is loaded by tests/conftest.py, before any test module is imported.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

DEFAULT = "derandomized"
BASE_EXAMPLES = 100  # Hypothesis' own default max_examples
RANDOM_SCALE = 10

# No deadline and no too_slow health check in either: on a shared machine they fail by
# timing luck, which a test must never do.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile(DEFAULT, derandomize=True, database=None, print_blob=True,
                          max_examples=BASE_EXAMPLES, **_UNTIMED)
settings.register_profile("random", derandomize=False, print_blob=True,
                          max_examples=BASE_EXAMPLES * RANDOM_SCALE, **_UNTIMED)
# CI's number of examples drawn from a seed of one's choosing (`HYPOTHESIS_PROFILE=seeded
# pytest --hypothesis-seed=N`): the same suite under other seeds, repeatably
settings.register_profile("seeded", derandomize=False, database=None, print_blob=True,
                          max_examples=BASE_EXAMPLES, **_UNTIMED)


def load() -> str:
    """Load the profile HYPOTHESIS_PROFILE names (default: derandomized); returns its name."""
    name = os.environ.get("HYPOTHESIS_PROFILE") or DEFAULT
    settings.load_profile(name)
    return name


def examples(n: int) -> int:
    """A test's max_examples under the loaded profile: n, or n * RANDOM_SCALE when random."""
    return max(1, n * settings.default.max_examples // BASE_EXAMPLES)
