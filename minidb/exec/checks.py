"""CHECK constraints on the rows a statement writes (PostgreSQL's ExecConstraints).

The binder binds a table's CHECK expressions over the target's range entry when it binds
an INSERT or UPDATE (``minidb.sql.checks``: ``entry.checks``, [(name, Expr)]); the insert
and update nodes (``minidb.exec.modify``) call ``RowChecker.check`` on each batch of new
rows before they are written - every path: row at a time, the bulk path of many-row
VALUES / executemany / COPY FROM, UPDATE's new versions.  The expressions run vectorized
over the batch; a row fails when a condition is false (NULL passes, as in SQL), and the
error is PostgreSQL's 23514 naming the constraint, with the failing row in its DETAIL.
The compiled point path (``exec.point``) is not used for a table with checks.
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.exec.chunk import rows_to_chunk
from minidb.exec.compile import evaluate

__all__ = ["RowChecker", "row_checker"]


class RowChecker:
    def __init__(self, ectx, entry):
        self.entry = entry
        ncols = len(entry.columns)
        full = {(entry.index, a): a for a in range(ncols)}
        self.types = [t for _, t in entry.columns]
        self.compiled = [(name, ectx.compile(e, full)) for name, e in entry.checks]

    def check(self, rows) -> None:
        """Raise CheckViolation for the first row of ``rows`` (full rows, in column order)
        that a CHECK condition rejects."""
        if not rows:
            return
        chunk = rows_to_chunk(rows, self.types)
        for name, c in self.compiled:
            vals, mask = evaluate(c, chunk)
            vals = np.broadcast_to(np.asarray(vals), (chunk.n,))
            bad = ~vals.astype(bool)
            if mask is not None:
                bad &= ~np.broadcast_to(np.asarray(mask, dtype=bool), (chunk.n,))
            hit = np.flatnonzero(bad)
            if hit.size:
                row = rows[int(hit[0])]
                shown = ", ".join("null" if v is None else str(v) for v in row)
                raise errors.CheckViolation(
                    f'new row for relation "{self.entry.table.name}" violates check '
                    f'constraint "{name}"\nDETAIL:  Failing row contains ({shown}).')


def row_checker(ectx, entry) -> RowChecker | None:
    """The checker of ``entry``'s CHECK constraints, None when it has none."""
    checks = getattr(entry, "checks", None)
    return RowChecker(ectx, entry) if checks else None
