"""Result printing as psql prints: values as PostgreSQL's text output, and the ``aligned``
(borders 0, 1, 2), ``expanded`` and ``unaligned`` layouts of psql's print.c, character for
character (the ``ascii`` line style; no ``wrapped`` format, no unicode lines).

``PrintOptions`` holds what ``\\pset`` sets; ``render(headers, rows, right, opts, ...)`` turns
already formatted cells into the text psql would print.  A cell with newlines spans several
lines, each but its last marked ``+``.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass

from minidb.dbapi import NUMBER


@dataclass
class PrintOptions:
    """psql's ``\\pset`` settings that minidb honours."""
    format: str = "aligned"       # aligned | unaligned
    border: int = 1               # 0, 1, 2
    expanded: bool = False
    null: str = ""
    fieldsep: str = "|"
    footer: bool = True
    tuples_only: bool = False
    pager: int = 1                # 0 off, 1 on (long output), 2 always


# ---------------------------------------------------------------------------------------------
# values, as PostgreSQL's text output prints them


def format_value(v, null: str = "") -> str:
    if v is None:
        return null
    if v is True:
        return "t"
    if v is False:
        return "f"
    if isinstance(v, float):
        return _pg_float(v)
    if isinstance(v, datetime.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        s += (f".{v.microsecond:06d}".rstrip("0") if v.microsecond else "")
        if v.tzinfo is not None:            # timestamptz, already in the session's TimeZone
            off = int(v.utcoffset().total_seconds())
            h, rem = divmod(abs(off), 3600)
            s += f"{'-' if off < 0 else '+'}{h:02d}" + (f":{rem // 60:02d}" if rem else "")
        return s
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, datetime.timedelta):   # an interval
        from minidb.exec.datetimes import format_interval
        from minidb.types import Interval
        return format_interval(Interval.from_timedelta(v))
    if isinstance(v, datetime.time):
        return v.strftime("%H:%M:%S") + (f".{v.microsecond:06d}".rstrip("0")
                                          if v.microsecond else "")
    if isinstance(v, decimal.Decimal):
        from minidb.types import format_numeric
        return format_numeric(v)
    return str(v)


def _pg_float(f: float) -> str:
    """float8 output of PostgreSQL 12+: the shortest digits that read back exactly, in
    positional form for decimal exponents -4 .. 14 and as ``1e+15`` otherwise."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e10 = exp + len(ds) - 1  # exponent of the first digit
    neg = "-" if sign else ""
    if -4 <= e10 < 15:
        if exp >= 0:
            return neg + ds + "0" * exp
        point = len(ds) + exp
        if point > 0:
            return neg + ds[:point] + "." + ds[point:]
        return neg + "0." + "0" * -point + ds
    mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{neg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"


def numeric_columns(description, rows) -> list[bool]:
    """Which columns print right-aligned: numbers by their SQL type, or, for a type code the
    DB-API does not know, by their values."""
    out = []
    for i, d in enumerate(description):
        code = d[1]
        if isinstance(code, str) and code:
            out.append(code == NUMBER)
        else:
            vals = [r[i] for r in rows if r[i] is not None]
            out.append(bool(vals) and all(isinstance(v, (int, float)) and
                                          not isinstance(v, bool) for v in vals))
    return out


# ---------------------------------------------------------------------------------------------
# layouts


def render(headers, rows, right=None, opts: PrintOptions | None = None, *, title=None,
           footer: bool | list[str] = True, expanded: bool | None = None) -> str:
    """The text psql prints for a table of formatted cells.  ``footer``: True for
    ``(N rows)``, or the lines to print under the table instead (``\\d NAME``'s indexes)."""
    opts = opts or PrintOptions()
    exp = opts.expanded if expanded is None else expanded
    footer = footer if opts.footer or isinstance(footer, list) else False
    if opts.format == "unaligned":
        return format_unaligned(headers, rows, sep=opts.fieldsep, title=title, footer=footer,
                                expanded=exp, tuples_only=opts.tuples_only)
    if exp:
        text = format_expanded(headers, rows, border=opts.border,
                               tuples_only=opts.tuples_only)
        if title and not opts.tuples_only:
            text = title + "\n" + text
        if isinstance(footer, list) and footer and not opts.tuples_only:
            text += "\n".join(footer) + "\n\n"
        return text
    return format_aligned(headers, rows, right, title=title, footer=footer,
                          border=opts.border, tuples_only=opts.tuples_only)


def format_aligned(headers: list[str], rows: list[list[str]], right: list[bool] | None = None,
                   *, title: str | None = None, footer: bool | list[str] = True,
                   border: int = 1, tuples_only: bool = False) -> str:
    """psql's aligned format (print.c ``print_aligned_text``, ascii line style)."""
    n = len(headers)
    right = right or [False] * n
    cells = [[c.split("\n") for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, lines in enumerate(row):
            widths[i] = max(widths[i], max(len(x) for x in lines))
    out = []
    rule = _hrule(widths, border)
    if not tuples_only:
        if title is not None:
            total = sum(widths) + (n if border == 0 else 3 * n - 1 if border == 1 else 3 * n + 1)
            out.append(title if len(title) >= total else
                       " " * ((total - len(title)) // 2) + title)
        if border == 2:
            out.append(rule)
        head = []
        for i, h in enumerate(headers):
            if border != 0:
                head.append(" ")
            head.append(_center(h, widths[i]) + " ")
            if border != 0 and i < n - 1:
                head.append("|")
        out.append(("|" if border == 2 else "") + "".join(head) + ("|" if border == 2 else ""))
        out.append(rule)
    for row in cells:
        height = max((len(lines) for lines in row), default=1)
        for k in range(height):
            parts = ["|"] if border == 2 else []
            for i, lines in enumerate(row):
                final = border == 2 or i < n - 1   # pad this column even when empty
                if border != 0:
                    parts.append(" ")
                more = k + 1 < len(lines)
                if k >= len(lines):
                    text = " " * widths[i] if final else ""
                elif right[i]:
                    text = lines[k].rjust(widths[i])
                else:
                    text = lines[k].ljust(widths[i]) if final or more else lines[k]
                parts.append(text)
                parts.append("+" if more else " " if final else "")
                if border != 0 and i < n - 1:
                    parts.append("|")
            if border == 2:
                parts.append("|")
            out.append("".join(parts))
    if border == 2 and not tuples_only:
        out.append(rule)
    if tuples_only:
        pass
    elif footer is True:
        out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    elif footer:
        out.extend(footer)
    return "\n".join(out) + "\n\n"


def _hrule(widths: list[int], border: int) -> str:
    if border == 0:
        return " ".join("-" * w for w in widths)
    inner = "+".join("-" * (w + 2) for w in widths)
    return "+" + inner + "+" if border == 2 else inner


def _center(text: str, width: int) -> str:
    left = (width - len(text)) // 2
    return " " * left + text + " " * (width - len(text) - left)


def format_expanded(headers: list[str], rows: list[list[str]], *, border: int = 1,
                    tuples_only: bool = False) -> str:
    """psql's expanded format (``\\x``, print.c ``print_aligned_vertical``): one record
    header line per row (``-[ RECORD n ]``, ``* Record n`` with border 0), then
    ``name | value`` lines."""
    if not rows:
        return "(0 rows)\n\n" if not tuples_only else "\n"
    w1 = max(len(h) for h in headers)
    w2 = max((len(x) for row in rows for c in row for x in c.split("\n")), default=0)
    out = []
    for r, row in enumerate(rows, 1):
        if not tuples_only or border == 2:
            out.append(_record_line(0 if tuples_only else r, w1, w2, border))
        for h, c in zip(headers, row):
            lines = c.split("\n")
            for k, line in enumerate(lines):
                name = (h if k == 0 else "").ljust(w1)
                more = k + 1 < len(lines)
                if more:
                    value = line.ljust(w2) + "+"
                elif border == 2:
                    value = line.ljust(w2) + " "
                else:
                    value = line
                if border == 0:
                    out.append(name + " " + value)
                elif border == 1:
                    out.append(name + " | " + value)
                else:
                    out.append("| " + name + " | " + value + "|")
    if border == 2:
        out.append(_record_line(0, w1, w2, border))
    return "\n".join(out) + "\n\n"


def _record_line(record: int, w1: int, w2: int, border: int = 1) -> str:
    """A record's header line (or, record 0, border 2's closing rule): the label overwrites
    the rule from its second character, eating into the ``+`` and the value's rule when it
    is longer than the names (print.c ``print_aligned_vertical_line``)."""
    fill = "-" if border > 0 else " "
    s = "+-" if border == 2 else "-" if border == 1 else ""
    label = "" if not record else f"* Record {record}" if border == 0 else f"[ RECORD {record} ]"
    s += label
    reclen = len(label) + (0 if border == 2 else 1)
    s += fill * max(0, w1 - reclen)
    reclen -= w1
    for piece in (("-", "+", "-") if border > 0 else (" ",)):
        if reclen <= 0:
            s += piece
        reclen -= 1
    s += fill * max(0, w2 - max(reclen, 0))
    if border == 2:
        s += "-+"
    return s


def format_unaligned(headers, rows, *, sep: str = "|", title=None, footer=True,
                     expanded: bool = False, tuples_only: bool = False) -> str:
    """psql's unaligned format: fields joined by ``fieldsep``, no padding; expanded, one
    ``name|value`` line per field and a blank line between records."""
    out = []
    if expanded:
        if title and not tuples_only:
            out.append(title)
        for r, row in enumerate(rows):
            if r:
                out.append("")
            out.extend(h + sep + c for h, c in zip(headers, row))
        if isinstance(footer, list) and footer and not tuples_only:
            out.extend(footer)
        return "".join(x + "\n" for x in out)
    if not tuples_only:
        if title:
            out.append(title)
        out.append(sep.join(headers))
    out.extend(sep.join(row) for row in rows)
    if not tuples_only:
        if footer is True:
            out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
        elif footer:
            out.extend(footer)
    return "".join(x + "\n" for x in out)
