"""The software reference engine over one NFA: :mod:`~nfacep.reference.matcher` (the
``Reference`` back-end, the ``Matcher`` that runs in pieces), the predicate decoder and input
symbols (:mod:`~nfacep.reference.symbols`), the partition keys' codes
(:mod:`~nfacep.reference.keys`), PREV's history (:mod:`~nfacep.reference.history`), the
subset-construction DFA (:mod:`~nfacep.reference.dfa`), the partitioner's capacity model
(:mod:`~nfacep.reference.capacity`), the array operations over tuples grouped by partition
(:mod:`~nfacep.reference.lockstep`) and the numba loops (:mod:`~nfacep.reference.compiled`,
loaded by :mod:`~nfacep.reference.loops` on first use)."""
