"""psql's input lexer, reduced to what the REPL needs (psqlscan.l's job).

``QueryScanner`` reads input one line at a time and keeps the *query buffer*: the SQL typed
so far that does not end a statement yet, and the lexical state at its end (inside a
'string', an E'string', a "quoted identifier", a $tag$ dollar quote, a /* nested comment */,
and the depth of parentheses).  Each line yields actions:

* ``("sql", text)`` - a complete statement (the ``;`` at parenthesis depth 0 outside quotes
  and comments ends it; the ``;`` is not part of the text);
* ``("meta", line)`` - a backslash command: an unquoted ``\\`` outside quotes and comments
  starts one, which runs to the end of the line.  SQL before it on the line stays in the
  buffer (``SELECT 1 \\g`` sends it: the command decides).

``:name``, ``:'name'`` and ``:"name"`` outside quotes and comments are replaced by the
variable's value, as a literal or as an identifier (``::`` casts are left alone; an unknown
variable is left as typed), as psql does.

Also here: the tokenizer of backslash-command arguments (``meta_args``) and psql's name
patterns (``pattern_regex``: ``*`` and ``?`` wildcards, names folded to lower case unless
double-quoted).
"""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_QUOTED_VAR = re.compile(r""":(['"])[A-Za-z_][A-Za-z0-9_]*\1""")


def quote_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def quote_ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


class QueryScanner:
    """The query buffer and the lexical state at its end (see the module docstring)."""

    def __init__(self, variables: dict | None = None):
        self.variables = variables if variables is not None else {}
        self.reset()

    def reset(self) -> None:
        self.buffer = ""
        self.state = None      # None, "'", "E", '"', "/*", or a dollar tag "$x$"
        self.comment_depth = 0
        self.parens = 0

    @property
    def in_progress(self) -> bool:
        """Does the buffer hold something (other than blanks)?"""
        return bool(self.buffer.strip())

    def take(self) -> str:
        """The buffer's text, emptying it (``\\g``)."""
        text = self.buffer
        self.reset()
        return text

    def feed(self, line: str) -> list[tuple[str, str]]:
        """Actions for one input line (with or without its newline)."""
        if not line.endswith("\n"):
            line += "\n"
        actions = []
        out = []               # this line's text since the last action
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            st = self.state
            if st is not None:
                i = self._in_quote(line, i, out)
                continue
            if ch == "-" and line.startswith("--", i):
                if self.buffer.strip() or "".join(out).strip():
                    out.append(line[i:])   # (dropped while the buffer is empty, as psql)
                break
            if ch == "/" and line.startswith("/*", i):
                self.state, self.comment_depth = "/*", 1
                out.append("/*")
                i += 2
                continue
            if ch == "'":
                prev = line[i - 1] if i else (self.buffer[-1:] or " ")
                before = line[i - 2] if i >= 2 else " "
                self.state = "E" if prev in "eE" and not (before.isalnum() or before == "_") \
                    else "'"
                out.append(ch)
                i += 1
                continue
            if ch == '"':
                self.state = '"'
                out.append(ch)
                i += 1
                continue
            if ch == "$":
                prev = line[i - 1] if i else " "
                m = _DOLLAR.match(line, i)
                if m and not (prev.isalnum() or prev == "_"):
                    self.state = m.group(0)
                    out.append(m.group(0))
                    i = m.end()
                    continue
            if ch == "(":
                self.parens += 1
            elif ch == ")":
                self.parens = max(0, self.parens - 1)
            elif ch == ";" and self.parens == 0:
                self.buffer += "".join(out)
                out = []
                actions.append(("sql", self.buffer))
                self.reset()
                i += 1
                continue
            elif ch == "\\":
                self.buffer += "".join(out)
                actions.append(("meta", line[i:].rstrip("\n")))
                return actions
            elif ch == ":" and i + 1 < n and line[i + 1] != ":" and \
                    (i == 0 or line[i - 1] != ":"):
                j, text = self._variable(line, i)
                if text is not None:
                    out.append(text)
                    i = j
                    continue
            out.append(ch)
            i += 1
        self.buffer += "".join(out)
        if not self.buffer.strip():
            self.buffer = ""
        return actions

    def _in_quote(self, line: str, i: int, out: list) -> int:
        st = self.state
        if st == "/*":
            j = i
            while j < len(line):
                if line.startswith("/*", j):
                    self.comment_depth += 1
                    j += 2
                elif line.startswith("*/", j):
                    self.comment_depth -= 1
                    j += 2
                    if self.comment_depth == 0:
                        self.state = None
                        break
                else:
                    j += 1
            out.append(line[i:j])
            return j
        if st == "E":
            j = i
            while j < len(line):
                if line[j] == "\\":
                    j += 2
                    continue
                if line[j] == "'":
                    self.state = None
                    j += 1
                    break
                j += 1
            out.append(line[i:j])
            return j
        close = st if st in ("'", '"') else st    # a dollar tag closes itself
        j = line.find(close, i)
        if j < 0:
            out.append(line[i:])
            return len(line)
        out.append(line[i:j + len(close)])
        self.state = None
        return j + len(close)

    def _variable(self, line: str, i: int) -> tuple[int, str | None]:
        """(end, replacement) of ``:name``, ``:'name'`` or ``:"name"`` at ``i``; replacement
        None when it is not a known variable."""
        return interpolate_at(line, i, self.variables)


def interpolate_at(text: str, i: int, variables: dict) -> tuple[int, str | None]:
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if nxt in ("'", '"'):
        m = _NAME.match(text, i + 2)
        if m and text.startswith(nxt, m.end()) and m.group(0) in variables:
            value = variables[m.group(0)]
            return m.end() + 1, (quote_literal(value) if nxt == "'" else quote_ident(value))
        return i, None
    m = _NAME.match(text, i + 1)
    if m and m.group(0) in variables:
        return m.end(), variables[m.group(0)]
    return i, None


def meta_args(text: str, variables: dict | None = None) -> list[str]:
    """Split a backslash command's arguments as psql does: blanks separate them,
    'single quotes' group (``''`` is a quote, ``\\n`` a newline), "double quotes" group and
    are kept, ``:var`` / ``:'var'`` / ``:"var"`` interpolate; pieces touching each other make
    one argument (``'a b'c`` is ``a bc``)."""
    variables = variables or {}
    args, cur, have = [], [], False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            if have:
                args.append("".join(cur))
                cur, have = [], False
            i += 1
            continue
        have = True
        if ch == "'":
            j = i + 1
            while j < n:
                if text[j] == "'" and text.startswith("''", j):
                    cur.append("'")
                    j += 2
                elif text[j] == "'":
                    j += 1
                    break
                elif text[j] == "\\" and j + 1 < n:
                    cur.append({"n": "\n", "t": "\t"}.get(text[j + 1], text[j + 1]))
                    j += 2
                else:
                    cur.append(text[j])
                    j += 1
            i = j
        elif ch == '"':
            j = text.find('"', i + 1)
            j = n if j < 0 else j + 1
            cur.append(text[i:j])
            i = j
        elif ch == ":":
            j, value = interpolate_at(text, i, variables)
            m = _QUOTED_VAR.match(text, i)
            if value is None and m:      # :'unknown' stays as typed
                cur.append(m.group(0))
                i = m.end()
            elif value is None:
                cur.append(ch)
                i += 1
            else:
                cur.append(value)
                i = j
        else:
            cur.append(ch)
            i += 1
    if have:
        args.append("".join(cur))
    return args


def pattern_regex(pattern: str) -> tuple[re.Pattern, re.Pattern | None]:
    """psql's pattern rules (``\\dt t*``): ``*`` any characters, ``?`` one, letters
    folded to lower case and the whole name matched, except inside double quotes (literal,
    case kept; ``""`` is a quote).  An unquoted ``.`` separates a schema pattern: (name
    regex, schema regex or None)."""
    parts, cur, quoted, i = [], [], False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == '"':
            if quoted and pattern.startswith('""', i):
                cur.append('"')
                i += 2
                continue
            quoted = not quoted
        elif quoted:
            cur.append(re.escape(ch))
        elif ch == "*":
            cur.append(".*")
        elif ch == "?":
            cur.append(".")
        elif ch == ".":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(re.escape(ch.lower()))
        i += 1
    parts.append("".join(cur))
    name = re.compile("^(" + parts[-1] + ")$")
    schema = re.compile("^(" + parts[-2] + ")$") if len(parts) > 1 else None
    return name, schema


def parse_bool(value: str) -> bool | None:
    """psql's boolean spellings (any unique prefix of true/false/yes/no, on/off, 1/0)."""
    v = value.strip().lower()
    if not v:
        return None
    if "true".startswith(v) or "yes".startswith(v) or (len(v) >= 2 and "on".startswith(v)) \
            or v == "1":
        return True
    if "false".startswith(v) or "no".startswith(v) or (len(v) >= 2 and "off".startswith(v)) \
            or v == "0":
        return False
    return None
