"""The one place Spark sessions are built: local mode by default, ``--master`` honoured
everywhere (docs/commands.md).

:func:`check_master` validates a master URL without starting anything, so a bad ``--master``
is reported before any JVM or job starts; :func:`session` builds (or reuses) the session.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import sys
import threading

from nfacep.errors import UsageError

__all__ = ["DEFAULT_MASTER", "check_master", "session", "stop"]

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


class _Interrupted(logging.Filter):
    """Drops what py4j logs (on the root logger, with its traceback) of a Ctrl-C that
    interrupted a call into the JVM: the command reports the interruption itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


def stop(spark) -> None:
    """Stop a session this command started (:func:`session`'s ``created``), in a ``finally``.
    Not while Ctrl-C or SIGTERM ends the command (exit 130 or 143): the call it interrupted
    left py4j's connection broken, and stopping would fail (a traceback over the command's
    line) or wait for the running tasks, as would this process's exit: the JVM this process
    started is ended instead."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    from nfacep.cli import Terminated

    if isinstance(sys.exc_info()[1], KeyboardInterrupt | Terminated):
        jvm = getattr(SparkContext._gateway, "proc", None)
        if jvm is not None:
            jvm.kill()
        return
    with contextlib.suppress(Py4JError, OSError):
        spark.stop()


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
    # PySpark takes Ctrl-C to cancel its jobs over the connection the interrupted call is
    # using, which logs py4j's tracebacks on stderr: the command's own handling is kept
    # (KeyboardInterrupt: exit 130, one line; the JVM ends with the process)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    spark = builder.getOrCreate()
    if main and previous is not None:
        signal.signal(signal.SIGINT, previous)
    # py4j logs the tracebacks of such a call, and of closing its broken connection, on
    # the root logger and its own (which it gives a NullHandler): they go no further
    logging.getLogger("py4j").propagate = False
    root = logging.getLogger()
    if not any(isinstance(f, _Interrupted) for f in root.filters):
        root.addFilter(_Interrupted())
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True
