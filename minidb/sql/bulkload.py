"""Bulk loading: many-row ``INSERT ... VALUES``, DB-API ``executemany`` of one INSERT, and
``COPY FROM`` (its field conversion) reach the heap's bulk path without per-row parsing or
planning.

All three end in the executor's Insert node (``minidb.exec.modify.InsertNode``) fed whole
columns: a batch of at least ``BULK_INSERT_MIN_ROWS`` rows goes through ``bulk_insert``
(``heap_bulk_insert``: rows encoded by numpy, a new page at a time, one WAL record per
page; then each index's entries in key order, a leaf page at a time).  Defaults of the
columns not given, NOT NULL, lengths and the statistics counters are the Insert node's, as
for any INSERT.  What differs is how the rows get there:

* **Literal VALUES** (``try_values``).  A statement that is exactly ``INSERT INTO name
  [(columns)] VALUES (literal, ...), ...`` is recognized by one regular-expression pass
  over the text (PostgreSQL's parser is what sqlglot's generic parse replaces here; on
  20,000 rows that parse was nearly all the time).  The list itself is split by numpy
  passes over its bytes (``_split_values``: string literals by quote parity, the rows'
  parentheses and commas, a column of plain integers converted from its digits), or, for
  text that scan declines (non-ASCII, comments, control characters), by a regular
  expression's token list whose row structure is checked with slices; either way each
  column's literals are converted as a whole.  A literal is converted exactly as the
  binder would (an integer literal into an integer column, a string literal through the
  column type's input function, ``cast_value(v, unknown, type)``); anything else - an
  expression, DEFAULT, a cast, a value the column cannot take, an unknown table or
  column, fewer than ``VALUES_MIN_ROWS`` rows - returns None and the statement takes the
  general path, which produces the result or the error it always did.  So the fast path
  only ever has to get the successful cases right, and tests compare it with the general
  path (and the byte scan with the token split).
* **executemany** (``executemany``).  ``INSERT ... VALUES (?, ...)`` with one row: the
  statement is bound once with a parameter signature that stands for every row (each
  column's one Python type), and each column's parameters are converted as the compiled
  plan would bind them (``bind_param``, vectorized for the common types).  It then runs as
  ONE statement: all rows or none, also in autocommit mode (where the one-execution-per-row
  loop committed each row).  Parameters of mixed types in one column, a column bound with a
  cast, or a wrong-length parameter sequence fall back to the loop (None).
* **COPY FROM** (``convert_strings``): the fields of a batch are converted column by column
  (``minidb.sql.copy``), with the same input functions as the per-field path it replaces;
  a batch whose column fails is converted again field by field to name the line.

Departure: a load's rows are placed on new pages at the end of the table (PostgreSQL's
COPY fills the current insert page first), and a unique violation of a load is reported
for the smallest duplicate key, not for the first duplicate in row order.
"""

from __future__ import annotations

import re
from operator import itemgetter

import numpy as np

import minidb.errors as errors
from minidb.exec.chunk import Chunk, column_from_values
from minidb.exec.compile import bind_param
from minidb.exec.datatypes import INT4_MAX, INT4_MIN, INT8_MAX, INT8_MIN, UNKNOWN, cast_value, \
    family
from minidb.exec.expr import Param
from minidb.exec.modify import DEFAULT, InsertNode
from minidb.exec.nodes import ExecContext, PlanNode
from minidb.sql.result import Result

__all__ = ["try_values", "executemany", "run_insert", "convert_strings", "VALUES_MIN_ROWS",
           "ChunksNode"]

VALUES_MIN_ROWS = 32           # fewer rows: the general path (a parse is cheap there)
EXECUTEMANY_BATCH = 100_000    # rows converted and inserted per chunk

_HEAD = re.compile(r"\s*insert\s+into\s+([a-z_][a-z0-9_$]*)\s*(?:\(([^()'\"]*)\))?\s*values\s*",
                   re.I | re.A)
# a string literal, a number, a word, punctuation; \S catches anything else (then: general path)
_TOKEN = re.compile(r"'(?:[^']|'')*'|-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|[A-Za-z_]+|\S")
_IDENT = re.compile(r"[a-z_][a-z0-9_$]*\Z", re.A)
_NUMBER_START = frozenset("-0123456789")
_WORDS = {"null": None, "true": True, "false": False}
_INT_RANGE = {"integer": (INT4_MIN, INT4_MAX), "bigint": (INT8_MIN, INT8_MAX)}


class _Fallback(Exception):
    """The fast path cannot say: let the general path run the statement."""


class ChunksNode(PlanNode):
    """A plan leaf that yields given chunks (columns already in the target types)."""

    def __init__(self, chunks, types):
        super().__init__([], [("v", i) for i in range(len(types))], types)
        self.chunks = chunks

    def execute(self, ectx):
        yield from self.chunks


def _target(engine, name: str, columns):
    """(RangeEntry, attnos) of a user table and a column list, or _Fallback."""
    from minidb.sql.binder import RangeEntry
    from minidb.types import parse_type
    catalog = engine.session.backend.catalog
    t = catalog.tables.get(name)
    if t is None:
        raise _Fallback
    cols = [(c.name, parse_type(c.type)) for c in t.columns]
    entry = RangeEntry(0, t.name, t, cols, [c.not_null for c in t.columns])
    if columns is None:
        return entry, list(range(len(cols)))
    attnos = []
    for c in columns:
        a = entry.attno(c)
        if a < 0 or a in attnos:
            raise _Fallback
        attnos.append(a)
    return entry, attnos


def run_insert(engine, entry, attnos, defaults, chunks) -> int:
    """Insert the rows of ``chunks`` (Chunk objects whose columns are ``attnos`` of
    ``entry``'s table, in their types) as one statement of ``engine``'s session; returns
    the row count.  The caller holds the table's RowExclusiveLock."""
    types = [entry.columns[a][1] for a in attnos]
    if not entry.checks:
        from minidb.sql.checks import bind_checks
        entry.checks = bind_checks(engine.session.backend.catalog, entry)
    node = InsertNode(entry, attnos, ChunksNode(chunks, types), defaults)

    def body(snap):
        ectx = ExecContext(engine.session, snap, [])
        for _ in node.run(ectx):
            pass
        return ectx.rows_affected, ectx.rows_affected > 0

    return engine._statement(body)


def _lock(engine, entry):
    """RowExclusiveLock on the table; the entry again if the table changed meanwhile."""
    from minidb.sql.locking import lock_table
    from minidb.txn.lmgr import RowExclusiveLock
    t = lock_table(engine, entry.table.name, RowExclusiveLock)
    if t is not entry.table and (t.oid != entry.table.oid or t.columns != entry.table.columns):
        raise _Fallback
    return entry


def _defaults(engine, entry):
    from minidb.sql.binder import Binder
    from minidb.sql.parser.translate import parse_expression_text
    return Binder(engine.session.backend.catalog,
                  default_parser=parse_expression_text).defaults(entry)


# -- literal VALUES -----------------------------------------------------------------------------
def try_values(engine, sql: str) -> Result | None:
    """Run ``sql`` if it is a plain many-row literal INSERT (see the module docstring);
    None when the general path must run it (nothing has been done then)."""
    m = _HEAD.match(sql)
    if m is None:
        return None
    try:
        split = _split_values(sql, m.end())
        if split is None:       # not plain enough for the byte scan: the token split says
            toks = _TOKEN.findall(sql, m.end())
            if toks and toks[-1] == ";":
                toks.pop()
            split = _value_columns(toks)
        nrows, width, cols = split
        if nrows < VALUES_MIN_ROWS:
            return None
        names = None
        if m.group(2) is not None:
            names = [x.strip().lower() for x in m.group(2).split(",")]
            if not all(_IDENT.match(x) for x in names) or len(names) != width:
                return None
        entry, attnos = _target(engine, m.group(1).lower(), names)
        if names is None:
            if width > len(attnos):
                return None
            attnos = attnos[:width]
        out = []
        for tokens, a in zip(cols, attnos):
            name, t = entry.columns[a]
            if isinstance(tokens, np.ndarray):      # integers the byte scan converted
                out.append((_integer_column(tokens, t), None))
                continue
            if isinstance(tokens, _Strings):        # string literals, without their quotes
                vals = _string_values(tokens, t)
            else:
                vals = _literal_column(tokens, t)
            if None in vals and entry.not_null[a]:
                return None     # the general path raises NotNullViolation
            out.append(column_from_values(vals, t))
        _lock(engine, entry)
        defaults = _defaults(engine, entry)
    except _Fallback:
        return None
    n = run_insert(engine, entry, attnos, defaults, [Chunk(out, nrows)])
    return Result(None, [], n, f"INSERT 0 {n}")


def _value_columns(toks: list) -> tuple[int, int, list]:
    """(rows, width, literal tokens of each column) of ``( a , b ) , ( c , d )``."""
    try:
        close = toks.index(")")
    except ValueError:
        raise _Fallback from None
    if close < 2 or close % 2:
        raise _Fallback
    width = close // 2
    stride = close + 2
    total = len(toks) + 1
    if total % stride:
        raise _Fallback
    nrows = total // stride
    if (set(toks[0::stride]) != {"("} or set(toks[close::stride]) != {")"}
            or (nrows > 1 and set(toks[close + 1::stride]) != {","})):
        raise _Fallback
    for k in range(1, width):
        if set(toks[2 * k::stride]) != {","}:
            raise _Fallback
    cols = [toks[2 * k + 1::stride] for k in range(width)]
    for c in cols:
        if len(c) != nrows:
            raise _Fallback
    return nrows, width, cols


# -- the byte scan -----------------------------------------------------------------------------
_QUOTE, _OPEN, _CLOSE, _COMMA, _MINUS = (ord(c) for c in "'(),-")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?\Z")
_WORD = re.compile(r"[A-Za-z_]+\Z")
_MAX_DIGITS = 18              # an int64 holds any 18-digit number


class _Strings(list):
    """A column of string literals, given as their text between the quotes."""


def _split_values(sql: str, pos: int):
    """(rows, width, columns) of the VALUES list at ``sql[pos:]``, found by numpy passes
    over its bytes instead of a token per literal; None when the text is not plain enough
    for this scan (non-ASCII text, control characters, comments, backslashes), and then
    the token split decides.  Where it answers, it is the token split's answer (a test
    compares them), with each column in one of three forms: an int64 array for a column
    of plain integers, ``_Strings`` (the text between the quotes) for a column of string
    literals, else the literals' tokens for ``_literal_column``.

    The scan: a byte is inside a string literal when an odd number of quotes precede it
    (a doubled quote inside a literal counts twice); the parentheses and commas outside
    literals must make the rows' pattern ``( , , ) , ( , , )``; each field is trimmed of
    spaces, a field that starts with a quote must be exactly one literal, any other field
    one number or word; and no other non-space byte lies outside the fields."""
    body = sql[pos:].rstrip(" \t\n\r\f")
    if body.endswith(";"):
        body = body[:-1]
    if not body.isascii() or "\\" in body or "--" in body or "/*" in body:
        return None
    b = np.frombuffer(body.encode("ascii"), dtype=np.uint8)
    n = len(b)
    if n < 2:
        return None
    low = b[b < 32]
    if len(low) and not ((low == 9) | (low == 10) | (low == 12) | (low == 13)).all():
        return None                                   # only SQL's whitespace below a blank
    quote = b == _QUOTE
    quotes = np.flatnonzero(quote)
    if len(quotes) % 2:
        return None                                   # an unterminated literal
    is_mark = (b == _OPEN) | (b == _CLOSE) | (b == _COMMA)
    solid = b > 32
    if len(quotes):
        # 1 from a literal's opening quote to the byte before its closing one
        inside = (np.cumsum(quote.view(np.uint8), dtype=np.uint8) & 1).view(bool)
        is_mark &= ~inside
        solid_outside = int(np.count_nonzero(solid)) - int(np.count_nonzero(
            solid & (inside | quote)))
    else:
        solid_outside = int(np.count_nonzero(solid))
    marks = np.flatnonzero(is_mark)
    chars = b[marks]
    closes = np.flatnonzero(chars == _CLOSE)
    if len(closes) == 0:
        return None
    width = int(closes[0])
    stride = width + 2
    if width < 1 or (len(marks) + 1) % stride:
        return None
    nrows = (len(marks) + 1) // stride
    row = np.full(stride, _COMMA, dtype=np.uint8)
    row[0] = _OPEN
    row[width] = _CLOSE
    if not np.array_equal(chars, np.tile(row, nrows)[:-1]):
        return None
    grid = np.append(marks, n).reshape(nrows, stride)
    ends = grid[:, 1:width + 1]
    lo = grid[:, :width] + 1                          # field k of row r: [lo, hi)
    while True:                                       # trimmed of the spaces around it
        space = b[lo] <= 32
        if not space.any():
            break
        lo += space
    if not (lo < ends).all():
        return None                                   # an empty field
    hi = ends.copy()
    while True:
        space = b[hi - 1] <= 32
        if not space.any():
            break
        hi -= space
    first = b[lo]
    strings = first == _QUOTE
    if strings.any():
        # each literal must end where a string field does: a closing quote not followed by
        # another quote ends a literal ('' inside one is not an end; the text's last byte
        # is never a literal's end, as the pattern ends with a parenthesis)
        closing = quotes[1::2]
        real = closing[b[np.minimum(closing + 1, n - 1)] != _QUOTE]
        if not np.array_equal(real, hi[strings] - 1):
            return None
    elif len(quotes):
        return None                                   # a literal outside any field
    cols = []
    plain_bytes = 0                                   # bytes of the non-string fields
    for k in range(width):
        col, nbytes = _split_column(body, b, first[:, k], lo[:, k], hi[:, k], strings[:, k])
        if col is None:
            return None
        cols.append(col)
        plain_bytes += nbytes
    if solid_outside != len(marks) + plain_bytes:
        return None                                   # something between the fields
    return nrows, width, cols


def _split_column(body, b, first, lo, hi, strings):
    """One column of ``_split_values`` and the number of bytes of its non-string fields;
    (None, 0) when a field is not one literal."""
    if strings.all():
        return _Strings([body[i:j] for i, j in zip((lo + 1).tolist(), (hi - 1).tolist())]), 0
    length = hi - lo
    neg = first == _MINUS
    ndig = length - neg
    if not strings.any() and ((first <= 57) & ((first >= 48) | neg)).all() and \
            int(ndig.min()) >= 1 and int(ndig.max()) <= _MAX_DIGITS:
        # right-aligned digits, the least significant first; a minus sign only in front
        place = np.arange(int(ndig.max()))
        used = place < ndig[:, None]
        d = b[np.maximum((hi - 1)[:, None] - place, 0)].astype(np.int64) - 48
        if (((d >= 0) & (d <= 9)) | ~used).all():
            vals = np.where(used, d, 0) @ (10 ** place)
            return np.where(neg, -vals, vals), int(length.sum())
    texts = [body[i:j] for i, j in zip(lo.tolist(), hi.tolist())]
    nbytes = 0
    for x, s in zip(texts, strings.tolist()):
        if s:
            continue
        if (_NUMBER if x[0] == "-" or x[0].isdigit() else _WORD).match(x) is None:
            return None, 0
        nbytes += len(x)
    return texts, nbytes


def _check_int_range(t, smallest: int, largest: int) -> None:
    """_Fallback unless integer column type ``t`` holds every value from ``smallest`` to
    ``largest`` (a type without a range here - smallint - always falls back: the general
    path names the error)."""
    lo, hi = _INT_RANGE.get(t.name, (1, 0))
    if not (lo <= smallest and largest <= hi):
        raise _Fallback


def _integer_column(vals: np.ndarray, t) -> np.ndarray:
    """An integer column's values for a column of type ``t``, as ``_number_literals``
    converts integer literals; _Fallback when it would."""
    f = family(t)
    if f == "int":
        _check_int_range(t, int(vals.min()), int(vals.max()))
        return vals
    if t.name == "double precision":
        return vals.astype(np.float64)
    raise _Fallback


def _literal_column(tokens: list, t) -> list:
    """Python values of one column's literal tokens, as the binder would make them for a
    column of type ``t``; _Fallback when in doubt."""
    firsts = set(map(itemgetter(0), tokens))
    if firsts <= _NUMBER_START:
        return _number_literals(tokens, t)
    if firsts == {"'"}:
        return _string_literals(tokens, t)
    # a mix: NULL / TRUE / FALSE words, numbers, strings - each group by its own rule
    groups: dict = {}
    for i, x in enumerate(tokens):
        c = x[0]
        if c == "'":
            kind = "s"
        elif c in _NUMBER_START:
            kind = "n"
        else:
            kind = x.lower()
            if kind not in _WORDS or (kind != "null" and t.name != "boolean"):
                raise _Fallback
        groups.setdefault(kind, []).append(i)
    out: list = [None] * len(tokens)
    for kind, idx in groups.items():
        if kind == "s":
            vals = _string_literals([tokens[i] for i in idx], t)
        elif kind == "n":
            vals = _number_literals([tokens[i] for i in idx], t)
        else:
            vals = [_WORDS[kind]] * len(idx)
        for i, v in zip(idx, vals):
            out[i] = v
    return out


_INF = float("inf")


def _number_literals(tokens: list, t) -> list:
    f = family(t)
    if f == "int":
        try:
            vals = list(map(int, tokens))
        except ValueError:
            raise _Fallback from None       # a decimal literal: a rounding cast
        _check_int_range(t, min(vals), max(vals))
        return vals
    if t.name == "double precision":
        # an integer literal is cast, and so is a decimal one (a numeric: PostgreSQL's
        # numeric has no -0, so -0.0 is 0, and it reads the digits as float8 does); a value
        # past float8's range is the general path's error
        try:
            vals = [float(x) + 0.0 if ("." in x or "e" in x or "E" in x) else float(int(x))
                    for x in tokens]
        except ValueError:
            raise _Fallback from None
        if any(v in (_INF, -_INF) for v in vals):
            raise _Fallback
        return vals
    raise _Fallback


def _string_literals(tokens: list, t) -> list:
    """String literals through the type's input function, as the binder assigns an
    unknown-typed constant to a column."""
    return _string_values([x[1:-1] for x in tokens], t)


def _string_values(vals: list, t) -> list:
    """``_string_literals`` of the literals' text between their quotes."""
    joined = "".join(vals)
    if "\\" in joined:
        raise _Fallback        # leave escape-looking text to the general parser
    if "''" in joined:
        vals = [x.replace("''", "'") for x in vals]
    try:
        return convert_strings(vals, t, t.name)
    except errors.Error:
        raise _Fallback from None


# -- conversion of text (COPY fields, string literals) ------------------------------------------
def convert_strings(vals: list, t, column: str) -> list:
    """``cast_value(v, unknown, t, explicit=False)`` of every string in ``vals`` (no None),
    vectorized where the type allows; raises what the first failing value raises."""
    f = family(t)
    if f == "text":
        if t.name in ("char", "varchar") and t.length is not None and vals and \
                max(map(len, vals)) > t.length:
            return [cast_value(v, UNKNOWN, t, explicit=False, column=column) for v in vals]
        return vals
    if f == "int" and t.name in _INT_RANGE:
        try:
            out = list(map(int, vals))
        except ValueError:
            out = None
        if out is not None:
            lo, hi = _INT_RANGE[t.name]
            if not out or (lo <= min(out) and max(out) <= hi):
                return out
    elif f == "float" and t.name == "double precision":
        try:
            return list(map(float, vals))
        except ValueError:
            pass
    return [cast_value(v, UNKNOWN, t, explicit=False, column=column) for v in vals]


# -- executemany --------------------------------------------------------------------------------
def executemany(engine, sql: str, seq_of_params) -> Result | None:
    """Run ``sql`` (an ``INSERT ... VALUES (?, ...)`` of one row) for every parameter
    sequence as one bulk statement; None when it is not such a statement or the rows need
    the one-at-a-time loop (nothing has been done then).  ``seq_of_params`` is a list of
    tuples."""
    from minidb.sql import ast
    from minidb.sql.binder import Binder
    from minidb.sql.parser.translate import parse_expression_text
    prepared = engine.prepare(sql)
    stmt = prepared._entry.stmt
    if not isinstance(stmt, ast.InsertStmt) or stmt.values is None or len(stmt.values) != 1 \
            or stmt.returning or getattr(stmt, "on_conflict", None) is not None:
        return None   # RETURNING / ON CONFLICT: the general path, row by row
    rows = seq_of_params
    nparams = stmt.nparams
    if not rows or any(len(r) != nparams for r in rows):
        return None
    try:
        cols = list(zip(*rows)) if nparams else []
        sig = []
        for c in cols:
            types = set(map(type, c))
            types.discard(type(None))
            if len(types) > 1:
                raise _Fallback
            sig.append(types.pop() if types else type(None))
        catalog = engine.session.backend.catalog
        if stmt.table not in catalog.tables:
            raise _Fallback
        bound = Binder(catalog, tuple(sig), default_parser=parse_expression_text).bind(stmt)
        entry, attnos = bound.entry, list(bound.attnos)
        exprs = bound.rows[0]
        defaults = bound.defaults
        values = []
        for e, a in zip(exprs, attnos):
            name, t = entry.columns[a]
            if e is DEFAULT:
                raise _Fallback
            if not isinstance(e, Param):
                raise _Fallback
            if e.type != t and not (family(t) == "text" and family(e.type) == "text"):
                raise _Fallback
            vals = _bind_column(cols[e.index], e.type, len(rows))
            if entry.not_null[a] and None in vals:
                raise _Fallback
            values.append((vals, t))
        entry = _lock(engine, entry)
    except _Fallback:
        return None
    n = len(rows)

    def chunks():
        for a in range(0, n, EXECUTEMANY_BATCH):
            b = min(a + EXECUTEMANY_BATCH, n)
            yield Chunk([column_from_values(v[a:b], t) for v, t in values], b - a)

    count = run_insert(engine, entry, attnos, defaults, chunks())
    return Result(None, [], count, f"INSERT 0 {count}")


def _bind_column(col: tuple, t, n: int) -> list:
    """``bind_param(v, t)`` of each parameter of one column (vectorized for the common
    cases); raises _Fallback where a value would fail, for the loop to report it."""
    f = family(t)
    present = [v for v in col if v is not None]
    kinds = set(map(type, present))
    try:
        if not present:
            return list(col)
        if f == "int" and kinds == {int} and t.name in _INT_RANGE:
            lo, hi = _INT_RANGE[t.name]
            if lo <= min(present) and max(present) <= hi:
                return list(col)
        elif f == "float" and kinds <= {float, int}:
            return [None if v is None else float(v) for v in col]
        elif f == "text" and kinds == {str}:
            return list(col)
        elif f == "bool" and kinds == {bool}:
            return list(col)
        return [bind_param(v, t) for v in col]
    except errors.Error:
        raise _Fallback from None

