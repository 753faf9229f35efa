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

PostgreSQL's clients' catalog queries (psql's ``\\d``): schema-qualified table names
(``_schema_qualified``), ``pg_catalog.f(...)``, ``OPERATOR(pg_catalog.~)``, ``COLLATE
pg_catalog.default`` and ``E'...'`` strings (``_pg_catalog_syntax``); a query that inner-joins
a catalog of a feature minidb lacks is an empty result with the query's column names
(``_empty_catalog_query``; ``minidb.catalog.pgcatalog.EMPTY``).
"""

from __future__ import annotations

import decimal
import re

import sqlglot
from sqlglot import exp

from minidb.errors import NotSupportedError, SyntaxError_
from minidb.catalog.cache import index_expr_name
from minidb.index.keys import default_option
from minidb.sql import ast
from minidb.sql.parser.dialect import UNARY_PLUS, MinidbPostgres
from minidb.sql.parser.lexer import _skip, unescape

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
    """NotSupportedError naming ``what``: a phrase, or a sqlglot node shown as the SQL the
    user wrote (a function by its name), never as sqlglot's class name."""
    if isinstance(what, exp.Expression):
        name = type(what).__name__
        what = _FRIENDLY.get(name) or _as_written(what)
    return NotSupportedError(f"{what} is not supported")


def _as_written(node) -> str:
    try:
        text = node.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - only for the message
        text = ""
    if isinstance(node, exp.Func):
        fname = text.split("(", 1)[0].strip().lower() or type(node).__name__.lower()
        return f"function {fname}(...)" if "(" in text else fname.upper()
    return f'"{text[:60]}"' if text else "this construct"


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
    if isinstance(node, exp.Select) and node.args.get("into") is not None:
        return _select_into(node)
    if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery)):
        return translate_query(node)
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


_SETOPS = {exp.Union: "union", exp.Intersect: "intersect", exp.Except: "except"}


def translate_query(node):
    """A query: SELECT, a set operation (UNION / INTERSECT / EXCEPT [ALL]) or a
    parenthesized query, with its WITH list, ORDER BY and LIMIT."""
    if isinstance(node, exp.Subquery):
        _only(node, {"this"}, {"alias": "an alias here"})
        inner = translate_query(node.this)
        return inner
    empty = _empty_catalog_query(node)
    if empty is not None:
        return empty
    if isinstance(node, exp.Select):
        return translate_select(node)
    if type(node) not in _SETOPS:
        raise unsupported(node)
    _only(node, {"this", "expression", "distinct", "order", "limit", "offset", "with_"},
          {"by_name": "UNION BY NAME", "side": "this set operation", "kind": "this set "
           "operation", "on": "this set operation"})
    st = ast.SetOpStmt(_SETOPS[type(node)], not node.args.get("distinct"),
                       translate_query(node.this), translate_query(node.expression))
    o = node.args.get("order")
    if o is not None:
        st.order_by = _order(o)
    st.limit, st.offset = _limit_offset(node)
    w = node.args.get("with_")
    if w is not None:
        st.with_ = _with(w)
    return st


def _with(w) -> list:
    _only(w, {"expressions", "recursive"})
    out = []
    for cte in w.expressions:
        _only(cte, {"this", "alias"}, {"materialized": "MATERIALIZED",
                                       "scalar": "this WITH form"})
        alias = cte.args.get("alias")
        cols = [_ident(c) for c in alias.args.get("columns") or []] or None
        out.append(ast.CTE(_ident(alias.this), cols, translate_query(cte.this),
                           bool(w.args.get("recursive"))))
    return out


def _limit_offset(node):
    limit = offset = None
    lim = node.args.get("limit")
    if lim is not None:
        if isinstance(lim, exp.Fetch):
            _only(lim, {"direction", "count", "limit_options"})
            opts = lim.args.get("limit_options")
            if opts is not None and (opts.args.get("percent") or opts.args.get("with_ties")):
                raise unsupported("FETCH ... PERCENT / WITH TIES")
            cnt = lim.args.get("count")
            limit = translate_expression(cnt) if cnt is not None else ast.Lit(1, "int")
        elif not isinstance(lim, exp.Limit):
            raise unsupported(lim)
        else:
            _only(lim, {"expression"}, {"offset": "LIMIT offset, count"})
            e = lim.expression
            if isinstance(e, exp.Var) and str(e.this).upper() == "ALL":
                limit = None                  # LIMIT ALL: no limit
            else:
                limit = translate_expression(e)
    off = node.args.get("offset")
    if off is not None:
        _only(off, {"expression"})
        offset = translate_expression(off.expression)
    return limit, offset


def translate_select(node) -> ast.SelectStmt:
    if not isinstance(node, exp.Select):
        raise unsupported(node)
    _only(node, {"expressions", "from_", "joins", "where", "group", "having", "order", "limit",
                 "offset", "distinct", "locks", "with_", "windows"})
    windows = {}
    for w in node.args.get("windows") or []:
        windows[_ident(w.this)] = w
    targets = []
    _WINDOWS.append(windows)
    try:
        for e in node.expressions:
            if isinstance(e, exp.Alias):
                _only(e, {"this", "alias"})
                targets.append((translate_expression(e.this), _ident(e.args["alias"])))
            else:
                targets.append((translate_expression(e, star_ok=True), None))
        o = node.args.get("order")
        order = _order(o) if o is not None else []
    finally:
        _WINDOWS.pop()
    s = ast.SelectStmt(targets=targets)
    d = node.args.get("distinct")
    if d is not None:
        _only(d, {"on"}, {"expressions": "DISTINCT here"})
        on = d.args.get("on")
        if on is not None:
            exprs = on.expressions if isinstance(on, exp.Tuple) else [on]
            s.distinct_on = [translate_expression(x) for x in exprs]
        else:
            s.distinct = True
    w = node.args.get("with_")
    if w is not None:
        s.with_ = _with(w)
    f = node.args.get("from_")
    items = []
    if f is not None:
        _only(f, {"this"})
        items.append(_from_item(f.this))
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
        s.group_by = [_group_item(x) for x in g.expressions]
    h = node.args.get("having")
    if h is not None:
        s.having = translate_expression(h.this)
    s.order_by = order
    s.limit, s.offset = _limit_offset(node)
    locks = node.args.get("locks") or []
    if len(locks) > 1:
        raise unsupported("more than one row-locking clause")
    for lock in locks:
        _only(lock, {"update", "key", "wait", "expressions"})
        upd, key = bool(lock.args.get("update")), bool(lock.args.get("key"))
        s.lock_mode = ("no key update" if key else "update") if upd else \
            ("key share" if key else "share")
        wait = lock.args.get("wait")
        if wait is not None and not isinstance(wait, bool):
            raise unsupported("WAIT n")
        s.lock_wait = "block" if wait is None else ("nowait" if wait else "skip")
        s.lock_of = [t.name for t in lock.args.get("expressions") or []]
        s.for_update = True
    return s


def _order(o: exp.Order) -> list:
    _only(o, {"expressions", "this"})
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
    name = _schema_qualified(t)
    _only(t, {"this", "alias", "db"}, {"only": "ONLY"})
    alias = t.args.get("alias")
    a = cols = None
    if alias is not None:
        a = _ident(alias.this) if alias.this is not None else None
        cols = [_ident(c) for c in alias.args.get("columns") or []] or None
    if not isinstance(t.this, exp.Identifier):
        raise unsupported(t.this)
    return ast.TableRef(name, a, cols)


def _alias_parts(alias):
    if alias is None:
        return None, None
    name = _ident(alias.this) if alias.this is not None else None
    return name, [_ident(c) for c in alias.args.get("columns") or []] or None


def _from_item(t):
    """One FROM item: a table, a subquery (derived table), a table function, or a
    parenthesized join."""
    if isinstance(t, exp.Table) and isinstance(t.this, exp.Func):
        _only(t, {"this", "alias", "db"})
        if t.args.get("db") is not None and _ident(t.args["db"]) != "pg_catalog":
            raise unsupported("a function of a schema other than pg_catalog")
        name, cols = _alias_parts(t.args.get("alias"))
        f = translate_expression(t.this)
        if not isinstance(f, ast.FuncE):
            raise unsupported(t.this)
        return ast.FunctionRef(f, name, cols)
    if isinstance(t, exp.Unnest) and len(t.expressions) == 1 and not t.args.get("offset"):
        _only(t, {"expressions", "alias", "offset"})
        name, cols = _alias_parts(t.args.get("alias"))
        return ast.FunctionRef(ast.FuncE("unnest", (translate_expression(t.expressions[0]),)),
                               name, cols)
    if isinstance(t, exp.Table) and t.args.get("joins"):
        items = _from_items(t)
        joined = items[0]
        for right in items[1:]:  # (a CROSS JOIN b): one item, the cross product
            joined = ast.JoinRef(joined, right, None)
        return joined
    if isinstance(t, exp.Subquery):
        _only(t, {"this", "alias"})
        name, cols = _alias_parts(t.args.get("alias"))
        if isinstance(t.this, exp.Table):          # (a JOIN b ON ...)
            if name is not None:
                raise unsupported("an alias for a parenthesized join")
            return _from_item(t.this)
        if name is None:
            raise SyntaxError_("subquery in FROM must have an alias")
        return ast.SubqueryRef(translate_query(t.this), name, cols)
    if isinstance(t, exp.Lateral):
        _only(t, {"this", "alias", "view", "outer", "ordinality"})
        if t.args.get("view") or t.args.get("outer"):
            raise unsupported("LATERAL VIEW")
        if t.args.get("ordinality"):
            raise unsupported("LATERAL ... WITH ORDINALITY")
        if isinstance(t.this, exp.Func):    # a function in FROM is lateral anyway
            return _from_item(exp.Table(this=t.this, alias=t.args.get("alias")))
        if not isinstance(t.this, exp.Subquery):
            raise unsupported("LATERAL of this item")
        _only(t.this, {"this"})
        name, cols = _alias_parts(t.args.get("alias"))
        if name is None:
            raise SyntaxError_("subquery in FROM must have an alias")
        return ast.SubqueryRef(translate_query(t.this.this), name, cols, lateral=True)
    if isinstance(t, exp.Values):
        return _values_in_from(t)
    return _table(t)


def _values_in_from(t: exp.Values):
    """``(VALUES (a, b), ...) AS v (x, y)`` - also what sqlglot makes of a VALUES operand of
    UNION (psql's \\d sends one) - as the derived table ``SELECT a AS column1, b AS
    column2 UNION ALL ...`` (PostgreSQL's column names)."""
    rows = [r.expressions if isinstance(r, exp.Tuple) else [r] for r in t.expressions]
    if not rows or len({len(r) for r in rows}) != 1:
        raise SyntaxError_("VALUES lists must all be the same length")
    q = None
    for r in rows:
        s = exp.select(*[e.copy().as_(f"column{i + 1}") for i, e in enumerate(r)])
        q = s if q is None else exp.union(q, s, distinct=False)
    name, cols = _alias_parts(t.args.get("alias"))
    return ast.SubqueryRef(translate_query(q), name or "*VALUES*", cols)


def _join(items: list, j: exp.Join) -> list:
    _only(j, {"this", "on", "kind", "side", "using", "method"})
    side = (j.args.get("side") or "").upper()
    kind = (j.args.get("kind") or "").upper()
    method = (j.args.get("method") or "").upper()
    if method not in ("", "NATURAL"):
        raise unsupported(f"{method} JOIN")
    if kind not in ("", "INNER", "CROSS", "OUTER"):
        raise unsupported(f"{kind} JOIN")
    right = _from_item(j.this)
    on = j.args.get("on")
    using = j.args.get("using")
    natural = method == "NATURAL"
    jkind = side.lower() if side else "inner"
    if on is None and not using and not natural:
        if kind == "CROSS" or (not side and kind == ""):
            if kind == "" and not side:
                # a comma (sqlglot gives no kind for either; JOIN without ON is a syntax
                # error in PostgreSQL and sqlglot refuses it already)
                return items + [right]
            return items + [right]
        raise SyntaxError_(f"syntax error: {side or kind} JOIN needs ON or USING")
    if kind == "CROSS":
        raise unsupported("CROSS JOIN ... ON")
    left = items[-1]
    jr = ast.JoinRef(left, right, translate_expression(on) if on is not None else None,
                     jkind, [_ident(u) for u in using] if using else None, natural)
    return items[:-1] + [jr]


def _target_table(t):
    if isinstance(t, exp.Schema):
        _only(t, {"this", "expressions"})
        tab = _table(t.this)
        cols = [_ident(c) for c in t.expressions]
        return tab, cols
    return _table(t), None


def _returning(node) -> list | None:
    """RETURNING's list as [(expr, alias)] (``*`` as StarE), None without one."""
    r = node.args.get("returning")
    if r is None:
        return None
    _only(r, {"expressions"}, {"into": "RETURNING ... INTO"})
    out = []
    for e in r.expressions:
        if isinstance(e, exp.Alias):
            out.append((translate_expression(e.this), _ident(e.args["alias"])))
        elif isinstance(e, exp.Star):
            out.append((ast.StarE(None), None))
        else:
            out.append((translate_expression(e, star_ok=True), None))
    return out


def _on_conflict(c) -> ast.OnConflictClause:
    _only(c, {"action", "conflict_keys", "constraint", "expressions", "where", "duplicate",
              "index_predicate"})
    if c.args.get("duplicate"):
        raise unsupported("ON DUPLICATE KEY")
    action = (c.args.get("action").name if c.args.get("action") is not None else "").upper()
    if action not in ("DO NOTHING", "DO UPDATE"):
        raise unsupported(f"ON CONFLICT {action or '...'}")
    out = ast.OnConflictClause("nothing" if action == "DO NOTHING" else "update")
    keys = c.args.get("conflict_keys")
    if keys:
        cols = []
        for k in keys:
            if isinstance(k, exp.Ordered):
                if k.args.get("desc") or k.args.get("nulls_first"):
                    raise unsupported("ASC / DESC / NULLS in ON CONFLICT")
                k = k.this
            if isinstance(k, exp.Column) and k.args.get("table") is None:
                cols.append(_ident(k.this))
            else:                   # an expression index's expression
                out.exprs.append(translate_expression(k))
        out.columns = cols
    ip = c.args.get("index_predicate")
    if ip is not None:
        if not keys:
            raise SyntaxError_('syntax error at or near "WHERE"')
        out.index_where = translate_expression(ip.this)
    if c.args.get("constraint") is not None:
        out.constraint = _ident(c.args["constraint"])
    for a in c.args.get("expressions") or []:
        if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column) \
                or a.this.args.get("table") is not None:
            raise unsupported(a)
        out.assignments.append((_ident(a.this.this),
                                translate_expression(a.expression, default_ok=True)))
    w = c.args.get("where")
    if w is not None:
        out.where = translate_expression(w.this)
    return out


def _insert(node: exp.Insert) -> ast.InsertStmt:
    _only(node, {"this", "expression", "default", "with_", "returning", "conflict"})
    tab, cols = _target_table(node.this)
    if tab.alias:
        raise unsupported("an alias for the INSERT target")
    st = ast.InsertStmt(table=tab.name, columns=cols, returning=_returning(node))
    if node.args.get("conflict") is not None:
        st.on_conflict = _on_conflict(node.args["conflict"])
    if node.args.get("default"):
        st.values = [[]]
        st.columns = []
        return st
    src = node.expression
    if node.args.get("with_") is not None and isinstance(src, (exp.Select, exp.SetOperation)):
        src = src.copy()
        src.set("with_", node.args["with_"])
    if isinstance(src, exp.Values):
        _only(src, {"expressions"})
        rows = []
        for tup in src.expressions:
            if not isinstance(tup, exp.Tuple):
                raise unsupported(tup)
            rows.append([translate_expression(x, default_ok=True) for x in tup.expressions])
        st.values = rows
    elif isinstance(src, (exp.Select, exp.SetOperation, exp.Subquery)):
        st.select = translate_query(src)
    else:
        raise unsupported(src if src is not None else "INSERT without VALUES or SELECT")
    return st


def _update(node: exp.Update) -> ast.UpdateStmt:
    _only(node, {"this", "expressions", "where", "from_", "returning"},
          {"order": "UPDATE ... ORDER BY", "limit": "UPDATE ... LIMIT"})
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
    st = ast.UpdateStmt(tab.name, tab.alias, assigns,
                        translate_expression(w.this) if w is not None else None,
                        returning=_returning(node))
    f = node.args.get("from_")
    if f is not None:
        _only(f, {"this"})
        st.from_ = _from_items(f.this)
    return st


def _from_items(t) -> list:
    """A FROM list given as one sqlglot node whose joins hang on its first table
    (UPDATE ... FROM, DELETE ... USING): its comma-separated items."""
    if isinstance(t, exp.Table) and t.args.get("joins"):
        inner = t.copy()
        joins = inner.args.pop("joins")
        items = [_from_item(inner)]
        for j in joins:
            items = _join(items, j)
        return items
    return [_from_item(t)]


def _delete(node: exp.Delete) -> ast.DeleteStmt:
    _only(node, {"this", "where", "using", "returning"})
    tab = _table(node.this)
    w = node.args.get("where")
    st = ast.DeleteStmt(tab.name, tab.alias,
                        translate_expression(w.this) if w is not None else None,
                        returning=_returning(node))
    for item in node.args.get("using") or []:
        st.using.extend(_from_items(item))
    return st


def _type_text(dt_node) -> str:
    if not isinstance(dt_node, exp.DataType):
        raise unsupported(dt_node)
    text = dt_node.sql(dialect="postgres").lower()
    return text[len("pg_catalog."):] if text.startswith("pg_catalog.") else text


def _storage_options(props) -> None:
    """CREATE TABLE's ``WITH (fillfactor = 100)`` (pgbench -i writes it) is accepted: it is
    minidb's behaviour already.  Another fillfactor is refused rather than ignored (minidb's
    fill factor is the session setting heap_fillfactor, not a per-table option), and so is
    every other table option."""
    if props is None:
        return
    for p in props.expressions:
        if isinstance(p, exp.Property) and isinstance(p.this, exp.Var) \
                and p.this.name.lower() == "fillfactor":
            v = p.args.get("value")
            if isinstance(v, exp.Literal) and not v.is_string and v.this == "100":
                continue
            raise unsupported("a table's own fillfactor other than 100 (use SET "
                              "heap_fillfactor = N before loading)")
        raise unsupported("table options (TEMP, WITH ...)")


def _create(node: exp.Create) -> ast.Statement:
    kind = (node.args.get("kind") or "").upper()
    if kind == "TABLE" and node.args.get("expression") is not None:
        return _create_table_as(node)
    if kind == "VIEW":
        return _create_view(node)
    if kind == "TABLE":
        temp, on_commit = _temp_options(node)
        _storage_options(node.args.get("properties"))
        _only(node, {"this", "kind", "exists", "properties"},
              {"expression": "CREATE TABLE ... AS", "replace": "OR REPLACE"})
        schema = node.this
        if not isinstance(schema, exp.Schema):
            raise unsupported("CREATE TABLE without a column list")
        _only(schema, {"this", "expressions"})
        tab = _table(schema.this)
        st = ast.CreateTableStmt(name=tab.name, columns=[],
                                 if_not_exists=bool(node.args.get("exists")), temp=temp,
                                 on_commit=on_commit)
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
            elif isinstance(item, exp.CheckColumnConstraint):
                st.checks.append((None, check_text(item)))
            elif isinstance(item, exp.Constraint) and len(item.expressions) == 1 and \
                    isinstance(item.expressions[0], exp.CheckColumnConstraint):
                st.checks.append((_ident(item.this), check_text(item.expressions[0])))
            elif isinstance(item, exp.ForeignKey) or (
                    isinstance(item, exp.Constraint) and len(item.expressions) == 1
                    and isinstance(item.expressions[0], exp.ForeignKey)):
                from minidb.sql.parser.fkeyspec import spec_from_sqlglot
                named = isinstance(item, exp.Constraint)
                st.foreign_keys.append(spec_from_sqlglot(
                    item.expressions[0] if named else item,
                    name=_ident(item.this) if named else None))
            else:
                raise unsupported(item)
        for c in st.columns:
            if c.references is not None:
                st.foreign_keys.append(c.references)
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
        _only(params, {"columns", "with_storage", "where"},
              {"using": "USING (index access methods other than btree)",
               "include": "INCLUDE columns"})
        where = params.args.get("where")
        predicate = where.this.sql(dialect="postgres", normalize_functions="lower") \
            if where is not None else None
        using = params.args.get("using")
        if using is not None:
            raise unsupported("USING (btree is the only index type)")
        cols, options, exprs = [], [], []
        for c in params.args.get("columns") or []:
            desc, nulls_first = False, None
            if isinstance(c, exp.Ordered):
                desc = bool(c.args.get("desc"))
                nulls_first = c.args.get("nulls_first")
                c = c.this
            options.append(default_option(desc, nulls_first))
            if isinstance(c, exp.Column) and c.args.get("table") is None:
                cols.append(_ident(c.this))
                exprs.append(None)
                continue
            if isinstance(c, exp.Paren):          # (a + 1): PostgreSQL's spelling
                c = c.this
            text = c.sql(dialect="postgres", normalize_functions="lower")
            cols.append(index_expr_name(text))
            exprs.append(text)
        name = _ident(idx.this) if idx.this is not None else None
        tab = _table(idx.args["table"])
        return ast.CreateIndexStmt(name, tab.name, cols, bool(node.args.get("unique")),
                                   bool(node.args.get("exists")), options=options,
                                   where=predicate,
                                   exprs=exprs if any(e is not None for e in exprs) else [])
    raise unsupported(f"CREATE {kind or node.sql(dialect='postgres')[:30]}")


def _temp_options(node) -> tuple:
    """(TEMP?, ON COMMIT action) of CREATE TABLE, taken out of its properties."""
    props = node.args.get("properties")
    temp, on_commit = False, None
    if props is None:
        return temp, on_commit
    keep = []
    for p in props.expressions:
        if isinstance(p, exp.TemporaryProperty):
            temp = True
        elif isinstance(p, exp.OnCommitProperty):
            on_commit = "delete" if p.args.get("delete") else "preserve"
        else:
            keep.append(p)
    if on_commit is not None and not temp:
        from minidb.errors import ProgrammingError
        raise ProgrammingError("ON COMMIT can only be used on temporary tables",
                               sqlstate="42P16")
    props.set("expressions", keep)
    if not keep:
        node.set("properties", None)
    return temp, on_commit


def _create_table_as(node: exp.Create) -> ast.CreateTableAsStmt:
    """CREATE [TEMP] TABLE t [(cols)] AS query [WITH [NO] DATA]."""
    _only(node, {"this", "kind", "exists", "properties", "expression"},
          {"replace": "OR REPLACE"})
    with_data = True
    temp, on_commit = _temp_options(node)
    props = node.args.get("properties")
    for p in (props.expressions if props is not None else []):
        if isinstance(p, exp.WithDataProperty):
            with_data = not p.args.get("no")
        else:
            raise unsupported(f"table option {p.sql(dialect='postgres')}")
    target = node.this
    cols = None
    if isinstance(target, exp.Schema):
        _only(target, {"this", "expressions"})
        cols = []
        for c in target.expressions:
            if not isinstance(c, exp.Identifier):
                raise unsupported("column definitions in CREATE TABLE ... AS")
            cols.append(_ident(c))
        target = target.this
    tab = _table(target)
    return ast.CreateTableAsStmt(tab.name, translate_query(node.expression), cols, with_data,
                                 bool(node.args.get("exists")), temp, on_commit=on_commit)


def _create_view(node: exp.Create) -> ast.CreateViewStmt:
    """CREATE [OR REPLACE] VIEW v [(cols)] AS query: the query is kept as SQL text
    (sqlglot's rendering of what was parsed) and bound where the view is named."""
    props = node.args.get("properties")
    for p in (props.expressions if props is not None else []):
        if isinstance(p, exp.MaterializedProperty):
            raise unsupported("materialized views (CREATE MATERIALIZED VIEW)")
        raise unsupported(f"view option {p.sql(dialect='postgres')}")
    _only(node, {"this", "kind", "expression", "replace", "properties"},
          {"exists": "IF NOT EXISTS"})
    target = node.this
    cols = None
    if isinstance(target, exp.Schema):
        _only(target, {"this", "expressions"})
        cols = [_ident(c) for c in target.expressions]
        target = target.this
    tab = _table(target)
    q = node.expression
    if q is None or not isinstance(q, (exp.Select, exp.SetOperation, exp.Subquery)):
        raise unsupported("CREATE VIEW without a query")
    if q.find(exp.Placeholder, exp.Parameter) is not None:
        from minidb.errors import ProgrammingError
        raise ProgrammingError("there is no parameter $1", sqlstate="42P02")
    return ast.CreateViewStmt(tab.name, translate_query(q), q.sql(dialect=MinidbPostgres),
                              cols, bool(node.args.get("replace")))


def _select_into(node: exp.Select) -> ast.CreateTableAsStmt:
    """SELECT ... INTO [TEMP] t FROM ...: CREATE TABLE t AS SELECT ..., as PostgreSQL
    reads it."""
    into = node.args["into"]
    _only(into, {"this", "temporary"}, {"unlogged": "UNLOGGED", "bulk_collect": "BULK COLLECT"})
    q = node.copy()
    q.set("into", None)
    tab = _table(into.this)
    return ast.CreateTableAsStmt(tab.name, translate_query(q), None, True, False,
                                 bool(into.args.get("temporary")), into=True)


def _column_def(cd: exp.ColumnDef) -> ast.ColumnSpec:
    _only(cd, {"this", "kind", "constraints"})
    if cd.args.get("kind") is None:
        raise unsupported(f'column "{_ident(cd.this)}" without a type')
    spec = ast.ColumnSpec(_ident(cd.this), _type_text(cd.args["kind"]))
    if spec.type_name in ast.SERIAL_TYPES:
        spec.type_name, spec.identity = ast.SERIAL_TYPES[spec.type_name], "serial"
    for con in cd.args.get("constraints") or []:
        k = con.args.get("kind")
        if isinstance(k, exp.GeneratedAsIdentityColumnConstraint):
            spec.identity, spec.seq_options = _identity(k)
            continue
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
        elif isinstance(k, exp.CheckColumnConstraint):
            name = con.args.get("this")
            spec.checks.append((_ident(name) if name is not None else None, check_text(k)))
        elif isinstance(k, exp.Reference):
            from minidb.sql.parser.fkeyspec import spec_from_sqlglot
            spec.references = spec_from_sqlglot(
                k, [spec.name], _ident(con.this) if con.this is not None else None)
        else:
            raise unsupported(f"column constraint {con.sql(dialect='postgres')}")
    return spec


def _identity(k) -> tuple[str, dict]:
    """GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY [(options)]: the kind and the
    sequence's options."""
    if k.args.get("expression") is not None or k.args.get("this") is None:
        raise unsupported("generated columns (GENERATED ... AS (expr))")
    opts = {}
    for key, name in (("start", "start"), ("increment", "increment"),
                      ("minvalue", "minvalue"), ("maxvalue", "maxvalue"), ("cycle", "cycle")):
        v = k.args.get(key)
        if v is None:
            continue
        if key == "cycle":
            opts["cycle"] = bool(v)
            continue
        c = translate_expression(v)
        if not isinstance(c, ast.Lit) or not isinstance(c.value, int):
            raise unsupported(f"identity option {key} {v.sql(dialect='postgres')}")
        opts[name] = c.value
    return ("a" if k.this else "d"), opts


def check_text(k) -> str:
    """The SQL text of a CHECK constraint's expression (checked to translate)."""
    _only(k, {"this", "enforced"}, {"no_inherit": "NO INHERIT"})
    translate_expression(k.this)
    e = k.this
    while isinstance(e, exp.Paren):
        e = e.this
    return e.sql(dialect=MinidbPostgres)


def parse_check_text(text: str) -> str:
    """``CHECK (expr)`` of ALTER TABLE ... ADD CONSTRAINT, as stored text."""
    node = sqlglot.parse_one(f"CREATE TABLE _ (_ int, CHECK ({text}))", read=MinidbPostgres)
    return check_text(node.this.expressions[-1])


def _drop(node: exp.Drop) -> ast.Statement:
    kind = (node.args.get("kind") or "").upper()
    _only(node, {"kind", "tables", "exists", "cascade", "restrict"},
          {"concurrently": "DROP INDEX CONCURRENTLY"})
    names = []
    for t in node.args.get("tables") or []:
        names.append(_table(t).name)
    if kind == "TABLE":
        return ast.DropTableStmt(names, bool(node.args.get("exists")),
                                 cascade=bool(node.args.get("cascade")))
    if kind == "INDEX":
        return ast.DropIndexStmt(names, bool(node.args.get("exists")))
    if kind == "VIEW":
        _only(node, {"kind", "tables", "exists", "cascade", "restrict"},
              {"materialized": "materialized views"})
        return ast.DropViewStmt(names, bool(node.args.get("exists")),
                                bool(node.args.get("cascade")))
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
_AGGS = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
         exp.GroupConcat: "string_agg", exp.ArrayAgg: "array_agg", exp.LogicalAnd: "bool_and",
         exp.LogicalOr: "bool_or", exp.Stddev: "stddev", exp.StddevSamp: "stddev_samp",
         exp.StddevPop: "stddev_pop", exp.Variance: "variance", exp.VariancePop: "var_pop"}
# sqlglot classes of functions minidb has: name, and the argument names in SQL order
_FUNCS = {exp.Explode: ("unnest", ("this",)),       # (sqlglot's name for unnest in FROM)
          exp.NthValue: ("nth_value", ("this", "offset")),
          exp.Grouping: ("grouping", ("expressions",)),
          exp.Abs: ("abs", ("this",)), exp.Lower: ("lower", ("this",)),
          exp.Upper: ("upper", ("this",)), exp.Length: ("length", ("this",)),
          exp.Round: ("round", ("this", "decimals")), exp.Trunc: ("trunc", ("this", "decimals")),
          exp.Floor: ("floor", ("this",)), exp.Ceil: ("ceil", ("this",)),
          exp.Sqrt: ("sqrt", ("this",)), exp.Pow: ("power", ("this", "expression")),
          exp.Rand: ("random", ()), exp.Replace: ("replace", ("this", "expression",
                                                               "replacement")),
          exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
          exp.Left: ("left", ("this", "expression")), exp.Right: ("right", ("this", "expression")),
          exp.StrPosition: ("strpos", ("this", "substr")),
          exp.Substring: ("substr", ("this", "start", "length")),
          exp.CurrentVersion: ("version", ()), exp.Reverse: ("reverse", ("this",)),
          exp.Repeat: ("repeat", ("this", "times")), exp.Ln: ("ln", ("this",)),
          exp.Exp: ("exp", ("this",)), exp.Initcap: ("initcap", ("this",)),
          exp.Ascii: ("ascii", ("this",)), exp.MD5: ("md5", ("this",)),
          exp.Sign: ("sign", ("this",)), exp.Localtimestamp: ("localtimestamp", ()),
          exp.ExplodingGenerateSeries: ("generate_series", ("start", "end", "step")),
          exp.GenerateSeries: ("generate_series", ("start", "end", "step")),
          exp.RowNumber: ("row_number", ()), exp.Rank: ("rank", ()),
          exp.DenseRank: ("dense_rank", ()), exp.Lag: ("lag", ("this", "offset", "default")),
          exp.Lead: ("lead", ("this", "offset", "default")),
          exp.FirstValue: ("first_value", ("this",)), exp.LastValue: ("last_value", ("this",)),
          exp.Ntile: ("ntile", ("this",)), exp.PercentRank: ("percent_rank", ()),
          exp.CumeDist: ("cume_dist", ()), exp.Log: ("log", ("this", "expression")),
          exp.Chr: ("chr", ("expressions",)), exp.Greatest: ("greatest", ("this", "expressions")),
          exp.Least: ("least", ("this", "expressions")), exp.Cbrt: ("cbrt", ("this",)),
          exp.ConcatWs: ("concat_ws", ("expressions",)), exp.Pi: ("pi", ()),
          exp.CurrentTime: ("current_time", ()), exp.Localtime: ("localtime", ()),
          exp.Uuid: ("gen_random_uuid", ()),
          exp.TimeFromParts: ("make_time", ("hour", "min", "sec")),
          exp.TimestampFromParts: ("make_timestamp", ("year", "month", "day", "hour", "min",
                                                      "sec"))}
_INT_RE = re.compile(r"^\d+$")
_WINDOWS: list = []          # the WINDOW clauses of the SELECTs being translated


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
        if cls is exp.Mod and e.args.get("safe") is not None:   # mod(a, b)
            return ast.FuncE("mod", (t(e.this), t(e.expression)))
        left, right = e.this, e.expression
        if cls in (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE) and \
                isinstance(right, (exp.Any, exp.All)):
            return _quantified(_BINOPS[cls], left, right)
        return ast.BinOp(_BINOPS[cls], t(left), t(right))
    if cls is exp.Column or cls is exp.Star:
        return _column(e, star_ok, default_ok)
    if cls in _CONSTANTS:
        return _constant(e)
    if cls is exp.Paren:
        return t(e.this)
    if cls is exp.Anonymous and str(e.this).lower() == UNARY_PLUS:   # + x (dialect.py)
        return ast.UnOp("+", t(e.expressions[0]))
    if cls is exp.AtTimeZone:               # x AT TIME ZONE z is timezone(z, x)
        _only(e, {"this", "zone"})
        return ast.FuncE("timezone", (t(e.args["zone"]), t(e.this)))
    if cls is exp.Neg:
        inner = t(e.this)
        if isinstance(inner, ast.Lit) and inner.kind in ("int", "float"):
            return ast.Lit(-inner.value, inner.kind)
        return ast.UnOp("-", inner)
    if cls in _PREDICATES:
        return _predicate(e)
    if cls is exp.Cast:
        _only(e, {"this", "to", "_type"})
        return ast.CastE(t(e.this), _type_text(e.args["to"]))
    if cls in _AGGS:
        return _aggregate(e)
    if cls is exp.Filter:
        _only(e, {"this", "expression"})
        f = t(e.this)
        if not isinstance(f, ast.FuncE):
            raise unsupported("FILTER on this expression")
        return ast.FuncE(f.name, f.args, f.distinct, f.star, t(e.expression.this), f.order)
    if cls is exp.Window:
        return _window(e)
    if cls is exp.Subquery:
        _only(e, {"this"})
        return ast.SubqueryE("scalar", translate_query(e.this))
    if cls is exp.Exists:
        _only(e, {"this"})
        return ast.SubqueryE("exists", translate_query(e.this))
    if cls is exp.Array and len(e.expressions) == 1 and \
            isinstance(e.expressions[0], (exp.Select, exp.SetOperation, exp.Subquery)):
        # ARRAY(subquery): its column's values as an array (psql's \du reads one)
        q = e.expressions[0]
        return ast.SubqueryE("array", translate_query(q.this if isinstance(q, exp.Subquery)
                                                      else q))
    if cls in (exp.NullSafeEQ, exp.NullSafeNEQ):
        _only(e, {"this", "expression"})
        return ast.DistinctFromE(t(e.this), t(e.expression), cls is exp.NullSafeEQ)
    if cls in (exp.RegexpLike, exp.RegexpILike):
        _only(e, {"this", "expression"})
        return ast.RegexE(t(e.this), t(e.expression), False, cls is exp.RegexpILike)
    if cls is exp.Escape:
        _only(e, {"this", "expression"})
        like = t(e.this)
        if not isinstance(like, ast.LikeE):
            raise unsupported("ESCAPE here")
        return ast.LikeE(like.arg, like.pattern, like.negated, like.case_insensitive,
                         t(e.expression))
    if cls in _FUNCS or cls in _SPECIAL_FUNCS:
        return _function(e)
    if cls is exp.Case:
        return _case(e)
    if cls is exp.Var and default_ok and str(e.this).upper() == "DEFAULT":
        return ast.DefaultE()
    if cls is exp.Placeholder:
        raise unsupported("this placeholder form (use ? or $n)")
    if cls in (exp.Dot, exp.Operator, exp.Collate, exp.ByteString):
        return _pg_catalog_syntax(e)
    raise unsupported(e)


_CONSTANTS = (exp.Literal, exp.Boolean, exp.Null, exp.Parameter)
_PREDICATES = (exp.Not, exp.Is, exp.Between, exp.In, exp.Like, exp.ILike)
_SPECIAL_FUNCS = (exp.Coalesce, exp.Nullif, exp.CurrentTimestamp, exp.Anonymous, exp.Trim,
                  exp.Concat, exp.Pad, exp.Extract, exp.TimestampTrunc, exp.DateTrunc,
                  exp.CurrentDate)


def _quantified(op, left, q):
    """``x = ANY (subquery)`` is IN, ``x <> ALL (subquery)`` is NOT IN."""
    inner = q.this
    if isinstance(inner, exp.Subquery):
        inner = inner.this
    if not isinstance(inner, (exp.Select, exp.SetOperation)):
        raise unsupported(f"{op} {'ANY' if isinstance(q, exp.Any) else 'ALL'} (array)")
    if isinstance(q, exp.Any) and op == "=":
        return ast.SubqueryE("in", translate_query(inner), translate_expression(left))
    if isinstance(q, exp.All) and op == "<>":
        return ast.SubqueryE("in", translate_query(inner), translate_expression(left), True)
    raise unsupported(f"{op} {'ANY' if isinstance(q, exp.Any) else 'ALL'} (subquery)")


_GROUPING_KINDS = {exp.GroupingSets: "sets", exp.Rollup: "rollup", exp.Cube: "cube"}


def _group_item(x, nested=False):
    """A GROUP BY item: an expression, or GROUPING SETS / ROLLUP / CUBE (an item of these:
    a tuple of expressions; nested sets only inside GROUPING SETS)."""
    kind = _GROUPING_KINDS.get(type(x))
    if kind is None:
        if isinstance(x, exp.Tuple) and not x.expressions:
            return ast.GroupingSetE("sets", ((),))        # GROUP BY (): one empty set
        return translate_expression(x)
    _only(x, {"expressions"})
    items = []
    for it in x.expressions:
        if type(it) in _GROUPING_KINDS:
            if kind != "sets":
                raise unsupported(f"{type(it).__name__.upper()} inside {kind.upper()}")
            items.append(_group_item(it, True))
        elif isinstance(it, exp.Tuple):
            items.append(tuple(translate_expression(e) for e in it.expressions))
        elif isinstance(it, exp.Paren) and kind != "sets":
            items.append((translate_expression(it.this),))
        else:
            items.append((translate_expression(it),))
    return ast.GroupingSetE(kind, tuple(items))


def _window(e) -> ast.WindowE:
    _only(e, {"this", "partition_by", "order", "over", "alias", "spec"})
    spec = e.args.get("spec")
    f = e.this
    part = e.args.get("partition_by") or []
    order = e.args.get("order")
    ref = e.args.get("alias")
    if ref is not None:                # OVER w / OVER (w ...)
        name = _ident(ref)
        base = None
        for scope in reversed(_WINDOWS):
            if name in scope:
                base = scope[name]
                break
        if base is None:
            raise errors_undefined_window(name)
        _only(base, {"this", "partition_by", "order", "spec"})
        if "partition_by" in e.args:   # OVER (w ...): copies w, which must leave room
            from minidb.errors import ProgrammingError
            for bad, msg in ((part, "override PARTITION BY clause of"),
                             (order is not None and base.args.get("order") is not None,
                              "override ORDER BY clause of"),
                             (base.args.get("spec") is not None, "copy")):
                if bad:
                    raise ProgrammingError(f'cannot {msg} window "{name}"' + (
                        " because it has a frame clause" if msg == "copy" else ""),
                        sqlstate="42P20")
        part = base.args.get("partition_by") or []
        if order is None:
            order = base.args.get("order")
        if spec is None:
            spec = base.args.get("spec")
    func = translate_expression(f)
    if not isinstance(func, ast.FuncE):
        raise unsupported("OVER on this expression")
    return ast.WindowE(func, tuple(translate_expression(x) for x in part),
                       tuple(_order(order)) if order is not None else (),
                       _frame(spec) if spec is not None else None)


_FRAME_EXCLUDE = {None: "no_others", "NO OTHERS": "no_others", "CURRENT ROW": "current",
                  "GROUP": "group", "TIES": "ties"}


def _frame_bound(value, side):
    """One bound of a frame clause as sqlglot gives it -> (kind, offset expression)."""
    if isinstance(value, str):
        v = value.upper()
        if v == "CURRENT ROW":
            return "current", None
        if v == "UNBOUNDED":
            return f"unbounded_{side}", None
        raise unsupported(f"frame bound {value}")
    return side, translate_expression(value)


def _frame(spec) -> ast.FrameE:
    """ROWS / RANGE / GROUPS [BETWEEN] start [AND end] [EXCLUDE ...]; a frame without
    BETWEEN ends at the current row."""
    _only(spec, {"kind", "start", "start_side", "end", "end_side", "exclude"})
    kind = str(spec.args.get("kind")).lower()
    if kind not in ("rows", "range", "groups"):
        raise unsupported(f"window frame {kind}")
    start, start_off = _frame_bound(spec.args.get("start"),
                                    str(spec.args.get("start_side") or "").lower())
    if spec.args.get("end") is None:
        end, end_off = "current", None
    else:
        end, end_off = _frame_bound(spec.args.get("end"),
                                    str(spec.args.get("end_side") or "").lower())
    ex = spec.args.get("exclude")
    ex = None if ex is None else str(ex.this if isinstance(ex, exp.Expression) else ex).upper()
    if ex not in _FRAME_EXCLUDE:
        raise unsupported(f"EXCLUDE {ex}")
    return ast.FrameE(kind, start, start_off, end, end_off, _FRAME_EXCLUDE[ex])


def errors_undefined_window(name):
    from minidb.errors import UndefinedObject
    return UndefinedObject(f'window "{name}" does not exist')


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
            return ast.Lit(decimal.Decimal(s), "float")     # the binder types it numeric
        except decimal.InvalidOperation:
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
    """NOT, IS [NOT] NULL / TRUE / FALSE, [NOT] BETWEEN, [NOT] IN (list or subquery),
    [NOT] [I]LIKE."""
    t = translate_expression
    cls = type(e)
    if cls is exp.Not:
        inner = e.this
        if isinstance(inner, exp.In):
            x = t(inner)
            if isinstance(x, ast.SubqueryE):
                return ast.SubqueryE("in", x.query, x.arg, not x.negated)
            return ast.InE(x.arg, x.items, not x.negated)
        if isinstance(inner, exp.Between):
            x = t(inner)
            return ast.BetweenE(x.arg, x.low, x.high, not x.negated)
        if isinstance(inner, (exp.RegexpLike, exp.RegexpILike)):
            x = t(inner)
            return ast.RegexE(x.arg, x.pattern, True, x.case_insensitive)
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
        _only(e, {"this", "expressions", "query"}, {"unnest": "IN UNNEST"})
        q = e.args.get("query")
        if q is not None:
            if isinstance(e.this, exp.Tuple):
                raise unsupported("row constructors with IN (subquery)")
            return ast.SubqueryE("in", translate_query(q.this if isinstance(q, exp.Subquery)
                                                        else q), t(e.this))
        if not e.expressions:
            raise SyntaxError_('syntax error at or near ")": IN () needs at least one value')
        return ast.InE(t(e.this), tuple(t(x) for x in e.expressions))
    _only(e, {"this", "expression", "negate"})          # LIKE, ILIKE
    return ast.LikeE(t(e.this), t(e.expression), bool(e.args.get("negate")),
                     cls is exp.ILike)


def _aggregate(e) -> ast.FuncE:
    """count / sum / avg / min / max / string_agg / array_agg / bool_and / bool_or /
    stddev / variance, with ``*`` (count only), DISTINCT, or ORDER BY inside."""
    name = _AGGS[type(e)]
    _only(e, {"this", "big_int", "separator", "expression"})
    arg = e.this
    order = ()
    if isinstance(arg, exp.Order):
        _only(arg, {"this", "expressions"})
        order = tuple(_order(arg))
        arg = arg.this
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
    args = (translate_expression(arg),)
    sep = e.args.get("separator")
    if name == "string_agg":
        if sep is None:
            raise UndefinedFunctionError("function string_agg(text) does not exist")
        args += (translate_expression(sep),)
    elif e.args.get("expression") is not None:
        raise unsupported(f"{name} with two arguments")
    return ast.FuncE(name, args, distinct, False, None, order)


def UndefinedFunctionError(msg):
    from minidb.errors import UndefinedFunction
    return UndefinedFunction(msg)


def _function(e) -> ast.FuncE:
    """A scalar function call: the ones sqlglot knows by a class of its own, COALESCE,
    NULLIF, CURRENT_TIMESTAMP, TRIM, CONCAT, LPAD/RPAD, EXTRACT/date_part, date_trunc, and
    any other name (checked by the binder)."""
    t = translate_expression
    cls = type(e)
    if cls in (exp.ExplodingGenerateSeries, exp.GenerateSeries):
        _only(e, {"start", "end", "step", "is_end_exclusive"})
        args = [t(e.args["start"]), t(e.args["end"])]
        step = e.args.get("step")
        if isinstance(step, exp.Interval):
            unit = step.args.get("unit")
            text = step.this.this if isinstance(step.this, exp.Literal) else None
            if text is None:
                raise unsupported("intervals")
            args.append(ast.Lit(f"{text} {unit.name if unit is not None else ''}".strip(),
                                "str"))
        elif step is not None:
            args.append(t(step))
        return ast.FuncE("generate_series", tuple(args))
    if cls in _FUNCS:
        name, argnames = _FUNCS[cls]
        allowed = set(argnames) | {"ignore_nulls", "charset", "safe", "coalesce"}
        if cls is exp.Initcap:
            allowed.add("expression")            # sqlglot's default word delimiters
        _only(e, allowed)
        args = []
        for k in argnames:
            v = e.args.get(k)
            if v is None:
                continue
            if isinstance(v, list):
                args += [t(x) for x in v]
            else:
                args.append(t(v))
        return ast.FuncE(name, tuple(args))
    if cls is exp.Coalesce:
        _only(e, {"this", "expressions", "is_nvl", "is_null"})
        return ast.FuncE("coalesce", (t(e.this),) + tuple(t(x) for x in e.expressions))
    if cls is exp.Nullif:
        _only(e, {"this", "expression"})
        return ast.FuncE("nullif", (t(e.this), t(e.expression)))
    if cls is exp.CurrentTimestamp:  # CURRENT_TIMESTAMP: the transaction's start, as now()
        if e.args.get("this") is not None:
            raise unsupported("CURRENT_TIMESTAMP(precision)")
        return ast.FuncE("now", ())
    if cls is exp.CurrentDate:
        return ast.FuncE("current_date", ())
    if cls is exp.Trim:
        _only(e, {"this", "expression", "position"}, {"collation": "COLLATE"})
        pos = (e.args.get("position") or "BOTH").upper()
        name = {"BOTH": "btrim", "LEADING": "ltrim", "TRAILING": "rtrim"}[pos]
        args = (t(e.this),)
        if e.args.get("expression") is not None:
            args += (t(e.expression),)
        return ast.FuncE(name, args)
    if cls is exp.Concat:
        _only(e, {"expressions", "safe", "coalesce"})
        return ast.FuncE("concat", tuple(t(x) for x in e.expressions))
    if cls is exp.Pad:
        _only(e, {"this", "expression", "fill_pattern", "is_left"})
        args = (t(e.this), t(e.expression))
        if e.args.get("fill_pattern") is not None:
            args += (t(e.args["fill_pattern"]),)
        return ast.FuncE("lpad" if e.args.get("is_left") else "rpad", args)
    if cls is exp.Extract:
        _only(e, {"this", "expression"})
        field = e.this.name if isinstance(e.this, (exp.Var, exp.Identifier)) else \
            (e.this.this if isinstance(e.this, exp.Literal) else None)
        if field is None:
            raise unsupported(e)
        return ast.FuncE("date_part", (ast.Lit(str(field).lower(), "str"), t(e.expression)))
    if cls in (exp.TimestampTrunc, exp.DateTrunc):
        _only(e, {"this", "unit", "zone", "input_type_preserved"})
        unit = e.args.get("unit")
        uname = unit.name if isinstance(unit, (exp.Var, exp.Identifier)) else \
            (unit.this if isinstance(unit, exp.Literal) else None)
        if uname is None:
            raise unsupported(e)
        zone = e.args.get("zone")
        return ast.FuncE("date_trunc", (ast.Lit(str(uname).lower(), "str"), t(e.this))
                         + ((t(zone),) if zone is not None else ()))
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


def parse_column_text(text: str) -> ast.ColumnSpec:
    """One column definition (``name type [NOT NULL] [DEFAULT e] ...``, ALTER TABLE ADD
    COLUMN's) read as CREATE TABLE reads it."""
    st = _create(sqlglot.parse_one(f"CREATE TABLE _ ({text})", read=MinidbPostgres))
    if len(st.columns) != 1 or st.primary_key or st.uniques:
        raise unsupported(f"column definition {text}")
    return st.columns[0]


def parse_expression_text(text: str) -> ast.Node:
    """A stored expression (a column DEFAULT) back into the logical tree."""
    return translate_expression(sqlglot.parse_one(text, read=MinidbPostgres))



# ---------------------------------------------------------------------------------------------
# what PostgreSQL's clients write against its catalog (psql's \\d queries, minidb.catalog.pgcatalog)
_SCHEMAS = ("pg_catalog", "public", "information_schema")


def _schema_qualified(t) -> str:
    """A table's name with its schema: ``pg_catalog.x`` and ``public.x`` are ``x`` (one
    schema for user tables, pg_catalog's relations found first, as on PostgreSQL's search
    path), ``information_schema.x`` keeps its prefix; another schema is refused."""
    name = _ident(t.this) if isinstance(t.this, exp.Identifier) else None
    db = t.args.get("db")
    if db is None:
        return name
    schema = _ident(db)
    if schema not in _SCHEMAS:
        from minidb.errors import ProgrammingError
        raise ProgrammingError(f'schema "{schema}" does not exist', sqlstate="3F000")
    return f"information_schema.{name}" if schema == "information_schema" else name


def _pg_catalog_syntax(e) -> ast.Node:
    """``pg_catalog.f(...)``, ``OPERATOR(pg_catalog.~)``, ``x COLLATE pg_catalog.default``
    (the only collation: dropped) and ``E'...'`` strings."""
    t = translate_expression
    if isinstance(e, exp.Dot):
        schema = e.this
        if isinstance(schema, (exp.Identifier, exp.Column)) and \
                _ident(schema) in ("pg_catalog", "public") and isinstance(e.expression, exp.Func):
            return t(e.expression)
        raise unsupported(e)
    if isinstance(e, exp.Operator):
        op = str(e.args.get("operator") or "").strip()
        if op.startswith("pg_catalog."):
            op = op[len("pg_catalog."):]
        left, right = t(e.this), t(e.expression)
        if op in ("~", "~*", "!~", "!~*"):
            return ast.RegexE(left, right, op.startswith("!"), op.endswith("*"))
        if op in ("=", "<>", "!=", "<", "<=", ">", ">="):
            return ast.BinOp("<>" if op == "!=" else op, left, right)
        raise unsupported(f"OPERATOR({op})")
    if isinstance(e, exp.Collate):
        coll = e.expression
        name = coll.sql(dialect="postgres").strip('"').lower()
        if name not in ("pg_catalog.default", "default", "c", "pg_catalog.\"c\"", "posix",
                        "pg_catalog.c"):
            raise unsupported(f"COLLATE {coll.sql(dialect='postgres')}")
        return t(e.this)
    text = e.this                                   # exp.ByteString: E'...'
    return ast.Lit(_unescape(text), "str")


_E_STRING_ESC = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _unescape(text: str) -> str:
    """The value of PostgreSQL's escape string E'...' (backslash escapes)."""
    return unescape(text, _E_STRING_ESC)


def _empty_catalog_query(node):
    """A query that inner-joins a catalog of a feature minidb does not have
    (``pgcatalog.EMPTY``: pg_policy, pg_inherits, pg_publication ...) has no rows: it is
    answered as ``SELECT NULL::text AS name, ... WHERE false`` with the query's output
    names, without translating the rest (which may use arrays minidb lacks); a set
    operation all of whose parts are such queries likewise.  None otherwise."""
    from minidb.catalog.pgcatalog import EMPTY

    def empty_select(sel) -> bool:
        if not isinstance(sel, exp.Select) or sel.args.get("from_") is None:
            return False
        items = [sel.args["from_"].this]
        for j in sel.args.get("joins") or []:
            if not j.args.get("side"):
                items.append(j.this)
        for it in items:
            if isinstance(it, exp.Table) and isinstance(it.this, exp.Identifier) and \
                    (it.args.get("db") is None or _ident(it.args["db"]) == "pg_catalog") and \
                    _ident(it.this) in EMPTY:
                return True
        return False

    def leaves(n):
        if isinstance(n, exp.Subquery):
            return leaves(n.this)
        if type(n) in _SETOPS:
            return leaves(n.this) + leaves(n.expression)
        return [n]

    parts = leaves(node)
    if not parts or not all(empty_select(p) for p in parts):
        return None
    names = []
    for x in parts[0].expressions:
        if isinstance(x, exp.Alias):
            names.append(_ident(x.args["alias"]))
        elif isinstance(x, exp.Column):
            names.append(_ident(x.this))
        elif isinstance(x, exp.Dot) and isinstance(x.expression, exp.Func):
            names.append(x.expression.name.lower() if isinstance(x.expression, exp.Anonymous)
                         else x.expression.sql_name().lower())
        else:
            names.append("?column?")
    cols = ", ".join('NULL::text AS "' + n.replace('"', '""') + '"' for n in names)
    return translate_select(sqlglot.parse_one(f"SELECT {cols} WHERE false", read="postgres"))
