"""Parallel workers: the process pool and the parallel sequential scan (see README.md)."""

from minidb.workers.pscan import (Aggregate, GatherStats, ParallelSeqScan, ParticipantStats,
                                  RowBatch, parallel_seq_scan)

__all__ = ["Aggregate", "GatherStats", "ParallelSeqScan", "ParticipantStats", "RowBatch",
           "parallel_seq_scan"]
