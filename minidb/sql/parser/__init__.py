"""SQL text -> minidb's logical tree (``minidb.sql.ast``).

``parse(text)`` takes exactly one statement (a trailing ';' is fine); ``parse_script``
any number.  The statement's first word decides the route:

* a utility word (BEGIN, COMMIT, SET, SHOW, VACUUM, EXPLAIN, COPY ...) -> ``utility``;
* SELECT / INSERT / UPDATE / DELETE / CREATE / DROP -> sqlglot, then ``translate``;
* a word PostgreSQL knows but minidb does not implement (GRANT, CLUSTER ...) ->
  NotSupportedError naming it;
* anything else -> a syntax error at that word (so ``selec * frm t``, which sqlglot
  would happily read as an alias, is refused like PostgreSQL refuses it).

Syntax errors from sqlglot are re-raised as ``SyntaxError_`` with the position of the
offending token in the original text.
"""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot.errors import ParseError, TokenError

from minidb.errors import NotSupportedError, ProgrammingError
from minidb.sql import ast
from minidb.sql.parser.dialect import MinidbPostgres
from minidb.sql.parser.lexer import (first_word, split_statements, strip_comments,
                                     syntax_error, _skip)
from minidb.sql.parser.translate import number_placeholders, translate_statement, unsupported
from minidb.sql.parser.sequence import is_sequence_statement, parse_sequence
from minidb.sql.parser.utility import UTILITY_WORDS, parse_utility

__all__ = ["parse", "parse_script", "split_statements"]

logging.getLogger("sqlglot").setLevel(logging.ERROR)

_QUERY = ("Select", "Union", "Intersect", "Except", "Subquery")
_SQLGLOT_WORDS = {"select": _QUERY, "insert": ("Insert",), "update": ("Update",),
                  "delete": ("Delete",), "create": ("Create",), "drop": ("Drop",),
                  "with": _QUERY, "(": _QUERY}
_KNOWN_UNSUPPORTED = {
    "grant", "revoke", "prepare", "execute", "deallocate", "listen", "notify",
    "unlisten", "do", "call", "comment", "lock", "merge", "cluster", "discard",
    "fetch", "declare", "close", "move", "refresh", "security",
    "import", "load", "values", "table", "reassign", "create", "security", "vacuum",
}


def parse(text: str) -> ast.Statement:
    """Exactly one statement."""
    pieces = _pieces(text)
    if not pieces:
        raise ProgrammingError("can't execute an empty query")
    if len(pieces) > 1:
        raise ProgrammingError("cannot execute several statements at once "
                               f"({len(pieces)} given); use execute_script")
    start, piece = pieces[0]
    return parse_at(text, start, piece)


def parse_script(text: str) -> list[tuple[str, ast.Statement | Exception]]:
    """Every statement of ``text``: (its text, the statement or the error parsing it)."""
    out = []
    for start, piece in _pieces(text):
        try:
            out.append((piece, parse_at(text, start, piece)))
        except Exception as e:  # noqa: BLE001 - the caller reports it in order
            out.append((piece, e))
    return out


def _pieces(text: str) -> list[tuple[int, str]]:
    """(offset, text) of each statement (split at ';' outside quotes and comments)."""
    out, start, i, n = [], 0, 0, len(text)
    while i < n:
        j, _ = _skip(text, i)
        if j != i:
            i = j
            continue
        if text[i] == ";":
            _add(out, text, start, i)
            start = i + 1
        i += 1
    _add(out, text, start, n)
    return out


def _add(out, text, a, b):
    piece = text[a:b]
    if strip_comments(piece).strip():
        lead = len(piece) - len(piece.lstrip())
        out.append((a + lead, piece.strip()))


def parse_at(full: str, start: int, piece: str) -> ast.Statement:
    word, off = first_word(piece)
    if word in ("create", "alter", "drop") and is_sequence_statement(piece):
        return parse_sequence(full, start, piece)
    if word in UTILITY_WORDS:
        return parse_utility(word, piece, start, full, lambda t, pos: parse_at(full, pos, t))
    if word in _SQLGLOT_WORDS:
        return _sqlglot(full, start, piece, word)
    if word in _KNOWN_UNSUPPORTED:
        raise NotSupportedError(f"{word.upper()} is not supported")
    raise syntax_error(full, start + off, word or piece[:1])


_ON_COMMIT_DROP = re.compile(r"\s+ON\s+COMMIT\s+DROP\s*$", re.IGNORECASE)


def _sqlglot(full: str, start: int, piece: str, word: str) -> ast.Statement:
    on_commit_drop = None
    if word == "create":    # sqlglot reads ON COMMIT DELETE / PRESERVE ROWS, not DROP
        on_commit_drop = _ON_COMMIT_DROP.search(strip_comments(piece))
        if on_commit_drop is not None:
            piece = strip_comments(piece)[:on_commit_drop.start()]
    _stray_comma(full, start, piece)
    overriding = None
    if word == "insert":
        piece, overriding = _overriding(piece)
    text, nq, nd = number_placeholders(piece)
    if nq and nd > nq:
        raise ProgrammingError("cannot mix ? and $n placeholders")
    try:
        trees = sqlglot.parse(text, read=MinidbPostgres)
    except ParseError as e:
        raise _position_error(full, start, piece, text, e) from None
    except TokenError:
        pos = _unterminated(piece)
        e = syntax_error(full, start + pos, piece[pos:pos + 20])
        kind = "quoted string" if piece[pos:pos + 1] in "'\"$" else "/* comment"
        msg = str(e).replace("syntax error", f"unterminated {kind}", 1)
        raise type(e)(msg) from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise syntax_error(full, start, word)
    tree = trees[0]
    want = _SQLGLOT_WORDS[word]
    if type(tree).__name__ not in want:
        if type(tree).__name__ == "Command":
            rest = strip_comments(piece).split()
            raise NotSupportedError(f"{' '.join(rest[:2]).upper()} is not supported")
        raise unsupported(tree)
    stmt = translate_statement(tree)
    stmt.nparams = max(nq, nd)
    if overriding is not None:
        stmt.overriding = overriding
    if on_commit_drop is not None:
        if not getattr(stmt, "temp", False):
            raise ProgrammingError("ON COMMIT can only be used on temporary tables",
                                   sqlstate="42P16")
        stmt.on_commit = "drop"
    return stmt


_OVERRIDING = re.compile(r"overriding\s+(system|user)\s+value\b", re.I)


def _overriding(piece: str) -> tuple[str, str | None]:
    """INSERT's OVERRIDING { SYSTEM | USER } VALUE (sqlglot does not read it): blanked out
    of the text (positions unchanged), returned as "system" / "user"."""
    i, n = 0, len(piece)
    while i < n:
        j, _ = _skip(piece, i)
        if j != i:
            i = j
            continue
        m = _OVERRIDING.match(piece, i)
        if m and (i == 0 or not (piece[i - 1].isalnum() or piece[i - 1] == "_")):
            return piece[:i] + " " * (m.end() - i) + piece[m.end():], m.group(1).lower()
        i += 1
    return piece, None


_AFTER_LIST = {"from", "where", "group", "having", "order", "limit", "offset", "union",
               "intersect", "except", "window", "into", "returning"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def _stray_comma(full: str, start: int, piece: str) -> None:
    """A comma directly before a clause keyword or a closing parenthesis (``SELECT id,
    FROM t``) is a syntax error at that keyword, as in PostgreSQL (sqlglot drops it)."""
    i, n = 0, len(piece)
    comma = False
    while i < n:
        j, _ = _skip(piece, i)
        if j != i:
            if piece[i] not in "-/":       # a string or quoted name, not a comment
                comma = False
            i = j
            continue
        ch = piece[i]
        if ch.isspace():
            i += 1
            continue
        if comma:
            m = _WORD.match(piece, i)
            word = m.group(0) if m else ch
            if ch == ")" or (m and word.lower() in _AFTER_LIST):
                raise syntax_error(full, start + i, word)
        if ch == ",":
            comma = True
            i += 1
            continue
        comma = False
        m = _WORD.match(piece, i)
        i = m.end() if m else i + 1
    if comma:
        raise syntax_error(full, start + n, None)


def _unterminated(piece: str) -> int:
    i, n = 0, len(piece)
    while i < n:
        j, closed = _skip(piece, i)
        if not closed:
            return i
        i = j if j != i else i + 1
    return n


_TOKEN_START = re.compile(r"start: (\d+)")


def _position_error(full, start, piece, text, e: ParseError):
    info = e.errors[0] if e.errors else {}
    desc = info.get("description") or str(e)
    highlight = info.get("highlight") or ""
    m = _TOKEN_START.search(desc)
    if m:
        pos_in_text = int(m.group(1))
    else:
        line, col = info.get("line", 1), info.get("col", 1)
        lines = text.split("\n")
        pos_in_text = sum(len(x) + 1 for x in lines[:max(0, line - 1)]) + max(0, col - len(highlight))
    # map back over the ?->$k rewrite (each $k is longer than its ?)
    pos = _map_back(piece, text, pos_in_text)
    detail = re.sub(r"(\s*but got)?\s*<Token.*", "", desc).strip()
    if detail.lower().startswith("invalid expression / unexpected token") \
            or "<class '" in detail:  # sqlglot's internals mean nothing to a SQL user
        detail = ""
    if pos >= len(piece.rstrip()) or not highlight:
        return syntax_error(full, start + len(piece.rstrip()), None, detail)
    near = highlight if highlight else piece[pos:pos + 1]
    return syntax_error(full, start + pos, near, detail)


def _map_back(orig: str, new: str, pos_new: int) -> int:
    if orig == new:
        return pos_new
    i = j = 0
    while i < len(orig) and j < pos_new:
        if new[j] == " " and orig[i] != " " and j > 0 and new[j - 1].isdigit():
            j += 1  # a space number_placeholders put after $n
            continue
        if orig[i] == "?" and new[j] == "$":
            k = j + 1
            while k < len(new) and new[k].isdigit():
                k += 1
            if k > pos_new:
                return i
            j = k
            i += 1
        else:
            i += 1
            j += 1
    return i
