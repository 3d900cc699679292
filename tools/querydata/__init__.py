"""The data sets of the bundled queries (``queries/<name>.sql``), one module per query file, each
with its ``gen_<name>`` writing ``<name>.csv`` and ``<name>.planted.csv``; what they share is
:mod:`.common`. ``tools/generate_queries.py`` runs them and then the check against the oracle.
"""
