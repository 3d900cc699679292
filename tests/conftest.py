"""What the whole suite shares: Hypothesis profiles and the expensive fixtures.

Hypothesis profiles: ``default`` for development, ``ci`` reproducible (derandomized, no example
database, so parallel workers share no files). Pick one with ``HYPOTHESIS_PROFILE=ci``; without
it, ``ci`` is used when ``CI`` is set. ``nightly`` is for long fuzzing runs
(tests/lang/test_query_fuzz.py says how). Each property test fixes its own ``max_examples`` so the
suite's runtime is the same under both.

Fixtures are per test process: under pytest-xdist (``-n 2``, as ``bash tools/run.sh test``
runs the suite) every worker has its own, in its own temporary folder; only the simulator
builds (``sim_cache``) are shared by the workers.

The layout: one folder per part of the package (``lang/``, ``reference/``, ``io/``, ``core/``,
``hdl/``, ``sim/``, ``links/``, ``boards/``, ``spark/``), the helpers the tests share
(``oracle.py``, ``strategies.py``, ``streams.py``, ``bundled.py``, …) here at the top, imported
by their bare names, as are the few test modules that others import (``test_udp_host``,
``test_hdl_partitioner``, …); ``benches/`` holds the cocotb benches that the link tests run in
the simulator (by module name). pytest runs in its default (prepend) import mode, so every test
file's name is unique across the folders.
"""

import os
import pathlib
import shlex
import shutil
import sys

import objcache
import pytest
from hypothesis import HealthCheck, settings

#: This folder (on ``sys.path`` already: pytest puts a ``conftest.py``'s folder there) and
#: every folder of test files or cocotb benches (``benches/``) under it, so that a test module
#: imports a helper, a bench or another test module by name whichever files the run selects
#: and in whatever order it collects them.
TESTS = pathlib.Path(__file__).resolve().parent
for _folder in sorted(
    {p.parent for p in TESTS.rglob("*.py") if p.name.startswith(("test_", "bench_"))}
):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

#: The Spark master of the tests: two local cores, like the CI machine.
SPARK_MASTER = "local[2]"

# Verilator's native models (the batch harness under a C++ main, ``nfacep.sim.native``) are
# compiled at -O2 for long streams; the tests' streams are a few thousand tuples at most, so
# the C++ build is most of their cost, and -O0 (the cocotb models' level) makes it cheaper
# (test_programmable_regress.py: 39.3 CPU-s at -O2, 29.5 at -O0). Set here, at import, so that
# the Spark sessions the tests start hand it to their tasks too; a value in the environment
# wins.
os.environ.setdefault("NFACEP_VERILATOR_OPT", "-O0")

#: The JVM options of the tests' Spark JVMs: the client compiler only, one compiler thread and
#: the serial collector. A test's JVM lives seconds to a minute, too short for C2's compilation
#: to pay for the CPU it takes from the other worker on a 2-core machine (a third less CPU for
#: the Spark test files: test_spark_vectors.py -k "same_seed or partitioned" 56.3 -> 38.1 CPU-s
#: with the JVMs counted, test_spark_match.py's quick tests 17.0 -> 9.2). Spark's own variables
#: carry them, so the local sessions, the cluster's daemons, its driver and its executors all
#: get them; a value in the environment wins. The command's defaults are left as they are.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    f'--driver-java-options "{TEST_JVM_OPTIONS}"'
    f' --conf "spark.executor.extraJavaOptions={TEST_JVM_OPTIONS}" pyspark-shell',
)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JVM_OPTIONS)

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
# Nightly fuzzing (tests/lang/test_query_fuzz.py): randomised, so that each night tries new inputs.
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


def pytest_collection_modifyitems(items):
    """The tests marked ``slow`` first, each part in its collection order.

    Under pytest-xdist (``--dist loadgroup``) workers take tests in this order (an
    ``xdist_group`` goes whole to one worker, the largest groups first), so the long tests start
    while there is still plenty of short ones to run on the other worker beside them, and the
    run ends with short tests on both workers instead of one worker finishing a long one alone.
    The order is the same in every worker (xdist requires it) and without xdist only the order
    of the report changes."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``NFACEP_TEST_CPU=FILE``, each test's CPU seconds (this process's and the children
    it waited for, setup and teardown included) appended to ``FILE.<worker>`` as ``seconds
    test-id`` lines: what a test costs whatever the machine's load, where ``--durations``
    gives the wall-clock time that the other worker's and other programs' load stretches.
    (Daemons that outlive the test, a Spark JVM, are counted where they exit.)"""
    path = os.environ.get("NFACEP_TEST_CPU")
    if not path:
        return (yield)
    import resource

    def cpu() -> float:
        own, children = (
            resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    start = cpu()
    try:
        return (yield)
    finally:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{path}.{worker}", "a", encoding="utf-8") as out:
            out.write(f"{cpu() - start:.3f} {item.nodeid}\n")


@pytest.fixture(autouse=True)
def _xdist_group_kept(request):
    """Fail a test of an ``xdist_group`` that pytest-xdist did not keep on one worker. Under
    ``--dist loadgroup`` xdist marks a grouped test by appending ``@group`` to its id in each
    worker; under pytest 9.2 that no longer takes (pytest-dev/pytest-xdist#1386) and the groups
    are silently spread over the workers, each of which then makes the group's module fixtures
    (Spark vectors, a wheel) again."""
    node = request.node
    if (
        getattr(request.config.option, "loadgroup", False)
        and node.get_closest_marker("xdist_group") is not None
        and "@" not in node.nodeid
    ):
        pytest.fail(
            f"pytest-xdist did not keep this test's xdist_group on one worker under pytest "
            f"{pytest.__version__} (no @group in its id): install the pytest that the test "
            'extra asks for (pip install -e ".[test]")'
        )


@pytest.fixture(scope="session")
def sim_cache(tmp_path_factory):
    """One simulator build folder for the whole run (``--build-dir``, ``SimOptions.build_dir``),
    shared by the pytest-xdist workers (in the folder that holds theirs): a build is keyed by
    its Verilog and made under a lock (``nfacep.sim.build``), so each design the tests that use
    it simulate (``test_sim.py``, ``test_sim_udp.py``) is compiled once per run, by the worker
    that needs it first. Every worker's run folders (``run-*``) come and go in it too: a test
    that looks at them uses a folder of its own."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / "sim-cache"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session", autouse=True)
def _verilator_runtime_once(sim_cache):
    """Verilator's and cocotb's runtime C++ compiled once per run, not once per model
    (``objcache.py``: Verilator's ``OBJCACHE`` hook, its objects beside the simulator builds,
    shared by the workers), and each model's own C++ as one file without precompiled headers
    (``VM_PARALLEL_BUILDS=0``; at -O0 a model split into parallel files with two precompiled
    headers costs half as much again). A cocotb model of the marathon engine: 22.1 CPU-s to
    build, 14.8 as one file, 11.4 of which the runtime's. Set here, before any test starts
    a build or a Spark session (whose tasks build models too); a value in the environment
    wins."""
    os.environ.setdefault(objcache.CACHE_ENV, str(sim_cache / "verilator-runtime"))
    os.environ.setdefault("OBJCACHE", shlex.join([sys.executable, objcache.__file__]))
    flags = os.environ.get("MAKEFLAGS", "")
    if "VM_PARALLEL_BUILDS" not in flags:
        os.environ["MAKEFLAGS"] = f"{flags} VM_PARALLEL_BUILDS=0".strip()


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
