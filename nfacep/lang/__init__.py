"""The query language, the compiler's front end: text → :mod:`~nfacep.lang.syntax` (grammar in
``grammar.lark``; with :mod:`~nfacep.lang.transform`, :mod:`~nfacep.lang.recovery` and
:mod:`~nfacep.lang.syntax_errors`, the only lark importers) → :mod:`~nfacep.lang.ast` →
:mod:`~nfacep.lang.check` (names in :mod:`~nfacep.lang.names`, types in
:mod:`~nfacep.lang.conditions`) → the checked program (:mod:`nfacep.schema`), whose
DEFINEs are :mod:`~nfacep.lang.predicates` over the field types of :mod:`~nfacep.lang.types`."""
