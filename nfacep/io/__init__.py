"""Tuple files: CSV, Parquet files and folders read into typed columns
(:mod:`~nfacep.io.tuples`)."""
