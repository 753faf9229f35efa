"""FOREIGN KEY clauses as written (the parser's half of ``minidb.sql.fkeys``): a column's
``REFERENCES`` (sqlglot's ``exp.Reference``), a table's ``FOREIGN KEY`` (``exp.ForeignKey``)
and ALTER TABLE's ``ADD ... FOREIGN KEY`` (``minidb.sql.parser.utility``) all become an
``FKeySpec``; MATCH FULL / PARTIAL, DEFERRABLE and other options are refused by name."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

import minidb.errors as errors
from minidb.catalog.defs import (FK_CASCADE, FK_NO_ACTION, FK_RESTRICT, FK_SET_DEFAULT,
                                 FK_SET_NULL)

__all__ = ["FKeySpec", "parse_actions", "spec_from_sqlglot"]


def _ident(i) -> str:
    return i.this if i.args.get("quoted") else i.this.lower()


_ACTIONS = {"NO ACTION": FK_NO_ACTION, "RESTRICT": FK_RESTRICT, "CASCADE": FK_CASCADE,
            "SET NULL": FK_SET_NULL, "SET DEFAULT": FK_SET_DEFAULT}


@dataclass
class FKeySpec:
    """A FOREIGN KEY as written: ``ref_columns`` None means the primary key."""
    name: str | None
    columns: list
    ref_table: str
    ref_columns: list | None = None
    on_update: str = FK_NO_ACTION
    on_delete: str = FK_NO_ACTION


def parse_actions(spec: FKeySpec, options) -> FKeySpec:
    """Apply sqlglot's option strings ("ON delete CASCADE", ...) to ``spec``."""
    for o in options or []:
        text = " ".join(str(o).split()).upper()
        if text.startswith("ON DELETE ") or text.startswith("ON UPDATE "):
            act = _ACTIONS.get(text[10:])
            if act is None:
                raise errors.NotSupportedError(f"foreign key option {o} is not supported")
            if text[3] == "D":
                spec.on_delete = act
            else:
                spec.on_update = act
        elif text in ("MATCH SIMPLE",):
            continue
        else:
            raise errors.NotSupportedError(f"foreign key option {o} is not supported")
    return spec


def spec_from_sqlglot(node, columns=None, name=None) -> FKeySpec:
    """A column constraint's ``exp.Reference`` (``columns`` = [the column]) or a table
    constraint's ``exp.ForeignKey``."""
    if isinstance(node, exp.ForeignKey):
        cols = [_ident(x) for x in node.expressions]
        ref = node.args.get("reference")
        options = list(ref.args.get("options") or []) + list(node.args.get("options") or [])
        for k in ("delete", "update"):
            if node.args.get(k):
                options.append(f"ON {k} {node.args[k]}")
    else:
        cols, ref = list(columns), node
        options = list(ref.args.get("options") or [])
    target = ref.this
    ref_cols = None
    if isinstance(target, exp.Schema):
        ref_cols = [_ident(x) for x in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table) or not isinstance(target.this, exp.Identifier):
        raise errors.NotSupportedError(f"REFERENCES {target.sql(dialect='postgres')}")
    spec = FKeySpec(name, cols, _ident(target.this), ref_cols)
    return parse_actions(spec, options)
