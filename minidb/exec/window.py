"""WindowAgg: window functions over sorted input (PostgreSQL's nodeWindowAgg.c, computed
for the whole input at once).

The planner puts a Sort by (PARTITION BY keys, ORDER BY keys) below each WindowAgg, one
WindowAgg per distinct window (stacked, as PostgreSQL does).  The node reads all its
input, finds the partition boundaries and the peer groups (rows equal in the ORDER BY
keys; NULLs are peers of each other) by comparing neighbouring rows, and computes each
function for every row with array operations:

* row_number, rank, dense_rank, percent_rank, cume_dist, ntile - from the positions of
  the row, its partition's first row and its peer group's first and last rows;
* lag / lead (offset, default) - the row ``offset`` before / after within the partition;
* first_value, last_value, nth_value and the aggregates count, sum, avg, min, max - over
  each row's frame (``_frame_segments``), the default one without a frame clause: with
  ORDER BY, ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``; without, the whole
  partition.  Ranking functions and lag / lead ignore the frame, as in PostgreSQL.

Frames.  Each row's frame is computed as index bounds [fs, fe] into the sorted input,
clamped to the partition:
* ROWS: the row's position plus or minus the offset;
* GROUPS: peer groups are numbered (a cumulative sum of the peer-group starts); the bound
  is the first / last row of the group ``offset`` groups away (past the partition: empty);
* RANGE: CURRENT ROW is the first / last peer; an offset bound is the first (last) row of
  the partition whose key reaches key - offset (key + offset), in the sort direction.  The
  keys and the targets are ranked together (``np.unique``, so integers, doubles and
  numerics alike) and one ``searchsorted`` over (partition number, rank) finds every row's
  bound at once.  A NULL key's offset bounds are its peer group (the NULL rows); for a
  non-NULL key the NULLs count as beyond every value on their side of the sort (so
  ``1 FOLLOWING AND UNBOUNDED FOLLOWING`` takes in NULLS LAST rows, ``1 FOLLOWING AND
  2 FOLLOWING`` does not), as PostgreSQL's frame head and tail searches give.
EXCLUDE then cuts the frame into two ranges around the excluded rows (the current row, or
its peer group) plus, for TIES, the current row itself between them.  Functions read the
two ranges:
* count / sum / avg: prefix sums (``cumsum`` with a leading 0), read at both ends of each
  range - exact for integers (the running sums wrap modulo 2**64, their difference does
  not; a frame's sum past bigint is caught on a double estimate) and numerics.  Doubles:
  frames that all start at the partition's first row (the default frame) read a running
  sum kept per partition (``_running_sums``, a segmented scan); other frames are summed
  from aligned power-of-two block sums (``_block_sum``).  Either way a frame's rounding
  error is that of its partition's / its own values (a difference of one running sum
  over all rows would carry every earlier row's - 1e20 in one partition would wipe out
  the next one's sums).  PostgreSQL adds each
  frame's doubles afresh, left to right: the last bits may differ;
* min / max: the values' ranks (``np.unique``), maximum taken (minimum as the maximum of
  reversed ranks); a running ``maximum.accumulate`` when every range starts at the
  partition's first row (the default frame), else a sparse table - level j holds the
  maximum of 2**j rows, only as many levels as the longest frame needs - read with two
  overlapping lookups per range;
* first_value / last_value / nth_value: the position of the first / last / n-th row across
  the two ranges and the kept current row.
RANGE offsets are supported for integer, double and numeric keys, and for date,
timestamp and timestamptz keys with an interval (``_plus_interval``: months and days on
the calendar, timestamptz on the session's wall clock; a date is compared as its
midnight), and time keys with an interval (its time part only, no wrap at midnight, as
PostgreSQL's in_range for time).
"""

from __future__ import annotations

import datetime as _dtm

import numpy as np

import minidb.errors as errors
from minidb.exec import datatypes as dt
from minidb.exec import datetimes as dtx
from minidb.exec.chunk import Chunk
from minidb.exec.compile import evaluate
from minidb.exec.datatypes import VECTOR_DTYPE, VECTOR_FILL, family
from minidb.exec.expr import DEFAULT_FRAME, deparse
from minidb.exec.nodes import PlanNode

__all__ = ["WindowAggNode"]

_DT = VECTOR_DTYPE   # one definition: datatypes.VECTOR_DTYPE / VECTOR_FILL
_FILL = VECTOR_FILL


def _changes(cols, n) -> np.ndarray:
    """True where row i differs from row i-1 in any of ``cols`` (row 0: True)."""
    new = np.zeros(n, bool)
    if n:
        new[0] = True
    for v, m in cols:
        v = np.full(n, v) if np.ndim(v) == 0 else v
        if v.dtype.kind == "f":
            v = np.where(v == 0, 0.0, v)
        diff = np.asarray(v[1:] != v[:-1], dtype=bool)
        if m is not None:
            diff = (diff & ~m[1:] & ~m[:-1]) | (m[1:] != m[:-1])
        new[1:] |= diff
    return new


def _first_index(flag) -> np.ndarray:
    idx = np.arange(len(flag))
    return np.maximum.accumulate(np.where(flag, idx, 0))


def _last_index(flag) -> np.ndarray:
    """For each row, the last row of its group (groups start where ``flag``)."""
    n = len(flag)
    ends = np.zeros(n, bool)
    if n:
        ends[:-1] = flag[1:]
        ends[-1] = True
    idx = np.arange(n)
    rev = np.where(ends, idx, n)[::-1]
    return np.minimum.accumulate(rev)[::-1]


class WindowAggNode(PlanNode):
    label = "WindowAgg"

    def __init__(self, child, wins, keys):
        super().__init__([child], list(child.keys) + list(keys),
                         list(child.types) + [w.type for w in wins])
        self.wins = list(wins)
        self.win_keys = list(keys)

    def details(self, qualify):
        w = self.wins[0]
        out = []
        if w.partition:
            out.append("Partition By: " + ", ".join(deparse(p, qualify) for p in w.partition))
        if w.order:
            out.append("Order By: " + ", ".join(
                deparse(o, qualify) + (" DESC" if d else "") for o, d in zip(w.order,
                                                                             w.order_desc)))
        return out

    def execute(self, ectx):
        child = self.children[0]
        data = child.run_all(ectx)
        n = data.n
        if n == 0:
            return
        layout = child.layout()
        w0 = self.wins[0]
        pcols = [evaluate(ectx.compile(p, layout), data) for p in w0.partition]
        ocols = [evaluate(ectx.compile(o, layout), data) for o in w0.order]
        pflag = _changes(pcols, n)
        peerflag = pflag | _changes(ocols, n) if ocols else pflag.copy()
        ps = _first_index(pflag)
        pe = _last_index(pflag)
        if ocols:
            qs, qe = _first_index(peerflag), _last_index(peerflag)
        else:
            qs, qe = ps, pe                   # no ORDER BY: every row is a peer
        pid = np.cumsum(pflag) - 1
        ctx = (n, ps, pe, qs, qe, pid, peerflag, bool(ocols))
        cols = list(data.cols)
        for w in self.wins:
            args = [evaluate(ectx.compile(a, layout), data) for a in w.args]
            args = [(np.full(n, v) if np.ndim(v) == 0 else v, m) for v, m in args]
            cols.append(self._compute(w, args, ctx, (ectx, layout, data, ocols,
                                                     w0.order_desc, w0.order_nf,
                                                     [o.type for o in w0.order])))
        yield Chunk(cols, n)

    def _compute(self, w, args, ctx, finputs):
        n, ps, pe, qs, qe, pid, peerflag, ordered = ctx
        idx = np.arange(n)
        name = w.name
        if name == "row_number":
            return (idx - ps + 1).astype(np.int64), None
        if name == "rank":
            return (qs - ps + 1).astype(np.int64), None
        if name == "dense_rank":
            c = np.cumsum(peerflag)
            return (c - c[ps] + 1).astype(np.int64), None
        if name == "percent_rank":
            size = pe - ps + 1
            with np.errstate(all="ignore"):
                r = np.where(size > 1, (qs - ps) / np.maximum(size - 1, 1), 0.0)
            return r.astype(np.float64), None
        if name == "cume_dist":
            return ((qe - ps + 1) / (pe - ps + 1)).astype(np.float64), None
        if name == "ntile":
            v, m = args[0]
            if m is not None and m.any():
                raise errors.DataError("argument of ntile must be greater than zero",
                                       sqlstate="22014")
            buckets = np.asarray(v, dtype=np.int64)
            if np.any(buckets <= 0):
                raise errors.DataError("argument of ntile must be greater than zero",
                                       sqlstate="22014")
            size = pe - ps + 1
            pos = idx - ps
            q, r = size // buckets, size % buckets
            big = r * (q + 1)
            with np.errstate(all="ignore"):
                out = np.where(pos < big, pos // np.maximum(q + 1, 1),
                               r + (pos - big) // np.maximum(q, 1)) + 1
            return out.astype(np.int64), None
        f = family(w.type)
        if name in ("lag", "lead"):
            v, m = args[0]
            off = np.ones(n, np.int64)
            if len(args) > 1:
                ov, om = args[1]
                off = np.asarray(ov, dtype=np.int64)
                if om is not None:
                    off = np.where(om, 0, off)
            tgt = idx - off if name == "lag" else idx + off
            inside = (tgt >= ps) & (tgt <= pe)
            safe = np.where(inside, tgt, idx)
            vals = np.array(v[safe], dtype=_DT[f], copy=True)
            mask = (m[safe] if m is not None else np.zeros(n, bool)) & inside
            if len(args) > 2:
                dv, dm = args[2]
                vals[~inside] = np.asarray(dv, dtype=_DT[f])[~inside]
                mask[~inside] = False if dm is None else dm[~inside]
            else:
                vals[~inside] = _FILL[f]
                mask[~inside] = True
            if len(args) > 1 and args[1][1] is not None:
                mask |= args[1][1]
            return vals, (mask if mask.any() else None)
        # frame-aware functions: first_value, last_value, nth_value and the aggregates
        segs = _frame_segments(w.frame or DEFAULT_FRAME, ctx, finputs)
        return _frame_function(name, f, args, segs, n, pid, ps)
        raise errors.NotSupportedError(f"window function {name} is not supported")


# ---------------------------------------------------------------------------------------------
# frames
def _offset(e, ectx, layout, data, what, kind):
    """A frame offset (a constant expression: no variables) as one Python value."""
    v, m = evaluate(ectx.compile(e, layout), data)
    if m is not None and np.any(m):
        raise errors.DataError(f"frame {what} offset must not be null", sqlstate="22004")
    v = v if np.ndim(v) == 0 else v[0]
    v = v.item() if hasattr(v, "item") else v
    if v < (_dtm.timedelta(0) if isinstance(v, _dtm.timedelta) else 0):
        if kind == "range":
            raise errors.DataError("invalid preceding or following size in window function",
                                   sqlstate="22013")
        raise errors.DataError(f"frame {what} offset must not be negative", sqlstate="22013")
    return v


def _plus_interval(us, iv, up, kfam):
    """Timestamps (microseconds) plus or minus an interval, as timestamp + interval does
    (months and days on the calendar; timestamptz on the session's wall clock); a result
    past the timestamp range saturates, as PostgreSQL's in_range treats overflow."""
    sign = 1 if up else -1
    if iv.months == 0 and (iv.mdays == 0 or kfam != "tstz"):
        return us + sign * (iv.mdays * dtx.USECS_PER_DAY + iv.usecs)
    add = dtx.add_interval_tstz if kfam == "tstz" else dtx.add_interval_ts
    out = np.empty(len(us), np.int64)
    for i, x in enumerate(us.tolist()):
        try:
            out[i] = add(x, iv, sign)
        except errors.DataError:
            out[i] = np.iinfo(np.int64).max if up else np.iinfo(np.int64).min
    return out


def _range_search(key, km, pid, desc, nulls_first, targets, side, qs, qe, which):
    """RANGE offset bounds: for each row, the first row of its partition whose ORDER BY key
    reaches ``targets`` (side "left": key >= target in the sort direction) or the last row
    whose key does not pass it (side "right": key <= target).  NULL keys sit where the
    sort put them, beyond every value (NULLS LAST) or before it (NULLS FIRST), so an
    unbounded end still takes them in, as PostgreSQL's frame head / tail search does; a
    NULL row's own offset bounds are its peer group.  One ``searchsorted`` over
    (partition, rank in the sort direction) serves every partition: the keys and the
    targets are ranked together, so any type ``np.unique`` orders works."""
    n = len(key)
    nn = np.flatnonzero(~km) if km is not None else np.arange(n)
    both = np.concatenate([np.asarray(key[nn], dtype=object if key.dtype == object
                                      else key.dtype), np.asarray(targets[nn])])
    _, rank = np.unique(both, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    r = int(rank.max()) + 1 if len(rank) else 1
    if desc:
        rank = (r - 1) - rank
    kr, tr = rank[:len(nn)], rank[len(nn):]
    # rank + 1 in 1..r for values; NULLs 0 (first) or r + 1 (last): the rows' sort order
    allr = np.full(n, 0 if nulls_first else r + 1, dtype=np.int64)
    allr[nn] = kr + 1
    comb = pid * (r + 2) + allr
    pos = np.searchsorted(comb, pid[nn] * (r + 2) + tr + 1, side=side)
    out = np.empty(n, np.int64)
    out[nn] = pos if side == "left" else pos - 1    # past / before the partition: empty
    if km is not None:                              # a NULL key: its peers are its frame
        out = np.where(km, qs if which == "starting" else qe, out)
    return out


def _frame_segments(fr, ctx, finputs):
    """The frame of every row as two row ranges and the current row (the frame with its
    EXCLUDE taken out, in order): ``(s1, e1, mid, s2, e2)``; a range with s > e is empty
    and ``mid`` says the current row is in (EXCLUDE TIES keeps it between the two)."""
    n, ps, pe, qs, qe, pid, peerflag, ordered = ctx
    ectx, layout, data, ocols, desc, nulls_first, otypes = finputs
    idx = np.arange(n, dtype=np.int64)
    off = {}
    for which, e in (("starting", fr.start_off), ("ending", fr.end_off)):
        if e is not None:
            off[which] = _offset(e, ectx, layout, data, which, fr.kind)
    if fr.kind in ("rows", "groups"):
        off = {k: min(int(v), n + 1) for k, v in off.items()}
    if fr.kind == "groups":
        g = np.cumsum(peerflag) - 1
        gs = np.flatnonzero(peerflag)
        ge = np.append(gs[1:] - 1, n - 1)
        gfirst, glast = g[ps], g[pe]
    if fr.kind == "range" and off:
        key, km = ocols[0]
        key = np.full(n, key) if np.ndim(key) == 0 else key
        if km is not None and not km.any():
            km = None
        d = bool(desc[0])
        nf = bool(nulls_first[0])
        kfam = family(otypes[0])

    def bound(which, side):
        b = fr.start if which == "starting" else fr.end
        if b == "unbounded_preceding":
            return ps
        if b == "unbounded_following":
            return pe
        if b == "current":
            if fr.kind == "rows":
                return idx
            return qs if which == "starting" else qe
        k = off[which]
        if fr.kind == "rows":
            return idx - k if b == "preceding" else idx + k
        if fr.kind == "groups":
            t = g - k if b == "preceding" else g + k
            if which == "starting":
                return np.where(t > glast, pe + 1, gs[np.clip(t, gfirst, len(gs) - 1)])
            return np.where(t < gfirst, ps - 1, ge[np.clip(t, 0, glast)])
        # RANGE with an offset: the sort key plus or minus it, in the sort direction
        up = (b == "following") != d
        if kfam == "time":                          # in_range_time_interval: the time part
            kk = key.astype(np.int64)
            return _range_search(kk, km, pid, d, nf, kk + (k.usecs if up else -k.usecs),
                                 "left" if which == "starting" else "right", qs, qe, which)
        if kfam in ("ts", "tstz", "date"):
            kk = key.astype(np.int64) * (dtx.USECS_PER_DAY if kfam == "date" else 1)
            return _range_search(kk, km, pid, d, nf, _plus_interval(kk, k, up, kfam),
                                 "left" if which == "starting" else "right", qs, qe,
                                 which)
        if key.dtype.kind in "iu":
            lim = np.iinfo(np.int64)
            kk = key.astype(np.int64)
            tgt = np.where(kk > lim.max - k, lim.max, kk + k) if up else \
                np.where(kk < lim.min + k, lim.min, kk - k)
        else:
            if key.dtype.kind == "f":
                kk, k = key.astype(np.float64), float(k)
            else:
                kk = key
            tgt = kk + k if up else kk - k
        return _range_search(key, km, pid, d, nf, tgt,
                             "left" if which == "starting" else "right", qs, qe, which)

    fs = np.maximum(bound("starting", 0), ps)
    fe = np.minimum(bound("ending", 1), pe)
    empty_rng = np.ones(n, np.int64), np.zeros(n, np.int64)
    if fr.exclude == "no_others":
        return fs, fe, np.zeros(n, bool), *empty_rng
    xa, xb = (idx, idx) if fr.exclude == "current" else (qs, qe)
    mid = (fr.exclude == "ties") & (fs <= idx) & (idx <= fe)
    return fs, np.minimum(fe, xa - 1), mid, np.maximum(fs, xb + 1), fe


def _seg_len(s, e):
    return np.maximum(e - s + 1, 0)


def _seg_sum(cs0, s, e):
    """Sums over rows s..e from the prefix sums ``cs0`` (cs0[0] = 0); 0 where empty."""
    ok = e >= s
    s2, e2 = np.where(ok, s, 0), np.where(ok, e, -1)
    return np.where(ok, cs0[e2 + 1] - cs0[s2], cs0[0])


def _running_sums(x, ps):
    """Each row's sum of its partition's rows up to it (doubles), partitions kept apart:
    a segmented Hillis-Steele scan - pass d adds the partial sum d rows back when that row
    is in the same partition - so log2(longest partition) contiguous passes, a tree
    summation, and no earlier partition's values enter a sum (a global ``cumsum``
    differenced at the partition start would carry their rounding)."""
    out = np.array(x, dtype=np.float64, copy=True)
    pos = np.arange(len(x)) - ps                      # position inside the partition
    longest = int(pos.max(initial=0)) + 1
    d = 1
    while d < longest:
        add = np.where(pos[d:] >= d, out[:-d], 0.0)
        out[d:] += add
        d <<= 1
    return out


def _block_sum(x, s, e):
    """Double sums over rows s..e (0 where empty) from aligned power-of-two blocks: level
    j holds the sums of x[i*2**j : (i+1)*2**j] (pairwise, so accurate), and [s, e] is cut
    into at most two blocks per level, as a Fenwick / segment tree reads a range - every
    row at once, one pass per level.  Unlike the difference of two running sums, the
    rounding error is that of the frame's own values, not of everything before it."""
    n = len(x)
    ok = e >= s
    out = np.zeros(n, np.float64)
    lo = np.where(ok, s, 0).astype(np.int64)
    hi = np.where(ok, e + 1, 0).astype(np.int64)      # half-open [lo, hi)
    level = np.asarray(x, np.float64)
    while True:
        live = lo < hi
        if not live.any():
            break
        take = live & (lo & 1 == 1)
        out[take] += level[lo[take]]
        lo = lo + take
        take = live & (hi & 1 == 1) & (lo < hi)
        hi = hi - take
        out[take] += level[hi[take]]
        lo, hi = lo >> 1, hi >> 1
        m = len(level) // 2
        level = level[:2 * m:2] + level[1:2 * m:2]
    return out


def _range_max(codes, s, e, pid, ps):
    """The maximum of ``codes`` (>= -1; -1 is "no value") over rows s..e, -1 where the range
    is empty: a running ``maximum.accumulate`` (partitions kept apart by an offset of
    ``pid``) when every range starts at its partition's first row - the default frame -,
    else a sparse table (as many levels as the longest range needs) read with two
    overlapping lookups."""
    n = len(codes)
    ok = e >= s
    out = np.full(n, -1, dtype=np.int64)
    if not ok.any():
        return out
    if np.array_equal(s[ok], ps[ok]):
        k = int(codes.max()) + 2
        run = np.maximum.accumulate(codes + 1 + pid * k)
        at = np.where(ok, e, 0)
        return np.where(ok, run[at] - pid[at] * k - 1, -1)
    longest = int((e - s + 1)[ok].max())
    levels = [codes]
    j = 1
    while (1 << j) <= longest:
        h = 1 << (j - 1)
        prev = levels[-1]
        levels.append(np.maximum(prev[:-h], prev[h:]))
        j += 1
    lv = np.floor(np.log2(np.where(ok, e - s + 1, 1))).astype(np.int64)
    for j in np.unique(lv[ok]):
        sel = ok & (lv == j)
        t = levels[int(j)]
        out[sel] = np.maximum(t[s[sel]], t[e[sel] - (1 << int(j)) + 1])
    return out


def _frame_function(name, f, args, segs, n, pid, ps):
    """first_value / last_value / nth_value and count / sum / avg / min / max over the
    frames ``segs`` (see ``_frame_segments``), vectorized over all rows."""
    s1, e1, mid, s2, e2 = segs
    idx = np.arange(n, dtype=np.int64)
    l1, l2 = _seg_len(s1, e1), _seg_len(s2, e2)
    if name in ("first_value", "last_value", "nth_value"):
        v, m = args[0]
        if name == "first_value":
            at = np.where(l1 > 0, s1, np.where(mid, idx, np.where(l2 > 0, s2, -1)))
        elif name == "last_value":
            at = np.where(l2 > 0, e2, np.where(mid, idx, np.where(l1 > 0, e1, -1)))
        else:
            kv, km = args[1]
            k = np.asarray(kv, dtype=np.int64)
            if np.any((k <= 0) & (~km if km is not None else True)):
                raise errors.DataError("argument of nth_value must be greater than zero",
                                       sqlstate="22016")
            k2 = k - l1 - mid
            at = np.where(k <= l1, s1 + k - 1,
                          np.where(mid & (k == l1 + 1), idx,
                                   np.where((k2 >= 1) & (k2 <= l2), s2 + k2 - 1, -1)))
            if km is not None:
                at = np.where(km, -1, at)
        none = at < 0
        safe = np.where(none, 0, at)
        vals = np.array(v[safe], dtype=_DT[f], copy=True)
        vals[none] = _FILL[f]
        mask = none | (m[safe] if m is not None else False)
        return vals, (mask if mask.any() else None)
    if name == "count" and not args:
        return (l1 + l2 + mid).astype(np.int64), None
    v, m = args[0]
    ok = np.ones(n, bool) if m is None else ~m
    if m is None:
        count = l1 + l2 + mid
    else:
        c0 = np.concatenate([[0], np.cumsum(ok)])
        count = _seg_sum(c0, s1, e1) + _seg_sum(c0, s2, e2) + (mid & ok)
    if name == "count":
        return count.astype(np.int64), None
    empty = count == 0
    emask = empty if empty.any() else None
    if name in ("sum", "avg"):
        if v.dtype == object:
            zero = _FILL[f] if f in _FILL and _FILL[f] is not None else 0
            x = np.where(ok, v, zero)
            x = np.array(x, dtype=object)
            cs0 = np.concatenate([np.array([zero], dtype=object), np.cumsum(x)])
            tot = _seg_sum(cs0, s1, e1) + _seg_sum(cs0, s2, e2) + \
                np.where(mid, x, zero)
            if name == "avg":
                tot = np.array([t / c if c else zero for t, c in zip(tot, count)],
                               dtype=object)
            tot = np.where(empty, zero, tot)
            return np.array(tot, dtype=object), emask
        if v.dtype.kind == "f" or name == "avg":
            x = np.where(ok, np.asarray(v, np.float64), 0.0)
            if not mid.any() and not (l2 > 0).any() and np.array_equal(s1[l1 > 0],
                                                                       ps[l1 > 0]):
                # every frame runs from its partition's first row (the default frame)
                tot = np.where(l1 > 0, _running_sums(x, ps)[np.where(l1 > 0, e1, 0)], 0.0)
            else:
                tot = _block_sum(x, s1, e1) + _block_sum(x, s2, e2) + np.where(mid, x, 0.0)
            if name == "avg":
                with np.errstate(all="ignore"):
                    return np.where(empty, 0.0, tot / np.maximum(count, 1)), emask
            return np.where(empty, 0.0, tot), emask
        x = np.where(ok, np.asarray(v, np.int64), 0)
        xf = x.astype(np.float64)
        # running sums wrap modulo 2**64, so their difference is each frame's sum modulo
        # 2**64; a double estimate of the sum says which multiple of 2**64 it really is
        cs0 = np.concatenate([[0], np.cumsum(x)])
        tot = _seg_sum(cs0, s1, e1) + _seg_sum(cs0, s2, e2) + np.where(mid, x, 0)
        big = np.abs(xf).max(initial=0.0) * n >= 2.0 ** 62
        if big:
            est = _block_sum(xf, s1, e1) + _block_sum(xf, s2, e2) + np.where(mid, xf, 0.0)
            if np.any(np.round((est - tot.astype(np.float64)) / 2.0 ** 64) != 0):
                raise errors.NumericValueOutOfRange("bigint out of range")
        return np.where(empty, 0, tot).astype(np.int64), emask
    if name in ("min", "max"):
        vals = v[ok] if not ok.all() else v
        if len(vals) == 0:
            return np.full(n, _FILL[f], dtype=_DT[f]), np.ones(n, bool)
        uniq, code = np.unique(vals, return_inverse=True)
        k = len(uniq)
        codes = np.full(n, -1, dtype=np.int64)
        codes[ok] = code.reshape(-1)
        if name == "min":                         # min as the max of reversed codes
            codes = np.where(ok, (k - 1) - codes, -1)
        else:
            codes = np.where(ok, codes, -1)
        got = np.maximum(_range_max(codes, s1, e1, pid, ps), _range_max(codes, s2, e2, pid, ps))
        got = np.maximum(got, np.where(mid, codes, -1))
        none = -1
        if name == "min":
            got = np.where(got >= 0, (k - 1) - got, -1)
        have = (got != none) & ~empty
        out = np.array(np.asarray(uniq)[np.clip(got, 0, k - 1)], dtype=_DT[f])
        mask = ~have
        return out, (mask if mask.any() else None)
    raise errors.NotSupportedError(f"window function {name} is not supported")


assert dt
