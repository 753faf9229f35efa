"""to_char for numbers: PostgreSQL's number template patterns (formatting.c's NUMDesc_prepare
and NUM_processor, written again in Python, in the C locale).

Patterns: ``9`` (a digit, a blank for a leading zero), ``0`` (a digit, leading zeros kept),
``.`` and ``D`` (the decimal point), ``,`` and ``G`` (a group separator, a blank before the
first digit), ``FM`` (fill mode: no padding blanks, no trailing zeros after the point
unless a ``0`` asks for them), ``S`` (the sign, + or -, anchored to the number: before it, or
after it when written after the digits), ``PR`` (a negative value in angle brackets),
``MI`` / ``PL`` / ``SG`` (minus / plus / either sign at that position); any other character,
and text in double quotes, is copied.  Refused (0A000): ``L``, ``V``, ``EEEE``, ``RN``,
``TH``, ``B``, ``C``, ``SP``.

The value becomes a digit string first, as each of PostgreSQL's ``*_to_char`` does:
an integer as written (zeros appended after the point), a numeric rounded half away from
zero to the pattern's digits after the point, a double (real) through ``%.*f`` - the C
library's rounding of the binary value, so 2.5 gives 2 - with at most 15 (6) significant
digits.  More digits before the point than the pattern has print as ``#`` s.
"""

from __future__ import annotations

import decimal
import math

import minidb.errors as errors

__all__ = ["num_to_char", "parse_num_format"]

# PostgreSQL's NUM_keywords, in its order (the first that matches wins: SG before S)
_KEYWORDS = (",", ".", "0", "9", "B", "C", "D", "EEEE", "FM", "G", "L", "MI", "PL", "PR", "RN",
             "SG", "SP", "S", "TH", "V", "b", "c", "d", "eeee", "fm", "g", "l", "mi", "pl",
             "pr", "rn", "sg", "sp", "s", "th", "v")
_UNSUPPORTED = {"B", "C", "EEEE", "L", "RN", "SP", "TH", "V"}
_PRE, _POST = 1, 2          # where S puts the sign


class _Desc:
    __slots__ = ("pre", "post", "zero", "zero_start", "zero_end", "decimal", "fill",
                 "bracket", "minus", "plus", "lsign", "lsign_at", "pre_lsign_num")

    def __init__(self):
        self.pre = self.post = self.zero_start = self.zero_end = self.pre_lsign_num = 0
        self.zero = self.decimal = self.fill = self.bracket = self.minus = self.plus = False
        self.lsign = False
        self.lsign_at = 0


def _bad(msg: str):
    return errors.ProgrammingError(msg, sqlstate="42601")


def parse_num_format(fmt: str):
    """The template as nodes - ("k", KEY) for a pattern, ("c", text) for text to copy -
    and its description (digits before and after the point, flags)."""
    nodes = []
    i, n = 0, len(fmt)
    while i < n:
        for kw in _KEYWORDS:
            if fmt.startswith(kw, i):
                nodes.append(("k", kw.upper()))
                i += len(kw)
                break
        else:
            ch = fmt[i]
            if ch == '"':
                i += 1
                while i < n:
                    if fmt[i] == '"':
                        i += 1
                        break
                    if fmt[i] == "\\" and i + 1 < n:
                        i += 1
                    nodes.append(("c", fmt[i]))
                    i += 1
                continue
            if ch == "\\" and i + 1 < n and fmt[i + 1] == '"':
                i += 1
            nodes.append(("c", fmt[i]))
            i += 1
    d = _Desc()
    for kind, k in nodes:
        if kind != "k":
            continue
        if k in _UNSUPPORTED:
            raise errors.NotSupportedError(
                f'to_char of a number: the pattern "{k}" is not supported')
        if k == "9":
            if d.bracket:
                raise _bad('"9" must be ahead of "PR"')
            if d.decimal:
                d.post += 1
            else:
                d.pre += 1
        elif k == "0":
            if d.bracket:
                raise _bad('"0" must be ahead of "PR"')
            if not d.zero and not d.decimal:
                d.zero = True
                d.zero_start = d.pre + 1
            if d.decimal:
                d.post += 1
            else:
                d.pre += 1
            d.zero_end = d.pre + d.post
        elif k in (".", "D"):
            if d.decimal:
                raise _bad("multiple decimal points")
            d.decimal = True
        elif k == "FM":
            d.fill = True
        elif k == "S":
            if d.lsign:
                raise _bad('cannot use "S" twice')
            if d.plus or d.minus or d.bracket:
                raise _bad('cannot use "S" and "PL"/"MI"/"SG"/"PR" together')
            if not d.decimal:
                d.lsign, d.lsign_at, d.pre_lsign_num = True, _PRE, d.pre
            elif not d.lsign:
                d.lsign, d.lsign_at = True, _POST
        elif k == "MI":
            if d.lsign:
                raise _bad('cannot use "S" and "MI" together')
            d.minus = True
        elif k == "PL":
            if d.lsign:
                raise _bad('cannot use "S" and "PL" together')
            d.plus = True
        elif k == "SG":
            if d.lsign:
                raise _bad('cannot use "S" and "SG" together')
            d.minus = d.plus = True
        elif k == "PR":
            if d.lsign or d.plus or d.minus:
                raise _bad('cannot use "PR" and "S"/"PL"/"MI"/"SG" together')
            d.bracket = True
    return nodes, d


def _digits(value, kind: str, d: _Desc) -> tuple[str, str]:
    """(sign, digit string) of ``value`` for a pattern with ``d.post`` digits after the
    point (kind: int / num / float4 / float8)."""
    post = d.post
    if kind == "int":
        s = str(int(value))
        if post:
            s = s + "." + "0" * post
    elif kind == "num":
        v = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        if v.is_nan():
            s = "NaN"
        else:
            v = v.quantize(decimal.Decimal(1).scaleb(-post), rounding=decimal.ROUND_HALF_UP,
                           context=decimal.Context(prec=max(60, v.adjusted() + post + 2)))
            if v == 0:
                v = abs(v)
            s = format(v, "f")
    else:
        x = float(value)
        if math.isnan(x) or math.isinf(x):    # as PostgreSQL's own printf spells them
            return ("-" if x < 0 else "+"), ("NaN" if math.isnan(x) else "Infinity")
        dig = 6 if kind == "float4" else 15
        pre_len = len("%.0f" % abs(x))
        if pre_len >= dig:
            post = 0
        elif pre_len + post > dig:
            post = dig - pre_len
        s = "%.*f" % (post, x)
    sign = "+"
    if s.startswith("-"):
        sign, s = "-", s[1:]
    return sign, s


def num_to_char(value, fmt, kind: str) -> str:
    """to_char(value, fmt); ``kind``: "int", "num", "float4" or "float8"."""
    nodes, d = fmt if isinstance(fmt, tuple) else parse_num_format(fmt)
    sign, number = _digits(value, kind, d)
    dot = number.find(".")
    pre_len = dot if dot >= 0 else len(number)
    out_pre_spaces = 0
    if pre_len < d.pre:
        out_pre_spaces = d.pre - pre_len
    elif pre_len > d.pre:
        number = "#" * d.pre + "." + "#" * d.post
    return _process(nodes, d, sign, number, out_pre_spaces)


def _process(nodes, d: _Desc, sign: str, number: str, out_pre_spaces: int) -> str:
    # NUM_processor, to_char direction
    bracket, lsign_at = d.bracket, d.lsign_at
    zero_start = d.zero_start - 1 if d.zero_start else 0     # 0-based from here on
    if d.plus or d.minus:
        sign_wrote = not (d.plus and not d.minus)
    else:
        if sign != "-" and d.fill:
            bracket = False
        sign_wrote = sign == "+" and d.fill and not d.lsign
        if lsign_at == _PRE and d.pre == d.pre_lsign_num:
            lsign_at = _POST
    num_count = d.post + d.pre - 1
    last_relevant = -1          # an index into number, -1: none
    if d.fill and d.decimal:
        p = number.find(".")
        if p >= 0:
            last_relevant = p
            for j in range(p + 1, len(number)):
                if number[j] != "0":
                    last_relevant = j
            if d.zero_end > out_pre_spaces:
                last_zero = min(len(number) - 1, d.zero_end - out_pre_spaces)
                if last_relevant < last_zero:
                    last_relevant = last_zero
    if not sign_wrote and out_pre_spaces == 0:
        num_count += 1
    out: list[str] = []
    st = {"num_in": False, "curr": 0, "p": 0, "sign_wrote": sign_wrote, "cut": None}
    nlen = len(number)

    def at_p():
        return number[st["p"]] if st["p"] < nlen else ""

    def rel_is_dot():
        return last_relevant >= 0 and number[last_relevant] == "."

    def predec_space():
        return not d.zero and st["p"] == 0 and number[:1] == "0" and d.post != 0

    def numpart(key):
        curr = st["curr"]
        if not st["sign_wrote"] and \
                (curr >= out_pre_spaces or (d.zero and zero_start == curr)) and \
                (not predec_space() or rel_is_dot()):
            if d.lsign:
                if lsign_at == _PRE:
                    out.append(sign)
                    st["sign_wrote"] = True
            elif bracket:
                out.append(" " if sign == "+" else "<")
                st["sign_wrote"] = True
            elif sign == "+":
                if not d.fill:
                    out.append(" ")
                st["sign_wrote"] = True
            elif sign == "-":
                out.append("-")
                st["sign_wrote"] = True
        if curr < out_pre_spaces and (zero_start > curr or not d.zero):
            if not d.fill:
                out.append(" ")
        elif d.zero and curr < out_pre_spaces and zero_start <= curr:
            out.append("0")
            st["num_in"] = True
        else:
            if at_p() == ".":
                if not rel_is_dot() or d.fill:
                    out.append(".")
            else:
                if last_relevant >= 0 and st["p"] > last_relevant and key != "0":
                    pass
                elif predec_space():
                    if not d.fill:
                        out.append(" ")
                    elif rel_is_dot():
                        out.append("0")
                else:
                    if st["p"] >= nlen and st["cut"] is None:
                        st["cut"] = len(out)    # C writes the string's NUL: the end
                    out.append(at_p())
                    st["num_in"] = True
            if st["p"] < nlen:
                st["p"] += 1
        end = num_count + (1 if out_pre_spaces else 0) + (1 if d.decimal else 0)
        if last_relevant >= 0 and last_relevant == st["p"]:
            end = curr
        if curr + 1 == end:
            if st["sign_wrote"] and bracket:
                out.append(" " if sign == "+" else ">")
            elif d.lsign and lsign_at == _POST:
                out.append(sign)
        st["curr"] = curr + 1

    for kind, k in nodes:
        if kind == "c":
            out.append(k)
            continue
        if k in ("9", "0", ".", "D"):
            numpart(k)
        elif k in (",", "G"):
            if not st["num_in"]:
                if not d.fill:
                    out.append(" ")
            else:
                out.append(",")
        elif k == "MI":
            if sign == "-":
                out.append("-")
            elif not d.fill:
                out.append(" ")
        elif k == "PL":
            if sign == "+":
                out.append("+")
            elif not d.fill:
                out.append(" ")
        elif k == "SG":
            out.append(sign)
        # FM, S, PR: no output of their own
    if st["cut"] is not None:       # NaN, Infinity: fewer digits than the pattern
        out = out[:st["cut"]]
    return "".join(out)
