"""ANALYZE and the row estimates the planner makes from what it stored (PostgreSQL's
analyze.c, selfuncs.c and plancat.c's estimate_rel_size, simplified).

ANALYZE (``analyze_table``):

  1. count the rows the statement's snapshot sees (a sequential scan fetching no column:
     visibility only) -> ``reltuples``; the file's length -> ``relpages``;
  2. draw a Bernoulli sample of at most 300 x ``default_statistics_target`` visible rows
     (PostgreSQL's sample size) in a second scan: the scan's visibility filter is wrapped
     so that it also drops rows at random before any column is gathered; the generator is
     seeded by the table's oid, so the same table gives the same statistics;
  3. per column: ``null_frac``; ``avg_width`` (bytes of the stored value); ``n_distinct``
     (the Haas-Stokes "Duj1" estimator PostgreSQL uses, stored as a negative fraction of
     the rows when it scales with the table, as in ``pg_stats``); up to
     ``default_statistics_target`` most common values with their frequencies (values
     seen at least twice and 25% more often than average); an equi-depth histogram of
     the other values; ``correlation`` between physical order and value order.

Estimates (``Estimator``), all PostgreSQL's rules and defaults:

=======================  =================================================  ============
clause                   with statistics                                    without
=======================  =================================================  ============
col = const              MCV frequency, else the non-MCV remainder          0.005
                         spread over the other distinct values;             (1/rows on a
                         a generic parameter: 1 / n_distinct                 unique column)
col <> const             1 - (col = const) - null_frac                      0.995
col < > <= >= const      MCVs that satisfy + the histogram fraction below   1/3
                         (linear inside a bucket)
lo < col < hi (one col)  sel(< hi) + sel(> lo) - 1                          0.005
col IS [NOT] NULL        null_frac / 1 - null_frac                          0.005
LIKE, other              0.005 (DEFAULT_MATCH_SEL); 1/3 for an inequality on an expression
AND / OR / NOT           s1 s2 / s1 + s2 - s1 s2 / 1 - s
a.x = b.y (join)         1 / max(n_distinct(a.x), n_distinct(b.y))           1/200
=======================  =================================================  ============

Relation size (``rel_size``): the tuples of a table are ``reltuples / relpages`` (its
density when last measured) times its *current* number of pages, so estimates follow a
table that grew since; a table never measured is assumed 10 pages if smaller, with as
many rows as fit at its columns' width (estimate_rel_size).
"""

from __future__ import annotations

import math

import numpy as np

from minidb.config import BLCKSZ
from minidb.exec import expr as X
from minidb.exec.datatypes import family
from minidb.heap import pgstat
from minidb.heap.heapam import HeapScan
from minidb.heap.mvcc import MVCCFilter, seq_scan
from minidb.heap.prune import PagePruner

__all__ = ["analyze_table", "Estimator", "rel_size", "estimated_rows", "column_width",
           "table_width", "DEFAULT_EQ_SEL", "DEFAULT_INEQ_SEL",
           "DEFAULT_RANGE_INEQ_SEL", "DEFAULT_MATCH_SEL", "DEFAULT_NUM_DISTINCT"]

DEFAULT_EQ_SEL = 0.005
DEFAULT_INEQ_SEL = 1.0 / 3.0
DEFAULT_RANGE_INEQ_SEL = 0.005
DEFAULT_MATCH_SEL = 0.005
DEFAULT_UNK_SEL = 0.005
DEFAULT_NUM_DISTINCT = 200
_TUPLE_OVERHEAD = 40 + 4   # tuple header (t_hoff) + line pointer
_PAGE_HEADER = 24


# ---------------------------------------------------------------------------------------------
# ANALYZE
def analyze_table(backend, table: str, snapshot) -> dict:
    """Measure ``table`` and store its statistics in the catalog; returns a summary."""
    catalog = backend.catalog
    tdef = catalog.table(table)
    rel = catalog.heap_rel(table)
    prune = PagePruner(backend, rel)
    # 1. visible rows
    scan = seq_scan(backend, rel, [], snapshot, prepare_pages=prune)
    total = 0
    for b in scan:
        total += len(b)
    seen = scan.heap_scan.tuples_seen
    nblocks = scan.heap_scan.nblocks
    # 2. sample
    target = 300 * backend.settings.default_statistics_target
    p = 1.0 if total <= target else target / total
    rng = np.random.default_rng(tdef.oid)
    mvcc = MVCCFilter(backend.bufmgr, snapshot, backend.instance.clog)

    def sample_filter(views, starts, bufs):
        vis = mvcc(views, starts, bufs)
        if p < 1.0:
            vis = vis & (rng.random(len(starts)) < p)
        return vis

    ncols = len(tdef.columns)
    hs = HeapScan(backend, rel, list(range(ncols)), tuple_filter=sample_filter,
                  prepare_pages=prune)
    parts = [[] for _ in range(ncols)]
    nsample = 0
    for batch in hs:
        nsample += len(batch)
        for i, col in enumerate(batch.columns):
            parts[i].append(col)
    stats = {}
    for i, c in enumerate(tdef.columns):
        t = rel.layout.columns[i].type
        if parts[i]:
            vals = np.concatenate([v for v, _ in parts[i]])
            mask = np.concatenate([m if m is not None else np.zeros(len(v), bool)
                                   for v, m in parts[i]])
        else:
            vals, mask = np.empty(0), np.empty(0, bool)
        stats[c.name] = _column_stats(vals, mask, t, total, backend.settings
                                      .default_statistics_target)
    catalog.set_column_stats(table, nblocks, total, stats)
    inst = backend.instance
    pgstat.set_live_dead(inst.seg, inst.locks.stats, tdef.oid, total, max(0, seen - total),
                         vacuum=False)
    return {"table": table, "pages": nblocks, "rows": total, "sampled": nsample,
            "dead": max(0, seen - total)}


def _column_stats(vals, mask, t, total: int, target: int) -> dict:
    n = len(vals)
    nn = int(np.count_nonzero(~mask)) if n else 0
    out = {"null_frac": float(1 - nn / n) if n else 0.0}
    f = family(t)
    if not t.fixed:
        v = vals[~mask] if n else vals
        out["avg_width"] = float(np.mean([len(s.encode()) if isinstance(s, str) else
                                          len(s) if isinstance(s, bytes) else len(str(s))
                                          for s in v]) + 1) if len(v) else \
            (t.length + 1 if t.length else 32.0)
    else:
        out["avg_width"] = float(t.size)
    if nn == 0:
        out.update(n_distinct=0.0, mcv=[], mcv_freq=[], histogram=[], correlation=0.0)
        return out
    v = vals[~mask]
    if f in _STAT_FORM:
        conv = _STAT_FORM[f]
        v = np.array([conv(x) for x in v], dtype=np.float64 if f in ("num", "interval")
                     else object)
    if f == "text" and t.name == "char":
        v = np.array([s.rstrip(" ") for s in v], dtype=object)
    if f == "bool":
        v = v.astype(np.int64)
    uniq, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    d = len(uniq)
    f1 = int(np.count_nonzero(counts == 1))
    rows_nn = total * (nn / n)
    if n == total or total <= 0:
        nd = float(d)
    elif f1 == nn:
        nd = rows_nn                      # every sampled value unique: as many as rows
    else:
        nd = nn * d / (nn - f1 + f1 * nn / max(rows_nn, 1))
        nd = min(max(nd, d), rows_nn)
    if rows_nn > 0 and nd > 0.1 * rows_nn:
        nd = -min(nd / max(total, 1), 1.0)   # scales with the table (pg_stats convention)
    out["n_distinct"] = float(nd)
    # most common values
    avg = nn / d
    order = np.argsort(-counts, kind="stable")
    mcv_idx = [k for k in order[:target].tolist() if counts[k] >= 2 and counts[k] > 1.25 * avg]
    if d <= target and nd > 0 and (n == total or counts.min() >= 2):
        # few distinct values, none rare: every value is an MCV (analyze.c's rule)
        mcv_idx = order[:target].tolist()
    out["mcv"] = [_py(uniq[k]) for k in mcv_idx]
    out["mcv_freq"] = [float(counts[k] / n) for k in mcv_idx]
    # histogram of the rest
    rest = np.ones(d, bool)
    rest[mcv_idx] = False
    if f == "bool":
        out["histogram"] = []
    else:
        keep = rest[inverse]
        hv = np.sort(v[keep]) if keep.any() else v[:0]
        if len(np.unique(hv)) >= 2:
            nb = min(target, len(hv) - 1)
            idx = np.round(np.linspace(0, len(hv) - 1, nb + 1)).astype(np.int64)
            out["histogram"] = [_py(x) for x in hv[idx]]
        else:
            out["histogram"] = []
    # correlation of physical position and value order
    if d > 1 and f != "bool":
        ranks = inverse.astype(np.float64)
        pos = np.arange(len(ranks), dtype=np.float64)
        c = np.corrcoef(pos, ranks)[0, 1]
        out["correlation"] = float(0.0 if math.isnan(c) else c)
    else:
        out["correlation"] = 1.0
    return out


def _py(x):
    return x.item() if isinstance(x, np.generic) else x


# ---------------------------------------------------------------------------------------------
# size of a relation
def rel_size(tdef, nblocks: int, width: float) -> tuple[int, float]:
    """(pages, tuples) the planner assumes for a table of ``nblocks`` pages now."""
    curpages = nblocks
    if curpages < 10 and tdef.relpages == 0:
        curpages = 10            # never measured: it may have grown since (plancat.c)
    return curpages, estimated_rows(tdef, curpages, width)


def estimated_rows(tdef, nblocks: int, width: float | None = None) -> float:
    """The rows a table of ``nblocks`` pages holds now by its statistics: the density of its
    last VACUUM or ANALYZE (reltuples / relpages) times its pages, or, never measured, as
    many rows as fit in a page at its columns' width (``table_width`` when ``width`` is
    None).  Without the planner's ten-page floor: what ``\\dt`` and ``describe_tables`` show."""
    if nblocks == 0:
        return 0.0
    if tdef.reltuples >= 0 and tdef.relpages > 0:
        density = tdef.reltuples / tdef.relpages
    else:
        if width is None:
            width = table_width(tdef)
        density = (BLCKSZ - _PAGE_HEADER) / (_TUPLE_OVERHEAD + int(math.ceil(width)))
    return float(round(density * nblocks))


def column_width(sqltype, stats: dict | None) -> float:
    """Average bytes of a column's value: ANALYZE's avg_width, else the type's size, else
    PostgreSQL's guess for a bounded varchar, else 32."""
    if stats and "avg_width" in stats:
        return stats["avg_width"]
    if sqltype.fixed:
        return float(sqltype.size)
    if sqltype.length:
        n = sqltype.length
        return float(n + 1 if n <= 32 else 32 + (n - 32) / 2)
    return 32.0


def table_width(tdef) -> float:
    """A row's width: the sum of its columns' (``column_width``)."""
    from minidb.types import parse_type
    stats = tdef.column_stats or {}
    return sum(column_width(parse_type(c.type), stats.get(c.name)) for c in tdef.columns)


# ---------------------------------------------------------------------------------------------
# selectivity
class RelStats:
    """What the planner knows of one range-table entry's columns."""

    def __init__(self, entry, rows: float, unique_cols: set):
        self.entry = entry
        self.rows = rows
        self.stats = entry.table.column_stats or {}
        self.unique_cols = unique_cols     # attnos alone in some unique index

    def col(self, attno: int) -> dict | None:
        return self.stats.get(self.entry.columns[attno][0])

    def n_distinct(self, attno: int) -> tuple[float, bool]:
        """(estimated distinct values, whether it is a default guess)."""
        if attno in self.unique_cols:
            return max(self.rows, 1.0), False
        st = self.col(attno)
        if st is None or "n_distinct" not in st:
            return float(min(DEFAULT_NUM_DISTINCT, max(self.rows, 1.0))) \
                if self.rows < DEFAULT_NUM_DISTINCT else float(DEFAULT_NUM_DISTINCT), True
        nd = st["n_distinct"]
        if nd < 0:
            nd = -nd * self.rows
        return max(nd, 1.0), False

    def width(self, attno: int) -> float:
        return column_width(self.entry.columns[attno][1], self.col(attno))


class Estimator:
    """Selectivity of conditions over the relations of one query."""

    def __init__(self, relstats: dict):
        self.rs = relstats                  # range index -> RelStats

    def _var(self, e):
        """(RelStats, attno) if ``e`` is a base column (possibly char-trimmed)."""
        if isinstance(e, X.Func) and e.name == "rtrim_char":
            e = e.args[0]
        if isinstance(e, X.ColRef) and isinstance(e.key, tuple) and isinstance(e.key[0], int):
            rs = self.rs.get(e.key[0])
            if rs is not None:
                return rs, e.key[1]
        return None

    def selectivity(self, e) -> float:
        s = self._sel(e)
        return float(min(max(s, 0.0), 1.0))

    def clauses(self, quals) -> float:
        """Selectivity of AND-ed conditions, with range pairs on one column combined."""
        ranges: dict = {}
        s = 1.0
        for q in quals:
            r = self._range_part(q)
            if r is not None:
                key, side, sel = r
                ranges.setdefault(key, {}).setdefault(side, []).append(sel)
                continue
            s *= self.selectivity(q)
        for key, sides in ranges.items():
            if "lo" in sides and "hi" in sides:
                lo, hi = min(sides["lo"]), min(sides["hi"])
                if lo == DEFAULT_INEQ_SEL and hi == DEFAULT_INEQ_SEL:
                    s *= DEFAULT_RANGE_INEQ_SEL
                else:
                    comb = hi + lo - 1.0
                    s *= comb if comb > 0 else 1e-4
            else:
                for v in sides.values():
                    for x in v:
                        s *= x
        return float(min(max(s, 0.0), 1.0))

    def _range_part(self, q):
        if not isinstance(q, X.Compare) or q.op not in ("<", "<=", ">", ">="):
            return None
        v = self._var(q.left)
        other, op = q.right, q.op
        if v is None:
            v = self._var(q.right)
            other = q.left
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        if v is None or X.column_keys(other):
            return None
        side = "hi" if op in ("<", "<=") else "lo"
        return (v[0].entry.index, v[1]), side, self.selectivity(q)

    def _sel(self, e) -> float:
        if isinstance(e, X.BoolOp):
            sels = [self._sel(a) for a in e.args]
            if e.op == "and":
                return self.clauses(e.args)
            out = 0.0
            for s in sels:
                out = out + s - out * s
            return out
        if isinstance(e, X.Not):
            return 1.0 - self._sel(e.arg)
        if isinstance(e, X.Const):
            return 1.0 if e.value else 0.0
        if isinstance(e, X.IsNull):
            v = self._var(e.arg)
            if v is None:
                return 1 - DEFAULT_UNK_SEL if e.negated else DEFAULT_UNK_SEL
            st = v[0].col(v[1])
            nf = st["null_frac"] if st else DEFAULT_UNK_SEL
            if not st and v[0].entry.not_null[v[1]]:
                nf = 0.0
            return 1 - nf if e.negated else nf
        if isinstance(e, X.Compare):
            return self._compare(e)
        if isinstance(e, X.InList):
            s = sum(self._compare(X.Compare("=", e.arg, i)) for i in e.items)
            s = min(s, 1.0)
            return 1 - s if e.negated else s
        if isinstance(e, X.Like):
            return 1 - DEFAULT_MATCH_SEL if e.negated else DEFAULT_MATCH_SEL
        if isinstance(e, X.ColRef) and e.type.name == "boolean":
            v = self._var(e)
            if v is not None:
                st = v[0].col(v[1])
                if st and st.get("mcv"):
                    for val, fr in zip(st["mcv"], st["mcv_freq"]):
                        if val in (1, True):
                            return fr
                    return max(0.0, (1 - st["null_frac"] - sum(st["mcv_freq"])))
            return 0.5
        return 0.5 if e.type.name == "boolean" else DEFAULT_UNK_SEL

    def _compare(self, e: X.Compare) -> float:
        op = e.op
        lv, rv = self._var(e.left), self._var(e.right)
        if lv is not None and rv is not None and lv[0] is not rv[0]:
            if op == "=":
                nd1, _ = lv[0].n_distinct(lv[1])
                nd2, _ = rv[0].n_distinct(rv[1])
                return 1.0 / max(nd1, nd2, 1.0)
            return DEFAULT_INEQ_SEL if op != "<>" else 1 - DEFAULT_EQ_SEL
        var, other = (lv, e.right) if lv is not None else (rv, e.left)
        if lv is None and rv is not None:
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if var is None or X.column_keys(other):
            if op == "=":
                return DEFAULT_EQ_SEL
            if op == "<>":
                return 1 - DEFAULT_EQ_SEL
            return DEFAULT_INEQ_SEL
        rs, attno = var
        known, value = _const_value(other)
        if op in ("=", "<>"):
            s = self._eq(rs, attno, known, value)
            if op == "<>":
                st = rs.col(attno)
                nf = st["null_frac"] if st else 0.0
                return max(0.0, 1.0 - s - nf)
            return s
        return self._ineq(rs, attno, op, known, value)

    def _eq(self, rs, attno, known, value) -> float:
        if known and value is None:
            return 0.0
        st = rs.col(attno)
        if attno in rs.unique_cols:
            return 1.0 / max(rs.rows, 1.0)
        if st is None:
            return DEFAULT_EQ_SEL
        nd, _ = rs.n_distinct(attno)
        mcv, freq = st.get("mcv", []), st.get("mcv_freq", [])
        if known:
            value = _norm(value, rs.entry.columns[attno][1])
            for v, fr in zip(mcv, freq):
                if v == value:
                    return fr
            rest = 1.0 - st["null_frac"] - sum(freq)
            others = nd - len(mcv)
            s = rest / others if others >= 1 else rest
            return max(min(s, 1.0), 0.0) if mcv else max(min((1 - st["null_frac"]) / nd, 1.0), 0)
        return max(min((1.0 - st["null_frac"]) / nd, 1.0), 0.0)

    def _ineq(self, rs, attno, op, known, value) -> float:
        st = rs.col(attno)
        if st is None or not known or value is None:
            return DEFAULT_INEQ_SEL if (not known or st is None) else 0.0
        value = _norm(value, rs.entry.columns[attno][1])
        below = op in ("<", "<=")
        incl = op in ("<=", ">=")
        mcv, freq = st.get("mcv", []), st.get("mcv_freq", [])
        try:
            mcv_part = sum(fr for v, fr in zip(mcv, freq)
                           if ((v < value) or (incl and v == value)) and below
                           or ((v > value) or (incl and v == value)) and not below)
        except TypeError:
            return DEFAULT_INEQ_SEL
        hist = st.get("histogram") or []
        rest = max(0.0, 1.0 - st["null_frac"] - sum(freq))
        if len(hist) >= 2:
            frac = _hist_fraction(hist, value)
            hsel = frac if below else 1.0 - frac
        else:
            hsel = DEFAULT_INEQ_SEL if rest > 0 else 0.0
        return mcv_part + hsel * rest


def _const_value(e):
    """(known, python value in vector representation) of a pseudo-constant."""
    if isinstance(e, X.Const):
        from minidb.exec.datatypes import to_repr
        return True, to_repr(e.value, e.type)
    if isinstance(e, X.Cast) and isinstance(e.arg, X.Const):
        return False, None
    return False, None


def _norm(value, t):
    if family(t) == "bool":
        return int(bool(value))
    if family(t) in _STAT_FORM:
        return _STAT_FORM[family(t)](value)
    return value


def _interval_seconds(v) -> float:
    return ((v.months * 30 + v.mdays) * 86_400_000_000 + v.usecs) / 1e6


# Values of object-vector types kept in statistics in a form JSON holds and that sorts as
# they do: numeric as a double, interval as its span in seconds, bytea as hex (memcmp
# order), uuid as its text; a constant compared against them is mapped the same way (_norm)
_STAT_FORM = {"num": float, "interval": _interval_seconds, "bytea": lambda b: bytes(b).hex(),
              "uuid": str}


def _hist_fraction(hist, value) -> float:
    """Fraction of the histogram's population below ``value`` (linear within a bucket)."""
    nb = len(hist) - 1
    try:
        if value <= hist[0]:
            return 0.0
        if value >= hist[-1]:
            return 1.0
    except TypeError:
        return DEFAULT_INEQ_SEL
    lo, hi = 0, nb
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hist[mid] <= value:
            lo = mid
        else:
            hi = mid
    a, b = hist[lo], hist[hi]
    inner = 0.5
    if isinstance(value, (int, float)) and isinstance(a, (int, float)) and b != a:
        inner = (value - a) / (b - a)
    return (lo + min(max(inner, 0.0), 1.0)) / nb
