"""The query language, the compiler's front end: text → :mod:`~nfacep.lang.syntax` (the
only lark importer, grammar in ``grammar.lark``) → :mod:`~nfacep.lang.ast` →
:mod:`~nfacep.lang.check` (names and types) → the checked program (:mod:`nfacep.schema`), whose
DEFINEs are :mod:`~nfacep.lang.predicates` over the field types of :mod:`~nfacep.lang.types`."""
