"""Spark testbench: regression vectors (tuples and expected matches) at scale.

Stages, each a module with one job:

- :mod:`nfacep.spark_testbench.generate`: schema- and predicate-aware tuple generation with planted
  pattern instances, deterministic per block (numpy only, no Spark);
- :mod:`nfacep.spark_testbench.session`: the one place Spark sessions are built, and master URL
checks; - :mod:`nfacep.spark_testbench.vectors`: the Spark jobs (generate, match with the reference
  matcher, write Parquet and the manifest, atomically);
- :mod:`nfacep.spark_testbench.regress`: simulate the gateware over vectors (one prebuilt model,
  shards of whole partition keys as Spark tasks) and check it against the expected matches;
- :mod:`nfacep.spark_testbench.cli`: the ``nfacep vectors`` and ``nfacep regress`` subcommands.

Importing this package does not import PySpark.
"""

#: Tuples per generation block: the unit of determinism (never derived from Spark's tasks).
BLOCK_TUPLES = 1 << 16
