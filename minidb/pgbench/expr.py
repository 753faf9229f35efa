"""pgbench's expression language, for ``\\set`` (and the durations of ``\\sleep``).

``compile_expression(text) -> Expr``; ``Expr.eval(variables, rng)`` returns an int, a float,
a bool or None (NULL).  The grammar is pgbench's (``exprparse.y``), with its precedence,
lowest first::

    OR
    AND
    NOT                                  (right)
    IS [NOT] NULL, ISNULL, NOTNULL       (non-associative)
    =  <>  !=  <  <=  >  >=              (non-associative)
    |  #  &  <<  >>                      (left; # is exclusive or)
    +  -                                 (left)
    *  /  %                              (left)
    unary -  +  ~                        (right)

Operands: integer literals (64-bit), double literals (``1.5``, ``2e3``), ``true``, ``false``,
``null``, ``:variable``, ``function(args)``, ``(expr)`` and
``CASE WHEN c THEN e [WHEN ...] [ELSE e] END``.

Semantics follow pgbench's documentation:

1. arithmetic on two integers is 64-bit integer arithmetic: ``/`` truncates toward zero, ``%``
   takes the sign of the dividend (as C does), overflow is the error "bigint out of range",
   a zero divisor the error "division by zero"; with a double operand it is double arithmetic;
2. ``%``, the bitwise operators and ``mod()`` want integers: a double is truncated, a boolean
   is an error;
3. comparisons compare numerically and give booleans; ``AND`` / ``OR`` / ``NOT`` take
   booleans, or numbers (non-zero is true);
4. a NULL operand makes the result NULL, except for ``IS [NOT] NULL``, ``debug()``,
   ``CASE`` conditions (NULL is false there) and ``AND`` / ``OR`` with a deciding operand.

Functions: ``abs``, ``debug``, ``double``, ``exp``, ``greatest``, ``int``, ``least``, ``ln``,
``mod``, ``pi``, ``pow`` / ``power``, ``random``, ``random_exponential``,
``random_gaussian``, ``random_zipfian``, ``sqrt``.

The random functions draw from the client's ``random.Random``; their distributions are the
ones pgbench documents:

* ``random(lb, ub)``: uniform over the integers [lb, ub];
* ``random_exponential(lb, ub, p)``, p > 0: the inverse of the truncated exponential's
  distribution function - ``x = -ln(cut + (1 - cut) * u) / p`` with ``cut = exp(-p)`` and u
  uniform in (0, 1], then ``lb + floor((ub - lb + 1) * x)``: values near lb are about
  ``exp(p)`` times as frequent as values near ub;
* ``random_gaussian(lb, ub, p)``, p >= 2: a standard normal draw z, redrawn until
  ``-p <= z < p``, mapped linearly onto [lb, ub] (mean at the middle, p standard deviations
  each side);
* ``random_zipfian(lb, ub, s)``, 1.001 <= s <= 1000: the value k in [1, n] with probability
  proportional to ``k**-s`` (n = ub - lb + 1), by Devroye's rejection method for the
  Zipf distribution ("Non-Uniform Random Variate Generation", 1986, p. 550), then
  ``lb + k - 1``.

Left out: ``hash``, ``hash_fnv1a``, ``hash_murmur2`` and ``permute`` (an error names them).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass

__all__ = ["Expr", "ExprError", "compile_expression", "to_sql_text", "INT64_MIN", "INT64_MAX"]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

MIN_GAUSSIAN_PARAM = 2.0      # pgbench's MIN_GAUSSIAN_PARAM: below it the tails are too fat
MIN_ZIPFIAN_PARAM = 1.001     # pgbench 13+: s must be > 1 (the rejection method needs it)
MAX_ZIPFIAN_PARAM = 1000.0


class ExprError(Exception):
    """A syntax error (with ``pos``, the offset in the text) or an evaluation error."""

    def __init__(self, message: str, pos: int | None = None):
        super().__init__(message)
        self.pos = pos


# ---------------------------------------------------------------------------------------------
# lexer
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<var>:[A-Za-z0-9_]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|<<|>>|[-+*/%()<>=,|#&~])
""", re.VERBOSE)

_KEYWORDS = {"and", "or", "not", "is", "isnull", "notnull", "null", "true", "false", "case",
             "when", "then", "else", "end"}


def _tokens(text: str) -> list[tuple[str, object, int]]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExprError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup
        tok = m.group()
        if kind == "num":
            if re.fullmatch(r"\d+", tok):
                v = int(tok)
                if v > INT64_MAX:
                    raise ExprError(f'bigint constant overflow: "{tok}"', pos)
                out.append(("int", v, pos))
            else:
                out.append(("double", float(tok), pos))
        elif kind == "var":
            out.append(("var", tok[1:], pos))
        elif kind == "ident":
            low = tok.lower()
            out.append(("kw", low, pos) if low in _KEYWORDS else ("ident", low, pos))
        elif kind == "op":
            out.append(("op", tok, pos))
        pos = m.end()
    out.append(("eof", None, len(text)))
    return out


# ---------------------------------------------------------------------------------------------
# parser: tree of tuples, compiled to closures afterwards
class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, kind, value=None) -> bool:
        t = self.peek()
        if t[0] == kind and (value is None or t[1] == value):
            self.i += 1
            return True
        return False

    def expect(self, kind, value):
        t = self.peek()
        if t[0] != kind or t[1] != value:
            raise ExprError(f"expected {value!r}", t[2])
        self.i += 1

    def parse(self):
        e = self.or_()
        t = self.peek()
        if t[0] != "eof":
            raise ExprError("syntax error", t[2])
        return e

    def or_(self):
        e = self.and_()
        while self.accept("kw", "or"):
            e = ("or", e, self.and_())
        return e

    def and_(self):
        e = self.not_()
        while self.accept("kw", "and"):
            e = ("and", e, self.not_())
        return e

    def not_(self):
        if self.accept("kw", "not"):
            return ("not", self.not_())
        return self.is_()

    def is_(self):
        e = self.cmp()
        if self.accept("kw", "isnull"):
            return ("isnull", e, True)
        if self.accept("kw", "notnull"):
            return ("isnull", e, False)
        if self.accept("kw", "is"):
            neg = self.accept("kw", "not")
            t = self.peek()
            if not self.accept("kw", "null"):
                raise ExprError("expected NULL after IS", t[2])
            return ("isnull", e, not neg)
        return e

    def cmp(self):
        e = self.bits()
        t = self.peek()
        if t[0] == "op" and t[1] in ("=", "<>", "!=", "<", "<=", ">", ">="):
            self.take()
            e = ("cmp", t[1] if t[1] != "!=" else "<>", e, self.bits())
            t2 = self.peek()
            if t2[0] == "op" and t2[1] in ("=", "<>", "!=", "<", "<=", ">", ">="):
                raise ExprError("syntax error (comparisons do not chain)", t2[2])
        return e

    def bits(self):
        e = self.add()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("|", "#", "&", "<<", ">>"):
                self.take()
                e = ("bit", t[1], e, self.add())
            else:
                return e

    def add(self):
        e = self.mul()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("+", "-"):
                self.take()
                e = ("arith", t[1], e, self.mul())
            else:
                return e

    def mul(self):
        e = self.unary()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("*", "/", "%"):
                self.take()
                e = ("arith", t[1], e, self.unary())
            else:
                return e

    def unary(self):
        t = self.peek()
        if t[0] == "op" and t[1] in ("-", "+", "~"):
            self.take()
            operand = self.unary()
            if t[1] == "-":
                if operand[0] == "const" and type(operand[1]) in (int, float):
                    return ("const", -operand[1])
                return ("arith", "-", ("const", 0), operand)
            if t[1] == "~":
                return ("bit", "#", ("const", -1), operand)
            return operand
        return self.primary()

    def primary(self):
        t = self.take()
        kind, v, pos = t
        if kind == "int" or kind == "double":
            return ("const", v)
        if kind == "var":
            return ("var", v)
        if kind == "kw":
            if v == "true":
                return ("const", True)
            if v == "false":
                return ("const", False)
            if v == "null":
                return ("const", None)
            if v == "case":
                return self.case(pos)
            raise ExprError(f'unexpected keyword "{v}"', pos)
        if kind == "ident":
            if not self.accept("op", "("):
                raise ExprError(f'unexpected word "{v}" (a variable is written :{v})', pos)
            args = []
            if not self.accept("op", ")"):
                while True:
                    args.append(self.or_())
                    if self.accept("op", ")"):
                        break
                    self.expect("op", ",")
            return ("func", v, args, pos)
        if kind == "op" and v == "(":
            e = self.or_()
            self.expect("op", ")")
            return e
        if kind == "eof":
            raise ExprError("unexpected end of expression", pos)
        raise ExprError("syntax error", pos)

    def case(self, pos):
        whens = []
        while self.accept("kw", "when"):
            c = self.or_()
            if not self.accept("kw", "then"):
                raise ExprError("expected THEN", self.peek()[2])
            whens.append((c, self.or_()))
        if not whens:
            raise ExprError("CASE needs at least one WHEN", pos)
        other = ("const", None)
        if self.accept("kw", "else"):
            other = self.or_()
        if not self.accept("kw", "end"):
            raise ExprError("expected END", self.peek()[2])
        return ("case", whens, other)


# ---------------------------------------------------------------------------------------------
# values and coercions (pgbench's coerceToInt / coerceToDouble / coerceToBool)
def _type_name(v) -> str:
    if v is None:
        return "NULL"
    if type(v) is bool:
        return "boolean"
    return "int" if type(v) is int else "double"


def _to_int(v) -> int:
    t = type(v)
    if t is int:
        return v
    if t is float:
        if math.isnan(v) or not (INT64_MIN <= v < 2.0 ** 63):
            raise ExprError("double to int overflow for " + repr(v))
        return int(v)
    raise ExprError(f"cannot coerce {_type_name(v)} to int")


def _to_double(v) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    raise ExprError(f"cannot coerce {_type_name(v)} to double")


def _to_bool(v) -> bool:
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    raise ExprError(f"cannot coerce {_type_name(v)} to boolean")


def _check(v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise ExprError("bigint out of range")
    return v


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero")
    q = abs(a) // abs(b)
    return _check(q if (a >= 0) == (b >= 0) else -q)


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _numeric(v) -> bool:
    t = type(v)
    if t is int or t is float:
        return True
    raise ExprError(f"cannot coerce {_type_name(v)} to a number")


def _arith(op: str, a, b):
    if a is None or b is None:
        return None
    _numeric(a)
    _numeric(b)
    if type(a) is int and type(b) is int:
        if op == "+":
            return _check(a + b)
        if op == "-":
            return _check(a - b)
        if op == "*":
            return _check(a * b)
        if op == "/":
            return _int_div(a, b)
        return _int_mod(a, b)
    if op == "%":
        return _int_mod(_to_int(a), _to_int(b))
    x, y = float(a), float(b)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0.0:
        raise ExprError("division by zero")
    return x / y


def _bit(op: str, a, b):
    if a is None or b is None:
        return None
    x, y = _to_int(a), _to_int(b)
    if op == "&":
        return x & y
    if op == "|":
        return x | y
    if op == "#":
        return x ^ y
    if op == "<<":
        return _wrap64(x << (y & 63))
    return x >> (y & 63)


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


_CMP = {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _compare(op: str, a, b):
    if a is None or b is None:
        return None
    if type(a) is bool and type(b) is bool:
        return _CMP[op](a, b)
    _numeric(a)
    _numeric(b)
    return _CMP[op](a, b)


# ---------------------------------------------------------------------------------------------
# random distributions
def _rand_range(lb, ub, name) -> tuple[int, int]:
    lo, hi = _to_int(lb), _to_int(ub)
    if lo > hi:
        raise ExprError(f"empty range given to {name}")
    return lo, hi


def rand_uniform(rng, lo: int, hi: int) -> int:
    return rng.randint(lo, hi)


def rand_exponential(rng, lo: int, hi: int, param: float) -> int:
    if param <= 0.0:
        raise ExprError(f"exponential parameter must be greater than zero (not {param:f})")
    cut = math.exp(-param)
    u = 1.0 - rng.random()                      # (0, 1]
    x = -math.log(cut + (1.0 - cut) * u) / param  # [0, 1)
    return lo + int((hi - lo + 1) * x)


def rand_gaussian(rng, lo: int, hi: int, param: float) -> int:
    if param < MIN_GAUSSIAN_PARAM:
        raise ExprError(f"gaussian parameter must be at least {MIN_GAUSSIAN_PARAM:f} "
                        f"(not {param:f})")
    while True:
        z = rng.gauss(0.0, 1.0)
        if -param <= z < param:
            break
    r = (z + param) / (2.0 * param)            # [0, 1)
    return lo + int((hi - lo + 1) * r)


def rand_zipfian(rng, lo: int, hi: int, s: float) -> int:
    if not MIN_ZIPFIAN_PARAM <= s <= MAX_ZIPFIAN_PARAM:
        raise ExprError(f"zipfian parameter must be in range [{MIN_ZIPFIAN_PARAM:.3f}, "
                        f"{MAX_ZIPFIAN_PARAM:.0f}] (not {s:f})")
    n = hi - lo + 1
    b = 2.0 ** (s - 1.0)
    inv = -1.0 / (s - 1.0)
    while True:
        u = 1.0 - rng.random()                  # (0, 1]
        v = rng.random()
        try:
            x = math.floor(u ** inv)
        except OverflowError:
            continue
        if x > n:
            continue
        t = (1.0 + 1.0 / x) ** (s - 1.0)
        if v * x * (t - 1.0) / (b - 1.0) <= t / b:
            return lo + int(x) - 1


# ---------------------------------------------------------------------------------------------
# functions: name -> (min args, max args or None, implementation(args, rng))
def _f_abs(a, rng):
    (x,) = a
    _numeric(x)
    return _check(abs(x)) if type(x) is int else abs(x)


def _f_debug(a, rng):
    (x,) = a
    print(f"debug: {_type_name(x)} {to_sql_text(x)}", file=sys.stderr)
    return x


def _f_minmax(fn):
    def f(a, rng):
        for x in a:
            _numeric(x)
        if any(type(x) is float for x in a):
            return float(fn(float(x) for x in a))
        return fn(a)
    return f


def _f_double1(fn):
    def f(a, rng):
        x = _to_double(a[0])
        try:
            return fn(x)
        except (ValueError, OverflowError) as e:
            raise ExprError(f"{fn.__name__}({x!r}): {e}") from None
    return f


def _f_pow(a, rng):
    x, y = float(_to_double(a[0])), float(_to_double(a[1]))
    try:
        return math.pow(x, y)
    except (ValueError, OverflowError) as e:
        raise ExprError(f"pow({x!r}, {y!r}): {e}") from None


def _f_random(a, rng):
    lo, hi = _rand_range(a[0], a[1], "random")
    return rng.randint(lo, hi)


def _f_rand3(name, fn):
    def f(a, rng):
        lo, hi = _rand_range(a[0], a[1], name)
        return fn(rng, lo, hi, _to_double(a[2]))
    return f


_FUNCS = {
    "abs": (1, 1, _f_abs),
    "debug": (1, 1, _f_debug),
    "double": (1, 1, lambda a, rng: _to_double(a[0])),
    "int": (1, 1, lambda a, rng: _to_int(a[0])),
    "exp": (1, 1, _f_double1(math.exp)),
    "ln": (1, 1, _f_double1(math.log)),
    "sqrt": (1, 1, _f_double1(math.sqrt)),
    "greatest": (1, None, _f_minmax(max)),
    "least": (1, None, _f_minmax(min)),
    "mod": (2, 2, lambda a, rng: _int_mod(_to_int(a[0]), _to_int(a[1]))),
    "pi": (0, 0, lambda a, rng: math.pi),
    "pow": (2, 2, _f_pow),
    "power": (2, 2, _f_pow),
    "random": (2, 2, _f_random),
    "random_exponential": (3, 3, _f_rand3("random_exponential", rand_exponential)),
    "random_gaussian": (3, 3, _f_rand3("random_gaussian", rand_gaussian)),
    "random_zipfian": (3, 3, _f_rand3("random_zipfian", rand_zipfian)),
}
_NOT_HERE = {"hash", "hash_fnv1a", "hash_murmur2", "permute"}
_NULL_PASSING = {"debug"}


# ---------------------------------------------------------------------------------------------
# compile the tree into closures fn(vars, rng)
def _compile(node):
    kind = node[0]
    if kind == "const":
        v = node[1]
        return lambda vs, rng: v
    if kind == "var":
        name = node[1]

        def var(vs, rng):
            try:
                return vs[name]
            except KeyError:
                raise ExprError(f'undefined variable "{name}"') from None
        return var
    if kind == "arith":
        op, a, b = node[1], _compile(node[2]), _compile(node[3])
        if op == "+":  # the common case, kept short
            def add(vs, rng):
                x, y = a(vs, rng), b(vs, rng)
                if type(x) is int and type(y) is int:
                    r = x + y
                    if INT64_MIN <= r <= INT64_MAX:
                        return r
                return _arith("+", x, y)
            return add
        if op == "*" and node[2][0] == "const" and type(node[2][1]) is int:
            # ``100000 * :scale`` of the built-in scripts: the constant bound, one call less
            c = node[2][1]

            def mul_const(vs, rng):
                y = b(vs, rng)
                if type(y) is int:
                    r = c * y
                    if INT64_MIN <= r <= INT64_MAX:
                        return r
                return _arith("*", c, y)
            return mul_const
        if op == "*":
            def mul(vs, rng):
                x, y = a(vs, rng), b(vs, rng)
                if type(x) is int and type(y) is int:
                    r = x * y
                    if INT64_MIN <= r <= INT64_MAX:
                        return r
                return _arith("*", x, y)
            return mul
        return lambda vs, rng: _arith(op, a(vs, rng), b(vs, rng))
    if kind == "bit":
        op, a, b = node[1], _compile(node[2]), _compile(node[3])
        return lambda vs, rng: _bit(op, a(vs, rng), b(vs, rng))
    if kind == "cmp":
        op, a, b = node[1], _compile(node[2]), _compile(node[3])
        return lambda vs, rng: _compare(op, a(vs, rng), b(vs, rng))
    if kind == "and":
        a, b = _compile(node[1]), _compile(node[2])

        def and_(vs, rng):
            x = a(vs, rng)
            if x is not None and not _to_bool(x):
                return False
            y = b(vs, rng)
            if y is not None and not _to_bool(y):
                return False
            return None if x is None or y is None else True
        return and_
    if kind == "or":
        a, b = _compile(node[1]), _compile(node[2])

        def or_(vs, rng):
            x = a(vs, rng)
            if x is not None and _to_bool(x):
                return True
            y = b(vs, rng)
            if y is not None and _to_bool(y):
                return True
            return None if x is None or y is None else False
        return or_
    if kind == "not":
        a = _compile(node[1])

        def not_(vs, rng):
            x = a(vs, rng)
            return None if x is None else not _to_bool(x)
        return not_
    if kind == "isnull":
        a, want = _compile(node[1]), node[2]
        return lambda vs, rng: (a(vs, rng) is None) == want
    if kind == "case":
        whens = [(_compile(c), _compile(e)) for c, e in node[1]]
        other = _compile(node[2])

        def case(vs, rng):
            for c, e in whens:
                x = c(vs, rng)
                if x is not None and _to_bool(x):
                    return e(vs, rng)
            return other(vs, rng)
        return case
    if kind == "func":
        name, args, pos = node[1], node[2], node[3]
        if name in _NOT_HERE:
            raise ExprError(f"function {name}() is not supported by minidb bench", pos)
        spec = _FUNCS.get(name)
        if spec is None:
            raise ExprError(f'unexpected function name "{name}"', pos)
        lo, hi, impl = spec
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}" if hi is None else f"{lo}-{hi}"
            raise ExprError(f"wrong number of arguments to {name}() ({len(args)}, want {want})",
                            pos)
        fns = [_compile(x) for x in args]
        passes_null = name in _NULL_PASSING
        if name == "random":  # the hot path of the built-in scripts
            f0, f1 = fns
            if args[0][0] == "const" and type(args[0][1]) is int:
                lb = args[0][1]     # random(1, ...): the constant lower bound as is

                def random_lb(vs, rng):
                    ub = f1(vs, rng)
                    if type(ub) is int and lb <= ub:
                        return lb + rng._randbelow(ub - lb + 1)   # (rng.randint's draw)
                    if ub is None:
                        return None
                    return impl([lb, ub], rng)
                return random_lb

            def random_(vs, rng):
                lb, ub = f0(vs, rng), f1(vs, rng)
                if type(lb) is int and type(ub) is int and lb <= ub:
                    # what rng.randint(lb, ub) returns, by the same draw, without its
                    # randrange argument checks (~0.4 of its ~0.65 us)
                    return lb + rng._randbelow(ub - lb + 1)
                if lb is None or ub is None:
                    return None
                return impl([lb, ub], rng)
            return random_

        def call(vs, rng):
            vals = [f(vs, rng) for f in fns]
            if not passes_null and any(v is None for v in vals):
                return None
            return impl(vals, rng)
        return call
    raise AssertionError(node)  # pragma: no cover


def _variables(node, out: set) -> set:
    kind = node[0]
    if kind == "var":
        out.add(node[1])
    elif kind in ("arith", "bit", "cmp"):
        _variables(node[2], out)
        _variables(node[3], out)
    elif kind in ("and", "or"):
        _variables(node[1], out)
        _variables(node[2], out)
    elif kind in ("not", "isnull"):
        _variables(node[1], out)
    elif kind == "case":
        for c, e in node[1]:
            _variables(c, out)
            _variables(e, out)
        _variables(node[2], out)
    elif kind == "func":
        for a in node[2]:
            _variables(a, out)
    return out


@dataclass
class Expr:
    """A compiled expression: ``eval(variables, rng)``; ``variables`` it reads."""
    text: str
    fn: object
    variables: frozenset

    def eval(self, variables: dict, rng):
        return self.fn(variables, rng)


def compile_expression(text: str) -> Expr:
    """Parse and compile ``text``; raises ExprError (with ``pos``) on a syntax error."""
    tree = _Parser(text).parse()
    return Expr(text, _compile(tree), frozenset(_variables(tree, set())))


def to_sql_text(v) -> str:
    """A value as pgbench substitutes it into SQL text (and prints it)."""
    if v is None:
        return "NULL"
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is float:
        return repr(v) if math.isfinite(v) else ("'NaN'" if math.isnan(v) else
                                                 ("'Infinity'" if v > 0 else "'-Infinity'"))
    return str(v)
