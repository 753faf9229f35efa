"""RETURNING of INSERT / UPDATE / DELETE (and INSERT ... ON CONFLICT): the rows a
writing node acted on, turned into the chunks it yields.

The planner sets ``returning`` on the node ([(name, Expr over the target row)]); the node
calls ``returning_of(node, ectx)`` once, ``add(row)`` for every row it inserted, updated
(the new version) or deleted (the version it deleted), and yields ``chunk()`` after each
batch.  The engine collects them as a SELECT's rows.

UPDATE ... FROM and DELETE ... USING may return the other relations' columns too
(``extra_keys``: the columns of other FROM items the expressions read); the node hands
their values from the joined row that changed the target row: ``add(row + extras)``,
``extras`` in ``extra_keys`` order (``extras_of(chunk, layout)`` reads them per batch).
"""

from __future__ import annotations

from minidb.exec.chunk import Chunk, column_to_list, rows_to_chunk
from minidb.exec.compile import evaluate
from minidb.exec.expr import ColRef, walk

__all__ = ["Returning", "returning_of"]


class Returning:
    """RETURNING: the expressions over the target row (``returning`` on the node, set by
    the planner), evaluated for a batch of rows acted on (new rows for INSERT and UPDATE,
    the deleted version for DELETE) into the chunk the node yields."""

    def __init__(self, node, ectx):
        entry = node.entry
        self.types = [t for _, t in entry.columns]
        full = {(entry.index, a): a for a in range(len(entry.columns))}
        extra: dict = {}
        for _, e in node.returning:
            for c in walk(e):
                if isinstance(c, ColRef) and c.key[0] != entry.index and c.key not in extra:
                    extra[c.key] = c.type
        self.extra_keys = list(extra)
        for k, t in extra.items():
            full[k] = len(self.types)
            self.types.append(t)
        self.comp = [ectx.compile(e, full) for _, e in node.returning]
        self.rows: list = []

    def extras_of(self, chunk, layout) -> list:
        """Per extra column, its values in ``chunk`` (a list; [] without extras)."""
        ntarget = len(self.types) - len(self.extra_keys)
        return [column_to_list(*chunk.cols[layout[k]], self.types[ntarget + j])
                for j, k in enumerate(self.extra_keys)]

    def add(self, row) -> None:
        self.rows.append(list(row))

    def chunk(self):
        """The rows collected since the last call, as the output chunk (None if none)."""
        if not self.rows:
            return None
        ch = rows_to_chunk(self.rows, self.types)
        self.rows = []
        return Chunk([evaluate(c, ch) for c in self.comp], ch.n)


def returning_of(node, ectx):
    """The node's Returning, None without RETURNING."""
    return Returning(node, ectx) if getattr(node, "returning", None) else None
