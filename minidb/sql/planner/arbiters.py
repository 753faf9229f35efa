"""ON CONFLICT's arbiter indexes from its inference specification (PostgreSQL's
plancat.c infer_arbiter_indexes): the unique indexes of the target whose plain key columns
are exactly the specification's columns and whose expression columns are exactly its
expressions (both as sets, expressions compared bound), and - for a partial index - whose
predicate the specification's WHERE implies (``indexpred.predicate_implied``; no WHERE
infers no partial index).  None: 42P10."""

from __future__ import annotations

import minidb.errors as errors
from minidb.sql.indexpred import bind_predicate, index_targets, predicate_implied

__all__ = ["infer_arbiters"]


def infer_arbiters(catalog, entry, inf) -> list:
    """The names of the unique indexes of ``entry``'s table ``inf`` (an ``Inference``)
    matches."""
    table = entry.table
    found = []
    for name in table.indexes:
        i = catalog.indexes.get(name)
        if i is None or not i.unique:
            continue
        targets = index_targets(catalog, i, entry)
        if targets is None:
            continue
        cols = {t for t in targets if isinstance(t, int)}
        exprs = [t for t in targets if not isinstance(t, int)]
        if cols != inf.columns or len(exprs) != len(inf.exprs) \
                or any(x not in inf.exprs for x in exprs) \
                or any(x not in exprs for x in inf.exprs):
            continue
        if i.predicate is not None:
            try:
                pred = bind_predicate(catalog, table, i.predicate, entry.index, entry.alias)
            except errors.Error:
                continue
            if not inf.where or not predicate_implied(pred, inf.where):
                continue
        found.append(i.name)
    if not found:
        raise errors.ProgrammingError(
            "there is no unique or exclusion constraint matching the ON CONFLICT "
            "specification", sqlstate="42P10")
    return found
