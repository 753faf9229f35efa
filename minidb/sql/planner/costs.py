"""Cost formulas and size estimates shared by the planner's modules (PostgreSQL's
costsize.c, small).  Costs are in PostgreSQL's units, read from the settings object
itself (``seq_page_cost``, ``cpu_operator_cost`` ...: every one is marked ``plan=True``
in ``minidb.config``, so a cached plan is replanned when it changes).

``disable_cost`` (1e10) is added to a path whose ``enable_*`` setting is off, so it is
chosen only when nothing else is possible, exactly as in PostgreSQL.

The index scan cost is PostgreSQL's ``cost_index`` with ``btcostestimate``: descent (log2
of the entries, plus 50 operators per level), index pages in proportion to the selectivity
at ``random_page_cost`` each, entries at ``cpu_index_tuple_cost``; heap pages by the
Mackert-Lohman formula (``effective_cache_size``) between the uncorrelated cost (every page
random) and the correlated one (one random then sequential pages), interpolated by the
square of the column's correlation.
"""

from __future__ import annotations

import math

from minidb.exec import expr as X

__all__ = ["DISABLE_COST", "penalize", "ops", "ops_list", "clamp", "type_width",
           "pages_fetched", "index_cost"]

DISABLE_COST = 1.0e10
LEAF_FANOUT = 300          # entries per B-tree page, for the height estimate


def penalize(enabled: bool, startup: float, total: float) -> tuple[float, float]:
    """A path's costs with ``disable_cost`` added when its ``enable_*`` setting is off."""
    if enabled:
        return startup, total
    return startup + DISABLE_COST, total + DISABLE_COST


def ops(e) -> int:
    """Operators an expression evaluates (its cost in cpu_operator_cost units)."""
    if e is None:
        return 0
    n = 0
    for node in X.walk(e):
        if isinstance(node, (X.Arith, X.Compare, X.Neg, X.Concat, X.Like, X.Func, X.Cast,
                             X.InList, X.IsNull)):
            n += 1 if not isinstance(node, X.InList) else max(1, len(node.items))
    return n


def ops_list(qs) -> int:
    return sum(ops(q) for q in qs)


def clamp(rows: float) -> float:
    """PostgreSQL's clamp_row_est: at least one row, whole numbers."""
    return 1.0 if rows <= 1.0 else float(round(rows))


def type_width(t) -> float:
    """Average bytes of a value of type ``t`` when no statistics say better."""
    if getattr(t, "fixed", False):
        return float(t.size)
    if t.name in ("char", "varchar") and t.length:
        return float(t.length + 1 if t.length <= 32 else 32 + (t.length - 32) / 2)
    return 32.0


def pages_fetched(tuples: float, pages: int, ecs: int) -> float:
    """Mackert and Lohman's estimate of distinct heap pages read (index_pages_fetched)."""
    T = max(pages, 1)
    N = tuples
    b = ecs
    if T <= b:
        pf = (2.0 * T * N) / (2.0 * T + N)
        pf = min(pf, T)
    else:
        lim = (2.0 * T * b) / (2.0 * T - b)
        pf = (2.0 * T * N) / (2.0 * T + N) if N <= lim else b + (N - lim) * (T - b) / T
    return float(math.ceil(pf))


def index_cost(s, br, idef, ipages, sel, n_index_quals, filter_ops, loop_count=1.0):
    """(startup, total, tuples fetched) of an index scan of base relation ``br`` through
    index ``idef`` (``ipages`` pages) whose index clauses select ``sel`` of the rows;
    ``loop_count`` > 1: the inner side of a nested loop, its heap pages shared by the
    loops.  ``s``: the settings."""
    coc = s.cpu_operator_cost
    rpc = s.random_page_cost
    ecs = s.effective_cache_size
    T = max(br.pages, 1)
    N = max(br.tuples, 1.0)
    idx_pages = max(ipages - 1, 1)
    num_index_tuples = max(1.0, round(sel * N))
    num_index_pages = math.ceil(num_index_tuples * idx_pages / N)
    height = 0 if idx_pages <= 1 else max(1, math.ceil(math.log(idx_pages)
                                                       / math.log(LEAF_FANOUT)))
    startup = (math.ceil(math.log2(N)) if N > 1 else 0) * coc + (height + 1) * 50 * coc
    index_total = startup + num_index_pages * rpc + num_index_tuples * (
        s.cpu_index_tuple_cost + n_index_quals * coc)
    tuples_fetched = num_index_tuples
    pages_sel = math.ceil(sel * T)
    if loop_count > 1:
        pf = pages_fetched(tuples_fetched * loop_count, T, ecs) / loop_count
        max_io = pf * rpc
        min_io = (pages_sel * rpc) if pages_sel else 0.0
    else:
        pf = pages_fetched(tuples_fetched, T, ecs)
        max_io = pf * rpc
        min_io = rpc + (pages_sel - 1) * s.seq_page_cost if pages_sel >= 1 else 0.0
    corr = 0.0
    first = br.entry.attno(idef.columns[0])
    st = br.stats.col(first) if first >= 0 and not (
        getattr(idef, "exprs", None) and idef.exprs[0] is not None) else None
    if st is not None:
        corr = st.get("correlation", 0.0) or 0.0
    io = max_io + corr * corr * (min_io - max_io)
    cpu = tuples_fetched * (s.cpu_tuple_cost + filter_ops * coc)
    total = index_total + io + cpu
    startup, total = penalize(s.enable_indexscan, startup, total)
    return startup, total, tuples_fetched
