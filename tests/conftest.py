"""What the whole suite shares: Hypothesis profiles and the expensive fixtures.

Hypothesis profiles: ``default`` for development, ``ci`` reproducible (derandomized, no example
database, so parallel workers share no files). Pick one with ``HYPOTHESIS_PROFILE=ci``; without
it, ``ci`` is used when ``CI`` is set. ``nightly`` is for long fuzzing runs
(tests/test_query_fuzz.py says how). Each property test fixes its own ``max_examples`` so the
suite's runtime is the same under both.

Fixtures are per test process: under pytest-xdist (``-n 2``, as ``bash tools/run.sh test``
runs the suite) every worker has its own, in its own temporary folder.
"""

import os
import shutil

import pytest
from hypothesis import HealthCheck, settings

#: The Spark master of the tests: two local cores, like the CI machine.
SPARK_MASTER = "local[2]"

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


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One Spark session (``local[2]``) per test process, its scratch files (``spark.local.dir``)
    in this process's temporary folder. Commands run in the test (``nfacep vectors``,
    ``nfacep regress``, ``--master local[2]``) reuse it instead of starting a JVM of their own."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail(
            "the Spark testbench needs Java 17 or 21 on PATH or in JAVA_HOME "
            "(Debian: apt-get install -y openjdk-17-jre-headless)"
        )
    from nfacep.spark_testbench import session

    local = tmp_path_factory.mktemp("spark-local")
    s, created = session.session(SPARK_MASTER, conf={"spark.local.dir": str(local)})
    yield s
    if created:
        s.stop()
