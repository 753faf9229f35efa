"""The four seed experiments, each runnable with one command (see README.md here)::

    python -m bench.experiments dead-tuples          # seed 003: dead tuples, index killing
    python -m bench.experiments syncscan-staggered   # seed 001: synchronized scans
    python -m bench.experiments parallel-readahead   # seed 002: parallel scan vs read-ahead
    python -m bench.experiments syncscan-parallel    # seed 000: syncscan with chunked scans
    python -m bench.experiments all

Each writes ``bench/out/<name>.md`` (markdown tables, the scaling chosen, the seed's figures
beside minidb's as ratios) and ``bench/out/<name>.png``, and prints the markdown.  In
Python each module's ``run(...)`` returns a ``common.Report`` whose ``data`` holds every
figure (the tests under ``tests/experiments`` read its counters).
"""

EXPERIMENTS = {
    "dead-tuples": "bench.experiments.dead_tuples",
    "syncscan-staggered": "bench.experiments.syncscan_staggered",
    "parallel-readahead": "bench.experiments.parallel_readahead",
    "syncscan-parallel": "bench.experiments.syncscan_parallel",
}
