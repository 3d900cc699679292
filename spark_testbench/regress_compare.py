"""The comparison and report of ``nfacep regress``: the simulated matches and drops joined with
the expected ones (outer joins), the differences counted by kind with the first of each kept,
and the report rendered as text.
"""

from __future__ import annotations

import functools
import os

from .layout import DROPS, EXPECTED, MEASURE, START_SEQ, measure_columns
from .regress_plan import Job

REPORT_FORMAT = "nfacep-regress/1"


#: Kinds of difference, in report order.
KINDS = ("missing", "extra", "wrong_start", "wrong_measure", "missing_drop", "extra_drop")


#: Kinds counted per query.
QUERY_KINDS = ("missing", "extra", "wrong_start", "wrong_measure")


#: Differing rows kept in the report.
FIRST = 20


def _compare(spark, job: Job, result) -> dict:
    """The report of the simulated ``result`` rows against the vectors' expected ones."""
    from pyspark.sql import functions as F

    expected = spark.read.parquet(os.path.join(job.vectors, EXPECTED))
    #: the vectors say where matches begin (a query reports start_seq): compare that too
    starts = START_SEQ in expected.columns
    #: and the measures' values (vectors made before they were written have none)
    measures = [c for c in measure_columns(job.nfa) if c in expected.columns]
    keys = ("seq", "query", "partition")
    expected = expected.select(*keys, *([START_SEQ] if starts else []), *measures)
    drops = spark.read.parquet(os.path.join(job.vectors, DROPS)).select("seq", "partition")
    got = result.filter(F.col("kind") == "match").select(
        *keys, *([F.col("start").alias(START_SEQ)] if starts else []), *measures
    )
    got_drops = result.filter(F.col("kind") == "drop").select("seq", "partition")
    diffs = _outer(
        expected, got, keys, "missing", "extra", start=starts, measures=measures
    ).unionByName(_outer(drops, got_drops, ("seq", "partition"), "missing_drop", "extra_drop"))
    diffs = diffs.localCheckpoint()
    counts, by_query = _tally(diffs, [q.name for q in job.nfa.queries])
    first = _first(diffs, starts, bool(measures))
    totals = {
        "expected": expected.count(),
        "simulated": got.count(),
        "expected_drops": drops.count(),
        "simulated_drops": got_drops.count(),
    }
    diffs.unpersist()
    total = sum(counts.values())
    return {
        "format": REPORT_FORMAT,
        "query_file": job.query_path,
        "vectors": job.vectors,
        "query_sha256": job.manifest["query_sha256"],
        "engine": job.params.as_dict(),
        "simulator": job.simulator,
        "sim_mode": job.sim_mode,
        "mode": job.mode,
        "reason": job.reason,
        "start_seq": starts,  # whether where the matches begin was compared
        # the measure columns whose values were compared (the match file's names)
        "measures": [c[len(MEASURE) :] for c in measures],
        "equal": total == 0,
        "counts": {**totals, **counts, "differences": total},
        "by_query": by_query,
        "first": first,
    }


def _outer(left, right, cols, missing: str, extra: str, start: bool = False, measures=()):
    """The rows of ``left`` and ``right`` (equal on ``cols``) that are in only one of them,
    with kind ``missing`` or ``extra`` (and, with ``start``, ``wrong_start`` where their
    start_seq differ; then ``wrong_measure`` where a column of ``measures`` differs): seq,
    query, partition, kind, expected_start, simulated_start, and the first differing
    measure's name and values (measure, expected_value, simulated_value)."""
    from pyspark.sql import functions as F

    no_start = F.lit(None).cast("long")
    no_text = F.lit(None).cast("string")
    e = left.withColumn("_e", F.lit(True)).alias("e")
    g = right.withColumn("_g", F.lit(True)).alias("g")
    cond = None
    for c in cols:
        eq = F.col(f"e.{c}").eqNullSafe(F.col(f"g.{c}"))
        cond = eq if cond is None else cond & eq
    joined = e.join(g, cond, "full_outer")
    kind = F.when(F.col("g._g").isNull(), F.lit(missing)).when(F.col("e._e").isNull(), F.lit(extra))
    if start:  # on both sides: null-safe, null for the queries without start_seq
        kind = kind.when(
            ~F.col(f"e.{START_SEQ}").eqNullSafe(F.col(f"g.{START_SEQ}")), F.lit("wrong_start")
        )
    # the first measure column whose values differ (null-safe), if any
    differs = [(c, ~F.col(f"e.`{c}`").eqNullSafe(F.col(f"g.`{c}`"))) for c in measures]
    if differs:
        kind = kind.when(
            functools.reduce(lambda a, b: a | b, (d for _, d in differs)), "wrong_measure"
        )

    def first_differing(side: str | None):
        if not differs:
            return no_text
        return F.coalesce(
            *(
                F.when(d, F.lit(c[len(MEASURE) :]) if side is None else F.col(f"{side}.`{c}`"))
                for c, d in differs
            )
        )

    return joined.select(
        F.coalesce(F.col("e.seq"), F.col("g.seq")).alias("seq"),
        (
            F.coalesce(F.col("e.query"), F.col("g.query"))
            if "query" in cols
            else F.lit(None).cast("string")
        ).alias("query"),
        F.coalesce(F.col("e.partition"), F.col("g.partition")).alias("partition"),
        kind.alias("kind"),
        (F.col(f"e.{START_SEQ}") if start else no_start).alias("expected_start"),
        (F.col(f"g.{START_SEQ}") if start else no_start).alias("simulated_start"),
        first_differing(None).alias("measure"),
        first_differing("e").alias("expected_value"),
        first_differing("g").alias("simulated_value"),
    ).filter(F.col("kind").isNotNull())


def _tally(diffs, names: list[str]) -> tuple[dict, dict]:
    """(differences per kind, differences per query and kind) of the difference rows."""
    counts = dict.fromkeys(KINDS, 0)
    by_query = {n: dict.fromkeys(QUERY_KINDS, 0) for n in names}
    for r in diffs.groupBy("kind", "query").count().collect():
        counts[r["kind"]] += r["count"]
        if r["query"] is not None:
            by_query.setdefault(r["query"], dict.fromkeys(QUERY_KINDS, 0))[r["kind"]] = r["count"]
    return counts, by_query


def _first(diffs, starts: bool, measures: bool) -> list[dict]:
    """The first :data:`FIRST` differences, in stream order, for the report."""
    return [
        {
            "kind": r["kind"],
            "seq": r["seq"],
            "query": r["query"],
            "partition": r["partition"],
            **(
                {
                    "expected_start_seq": r["expected_start"],
                    "simulated_start_seq": r["simulated_start"],
                }
                if starts
                else {}
            ),
            **(
                {
                    "measure": r["measure"],
                    "expected_value": r["expected_value"],
                    "simulated_value": r["simulated_value"],
                }
                if measures
                else {}
            ),
        }
        for r in diffs.orderBy("seq", "query", "kind").limit(FIRST).collect()
    ]


def render(report: dict) -> str:
    """The report as text, for stdout."""
    c = report["counts"]
    lines = [
        f"{report['tuples']} tuples, {report['shards']['simulated']} shard(s) simulated "
        f"({report['mode']}), {report['simulator']} ({report.get('sim_mode', 'batch')}), "
        f"{report['cycles']} cycles",
        f"expected {c['expected']} matches and {c['expected_drops']} drops; simulated "
        f"{c['simulated']} matches and {c['simulated_drops']} drops",
    ]
    if report["equal"]:
        lines.append("OK: the gateware's matches and drops equal the expected ones")
        return "\n".join(lines)
    starts = report.get("start_seq", False)
    measures = bool(report.get("measures"))
    shown = [
        k for k in KINDS if (starts or k != "wrong_start") and (measures or k != "wrong_measure")
    ]
    kinds = ", ".join(f"{c.get(k, 0)} {k.replace('_', ' ')}" for k in shown)
    lines.append(
        f"DIFFERENT: {c['differences']} differences ({kinds}); missing = expected but "
        "not reported by the gateware, extra = reported but not expected"
        + (", wrong start = reported as expected but with another start_seq" if starts else "")
        + (
            ", wrong measure = reported as expected but a measure's value differs"
            if measures
            else ""
        )
    )
    for name, k in report["by_query"].items():
        if any(k.get(kind) for kind in QUERY_KINDS):
            lines.append(
                f"  query {name}: "
                + ", ".join(
                    f"{k.get(kind, 0)} {kind.replace('_', ' ')}"
                    for kind in QUERY_KINDS
                    if kind in shown
                )
            )
    rows = report["first"]
    lines.append(f"first {len(rows)} differences:")
    head = ("kind", "seq", "query", "partition")
    if starts:
        head += ("expected start_seq", "simulated start_seq")
    if measures:
        head += ("measure", "expected value", "simulated value")

    def text(v):
        return "-" if v is None else str(v) or '""'

    table = [head] + [
        (
            r["kind"],
            str(r["seq"]),
            r["query"] or "-",
            text(r["partition"]),
            *((text(r["expected_start_seq"]), text(r["simulated_start_seq"])) if starts else ()),
            *(
                (text(r["measure"]), text(r["expected_value"]), text(r["simulated_value"]))
                if measures
                else ()
            ),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        lines.append(
            "  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        )
    return "\n".join(lines)
