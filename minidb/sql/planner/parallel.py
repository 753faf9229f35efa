"""Parallel plans: how many workers a scan gets, and the one parallel plan minidb makes -
Finalize Aggregate -> Gather -> Partial Aggregate -> Parallel Seq Scan for a plain
aggregate of one table (see ``minidb.exec.gather``; PostgreSQL's allpaths.c
compute_parallel_worker and planner.c create_partial_grouping_paths, small).

Workers (``compute_parallel_workers``): none below ``min_parallel_table_scan_size``, then
one more each time the table triples, capped by ``max_parallel_workers_per_gather``.

The plan is made only for count / sum / avg / min / max of fixed-width columns of the
scanned table (sums and averages of integers only: a float sum would depend on the order
the participants add), without GROUP BY, HAVING, DISTINCT, ORDER BY, LIMIT or FOR UPDATE,
and with every filter clause naming the table.  Its cost: the scan's CPU divided among
the participants (the leader counting as ``1 - 0.3 x workers`` of one when
``parallel_leader_participation``), the pages read once, plus ``parallel_setup_cost`` and
``parallel_tuple_cost`` per partial row passed up; it replaces the serial aggregate only
when cheaper, as PostgreSQL's add_path keeps the cheaper.
"""

from __future__ import annotations

from minidb.exec import expr as X
from minidb.exec.datatypes import family
from minidb.exec.scan import SeqScanNode
from minidb.sql.planner.costs import clamp, ops_list, type_width

__all__ = ["compute_parallel_workers", "ParallelPaths"]


def compute_parallel_workers(nblocks: int, settings) -> int:
    """PostgreSQL's compute_parallel_worker for a table of ``nblocks`` pages."""
    threshold = settings.min_parallel_table_scan_size
    if nblocks < threshold:
        return 0
    t = max(threshold, 1)
    workers = 1
    while nblocks >= t * 3:
        workers += 1
        t *= 3
    return min(workers, settings.max_parallel_workers_per_gather)


def _partial_agg_specs(b, scan):
    """The aggregates of ``b`` as the partial aggregate computes them - (name, position
    of the argument among the scan's columns, None for count(*)) - or None when the
    statement or its scan is outside what the parallel plan covers."""
    entry = scan.entry
    attnos = list(scan.attnos)
    if not all(entry.columns[a][1].fixed for a in attnos):
        return None             # string columns: the scan would hand them over raw
    for q in scan.quals:
        if not any(k[0] == entry.index for k in X.column_keys(q)):
            return None         # a constant condition: keep it simple, run serially
        if X.has_sublink(q):
            return None         # a subquery or outer reference: the leader's only
    if b.windows or b.srfs or b.distinct_on:
        return None
    specs = []
    for a in b.aggs:
        if a.name not in ("count", "sum", "avg", "min", "max") or a.filter is not None \
                or a.extra or a.order:
            return None
        if a.distinct or a.name not in ("count", "sum", "avg", "min", "max"):
            return None
        if a.arg is None:
            if a.name != "count":
                return None
            specs.append(("count", None))
            continue
        if not (isinstance(a.arg, X.ColRef) and a.arg.key[0] == entry.index
                and a.arg.key[1] in attnos):
            return None
        if a.name != "count" and family(a.arg.type) != "int":
            return None         # float sums depend on the order; keep them serial
        specs.append((a.name, attnos.index(a.arg.key[1])))
    return specs


class ParallelPaths:
    """The ``Planner``'s method for the parallel aggregate."""

    def _parallel_agg(self, b, scan):
        """Finalize Aggregate -> Gather -> Partial Aggregate -> Parallel Seq Scan for a
        plain aggregate of one table scanned by ``scan``, or None: the serial plan."""
        s = self.settings
        if (len(b.rtable) != 1 or b.rtable[0].kind != "table" or b.group_by or b.having is not None or b.distinct
                or b.order_by or b.for_update or b.limit is not None or b.offset is not None
                or not b.aggs or type(scan) is not SeqScanNode or scan.need_tids
                or s.max_parallel_workers_per_gather <= 0):
            return None
        entry = scan.entry
        nblocks = self._nblocks(entry.table.relfilenode)
        if nblocks < s.min_parallel_table_scan_size:
            return None
        nworkers = compute_parallel_workers(nblocks, s)
        if nworkers <= 0:
            return None
        specs = _partial_agg_specs(b, scan)
        if specs is None:
            return None
        from minidb.exec.gather import (FinalizeAggNode, GatherNode, ParallelSeqScanNode,
                                        PartialAggNode)
        coc, ctc = s.cpu_operator_cost, s.cpu_tuple_cost
        divisor = float(nworkers)
        if s.parallel_leader_participation:
            divisor += max(0.0, 1.0 - 0.3 * nworkers)
        ops = ops_list(scan.quals)
        br = self._single[0]
        pscan = ParallelSeqScanNode(scan)
        pscan.set_cost(0.0, br.pages * s.seq_page_cost + br.tuples * (ctc + ops * coc) / divisor,
                       clamp(scan.rows / divisor), scan.width)
        width = sum(type_width(a.type) for a in b.aggs)
        naggs = max(1, len(b.aggs))
        partial = PartialAggNode(pscan, b.aggs)
        pstart = pscan.total_cost + pscan.rows * coc * naggs
        partial.set_cost(pstart, pstart + ctc, 1, width)
        gather = GatherNode(partial, nworkers)
        gather.set_cost(partial.startup_cost + s.parallel_setup_cost,
                        partial.total_cost + s.parallel_setup_cost
                        + s.parallel_tuple_cost * (nworkers + 1), nworkers + 1, width)
        fin = FinalizeAggNode(gather, b.aggs, specs)
        fstart = gather.total_cost + (nworkers + 1) * coc * naggs
        fin.set_cost(fstart, fstart + ctc, 1, width)
        self._t(f"parallel aggregate on {entry.alias}: {nworkers} workers, "
                f"cost={fin.total_cost:.2f}")
        return fin
