"""The four seed experiments and the WAL's demonstration, each runnable with one command
(see README.md here)::

    minidb experiment dead-tuples          # seed 003: dead tuples, index killing
    minidb experiment syncscan-staggered   # seed 001: synchronized scans
    minidb experiment parallel-readahead   # seed 002: parallel scan vs read-ahead
    minidb experiment syncscan-parallel    # seed 000: syncscan with chunked scans
    minidb experiment wal-checkpoints      # issue 14: full-page images after checkpoints
    minidb experiment all

Each writes ``minidb-results/<name>.md`` (markdown tables, the scaling chosen, the seed's figures
beside minidb's as ratios) and ``minidb-results/<name>.png``, and prints a short summary.  In
Python each module's ``run(...)`` returns a ``common.Report`` whose ``data`` holds every
figure (the tests under ``tests/experiments`` read its counters).
"""

EXPERIMENTS = {
    "dead-tuples": "minidb.experiments.dead_tuples",
    "syncscan-staggered": "minidb.experiments.syncscan_staggered",
    "parallel-readahead": "minidb.experiments.parallel_readahead",
    "syncscan-parallel": "minidb.experiments.syncscan_parallel",
    "wal-checkpoints": "minidb.experiments.wal_checkpoints",
}
