"""The rewriter's part of views (PostgreSQL's ``rewriteHandler.c``): a FROM name that is a
view becomes its query, a view named as a write's target is refused.  The binder calls
these (``Binder._view``, ``Binder._entry``); the DDL side of views is ``views``.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.sql import ast

__all__ = ["expand", "check_not_view"]


def check_not_view(catalog, name: str, what: str) -> None:
    """A view named as the target of ``what`` (INSERT, UPDATE, DELETE, COPY, ...): 42809."""
    if catalog.view(name) is not None:
        raise errors.WrongObjectType(f'cannot {what} view "{name}"\nDETAIL:  Views that '
                                     "are not automatically updatable are not supported.")


def expand(catalog, item: ast.TableRef):
    """The subquery a FROM item naming a view stands for (None: not a view)."""
    v = catalog.view(item.name)
    if v is None:
        return None
    from minidb.sql.parser import parse
    query = parse(v.query)
    cols = item.col_aliases
    names = [c.name for c in v.columns]
    if cols:
        names = list(cols) + names[len(cols):]
    return ast.SubqueryRef(query, item.alias or item.name, names)
