"""A small SQL lexer: statement splitting, tokens for the utility parser, error positions.

PostgreSQL's lexical rules that matter for finding where a statement ends:

==================  ========================================================================
construct           rule
==================  ========================================================================
'...'               a string; '' inside is a quote; E'...' also treats \\' as a quote
"..."               a quoted identifier; "" inside is a quote
-- ... newline      a comment
/* ... */           a comment; they nest
$tag$ ... $tag$     a dollar-quoted string (tag: letters, digits, _; not starting with a
                    digit, so $1 is a parameter)
;                   ends a statement anywhere else
==================  ========================================================================

``tokenize`` yields ``Token(kind, value, pos)`` with kind one of ``ident`` (unquoted, lower
cased), ``qident`` (quoted, as written), ``string``, ``number``, ``param`` (``?``), ``op``
(punctuation and operators); ``pos`` is the character offset.  Errors carry the position
as ``(line L, column C)``, both 1-based.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from minidb.errors import SyntaxError_

__all__ = ["split_statements", "tokenize", "Token", "line_col", "syntax_error",
           "first_word", "strip_comments"]


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, column) of character offset ``pos``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def syntax_error(text: str, pos: int, near: str | None = None, detail: str = "") -> SyntaxError_:
    line, col = line_col(text, pos)
    if near is None or pos >= len(text.rstrip()):
        msg = "syntax error at end of input"
    else:
        msg = f'syntax error at or near "{near}"'
    msg += f" (line {line}, column {col})"
    if detail:
        msg += f": {detail}"
    e = SyntaxError_(msg)
    e.position = pos + 1   # PostgreSQL's 1-based character position
    e.line, e.column = line, col
    return e


_DOLLAR = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")


def _skip(text: str, i: int) -> tuple[int, bool]:
    """If a quoted construct or comment starts at ``i``, the index after it and whether it
    was closed; else (i, True) unchanged."""
    n = len(text)
    ch = text[i]
    if ch == "'":
        escapes = i > 0 and text[i - 1] in "eE" and (i < 2 or not (text[i - 2].isalnum()
                                                                  or text[i - 2] == "_"))
        j = i + 1
        while j < n:
            c = text[j]
            if escapes and c == "\\":
                j += 2
                continue
            if c == "'":
                if j + 1 < n and text[j + 1] == "'":
                    j += 2
                    continue
                return j + 1, True
            j += 1
        return n, False
    if ch == '"':
        j = i + 1
        while j < n:
            if text[j] == '"':
                if j + 1 < n and text[j + 1] == '"':
                    j += 2
                    continue
                return j + 1, True
            j += 1
        return n, False
    if ch == "-" and text.startswith("--", i):
        j = text.find("\n", i)
        return (n if j < 0 else j + 1), True
    if ch == "/" and text.startswith("/*", i):
        depth, j = 0, i
        while j < n:
            if text.startswith("/*", j):
                depth += 1
                j += 2
            elif text.startswith("*/", j):
                depth -= 1
                j += 2
                if depth == 0:
                    return j, True
            else:
                j += 1
        return n, False
    if ch == "$":
        if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
            return i, True
        m = _DOLLAR.match(text, i)
        if m:
            tag = m.group(0)
            j = text.find(tag, m.end())
            return (n, False) if j < 0 else (j + len(tag), True)
    return i, True


def strip_comments(text: str) -> str:
    """The text with comments replaced by blanks (strings and identifiers kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        j, _ = _skip(text, i)
        if j != i:
            piece = text[i:j]
            if piece.startswith("--") or piece.startswith("/*"):
                out.append(" ")
            else:
                out.append(piece)
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def split_statements(text: str) -> tuple[list[str], str]:
    """(complete statements without their ';', the unfinished rest of ``text``).

    Statements that hold nothing but blanks and comments are dropped; the rest is "" when
    nothing but blanks and comments follows the last ';'."""
    stmts, start, i, n = [], 0, 0, len(text)
    while i < n:
        j, _closed = _skip(text, i)
        if j != i:
            i = j
            continue
        if text[i] == ";":
            piece = text[start:i]
            if strip_comments(piece).strip():
                stmts.append(piece.strip())
            start = i + 1
        i += 1
    rest = text[start:]
    if not strip_comments(rest).strip():
        rest = ""
    return stmts, rest


@dataclass
class Token:
    kind: str
    value: str
    pos: int


_NUMBER = re.compile(r"(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)")
_IDENT = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*")
_OPS = ("::", "<>", "!=", "<=", ">=", "||", "(", ")", ",", "=", "<", ">", "+", "-", "*", "/",
        "%", ".", ";", "?")


def tokenize(text: str) -> list[Token]:
    toks, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "eE" and i + 1 < n and text[i + 1] == "'":
            j, closed = _skip(text, i + 1)
            if not closed:
                raise syntax_error(text, i, None, "unterminated quoted string")
            body = text[i + 2:j - 1].replace("''", "'")
            toks.append(Token("string", _unescape(body), i))
            i = j
            continue
        j, closed = _skip(text, i)
        if j != i:
            if not closed:
                raise syntax_error(text, i, None, "unterminated quoted string or comment")
            piece = text[i:j]
            if ch == "'":
                toks.append(Token("string", piece[1:-1].replace("''", "'"), i))
            elif ch == '"':
                toks.append(Token("qident", piece[1:-1].replace('""', '"'), i))
            elif ch == "$":
                tag_len = piece.index("$", 1) + 1
                toks.append(Token("string", piece[tag_len:-tag_len], i))
            i = j
            continue
        m = _NUMBER.match(text, i)
        if m and (ch.isdigit() or ch == "."):
            if ch == "." and not (i + 1 < n and text[i + 1].isdigit()):
                pass
            else:
                toks.append(Token("number", m.group(0), i))
                i = m.end()
                continue
        m = _IDENT.match(text, i)
        if m:
            toks.append(Token("ident", m.group(0).lower(), i))
            i = m.end()
            continue
        for op in _OPS:
            if text.startswith(op, i):
                toks.append(Token("param" if op == "?" else "op", op, i))
                i += len(op)
                break
        else:
            raise syntax_error(text, i, ch)
    return toks


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "b": "\b",
                                       "f": "\f"}.get(m.group(1), m.group(1)), s)


def first_word(text: str) -> tuple[str, int]:
    """The first keyword of a statement, lower cased, and its offset ('' if none)."""
    clean = strip_comments(text)
    m = re.search(r"\S", clean)
    if not m:
        return "", 0
    w = _IDENT.match(clean, m.start())
    return (w.group(0).lower() if w else clean[m.start()]), m.start()


def unescape(text: str, table: dict) -> str:
    """``text`` with its backslash escapes replaced: ``\\x`` by ``table[x]``, or by ``x``
    itself when the table has none (COPY's text format, PostgreSQL's E'...' strings)."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(table.get(nxt, nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
