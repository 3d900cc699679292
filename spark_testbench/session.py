"""The one place Spark sessions are built: local mode by default, ``--master`` honoured
everywhere (docs/commands.md).

:func:`check_master` validates a master URL without starting anything, so a bad ``--master``
is reported before any JVM or job starts; :func:`session` builds (or reuses) the session.
"""

from __future__ import annotations

import os
import re
import socket
import sys

from nfacep.errors import UsageError

__all__ = ["DEFAULT_MASTER", "check_master", "session"]

#: Local mode on every core of this machine.
DEFAULT_MASTER = "local[*]"

_HOSTPORT = r"[A-Za-z0-9_.\-]+:[0-9]{1,5}|\[[0-9A-Fa-f:]+\]:[0-9]{1,5}"
_MASTERS = (
    ("local", r"local"),
    ("local[N]", r"local\[(?:\*|[1-9][0-9]*)(?:,\s*[1-9][0-9]*)?\]"),
    (
        "local-cluster[N,C,M]",
        r"local-cluster\[\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,"
        r"\s*[1-9][0-9]*\s*\]",
    ),
    ("spark://HOST:PORT", rf"spark://(?:{_HOSTPORT})(?:,(?:{_HOSTPORT}))*"),
    ("yarn", r"yarn"),
    ("k8s://URL", r"k8s://\S+"),
)


def check_master(url: str, *, connect: bool = True, connect_timeout: float = 3.0) -> str:
    """Validate a Spark master URL; for ``spark://`` also check (``connect``) that it answers.

    Raises :class:`UsageError` naming the accepted forms. Returns the URL unchanged.
    """
    for _, pattern in _MASTERS:
        if re.fullmatch(pattern, url):
            break
    else:
        forms = ", ".join(name for name, _ in _MASTERS)
        raise UsageError(
            f"--master {url!r} is not a Spark master URL (use one of: {forms}; "
            f"default {DEFAULT_MASTER})"
        )
    if connect and url.startswith("spark://"):
        errors = []
        for hostport in url[len("spark://") :].split(","):
            host, _, port = hostport.rpartition(":")
            try:
                with socket.create_connection(
                    (host.strip("[]"), int(port)), timeout=connect_timeout
                ):
                    return url
            except OSError as err:
                errors.append(f"{hostport}: {err.strerror or err}")
        raise UsageError(f"--master {url}: no Spark master answers ({'; '.join(errors)})")
    return url


def _active():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def session(
    master: str = DEFAULT_MASTER, app_name: str = "nfacep", conf: dict[str, str] | None = None
):
    """A SparkSession on ``master``: the running one if it uses that master, else a new one.

    Returns ``(spark, created)``; stop the session only if ``created``. A session already
    running in this process on another master is an error, never silently reused: Spark
    allows one context per process.
    """
    check_master(master)
    from pyspark.sql import SparkSession

    active = _active()
    if active is not None:
        running = active.sparkContext.master
        if running != master:
            raise UsageError(
                f"--master {master}: this process already runs a Spark session on "
                f"{running}, and Spark allows one per process"
            )
        return active, False
    # Python workers must run this interpreter (with nfacep and numpy) and find this package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "16")
        .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.memory", "4g")
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True
