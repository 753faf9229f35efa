"""Tab completion for the interactive REPL (a prompt_toolkit ``Completer``).

After a backslash at the start of a word: the meta commands.  Otherwise the word before the
cursor completes to table and index names, the columns of the tables the buffer names (of
every table when it names none), and SQL keywords - read from the catalog at each Tab, so
names created a moment ago are there.  Keywords complete in upper case unless the word is
typed in lower case, names as they are stored.
"""

from __future__ import annotations

import re

from prompt_toolkit.completion import Completer, Completion

KEYWORDS = (
    "ALTER", "ANALYZE", "AND", "AS", "ASC", "BEGIN", "BETWEEN", "BY", "COMMIT", "COPY",
    "COUNT", "CREATE", "DEFAULT", "DELETE", "DESC", "DISTINCT", "DROP", "END", "EXISTS",
    "EXPLAIN", "FALSE", "FROM", "GROUP", "HAVING", "IN", "INDEX", "INSERT", "INTO", "IS",
    "JOIN", "KEY", "LIKE", "LIMIT", "NOT", "NULL", "OFFSET", "ON", "OR", "ORDER", "PRIMARY",
    "ROLLBACK", "SELECT", "SET", "SHOW", "TABLE", "TRUE", "TRUNCATE", "UNIQUE", "UPDATE",
    "VACUUM", "VALUES", "WHERE",
    "integer", "bigint", "smallint", "text", "varchar", "boolean", "double precision",
    "timestamp", "numeric",
)

META = ("?", "a", "btree", "d", "d+", "di", "di+", "dt", "dt+", "echo", "g", "gx", "i",
        "ir", "locks", "p", "page", "pset", "q", "r", "set", "stats", "t", "timing", "unset", "x")

_WORD = re.compile(r"(\\?[A-Za-z0-9_+?]*)$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SqlCompleter(Completer):
    def __init__(self, repl):
        self.repl = repl

    def names(self, text: str) -> tuple[list[str], list[str]]:
        """(relation names, column names) the catalog offers for the buffer ``text``."""
        cat = self.repl.conn.session.backend.catalog
        cat.refresh()
        tables = sorted(cat.tables)
        rels = tables + sorted(cat.indexes)
        mentioned = {w.lower() for w in _IDENT.findall(text)} & set(tables)
        cols = []
        for name in (sorted(mentioned) or tables):
            for c in cat.tables[name].columns:
                if c.name not in cols:
                    cols.append(c.name)
        return rels, cols

    def get_completions(self, document, complete_event):
        before = document.text_before_cursor
        word = _WORD.search(before).group(1)
        if word.startswith("\\"):
            for m in META:
                if m.startswith(word[1:]):
                    yield Completion("\\" + m, start_position=-len(word))
            return
        try:
            rels, cols = self.names(document.text)
        except Exception:   # a completion must never break the prompt
            rels, cols = [], []
        low = word.lower()
        seen = set()
        for cand in cols + rels:
            if cand.lower().startswith(low) and cand not in seen:
                seen.add(cand)
                yield Completion(cand, start_position=-len(word))
        for kw in KEYWORDS:
            if kw.lower().startswith(low) and word:
                text = kw.lower() if word.islower() else kw
                if text not in seen:
                    seen.add(text)
                    yield Completion(text, start_position=-len(word))
