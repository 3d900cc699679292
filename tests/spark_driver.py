"""One Spark application on a standalone cluster for tests/spark/test_spark_cluster.py: a process
that opens the session on the cluster once and runs the test's ``nfacep`` commands in it, one
after another, as the test process runs the local ones in its own session (``conftest.spark``).

A command that finds a session on its ``--master`` running reuses it (``session.session``), so
the commands run as they do from the shell, without a driver JVM and two executors started for
each. Spark allows one context per process, hence a process of its own.

Run as ``python tests/spark_driver.py MASTER``: it reads one command a line on stdin (a JSON list
of ``nfacep`` arguments) and answers each with one line on stdout, :data:`REPLY` followed by
``{"rc": exit status, "output": the end of what the command printed}``; it stops the session
and exits at the end of stdin.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

#: What starts a reply line (anything else on stdout is Spark's, and skipped by the reader).
REPLY = "nfacep-spark-driver: "
#: How much of a command's output a reply carries.
TAIL = 6000


def _one(argv: list[str]) -> dict:
    from nfacep.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            rc = main(argv)
        except BaseException:
            traceback.print_exc()
            rc = None
    return {"rc": rc, "output": printed.getvalue()[-TAIL:]}


def serve(master: str) -> None:
    from nfacep.spark_testbench import session

    spark, _ = session.session(master)
    try:
        for line in sys.stdin:
            reply = _one(json.loads(line))
            sys.stdout.write(REPLY + json.dumps(reply) + "\n")
            sys.stdout.flush()
    finally:
        spark.stop()


if __name__ == "__main__":
    serve(sys.argv[1])
