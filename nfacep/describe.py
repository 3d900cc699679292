"""What ``nfacep check`` and ``nfacep explain`` print: the NFA in words, and as JSON for tools.

The JSON documents are described in docs/commands.md; their ``"format"`` field names the
document and its version, so that a tool can refuse one it does not know.
"""

from __future__ import annotations

from .errors import QueryError
from .lang.ast import dump
from .lang.predicates import Const, nodes, render
from .nfa import Nfa

__all__ = [
    "CHECK_FORMAT",
    "EXPLAIN_FORMAT",
    "check_json",
    "diagnostic",
    "explain_json",
    "explain_text",
]

CHECK_FORMAT = "nfacep-check/1"
EXPLAIN_FORMAT = "nfacep-explain/1"

#: Printed above the states by ``explain``: how to read a state's line.
LEGEND = """\
Each state is set after a tuple that satisfies its predicate while the state is activated:
by a state after '<-' that was set after the previous tuple, or by 'start' (on every tuple:
a match may begin there). A match ends at a tuple after which an accepting state is set."""


def diagnostic(err: QueryError) -> dict:
    """An error or warning as JSON: file, line, column (null when the error has no place),
    severity and message."""
    return {
        "file": err.filename,
        "line": err.line,
        "column": err.column,
        "severity": err.severity,
        "message": err.message,
    }


def _states(nfa: Nfa, q, *, wiring: bool) -> list[dict]:
    out = []
    for i in q.states:
        s = nfa.states[i]
        state = {
            "index": s.index,
            "name": s.name,
            "variable": s.var,
            "predicate": s.predicate,
            "start": s.start,
            "accepting": s.accepting,
        }
        if wiring:
            state["activated_by"] = sorted(s.activation)
        out.append(state)
    return out


def check_json(nfa: Nfa, query_file: str, *, wiring: bool = False) -> dict:
    """What ``check`` prints, as a JSON-ready dict."""
    prog = nfa.program
    queries = []
    for q, cq in zip(nfa.queries, prog.queries, strict=True):
        queries.append(
            {
                "name": q.name,
                "form": cq.form,
                "semantics": "skip past last row" if q.skip_past_last_row else "every end",
                "order_by": cq.order_field,
                "within": cq.window,
                "start_seq": cq.start_seq,
                "measures": [
                    {"name": m.name, "kind": m.kind, "field": m.field, "text": str(m)}
                    for m in cq.measures
                ],
                "state_count": q.count,
                "states": _states(nfa, q, wiring=wiring),
            }
        )
    return {
        "format": CHECK_FORMAT,
        "query_file": query_file,
        "stream": {
            "name": prog.schema.name,
            "fields": [
                {"name": f.name, "type": str(f.type), "bits": f.type.bits}
                for f in prog.schema.fields
            ],
        },
        # the key's text as PARTITION BY lists it; its fields and their place in the key
        "partition_key": ", ".join(prog.partition_fields) or None,
        "partition_fields": [
            {"name": name, "offset": offset, "bits": width}
            for name, offset, width in prog.key.slices
        ],
        "predicates": [
            {"index": p.index, "name": f"p{p.index}", "text": p.text, "constants": _constants(p)}
            for p in nfa.predicates
        ],
        "parameters": [
            {"name": n, "type": str(t), "bits": t.bits} for n, t in prog.parameters.items()
        ],
        "history": [
            {"field": f, "depth": k, "bits": k * prog.schema.field(f).type.bits}
            for f, k in nfa.history.items()
        ],
        "queries": queries,
        "warnings": [diagnostic(w) for w in prog.warnings],
    }


def explain_json(nfa: Nfa, query_file: str) -> dict:
    """What ``explain`` prints, as a JSON-ready dict: ``check``'s document with each query's
    pattern tree and conditions, and each state's activation wiring (state indices)."""
    doc = check_json(nfa, query_file, wiring=True)
    doc["format"] = EXPLAIN_FORMAT
    for q, cq in zip(doc["queries"], nfa.program.queries, strict=True):
        q["pattern"] = dump(cq.pattern)
        q["conditions"] = {
            var: None if pred is None else render(pred) for var, pred in cq.predicates.items()
        }
    return doc


def partition_text(prog) -> str:
    """The partition key for a reader: its field, or its fields with their bits in the key
    (the first field listed in the most significant bits)."""
    key = prog.key
    if not key.names:
        return "(none: one stream)"
    if len(key.names) == 1:
        return key.names[0]
    return ", ".join(f"{name} (key bits {o + w - 1}..{o})" for name, o, w in key.slices)


def explain_text(nfa: Nfa) -> str:
    """The NFA for a reader: predicates, then per query one line per state, its activation
    set with the paper's '1' written 'start', and start and accepting states said in words."""
    lines = [f"p{p.index}: {p.text}" for p in nfa.predicates]
    if nfa.program.parameters:
        lines.append(
            "parameters (registers the decoder compares with; --param sets them): "
            + ", ".join(f":{n} {t}" for n, t in nfa.program.parameters.items())
        )
    lines.append(f"partition key: {partition_text(nfa.program)}")
    lines += ["", LEGEND]
    for q, cq in zip(nfa.queries, nfa.program.queries, strict=True):
        semantics = "skip past last row" if q.skip_past_last_row else "every match end"
        if q.window is not None:
            semantics += f", WITHIN {q.window} ({q.order_field} units)"
        if q.start_seq:
            semantics += ", reports start_seq (each state keeps the latest start of its runs)"
        if cq.measures:
            semantics += "; MEASURES " + ", ".join(map(str, cq.measures)) + " (read on the host)"
        lines.append(f"query {q.name}: states {q.first}..{q.first + q.count - 1}, {semantics}")
        for i in q.states:
            s = nfa.states[i]
            words = []
            if s.start:
                words.append("start (a match may begin here)")
            if s.accepting:
                words.append("accept (a match ends here)")
            tail = (" " + ", ".join(words)) if words else ""
            lines.append(nfa.state_line(i, start="start") + tail)
    return "\n".join(lines)


def _constants(p) -> list[dict]:
    """The TIMESTAMP and IPV4 constants of predicate ``p``, which its text shows as a time and
    a dotted quad: each as that text and the number the engine compares (a TIMESTAMP's count
    of its unit, an address's 32 bits), for tools that want the number."""
    out = []
    for node in nodes(p.expr):
        if isinstance(node, Const) and node.unit is not None:
            out.append({"text": render(node), "value": int(node.value), "unit": node.unit})
        elif isinstance(node, Const) and node.kind == "ipv4":
            out.append({"text": render(node), "value": int(node.value), "prefix": node.prefix})
    return out
