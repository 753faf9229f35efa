"""Identity columns in INSERT and UPDATE (the binder's rules; PostgreSQL's rewriter).

A value given for a GENERATED ALWAYS column is 428C9 unless the INSERT says OVERRIDING
SYSTEM VALUE; OVERRIDING USER VALUE drops the values given for identity columns (their
default, ``nextval`` of the owned sequence, is used); an UPDATE (or ON CONFLICT DO UPDATE)
may set a GENERATED ALWAYS column only to DEFAULT.  The columns and their sequences are
made by ``minidb.sql.sequences``.
"""

from __future__ import annotations

import minidb.errors as errors

__all__ = ["check_identity_insert", "check_identity_update"]


def check_identity_insert(table, attnos, rows, overriding):
    """The rows of an INSERT into a table with identity columns: a value given for a
    GENERATED ALWAYS column (VALUES rows, or a query: ``rows`` None) is 428C9 unless
    OVERRIDING SYSTEM VALUE; OVERRIDING USER VALUE replaces the values given for identity
    columns by DEFAULT.  Returns the rows."""
    from minidb.exec.modify import DEFAULT
    if overriding == "system":
        return rows
    for pos, a in enumerate(attnos):
        c = table.columns[a]
        if not c.identity:
            continue
        if overriding == "user":
            if rows is None:
                raise errors.NotSupportedError("OVERRIDING USER VALUE with INSERT ... SELECT "
                                               "is not supported")
            for r in rows:
                if pos < len(r):
                    r[pos] = DEFAULT
            continue
        if c.identity != "a":
            continue
        if rows is not None and all(r[pos] is DEFAULT for r in rows if pos < len(r)):
            continue
        err = errors.GeneratedAlways(f'cannot insert a non-DEFAULT value into column "{c.name}"')
        err.detail = f'Column "{c.name}" is an identity column defined as GENERATED ALWAYS.'
        err.hint = "Use OVERRIDING SYSTEM VALUE to override."
        raise err
    return rows


def check_identity_update(table, attno: int, is_default: bool) -> None:
    c = table.columns[attno]
    if c.identity == "a" and not is_default:
        err = errors.GeneratedAlways(f'column "{c.name}" can only be updated to DEFAULT')
        err.detail = f'Column "{c.name}" is an identity column defined as GENERATED ALWAYS.'
        raise err
