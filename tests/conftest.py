"""Hypothesis profiles: ``default`` for development, ``ci`` reproducible (derandomized).

Pick one with ``HYPOTHESIS_PROFILE=ci``; without it, ``ci`` is used when ``CI`` is set.
``nightly`` is for long fuzzing runs (tests/test_query_fuzz.py says how). Each
property test fixes its own ``max_examples`` so the suite's runtime is the same under both.
"""

import os

from hypothesis import HealthCheck, settings

# The differential tests drive the command line on every example, which takes longer than
# Hypothesis' 200 ms deadline on a slow machine without anything being wrong.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# Nightly fuzzing (tests/test_query_fuzz.py): randomised, so that each night tries new inputs.
settings.register_profile(
    "nightly",
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default")
)
