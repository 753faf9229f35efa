"""Simple parameterization: a statement's literals replaced by parameters, so that texts that
differ only in their constants share one parse and one plan (SQL Server's "simple
parameterization", pg_stat_statements' normalization).

pgbench's default protocol (``-M simple``) sends every statement as text with its values
written in; without this, each text is new to the plan cache and goes through the full
parse, bind and plan.  ``normalize(sql)`` returns ``(key, text, values)``, the decisions of
one pass of a small lexer over the text, cached by the text's skeleton (see ``normalize``):
``text`` has a ``?`` where a literal was, ``values`` the literals as Python values, and
``key`` is ``text`` plus the class of each value (below).
The engine (``Engine.execute`` without parameters) looks the key up among the shapes it has
seen and runs the cached statement with ``values``; a new key is parsed and bound once and
kept only if its parameters got the types the literals would have had (else the shape is
remembered as not parameterizable and the text goes through the full parse).

What is replaced - conservatively, so that the parameterized statement means exactly what
the text meant:

* only in SELECT / INSERT / UPDATE / DELETE, and only after the first WHERE, SET or VALUES
  and before any ORDER BY, GROUP BY, HAVING, LIMIT, OFFSET, FETCH, FOR, RETURNING, ON,
  UNION / INTERSECT / EXCEPT, WINDOW or a nested SELECT: a plan depends on LIMIT / OFFSET
  counts and ORDER BY / GROUP BY ordinals, and a select list's literal names and types
  its column, so those stay in the text (and the engine keeps every literal of a statement
  on a table with a partial index, whose predicate a plan is matched against:
  ``indexpred.has_partial_index``);
* only a literal after ``=``, ``<>``, ``!=``, an element of an IN or VALUES list, or after ``+``, ``-``, ``*``
  whose left operand is a column or a parenthesized expression (not another literal:
  ``1 + 2`` keeps its types); never one followed by ``::`` or ``(`` (a cast, a typed
  literal) - a range comparison's constant (``<``, ``BETWEEN``) stays too, as the
  planner's estimate for it depends on the value;
* integers (a unary minus folded in) that fit in bigint, classed ``i`` (fits in integer)
  or ``I``; plain ``'...'`` strings (``''`` inside), classed ``s``.  Decimal and exponent
  numbers stay in the text (their type is the literal's, not a parameter's), as do TRUE,
  FALSE and NULL.

A text with a comment, a ``?`` or ``$`` of its own, a prefixed string (``E'..'``), a
quoted identifier, more than one statement or more than ``MAX_PARAMS`` literals is not
normalized (None): the full parse takes it.

The check of a new shape (``Engine``): each parameter's type from the binder must be one
the literal's value has there - ``i``: integer or bigint, ``I``: bigint, ``s``: text or
varchar.  (A parameter typed from its context where the literal would have been coerced
differently - ``int_col = 5.5`` is not a case, decimals stay - or a string compared with a
``char(n)`` column, whose blank padding a parameter does not get, fails the check.)

Estimates for a parameterized shape are generic, as for a prepared statement: the planner
sees ``col = ?``, not the value.  Equality estimates do not use the value here anyway.
"""

from __future__ import annotations

import re

__all__ = ["normalize", "param_type_ok", "MAX_PARAMS"]

MAX_PARAMS = 64      # more literals than this: a bulk VALUES list, not a point statement

_TOKEN = re.compile(r"""
    (?P<s>'(?:[^']|'')*')
  | (?P<n>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)
  | (?P<w>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<o>::|<>|!=|<=|>=|\|\||[-+*/%=<>(),;.\[\]])
  | (?P<sp>\s+)
  | (?P<x>.)
""", re.VERBOSE | re.DOTALL)

_FIRST = {"select", "insert", "update", "delete"}
_START = {"where", "set", "values"}
_STOP = {"order", "group", "having", "limit", "offset", "fetch", "for", "returning", "on",
         "union", "intersect", "except", "window", "select"}
_EQ_CTX = {"=", "<>", "!=", "(", ","}
_ARITH = {"+", "-", "*"}

# The skeleton: the text split at each plain string and each unsigned ASCII integer that is a
# whole token of the lexer, the pieces between them joined by NULs.  A digit run touching a
# word character or a dot is part of an identifier or of another number, never one of these;
# strings are found left to right by the lexer's own pattern, so both see the same strings.
# (The look-behind after the first digit, not before it, lets the regex engine skip to the
# next quote or digit: three times faster than a leading one.)
_LIT = re.compile(r"('(?:[^']|'')*'|[0-9](?<![\w.][0-9])[0-9]*(?![\w.]))")
_INT4_LO, _INT4_HI = _INT4 = (-(1 << 31), (1 << 31) - 1)
_INT8_LO, _INT8_HI = _INT8 = (-(1 << 63), (1 << 63) - 1)

# per literal of a skeleton: kept in the text (an integer or a string), or a parameter
KEEP_N, KEEP_S, INT, NEG, STR = 0, 1, 2, 3, 4     # NEG: an integer with a unary minus folded in
_STRING_ACTS = (False, True, False, False, True)  # by action: is the literal a string?

_SKELETONS: dict = {}    # skeleton -> _Recipe, or _LEX: ask the lexer's walk every time
_SKELETONS_MAX = 4096
_LEX = object()


class _Recipe:
    """What the lexer's walk does with every text of one skeleton: an action per literal
    (each also states the literal's kind, checked per text) and the pieces of the normalized
    text between the literals (a folded minus cut off); ``none``: normalize gives None."""

    __slots__ = ("acts", "pieces", "text", "classes", "none", "ints", "neg", "key")

    def __init__(self, acts, pieces, none):
        self.acts = acts
        self.pieces = pieces
        self.none = none
        # every literal a parameter: one text for all texts of the skeleton
        self.text = None if KEEP_N in acts or KEEP_S in acts else "?".join(pieces)
        self.classes = "".join("s" if a == STR else "i" for a in acts if a > KEEP_S)
        # every literal an integer parameter (pgbench's statements): one pass of int()
        self.ints = bool(acts) and not none and all(a == INT or a == NEG for a in acts)
        self.neg = tuple(i for i, a in enumerate(acts) if a == NEG)
        self.key = None if self.text is None else self.text + "\x00" + self.classes


def normalize(sql: str):
    """(key, text with ``?`` for literals, [values]) or None (see the module docstring).

    The lexer's walk (``_lex_normalize``, the definition) runs once per skeleton - the text
    with its integer and string literals cut out, by one compiled regular expression - and
    the texts that differ only in those literals take its decisions from a cache: what the
    walk decides depends on the tokens around each literal, on the literal's kind (checked)
    and, for an integer, on whether it fits in bigint (checked: if not, the walk decides)."""
    if "?" in sql or "$" in sql or "--" in sql or "/*" in sql or '"' in sql:
        return None
    if "\x00" in sql:                        # the skeleton's separator: no cache for this
        return _walk(sql)
    parts = _LIT.split(sql)
    skel = "\x00".join(parts[::2])
    r = _SKELETONS.get(skel)
    if r is None:
        r = _learn(sql, skel, parts)
    if r is _LEX:
        return _walk(sql)
    return _apply(r, sql, parts[1::2])


def _apply(r: _Recipe, sql: str, lits: list):
    """``r`` applied to the literals ``lits`` of ``sql``: normalize's result."""
    if r.ints:
        try:
            values = list(map(int, lits))    # (a string literal: ValueError)
        except ValueError:
            return _walk(sql)                # another kind of literal: another skeleton
        for i in r.neg:
            values[i] = -values[i]
        if _INT4_LO <= min(values) and max(values) <= _INT4_HI:
            return r.key, r.text, values
    values = []
    classes = r.classes
    k = 0
    for lit, a in zip(lits, r.acts):
        if (lit[0] == "'") is not _STRING_ACTS[a]:
            return _walk(sql)                # another kind of literal: another skeleton
        if a == INT or a == NEG:
            if len(lit) > 18:
                return _walk(sql)            # may not fit in bigint: the walk decides
            v = int(lit)
            if a == NEG:
                v = -v
            if not _INT4_LO <= v <= _INT4_HI:
                if not _INT8_LO <= v <= _INT8_HI:
                    return _walk(sql)        # stays in the text: the walk decides
                classes = classes[:k] + "I" + classes[k + 1:]
            values.append(v)
            k += 1
        elif a == STR:
            values.append(lit[1:-1].replace("''", "'"))
            k += 1
    if r.none:
        return None
    text = r.text
    if text is None:
        pieces = r.pieces
        out = [pieces[0]]
        for i, (lit, a) in enumerate(zip(lits, r.acts)):
            out.append(lit if a <= KEEP_S else "?")
            out.append(pieces[i + 1])
        text = "".join(out)
    return text + "\x00" + classes, text, values


def _walk(sql: str):
    got = _lex_normalize(sql)
    return None if got is None else got[:3]


def _learn(sql: str, skel: str, parts: list):
    """The recipe of ``sql``'s skeleton, from the lexer's walk over ``sql`` (cached)."""
    got = _lex_normalize(sql)
    cands = []
    pos = 0
    for i, p in enumerate(parts):
        if i % 2:
            cands.append((pos, pos + len(p)))
        pos += len(p)
    if any(sql[a] != "'" and b - a >= 19 for a, b in cands):
        return _LEX      # an integer that may not fit in bigint decided the walk: not cached
    r = _recipe(sql, got, cands)
    if r is not _LEX and _apply(r, sql, parts[1::2]) != (None if got is None else got[:3]):
        r = _LEX                     # (a safety net: the recipe must reproduce the walk)
    if len(_SKELETONS) >= _SKELETONS_MAX:
        _SKELETONS.clear()
    _SKELETONS[skel] = r
    return r


def _recipe(sql: str, got, cands):
    """The _Recipe that reproduces ``got`` (the walk's result over ``sql``) from ``sql``'s
    literals at ``cands``, or _LEX when a replaced literal is not one of them."""
    by_start = {ls: (start, end) for start, end, ls in (got[3] if got else ())}
    acts = []
    pieces = []
    last = 0
    for a, b in cands:
        span = by_start.pop(a, None)
        if span is None:
            acts.append(KEEP_S if sql[a] == "'" else KEEP_N)
            pieces.append(sql[last:a])
        else:
            start, end = span
            if end != b or start < last:
                return _LEX
            acts.append(STR if sql[a] == "'" else (NEG if start < a else INT))
            pieces.append(sql[last:start])
        last = b
    pieces.append(sql[last:])
    if by_start:
        return _LEX                  # a literal the skeleton does not cut out
    return _Recipe(tuple(acts), tuple(pieces), got is None)


def _lex_normalize(sql: str):
    """The definition: one walk of the lexer's tokens.  (key, text, values, spans) or None;
    ``spans``: per replaced literal, the (start, end) of the text it replaced (a folded
    unary minus included) and the literal token's own start."""
    if "?" in sql or "$" in sql or "--" in sql or "/*" in sql or '"' in sql:
        return None
    toks = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        if kind == "sp":
            continue
        if kind == "x":
            return None
        toks.append((kind, m.group(), m.start(), m.end()))
    if not toks or toks[0][0] != "w" or toks[0][1].lower() not in _FIRST:
        return None
    if toks[-1][1] == ";":
        toks.pop()
    out = []            # pieces of the normalized text
    spans = []
    values = []
    classes = []
    last = 0            # end of the text copied so far
    active = False
    stopped = False
    n = len(toks)
    stack = []          # per open parenthesis: is it an IN / VALUES list?
    in_values = False
    i = 1
    while i < n:
        kind, val, start, end = toks[i]
        if kind == "w":
            low = val.lower()
            if low in _STOP:
                stopped = True
            elif low in _START and not stopped:
                active = True
                in_values = in_values or low == "values"
            i += 1
            continue
        if val == "(":
            pk, pv = toks[i - 1][0], toks[i - 1][1].lower()
            stack.append((pk == "w" and pv in ("in", "values"))
                         or (in_values and not stack and pv == "," and toks[i - 2][1] == ")"))
            i += 1
            continue
        if val == ")":
            if stack:
                stack.pop()
            i += 1
            continue
        if val == ";":
            return None             # a second statement
        if kind == "s" and start and (sql[start - 1].isalnum() or sql[start - 1] == "_"):
            return None             # E'...', B'...', X'...', N'...'
        if not active or stopped or kind not in ("n", "s", "o"):
            i += 1
            continue
        # a literal (possibly behind a unary minus) in a replaceable place?
        neg = False
        j = i
        if kind == "o":
            if val != "-" or i + 1 >= n or toks[i + 1][0] != "n" or not _unary_place(toks, i):
                i += 1
                continue
            neg = True
            j = i + 1
        lk, lval, _ls, lend = toks[j]
        if not _replace_place(toks, i, bool(stack and stack[-1])):
            i = j + 1
            continue
        if j + 1 < n and toks[j + 1][1] in ("::", "(", ".", "["):
            i = j + 1
            continue
        if lk == "n":
            digits = lval.lstrip("0") or "0"
            if not lval.isdigit() or len(digits) > 19:
                i = j + 1           # (more than 19 digits: beyond bigint, and int() refuses
                continue            # a text of thousands)
            v = -int(digits) if neg else int(digits)
            if _INT4[0] <= v <= _INT4[1]:
                cls = "i"
            elif _INT8[0] <= v <= _INT8[1]:
                cls = "I"
            else:
                i = j + 1
                continue
        else:
            v = lval[1:-1].replace("''", "'")
            cls = "s"
        out.append(sql[last:start])
        out.append("?")
        spans.append((start, lend, _ls))
        last = lend
        values.append(v)
        classes.append(cls)
        if len(values) > MAX_PARAMS:
            return None
        i = j + 1
    if not values:
        return None
    out.append(sql[last:])
    text = "".join(out)
    return text + "\x00" + "".join(classes), text, values, spans


def _unary_place(toks, i: int) -> bool:
    """Is the ``-`` at ``i`` a unary minus (after an operator or an opening)?"""
    prev = toks[i - 1]
    return prev[0] == "o" and prev[1] in _EQ_CTX | _ARITH


def _replace_place(toks, i: int, in_list: bool) -> bool:
    """May the literal starting at token ``i`` become a parameter (see the docstring)?
    ``in_list``: the innermost parenthesis is an IN or VALUES list."""
    prev = toks[i - 1]
    if prev[0] != "o":
        return False
    p = prev[1]
    if p in _EQ_CTX:
        if p in ("(", ","):
            return in_list
        before = toks[i - 2] if i >= 2 else None       # col = 5, not 1 = 5
        return before is not None and (before[0] == "w" or before[1] == ")")
    if p in _ARITH:
        before = toks[i - 2] if i >= 2 else None       # col + 5, (a) * 5; not 1 + 5
        return before is not None and (before[0] == "w" or before[1] == ")")
    return False


_OK = {"i": ("integer", "bigint"), "I": ("bigint",), "s": ("text", "varchar")}


def param_type_ok(cls: str, t) -> bool:
    """Does a parameter of type ``t`` mean what a literal of class ``cls`` meant?"""
    return t is not None and getattr(t, "name", None) in _OK[cls]
