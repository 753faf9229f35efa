"""sqlglot's syntax tree -> minidb's logical tree (``minidb.sql.ast``).

sqlglot (``read="postgres"``) accepts far more than minidb implements, and some nonsense
too (``selec * frm t`` parses as an alias of a product).  So translation is a whitelist:
each sqlglot node class that minidb handles has a translator that also checks the node
carries no argument it does not understand (``_only``); any other class, or any extra
argument, raises NotSupportedError naming the construct ("LEFT JOIN is not supported").
Statements sqlglot would parse but whose first word is not a statement minidb knows are
refused before sqlglot sees them (``parser.parse``), as syntax errors at that word.

Placeholders: ``?`` (the DB-API paramstyle, qmark) and ``$n`` both become
``ast.Placeholder``; ``?`` are numbered in text order before parsing by rewriting them to
``$1, $2, ...`` outside strings and comments (``number_placeholders``).
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from minidb.errors import NotSupportedError, SyntaxError_
from minidb.sql import ast
from minidb.sql.parser.lexer import _skip

__all__ = ["translate_statement", "translate_expression", "number_placeholders"]


def number_placeholders(text: str) -> tuple[str, int, int]:
    """Rewrite each ``?`` outside strings/comments to ``$k``: (text, count of ?, largest $n).

    Every ``$n`` is followed by a space unless whitespace follows already: sqlglot reads
    ``$1,$2`` as the start of a dollar-quoted string (``$1,$``)."""
    out, i, n, k = [], 0, len(text), 0
    while i < n:
        j, _ = _skip(text, i)
        if j != i:
            out.append(text[i:j])
            i = j
            continue
        ch = text[i]
        if ch == "?":
            k += 1
            out.append(f"${k}")
            if i + 1 < n and not text[i + 1].isspace():
                out.append(" ")
        elif ch == "$" and i + 1 < n and text[i + 1].isdigit() and (
                i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_$")):
            e = i + 1
            while e < n and text[e].isdigit():
                e += 1
            out.append(text[i:e])
            if e < n and not text[e].isspace():
                out.append(" ")
            i = e
            continue
        else:
            out.append(ch)
        i += 1
    new = "".join(out)
    dollars = [int(m.group(1)) for m in re.finditer(r"(?<![\w$])\$(\d+)", strip_strings(new))]
    return new, k, max(dollars, default=0)


def strip_strings(text: str) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        j, _ = _skip(text, i)
        if j != i:
            out.append(" ")
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_FRIENDLY = {
    "Union": "UNION", "Intersect": "INTERSECT", "Except": "EXCEPT", "Subquery": "subqueries",
    "Exists": "EXISTS", "Window": "window functions", "With": "WITH (common table expressions)",
    "CTE": "WITH (common table expressions)", "Merge": "MERGE", "Alter": "ALTER",
    "Command": "this command", "Values": "VALUES as a query", "Array": "arrays",
    "Interval": "intervals", "Extract": "EXTRACT", "Lateral": "LATERAL", "Unnest": "UNNEST",
    "Escape": "LIKE ... ESCAPE", "TryCast": "TRY_CAST", "RegexpLike": "regular expressions",
    "Bracket": "array subscripts", "ByteString": "E'' strings", "HexString": "hex strings",
    "Dot": "composite field access", "JSONExtract": "JSON operators", "Distinct": "DISTINCT here",
    "BitwiseAnd": "operator &", "BitwiseOr": "operator |", "BitwiseXor": "operator #",
    "Pow": "operator ^", "Collate": "COLLATE", "AtTimeZone": "AT TIME ZONE",
    "Round": "round()", "Concat": "concat()",
}


def unsupported(what) -> NotSupportedError:
    if isinstance(what, exp.Expression):
        name = type(what).__name__
        what = _FRIENDLY.get(name) or f"{name.lower()} ({what.sql(dialect='postgres')[:60]})"
    return NotSupportedError(f"{what} is not supported")


def _present(v) -> bool:
    return v not in (None, False, [], "")


def _only(node: exp.Expression, allowed: set, labels: dict | None = None) -> None:
    """Refuse ``node`` if it carries an argument outside ``allowed``."""
    for k, v in node.args.items():
        if k not in allowed and _present(v):
            label = (labels or {}).get(k) or _ARG_LABELS.get(k) or f"{k} in {type(node).__name__}"
            raise unsupported(label)


_ARG_LABELS = {
    "with_": "WITH (common table expressions)", "returning": "RETURNING",
    "conflict": "ON CONFLICT", "windows": "WINDOW", "qualify": "QUALIFY",
    "laterals": "LATERAL", "pivots": "PIVOT", "sample": "TABLESAMPLE", "into": "SELECT INTO",
    "using": "USING", "connect": "CONNECT BY", "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY", "cluster": "CLUSTER BY", "prewhere": "PREWHERE",
    "hint": "optimizer hints", "kind": "this statement form", "db": "schema-qualified names",
    "catalog": "database-qualified names", "options": "options", "settings": "SETTINGS",
    "format": "FORMAT", "tables": "multi-table DELETE", "exclude": "EXCLUDE",
    "operation_modifiers": "statement modifiers", "match": "MATCH_RECOGNIZE", "for_": "FOR",
}


# ---------------------------------------------------------------------------------------------
# statements
def translate_statement(node: exp.Expression) -> ast.Statement:
    if isinstance(node, exp.Select):
        return translate_select(node)
    if isinstance(node, exp.Insert):
        return _insert(node)
    if isinstance(node, exp.Update):
        return _update(node)
    if isinstance(node, exp.Delete):
        return _delete(node)
    if isinstance(node, exp.Create):
        return _create(node)
    if isinstance(node, exp.Drop):
        return _drop(node)
    raise unsupported(node)


def translate_select(node) -> ast.SelectStmt:
    if not isinstance(node, exp.Select):
        raise unsupported(node)
    _only(node, {"expressions", "from_", "joins", "where", "group", "having", "order", "limit",
                 "offset", "distinct", "locks"})
    targets = []
    for e in node.expressions:
        if isinstance(e, exp.Alias):
            _only(e, {"this", "alias"})
            targets.append((translate_expression(e.this), _ident(e.args["alias"])))
        else:
            targets.append((translate_expression(e, star_ok=True), None))
    s = ast.SelectStmt(targets=targets)
    d = node.args.get("distinct")
    if d is not None:
        if d.args.get("on") is not None:
            raise unsupported("DISTINCT ON")
        s.distinct = True
    f = node.args.get("from_")
    items = []
    if f is not None:
        _only(f, {"this"})
        items.append(_table(f.this))
    for j in node.args.get("joins") or []:
        items = _join(items, j)
    s.from_ = items
    w = node.args.get("where")
    if w is not None:
        s.where = translate_expression(w.this)
    g = node.args.get("group")
    if g is not None:
        _only(g, {"expressions"}, {"rollup": "ROLLUP", "cube": "CUBE",
                                   "grouping_sets": "GROUPING SETS", "all": "GROUP BY ALL"})
        s.group_by = [translate_expression(x) for x in g.expressions]
    h = node.args.get("having")
    if h is not None:
        s.having = translate_expression(h.this)
    o = node.args.get("order")
    if o is not None:
        s.order_by = _order(o)
    lim = node.args.get("limit")
    if lim is not None:
        if not isinstance(lim, exp.Limit):
            raise unsupported(lim)
        _only(lim, {"expression"}, {"offset": "LIMIT offset, count"})
        s.limit = translate_expression(lim.expression)
    off = node.args.get("offset")
    if off is not None:
        _only(off, {"expression"})
        s.offset = translate_expression(off.expression)
    for lock in node.args.get("locks") or []:
        _only(lock, {"update"}, {"expressions": "FOR UPDATE OF", "wait": "NOWAIT / SKIP LOCKED",
                                 "key": "FOR NO KEY UPDATE / FOR KEY SHARE"})
        if not lock.args.get("update"):
            raise unsupported("FOR SHARE")
        s.for_update = True
    return s


def _order(o: exp.Order) -> list:
    _only(o, {"expressions"})
    out = []
    for it in o.expressions:
        if not isinstance(it, exp.Ordered):
            out.append(ast.OrderItem(translate_expression(it)))
            continue
        _only(it, {"this", "desc", "nulls_first"}, {"with_fill": "WITH FILL"})
        desc = bool(it.args.get("desc"))
        nf = it.args.get("nulls_first")
        out.append(ast.OrderItem(translate_expression(it.this), desc,
                                 None if nf is None else bool(nf)))
    return out


def _table(t) -> ast.TableRef:
    if not isinstance(t, exp.Table):
        raise unsupported(t)
    _only(t, {"this", "alias"}, {"only": "ONLY"})
    alias = t.args.get("alias")
    a = None
    if alias is not None:
        if alias.args.get("columns"):
            raise unsupported("column aliases in FROM")
        a = _ident(alias.this)
    if not isinstance(t.this, exp.Identifier):
        raise unsupported(t.this)
    return ast.TableRef(_ident(t.this), a)


def _join(items: list, j: exp.Join) -> list:
    _only(j, {"this", "on", "kind", "side"}, {"method": "NATURAL JOIN",
                                              "using": "JOIN ... USING"})
    side = (j.args.get("side") or "").upper()
    kind = (j.args.get("kind") or "").upper()
    if side:
        raise unsupported(f"{side} JOIN (outer joins)")
    if kind not in ("", "INNER", "CROSS"):
        raise unsupported(f"{kind} JOIN")
    right = _table(j.this)
    on = j.args.get("on")
    if on is None:
        if kind == "INNER":
            raise unsupported("JOIN without ON")
        return items + [right]
    if kind == "CROSS":
        raise unsupported("CROSS JOIN ... ON")
    left = items[-1]
    return items[:-1] + [ast.JoinRef(left, right, translate_expression(on))]


def _target_table(t):
    if isinstance(t, exp.Schema):
        _only(t, {"this", "expressions"})
        tab = _table(t.this)
        cols = [_ident(c) for c in t.expressions]
        return tab, cols
    return _table(t), None


def _insert(node: exp.Insert) -> ast.InsertStmt:
    _only(node, {"this", "expression", "default"})
    tab, cols = _target_table(node.this)
    if tab.alias:
        raise unsupported("an alias for the INSERT target")
    st = ast.InsertStmt(table=tab.name, columns=cols)
    if node.args.get("default"):
        st.values = [[]]
        st.columns = []
        return st
    src = node.expression
    if isinstance(src, exp.Values):
        _only(src, {"expressions"})
        rows = []
        for tup in src.expressions:
            if not isinstance(tup, exp.Tuple):
                raise unsupported(tup)
            rows.append([translate_expression(x, default_ok=True) for x in tup.expressions])
        st.values = rows
    elif isinstance(src, exp.Select):
        st.select = translate_select(src)
    else:
        raise unsupported(src if src is not None else "INSERT without VALUES or SELECT")
    return st


def _update(node: exp.Update) -> ast.UpdateStmt:
    _only(node, {"this", "expressions", "where"}, {"from_": "UPDATE ... FROM",
                                                  "order": "UPDATE ... ORDER BY",
                                                  "limit": "UPDATE ... LIMIT"})
    tab = _table(node.this)
    assigns = []
    for a in node.expressions:
        if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
            raise unsupported(a)
        col = a.this
        if col.args.get("table") is not None:
            raise unsupported("qualified column names in SET")
        assigns.append((_ident(col.this), translate_expression(a.expression, default_ok=True)))
    w = node.args.get("where")
    return ast.UpdateStmt(tab.name, tab.alias, assigns,
                          translate_expression(w.this) if w is not None else None)


def _delete(node: exp.Delete) -> ast.DeleteStmt:
    _only(node, {"this", "where"}, {"using": "DELETE ... USING"})
    tab = _table(node.this)
    w = node.args.get("where")
    return ast.DeleteStmt(tab.name, tab.alias,
                          translate_expression(w.this) if w is not None else None)


def _type_text(dt_node) -> str:
    if not isinstance(dt_node, exp.DataType):
        raise unsupported(dt_node)
    return dt_node.sql(dialect="postgres").lower()


def _create(node: exp.Create) -> ast.Statement:
    kind = (node.args.get("kind") or "").upper()
    if kind == "TABLE":
        _only(node, {"this", "kind", "exists"}, {"expression": "CREATE TABLE ... AS",
                                                 "properties": "table options (TEMP, WITH ...)",
                                                 "replace": "OR REPLACE"})
        schema = node.this
        if not isinstance(schema, exp.Schema):
            raise unsupported("CREATE TABLE without a column list")
        _only(schema, {"this", "expressions"})
        tab = _table(schema.this)
        st = ast.CreateTableStmt(name=tab.name, columns=[],
                                 if_not_exists=bool(node.args.get("exists")))
        for item in schema.expressions:
            if isinstance(item, exp.ColumnDef):
                st.columns.append(_column_def(item))
            elif isinstance(item, exp.PrimaryKey):
                _only(item, {"expressions", "include"})
                if st.primary_key is not None:
                    raise unsupported("more than one PRIMARY KEY")
                st.primary_key = [_ident(x) for x in item.expressions]
            elif isinstance(item, exp.UniqueColumnConstraint):
                _only(item, {"this", "nulls", "include"})
                sch = item.this
                if not isinstance(sch, exp.Schema):
                    raise unsupported(item)
                st.uniques.append([_ident(x) for x in sch.expressions])
            else:
                raise unsupported(item)
        return st
    if kind == "INDEX":
        _only(node, {"this", "kind", "unique", "exists"},
              {"concurrently": "CREATE INDEX CONCURRENTLY", "replace": "OR REPLACE"})
        idx = node.this
        if not isinstance(idx, exp.Index):
            raise unsupported(idx)
        _only(idx, {"this", "table", "params", "unique"})
        params = idx.args.get("params")
        if params is None:
            raise unsupported("CREATE INDEX without columns")
        _only(params, {"columns", "with_storage"}, {"using": "USING (index access methods "
                                                    "other than btree)",
                                                    "where": "partial indexes",
                                                    "include": "INCLUDE columns"})
        using = params.args.get("using")
        if using is not None:
            raise unsupported("USING (btree is the only index type)")
        cols = []
        for c in params.args.get("columns") or []:
            if isinstance(c, exp.Ordered):
                if c.args.get("desc"):
                    raise unsupported("DESC index columns")
                if c.args.get("nulls_first"):
                    raise unsupported("NULLS FIRST index columns")
                c = c.this
            if not isinstance(c, exp.Column) or c.args.get("table") is not None:
                raise unsupported("expression indexes")
            cols.append(_ident(c.this))
        name = _ident(idx.this) if idx.this is not None else None
        tab = _table(idx.args["table"])
        return ast.CreateIndexStmt(name, tab.name, cols, bool(node.args.get("unique")),
                                   bool(node.args.get("exists")))
    raise unsupported(f"CREATE {kind or node.sql(dialect='postgres')[:30]}")


def _column_def(cd: exp.ColumnDef) -> ast.ColumnSpec:
    _only(cd, {"this", "kind", "constraints"})
    if cd.args.get("kind") is None:
        raise unsupported(f'column "{_ident(cd.this)}" without a type')
    spec = ast.ColumnSpec(_ident(cd.this), _type_text(cd.args["kind"]))
    for con in cd.args.get("constraints") or []:
        k = con.args.get("kind")
        if isinstance(k, exp.NotNullColumnConstraint):
            if k.args.get("allow_null"):
                continue                 # an explicit NULL
            spec.not_null = True
        elif isinstance(k, exp.DefaultColumnConstraint):
            translate_expression(k.this)   # refuse what we could not evaluate later
            spec.default = k.this.sql(dialect="postgres")
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            spec.primary = True
        elif isinstance(k, exp.UniqueColumnConstraint):
            spec.unique = True
        else:
            raise unsupported(f"column constraint {con.sql(dialect='postgres')}")
    return spec


def _drop(node: exp.Drop) -> ast.Statement:
    kind = (node.args.get("kind") or "").upper()
    _only(node, {"kind", "tables", "exists", "cascade", "restrict"},
          {"concurrently": "DROP INDEX CONCURRENTLY"})
    names = []
    for t in node.args.get("tables") or []:
        names.append(_table(t).name)
    if kind == "TABLE":
        return ast.DropTableStmt(names, bool(node.args.get("exists")))
    if kind == "INDEX":
        return ast.DropIndexStmt(names, bool(node.args.get("exists")))
    raise unsupported(f"DROP {kind}")


def _ident(i) -> str:
    if isinstance(i, exp.Identifier):
        return i.this if i.args.get("quoted") else i.this.lower()
    if isinstance(i, str):
        return i.lower()
    if isinstance(i, exp.Column) and i.args.get("table") is None:
        return _ident(i.this)
    raise unsupported(i)


# ---------------------------------------------------------------------------------------------
# expressions
_BINOPS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
           exp.DPipe: "||", exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=",
           exp.GT: ">", exp.GTE: ">=", exp.And: "and", exp.Or: "or"}
_AGGS = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
_FUNCS = {exp.Abs: "abs", exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length"}
_INT_RE = re.compile(r"^\d+$")


def translate_expression(e, *, star_ok: bool = False, default_ok: bool = False) -> ast.Node:
    """sqlglot's expression ``e`` -> minidb's (a whitelist: any other form is
    NotSupportedError).  ``star_ok``: ``*`` and ``t.*`` are allowed (a select list);
    ``default_ok``: ``DEFAULT`` is (an INSERT's VALUES, an UPDATE's SET)."""
    t = translate_expression
    cls = type(e)
    if cls in _BINOPS:
        _only(e, {"this", "expression", "typed", "safe"})
        if cls is exp.Div and e.args.get("safe"):
            raise unsupported(e)
        return ast.BinOp(_BINOPS[cls], t(e.this), t(e.expression))
    if cls is exp.Column or cls is exp.Star:
        return _column(e, star_ok, default_ok)
    if cls in _CONSTANTS:
        return _constant(e)
    if cls is exp.Paren:
        return t(e.this)
    if cls is exp.Neg:
        inner = t(e.this)
        if isinstance(inner, ast.Lit) and inner.kind in ("int", "float"):
            return ast.Lit(-inner.value, inner.kind)
        return ast.UnOp("-", inner)
    if cls in _PREDICATES:
        return _predicate(e)
    if cls is exp.Cast:
        _only(e, {"this", "to"})
        return ast.CastE(t(e.this), _type_text(e.args["to"]))
    if cls in _AGGS:
        return _aggregate(e)
    if cls in _FUNCS or cls in _SPECIAL_FUNCS:
        return _function(e)
    if cls is exp.Case:
        return _case(e)
    if cls is exp.Var and default_ok and str(e.this).upper() == "DEFAULT":
        return ast.DefaultE()
    if cls is exp.Placeholder:
        raise unsupported("this placeholder form (use ? or $n)")
    raise unsupported(e)


_CONSTANTS = (exp.Literal, exp.Boolean, exp.Null, exp.Parameter)
_PREDICATES = (exp.Not, exp.Is, exp.Between, exp.In, exp.Like, exp.ILike)
_SPECIAL_FUNCS = (exp.Coalesce, exp.Nullif, exp.CurrentTimestamp, exp.Anonymous)


def _column(e, star_ok: bool, default_ok: bool) -> ast.Node:
    """A column reference ``c`` / ``t.c``, a star ``*`` / ``t.*``, or the keyword
    DEFAULT (which sqlglot reads as a column named default)."""
    if type(e) is exp.Star:
        if not star_ok:
            raise unsupported("* here")
        return ast.StarE(None)
    _only(e, {"this", "table"})
    if default_ok and e.args.get("table") is None and isinstance(e.this, exp.Identifier) \
            and not e.this.args.get("quoted") and e.this.this.upper() == "DEFAULT":
        return ast.DefaultE()
    if isinstance(e.this, exp.Star):
        if not star_ok:
            raise unsupported("* here")
        return ast.StarE(_ident(e.args["table"]))
    parts = (_ident(e.this),)
    if e.args.get("table") is not None:
        parts = (_ident(e.args["table"]),) + parts
    return ast.Name(parts)


def _constant(e) -> ast.Node:
    """A literal (string, number, boolean, NULL) or a parameter ``$n``."""
    cls = type(e)
    if cls is exp.Literal:
        if e.is_string:
            return ast.Lit(e.this, "str")
        s = e.this
        if _INT_RE.match(s):
            return ast.Lit(int(s), "int")
        try:
            return ast.Lit(float(s), "float")
        except ValueError:
            raise unsupported(e) from None
    if cls is exp.Boolean:
        return ast.Lit(bool(e.this), "bool")
    if cls is exp.Null:
        return ast.Lit(None, "null")
    inner = e.this                       # exp.Parameter
    if isinstance(inner, exp.Literal) and not inner.is_string and _INT_RE.match(inner.this):
        n = int(inner.this)
        if n < 1:
            raise unsupported(e)
        return ast.Placeholder(n - 1)
    raise unsupported(e)


def _predicate(e) -> ast.Node:
    """NOT, IS [NOT] NULL / TRUE / FALSE, [NOT] BETWEEN, [NOT] IN (list), [NOT] [I]LIKE."""
    t = translate_expression
    cls = type(e)
    if cls is exp.Not:
        inner = e.this
        if isinstance(inner, exp.In):
            x = t(inner)
            return ast.InE(x.arg, x.items, not x.negated)
        if isinstance(inner, exp.Between):
            x = t(inner)
            return ast.BetweenE(x.arg, x.low, x.high, not x.negated)
        return ast.UnOp("not", t(inner))
    if cls is exp.Is:
        _only(e, {"this", "expression", "negate"})
        rhs = e.expression
        neg = bool(e.args.get("negate"))
        if isinstance(rhs, exp.Null):
            return ast.IsNullE(t(e.this), neg)
        if isinstance(rhs, exp.Boolean):
            return ast.IsBoolE(t(e.this), bool(rhs.this), neg)
        raise unsupported(f"IS {rhs.sql(dialect='postgres')}")
    if cls is exp.Between:
        _only(e, {"this", "low", "high"}, {"symmetric": "BETWEEN SYMMETRIC"})
        return ast.BetweenE(t(e.this), t(e.args["low"]), t(e.args["high"]))
    if cls is exp.In:
        _only(e, {"this", "expressions"}, {"query": "IN (subquery)", "unnest": "IN UNNEST"})
        if not e.expressions:
            raise SyntaxError_('syntax error at or near ")": IN () needs at least one value')
        return ast.InE(t(e.this), tuple(t(x) for x in e.expressions))
    _only(e, {"this", "expression", "negate"})          # LIKE, ILIKE
    return ast.LikeE(t(e.this), t(e.expression), bool(e.args.get("negate")),
                     cls is exp.ILike)


def _aggregate(e) -> ast.FuncE:
    """count / sum / avg / min / max, with ``*`` (count only) or DISTINCT."""
    name = _AGGS[type(e)]
    _only(e, {"this", "big_int"})
    arg = e.this
    if isinstance(arg, exp.Star):
        if name != "count":
            raise unsupported(f"{name}(*)")
        return ast.FuncE("count", (), False, True)
    distinct = False
    if isinstance(arg, exp.Distinct):
        _only(arg, {"expressions"})
        if len(arg.expressions) != 1:
            raise unsupported(f"{name}(DISTINCT with several arguments)")
        distinct, arg = True, arg.expressions[0]
    if arg is None:
        raise unsupported(f"{name}() without an argument")
    return ast.FuncE(name, (translate_expression(arg),), distinct)


def _function(e) -> ast.FuncE:
    """A scalar function call: the ones sqlglot knows by name, COALESCE, NULLIF,
    CURRENT_TIMESTAMP, and any other name (checked by the binder)."""
    t = translate_expression
    cls = type(e)
    if cls in _FUNCS:
        _only(e, {"this"})
        return ast.FuncE(_FUNCS[cls], (t(e.this),))
    if cls is exp.Coalesce:
        _only(e, {"this", "expressions"})
        return ast.FuncE("coalesce", (t(e.this),) + tuple(t(x) for x in e.expressions))
    if cls is exp.Nullif:
        _only(e, {"this", "expression"})
        return ast.FuncE("nullif", (t(e.this), t(e.expression)))
    if cls is exp.CurrentTimestamp:  # CURRENT_TIMESTAMP: the transaction's start, as now()
        if e.args.get("this") is not None:
            raise unsupported("CURRENT_TIMESTAMP(precision)")
        return ast.FuncE("now", ())
    _only(e, {"this", "expressions"})                 # exp.Anonymous
    return ast.FuncE(str(e.this).lower(), tuple(t(x) for x in e.expressions))


def _case(e) -> ast.CaseE:
    """CASE [operand] WHEN ... THEN ... [ELSE ...] END."""
    t = translate_expression
    _only(e, {"this", "ifs", "default"})
    whens = []
    for i in e.args.get("ifs") or []:
        if not isinstance(i, exp.If):
            raise unsupported(i)
        _only(i, {"this", "true"})
        whens.append((t(i.this), t(i.args["true"])))
    operand = e.args.get("this")
    default = e.args.get("default")
    return ast.CaseE(t(operand) if operand is not None else None, tuple(whens),
                     t(default) if default is not None else None)


def parse_expression_text(text: str) -> ast.Node:
    """A stored expression (a column DEFAULT) back into the logical tree."""
    return translate_expression(sqlglot.parse_one(text, read="postgres"))
