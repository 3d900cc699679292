"""A real Spark standalone cluster: a master and two 1-core workers on 127.0.0.1, started from
the installed PySpark (``bin/spark-class``); ``vectors``, ``regress`` and ``match --master`` run
against it and give what local mode gives. Slow (JVMs start in separate processes), but CI runs
it: one cluster for the module, and one Spark application on it.

The commands on the cluster run in a process of their own (tests/spark_driver.py, which opens
the session on the cluster once): Spark allows one context per process, and the test process
holds a local one (``conftest.spark``), in which the same commands run with
``--master local[2]`` for the local results.
"""

from __future__ import annotations

import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pyspark
import pytest
from spark_driver import REPLY

from nfacep import sim
from nfacep.cli import main
from nfacep.spark_testbench import layout, regress

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIRE = str(ROOT / "queries" / "fire.sql")
SPARK_CLASS = pathlib.Path(pyspark.__file__).parent / "bin" / "spark-class"
ARGS = ("--store", "pipeline", "--partitions", "16")
START_TIMEOUT = 120
#: The longest a command on the cluster may take.
COMMAND_TIMEOUT = 600
DRIVER = pathlib.Path(__file__).resolve().parents[1] / "spark_driver.py"

# Both tests run on one cluster (module fixtures), so on one pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("spark_cluster")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(tmp / "local"),
            "SPARK_LOG_DIR": str(tmp / "logs"),
            "SPARK_WORKER_DIR": str(tmp / "work"),
            "SPARK_HOME": str(SPARK_CLASS.parent.parent),
            "PYSPARK_PYTHON": sys.executable,
            # the simulator and the Python with nfacep on the workers' PATH
            "PATH": os.pathsep.join(
                [str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]
            ),
        }
    )
    return env


def _wait_for(path: pathlib.Path, text: str, count: int, procs) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(
                    f"a Spark daemon exited ({p.args[-1]}): "
                    f"{path.read_text(errors='replace')[-2000:]}"
                )
        if path.is_file() and path.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {text!r} in {path}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a standalone master with two 1-core workers, and the
    environment of its processes; started once for the module's tests."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("the Spark cluster test needs Java 17 or 21 on PATH or in JAVA_HOME")
    assert SPARK_CLASS.is_file(), f"no {SPARK_CLASS} in the installed PySpark"
    env = _env(tmp_path)
    for d in ("local", "logs", "work"):
        (tmp_path / d).mkdir()
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs = []

    def start(name, *args):
        log = open(tmp_path / "logs" / f"{name}.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [str(SPARK_CLASS), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_free_port()),
        )
        master_log = tmp_path / "logs" / "master.log"
        _wait_for(master_log, "I have been elected leader", 1, procs)
        for i in (1, 2):
            start(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(tmp_path / "work" / str(i)),
                url,
            )
        _wait_for(master_log, "Registering worker", 2, procs)
        yield url, env
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()


class _Driver:
    """The process that holds the Spark application on the cluster (tests/spark_driver.py):
    :meth:`command` runs ``nfacep ARGS`` in it."""

    def __init__(self, url: str, env: dict[str, str], log: pathlib.Path):
        self.log = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), url],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self._buffer = b""

    def command(self, args) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([str(a) for a in args]).encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not (line := self._line(deadline)).startswith(REPLY):
            pass
        reply = json.loads(line[len(REPLY) :])
        assert reply["rc"] == 0, f"nfacep {' '.join(map(str, args))}: {reply['output']}"

    def _line(self, deadline: float) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"no answer from the Spark driver: {self._tail()}")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AssertionError(f"the Spark driver exited: {self._tail()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._log.close()


@pytest.fixture(scope="module")
def driver(cluster, tmp_path_factory):
    """``(url, driver)``: the cluster and the one Spark application the module runs on it."""
    url, env = cluster
    d = _Driver(url, env, tmp_path_factory.mktemp("driver") / "driver.log")
    try:
        yield url, d
    finally:
        d.stop()


def _command(driver, args) -> None:
    """``nfacep ARGS``: on the cluster (``driver`` given) in the driver's process, in local mode
    in this one, whose Spark session it reuses."""
    if driver is None:
        assert main(list(args)) == 0
        return
    driver.command(args)


def _vectors(driver, out, master):
    _command(
        driver,
        [
            "vectors",
            FIRE,
            "--tuples",
            "3000",
            "--keys",
            "16",
            "--block-tuples",
            "1024",
            "--seed",
            "11",
            "--tasks",
            "2",
            "--out",
            str(out),
            "--master",
            master,
            *ARGS,
        ],
    )


def _regress(driver, folder, master, build_dir):
    _command(
        driver,
        [
            "regress",
            FIRE,
            "--vectors",
            str(folder),
            "--master",
            master,
            "--tasks",
            "2",
            "--build-dir",
            str(build_dir),
            "--simulator",
            "icarus",
            *ARGS,
        ],
    )
    return json.loads((folder / regress.REPORT).read_text())


@pytest.mark.slow
def test_standalone_cluster_gives_the_local_results(driver, spark, tmp_path):
    missing = sim.simulator_available("icarus")
    if missing:
        pytest.fail(missing)
    url, on = driver
    build_dir = tmp_path / "sim-cache"
    _vectors(on, tmp_path / "on-cluster", url)
    _vectors(None, tmp_path / "local", "local[2]")
    manifests = [
        json.loads((tmp_path / d / layout.MANIFEST).read_text()) for d in ("on-cluster", "local")
    ]
    assert manifests[0]["run"]["master"] == url
    assert [{k: v for k, v in m.items() if k != "run"} for m in manifests] == [
        {k: v for k, v in manifests[1].items() if k != "run"}
    ] * 2
    for name in (layout.TUPLES, layout.EXPECTED, layout.DROPS):
        assert pq.read_table(tmp_path / "on-cluster" / name).equals(
            pq.read_table(tmp_path / "local" / name)
        ), name

    on_cluster = _regress(on, tmp_path / "on-cluster", url, build_dir)
    local = _regress(None, tmp_path / "local", "local[2]", build_dir)
    assert on_cluster["run"]["master"] == url
    assert on_cluster["equal"] and local["equal"]
    assert on_cluster["counts"] == local["counts"]
    assert on_cluster["counts"]["expected"] == manifests[0]["counts"]["matches_total"] > 0
    assert on_cluster["shards"] == local["shards"] and on_cluster["shards"]["simulated"] == 2


@pytest.mark.slow
def test_match_on_the_cluster_gives_the_local_files(driver, tmp_path):
    """``nfacep match --master spark://…`` over a recorded trace: the local command's match file,
    byte for byte, and its summary with the ``spark`` entry naming the cluster."""
    url, on = driver
    trace = ROOT / "queries" / "fire.csv"
    outputs = {}
    for name, where, extra in (
        ("local", None, ()),
        ("cluster", on, ("--master", url, "--tasks", "2")),
    ):
        out = tmp_path / f"{name}.csv"
        _command(
            where,
            ["match", FIRE, "--input", str(trace), "--output", str(out), "--partitions", "64",
             *extra],
        )  # fmt: skip
        summary = json.loads((tmp_path / f"{name}.summary.json").read_text())
        outputs[name] = out.read_bytes(), summary
    (local, want), (on_cluster, got) = outputs["local"], outputs["cluster"]
    assert on_cluster == local and local.count(b"\n") > 2
    assert got.pop("spark")["master"] == url
    assert got == want
