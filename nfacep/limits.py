"""The limits shared by the stages: what one query file, one parse and one engine may hold.

A leaf module (it imports nothing of nfacep), as Amaranth's ``hdl/_time.py`` is, so that the
parser, the NFA builder and the engine parameters read the same numbers without importing each
other.
"""

from __future__ import annotations

__all__ = [
    "CHUNK",
    "FIRST_PIECE",
    "MAX_ERRORS",
    "MAX_FILE_BYTES",
    "MAX_FILE_STATES",
    "MAX_INT_LITERAL",
    "MAX_KEY_BITS",
    "MAX_NESTING",
    "MAX_PREDICATES",
    "MAX_PREV",
    "MAX_STATES",
    "MAX_TOKENS",
    "MAX_WIRES",
]

# --- a query file ------------------------------------------------------------------------------

#: Largest query file read, in bytes (far more than MAX_TOKENS tokens need).
MAX_FILE_BYTES = 1 << 20

#: Deepest nesting accepted, like regex-syntax's nest limit: parentheses (counted on the
#: lexer's tokens, so comments and strings do not count) and the levels of a pattern or
#: condition (every operator inside another: NOT, unary minus, each '+' or '-' of a chain,
#: quantifiers, PERMUTE). Deeper input is rejected while parsing, so that no later pass, all of
#: which walk the tree recursively, can overflow the stack.
MAX_NESTING = 100

#: Most tokens (names, numbers, operators, punctuation) in one file, comments excluded: keeps
#: checking any accepted file well under a second.
MAX_TOKENS = 20_000

#: Most errors looked for in one file: parsing, and checking, stop at the next, and the errors
#: found are reported (the first SHOWN_ERRORS in full, nfacep.errors).
MAX_ERRORS = 100

#: Largest magnitude of an integer literal. Fields are at most 64 bits; a larger constant can
#: only matter in a sum of very many fields.
MAX_INT_LITERAL = (1 << 128) - 1

#: Most tuples back that ``PREV(field, k)`` reads (``k`` from 1 to it): each partition keeps
#: that many values of the field, in the gateware in its entry of the partition store.
MAX_PREV = 8

# --- a tuple file ------------------------------------------------------------------------------

#: Tuples a back-end that takes the stream in pieces gets at a time from a file: some
#: tens of MB of columns, and few enough pieces for the per-piece costs not to matter
#: (benchmarks/reference_memory.py: 1M tuples a piece was as fast as 4M, in less memory).
CHUNK = 1 << 20

#: The first piece of such a stream: the pieces then double up to the chunk, so that matching
#: starts while the rest of the file is read (benchmarks/csv_read.py); a stream this short is
#: one piece.
FIRST_PIECE = 1 << 16

# --- one engine --------------------------------------------------------------------------------

#: NFA state bits of one engine, all its queries together.
MAX_STATES = 4096
#: Distinct predicates (decoder outputs) of one engine.
MAX_PREDICATES = 4096
#: Width of the partition key.
MAX_KEY_BITS = 64

#: Activation wires of one engine, all its queries together: each is an input of a state's OR
#: in the gateware (the '1' of a start state included). Keeps wiring fast and its memory small;
#: an engine near the limit is already far beyond the largest FPGA boards nfacep targets.
MAX_WIRES = 1 << 20

#: NFA states of one file's queries together, for the software model (``check``, ``match``):
#: sixteen times what the gateware takes (:data:`MAX_STATES`), so that a file of many big
#: queries is refused before its states are made rather than after seconds of work.
MAX_FILE_STATES = 16 * MAX_STATES
