"""The software reference engine over one NFA: :mod:`~nfacep.reference.matcher` (the
``Reference`` back-end, the ``Matcher`` that runs in pieces), the subset-construction DFA
(:mod:`~nfacep.reference.dfa`), the partitioner's capacity model
(:mod:`~nfacep.reference.capacity`) and the numba loops (:mod:`~nfacep.reference.compiled`,
loaded by :mod:`~nfacep.reference.loops` on first use)."""
