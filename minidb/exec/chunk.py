"""Batches of rows as they flow between operators.

A ``Chunk`` is ``n`` rows as columns: ``cols[i] = (values, nullmask)`` (see
``datatypes`` for how each type is held) and, when an operator above needs them (UPDATE,
DELETE, SELECT FOR UPDATE), ``tids[r] = (blocks, offsets)`` of the heap tuples the rows
came from, per range-table index ``r``.  Chunks are never modified in place once passed
on: an operator that filters or reorders makes a new one (`take`).

The conversions at the edges live here too: Python rows to a chunk (index scans, VALUES,
re-checked rows) and a chunk to Python rows (results).
"""

from __future__ import annotations

import numpy as np

from minidb.exec import datatypes as dt
from minidb.exec.datatypes import VECTOR_DTYPE, VECTOR_FILL, family
from minidb.types import ints_to_datetime64, session_timezone

__all__ = ["Chunk", "rows_to_chunk", "chunk_to_rows", "column_to_list", "concat",
           "normalize_columns"]

_DTYPE = VECTOR_DTYPE   # one definition: datatypes.VECTOR_DTYPE / VECTOR_FILL
_FILL = VECTOR_FILL


class Chunk:
    __slots__ = ("cols", "n", "tids")

    def __init__(self, cols, n: int, tids: dict | None = None):
        self.cols = cols
        self.n = n
        self.tids = tids

    def take(self, idx) -> "Chunk":
        """Rows ``idx`` (an int array), in that order."""
        cols = [(v[idx], None if m is None else m[idx]) for v, m in self.cols]
        tids = None
        if self.tids:
            tids = {r: (b[idx], o[idx]) for r, (b, o) in self.tids.items()}
        return Chunk(cols, len(idx), tids)

    def select(self, keep) -> "Chunk":
        """The rows where ``keep`` (bool array, or a bool for all rows) is true."""
        if isinstance(keep, (bool, np.bool_)):
            return self if keep else self.take(np.empty(0, np.int64))
        cnt = int(np.count_nonzero(keep))
        if cnt == self.n:
            return self
        if not self.cols and not self.tids:
            return Chunk([], cnt)
        return self.take(np.flatnonzero(keep))

    def __len__(self):
        return self.n

    def __repr__(self):
        return f"Chunk(n={self.n}, cols={len(self.cols)})"


def normalize_columns(cols, types):
    """Scan output -> chunk columns: string NULL slots hold "" instead of None."""
    out = []
    for (v, m), t in zip(cols, types):
        if m is not None and v.dtype == object:
            v = v.copy()
            v[m] = _FILL[family(t)]
        out.append((v, m))
    return out


def column_from_values(values: list, t):
    """(values, mask) of one column from Python values (None = NULL)."""
    f = family(t)
    n = len(values)
    if None in values if isinstance(values, list) else any(x is None for x in values):
        mask = np.fromiter((x is None for x in values), dtype=bool, count=n)
        fill = _FILL[f]
        values = [fill if x is None else x for x in values]
    else:
        mask = None
    if f in ("ts", "tstz", "date", "time"):
        values = [dt.to_repr(x, t) for x in values]
    if _DTYPE[f] is object:
        arr = np.empty(n, dtype=object)
        arr[:] = values
    else:
        arr = np.array(values, dtype=_DTYPE[f]) if n else np.empty(0, dtype=_DTYPE[f])
    return arr, mask


def rows_to_chunk(rows: list, types, positions=None, tids=None) -> Chunk:
    """A chunk from Python row tuples; ``positions`` picks (and orders) row fields."""
    if positions is None:
        positions = range(len(types))
    cols = []
    for p, t in zip(positions, types):
        cols.append(column_from_values([r[p] for r in rows], t))
    return Chunk(cols, len(rows), tids)


def column_to_list(vals, mask, t) -> list:
    """Python values of one column (None for NULL), as results return them."""
    f = family(t)
    if f == "ts":
        lst = ints_to_datetime64(np.asarray(vals, dtype=np.int64)).astype(object).tolist()
    elif f in ("tstz", "date", "time"):
        lst = _datetimes(vals, mask, t, f)
    elif _DTYPE[f] is object:
        lst = list(vals)
    else:
        lst = vals.tolist()
    if mask is not None:
        for k in np.flatnonzero(mask).tolist():
            lst[k] = None
    return lst


_UTC_EPOCH_US = 946_684_800_000_000


def _datetimes(vals, mask, t, f) -> list:
    """Python dates, times and aware (UTC) datetimes of one int column."""
    a = np.asarray(vals, dtype=np.int64)
    if mask is not None:
        a = np.where(mask, 0, a)
    if f == "date":
        return (a + 10957).astype("datetime64[D]").astype(object).tolist()
    if f == "tstz":
        # aware datetimes in the session's TimeZone, as PostgreSQL's drivers return them
        import datetime as _dt
        utc = _dt.timezone.utc
        tz = session_timezone()
        out = [x.replace(tzinfo=utc) for x in
               (a + _UTC_EPOCH_US).view("datetime64[us]").astype(object).tolist()]
        return out if tz is utc else [x.astimezone(tz) for x in out]
    return [dt.from_repr(x, t) for x in a.tolist()]


def chunk_to_rows(chunk: Chunk, types) -> list[tuple]:
    if not types:
        return [()] * chunk.n
    cols = [column_to_list(v, m, t) for (v, m), t in zip(chunk.cols, types)]
    return list(zip(*cols))


def concat(chunks: list, ncols: int) -> Chunk:
    """One chunk holding the rows of ``chunks`` in order (tids kept if all have them)."""
    chunks = [c for c in chunks if c.n]
    if not chunks:
        return Chunk([(np.empty(0), None)] * ncols, 0)
    if len(chunks) == 1:
        return chunks[0]
    cols = []
    for i in range(ncols):
        vals = [c.cols[i][0] for c in chunks]
        if any(v.dtype == object for v in vals):
            vals = [v.astype(object) if v.dtype != object else v for v in vals]
        v = np.concatenate(vals)
        if any(c.cols[i][1] is not None for c in chunks):
            m = np.concatenate([c.cols[i][1] if c.cols[i][1] is not None
                                else np.zeros(c.n, bool) for c in chunks])
        else:
            m = None
        cols.append((v, m))
    tids = None
    if all(c.tids for c in chunks):
        tids = {}
        for r in chunks[0].tids:
            tids[r] = (np.concatenate([c.tids[r][0] for c in chunks]),
                       np.concatenate([c.tids[r][1] for c in chunks]))
    return Chunk(cols, sum(c.n for c in chunks), tids)
