"""``compute_parallel_workers``, the planner's rule for the number of workers of a parallel
scan: its last piece here (the parallel scan itself is ``minidb.exec.gather`` and
``minidb.exec.parallel_scan``); it moves to the SQL planner."""

from __future__ import annotations


def compute_parallel_workers(nblocks: int, settings) -> int:
    """PostgreSQL's compute_parallel_worker for a table: none below
    ``min_parallel_table_scan_size``, then one more each time the table triples, capped
    by ``max_parallel_workers_per_gather``.  For the planner."""
    threshold = settings.min_parallel_table_scan_size
    if nblocks < threshold:
        return 0
    t = max(threshold, 1)
    workers = 1
    while nblocks >= t * 3:
        workers += 1
        t *= 3
    return min(workers, settings.max_parallel_workers_per_gather)
