"""sqlglot's PostgreSQL dialect with the three changes minidb needs to see what was typed.

- ``INTERVAL 'text' [unit]`` becomes ``CAST('text unit' AS INTERVAL)``: sqlglot splits the
  text into a number and a unit and drops the rest (``interval '-1 day +02:00:00'`` would
  lose its time), so the literal is kept whole and read by minidb's interval input
  function (``minidb.exec.datetimes.parse_interval``).
- ``to_char(x, 'template')`` stays a plain call: sqlglot turns the template into strftime
  codes, which cannot be turned back (``Day`` becomes ``%uay``).
- a unary ``+`` is kept (sqlglot drops it) as the call ``__unary_plus(x)`` - except before a
  number literal - so that the binder can refuse it on a type without one, as PostgreSQL
  does (``+ 'abc'::text``: 42883).  SQL text minidb regenerates from a parse (a DEFAULT, an
  index expression, a view) shows it as that call.

Everything else is sqlglot's ``postgres`` dialect.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import TokenType

__all__ = ["MinidbPostgres"]

_UNITS = {"YEAR", "YEARS", "MONTH", "MONTHS", "MON", "MONS", "WEEK", "WEEKS", "DAY", "DAYS",
          "HOUR", "HOURS", "MINUTE", "MINUTES", "SECOND", "SECONDS", "MILLISECOND",
          "MILLISECONDS", "MICROSECOND", "MICROSECONDS", "DECADE", "DECADES", "CENTURY",
          "CENTURIES", "MILLENNIUM", "MILLENNIA"}


UNARY_PLUS = "__unary_plus"


def _unary_plus(parser):
    arg = parser._parse_unary()
    if isinstance(arg, exp.Literal) and not arg.is_string:
        return arg
    return exp.Anonymous(this=UNARY_PLUS, expressions=[arg])


class MinidbPostgres(Postgres):
    class Parser(Postgres.Parser):
        FUNCTIONS = {
            **Postgres.Parser.FUNCTIONS,
            "TO_CHAR": lambda args: exp.Anonymous(this="to_char", expressions=args),
        }
        UNARY_PARSERS = {**Postgres.Parser.UNARY_PARSERS, TokenType.PLUS: _unary_plus}

        def _parse_interval(self, require_interval: bool = True,
                            parse_function_unit: bool = True):
            index = self._index
            if require_interval and self._match(TokenType.INTERVAL):
                if self._curr is not None and self._curr.token_type == TokenType.STRING:
                    text = self._curr.text
                    self._advance()
                    if self._curr is not None and self._curr.text.upper() in _UNITS \
                            and self._curr.token_type not in (TokenType.STRING,):
                        text = f"{text} {self._curr.text}"
                        self._advance()
                    return exp.Cast(this=exp.Literal.string(text),
                                    to=exp.DataType.build("interval"))
                self._retreat(index)
            return super()._parse_interval(require_interval, parse_function_unit)
