"""CREATE / ALTER / DROP SEQUENCE: minidb's own small parser (sqlglot reads little of them).

``is_sequence_statement(piece)`` says whether a statement is one of them (its second word
is SEQUENCE); ``parse_sequence(full, start, piece)`` returns the statement.  The options
are PostgreSQL's::

    CREATE [TEMP] SEQUENCE [IF NOT EXISTS] name [AS type] [INCREMENT [BY] n]
        [MINVALUE n | NO MINVALUE] [MAXVALUE n | NO MAXVALUE] [START [WITH] n]
        [CACHE n] [[NO] CYCLE] [OWNED BY table.column | OWNED BY NONE]
    ALTER SEQUENCE [IF EXISTS] name [those options] [RESTART [[WITH] n]]
    DROP SEQUENCE [IF EXISTS] name [, ...] [CASCADE | RESTRICT]

(TEMP is refused.)  The options are a dict for ``minidb.catalog.sequence.sequence_params``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from minidb.errors import NotSupportedError
from minidb.sql import ast
from minidb.sql.parser.lexer import strip_comments, syntax_error

__all__ = ["CreateSequenceStmt", "AlterSequenceStmt", "DropSequenceStmt",
           "is_sequence_statement", "parse_sequence", "parse_sequence_options"]


@dataclass
class CreateSequenceStmt(ast.Statement):
    name: str = ""
    options: dict = field(default_factory=dict)
    if_not_exists: bool = False
    tag: str = "CREATE SEQUENCE"


@dataclass
class AlterSequenceStmt(ast.Statement):
    name: str = ""
    options: dict = field(default_factory=dict)
    if_exists: bool = False
    tag: str = "ALTER SEQUENCE"


@dataclass
class DropSequenceStmt(ast.Statement):
    names: list = field(default_factory=list)
    if_exists: bool = False
    tag: str = "DROP SEQUENCE"


_TOKEN = re.compile(r'\s*(?:(-?\d+)|("(?:[^"]|"")*")|([A-Za-z_][A-Za-z0-9_$]*)|(\S))')


def _tokens(piece: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset): kind 'n' number, 'q' quoted name, 'w' word, 'p' punctuation."""
    out, i = [], 0
    text = strip_comments(piece)
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None or m.end() == i:
            break
        for kind, g in zip("nqwp", m.groups()):
            if g is not None:
                out.append((kind, g, m.start(m.lastindex)))
        i = m.end()
    return out


def is_sequence_statement(piece: str) -> bool:
    toks = [t for t in _tokens(piece)[:3] if t[0] == "w"]
    if len(toks) < 2 or toks[0][1].lower() not in ("create", "alter", "drop"):
        return False
    second = toks[1][1].lower()
    if second in ("temp", "temporary") and len(toks) > 2:
        second = toks[2][1].lower()
    return second == "sequence"


class _P:
    def __init__(self, full, start, piece):
        self.full, self.start = full, start
        self.toks = _tokens(piece)
        self.i = 0
        self.end = start + len(piece)

    def error(self):
        if self.i < len(self.toks):
            k, t, off = self.toks[self.i]
            return syntax_error(self.full, self.start + off, t)
        return syntax_error(self.full, self.end, None)

    def peek(self, *words) -> bool:
        if self.i >= len(self.toks):
            return False
        k, t, _ = self.toks[self.i]
        return k in "wp" and t.lower() in words

    def word(self, *words) -> bool:
        if self.peek(*words):
            self.i += 1
            return True
        return False

    def expect(self, w):
        if not self.word(w):
            raise self.error()

    def number(self) -> int:
        if self.i < len(self.toks) and self.toks[self.i][0] == "n":
            self.i += 1
            return int(self.toks[self.i - 1][1])
        raise self.error()

    def name(self) -> str:
        if self.i >= len(self.toks):
            raise self.error()
        k, t, _ = self.toks[self.i]
        if k == "q":
            self.i += 1
            return t[1:-1].replace('""', '"')
        if k == "w":
            self.i += 1
            n = t.lower()
            if n == "public" and self.word("."):
                return self.name()
            return n
        raise self.error()

    def done(self) -> bool:
        return self.i >= len(self.toks) or self.peek(";")


_TYPES = {"smallint": "smallint", "int2": "smallint", "integer": "integer", "int": "integer",
          "int4": "integer", "bigint": "bigint", "int8": "bigint"}


def parse_sequence_options(p: _P, alter: bool) -> dict:
    opts: dict = {}
    while not p.done():
        if p.word("as"):
            t = p.name()
            if t not in _TYPES:
                raise NotSupportedError(f"sequence type {t} is not supported "
                                        "(smallint, integer, bigint)")
            opts["as"] = _TYPES[t]
        elif p.word("increment"):
            p.word("by")
            opts["increment"] = p.number()
        elif p.word("minvalue"):
            opts["minvalue"] = p.number()
        elif p.word("maxvalue"):
            opts["maxvalue"] = p.number()
        elif p.word("start"):
            p.word("with")
            opts["start"] = p.number()
        elif p.word("cache"):
            opts["cache"] = p.number()
        elif p.word("cycle"):
            opts["cycle"] = True
        elif p.word("no"):
            if p.word("minvalue"):
                opts["minvalue"] = None
            elif p.word("maxvalue"):
                opts["maxvalue"] = None
            elif p.word("cycle"):
                opts["cycle"] = False
            else:
                raise p.error()
        elif p.word("owned"):
            p.expect("by")
            if p.word("none"):
                opts["owned_by"] = None
            else:
                t = p.name()
                p.expect(".")
                opts["owned_by"] = (t, p.name())
        elif alter and p.word("restart"):
            p.word("with")
            opts["restart"] = p.number() if not p.done() and \
                p.toks[p.i][0] == "n" else None
        else:
            raise p.error()
    return opts


def parse_sequence(full: str, start: int, piece: str) -> ast.Statement:
    p = _P(full, start, piece)
    if p.word("create"):
        if p.word("temp", "temporary"):
            raise NotSupportedError("temporary sequences are not supported")
        p.expect("sequence")
        ine = False
        if p.word("if"):
            p.expect("not")
            p.expect("exists")
            ine = True
        name = p.name()
        return CreateSequenceStmt(name=name, options=parse_sequence_options(p, False),
                                  if_not_exists=ine)
    if p.word("alter"):
        p.expect("sequence")
        ie = False
        if p.word("if"):
            p.expect("exists")
            ie = True
        name = p.name()
        if p.peek("rename", "owner", "set"):
            raise NotSupportedError(f"ALTER SEQUENCE ... {p.toks[p.i][1].upper()} is not "
                                    "supported")
        return AlterSequenceStmt(name=name, options=parse_sequence_options(p, True),
                                 if_exists=ie)
    p.expect("drop")
    p.expect("sequence")
    ie = False
    if p.word("if"):
        p.expect("exists")
        ie = True
    names = [p.name()]
    while p.word(","):
        names.append(p.name())
    p.word("cascade") or p.word("restrict")
    if not p.done():
        raise p.error()
    return DropSequenceStmt(names=names, if_exists=ie)
