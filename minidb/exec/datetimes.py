"""Dates, times, timestamps with time zone and intervals: PostgreSQL's input and output
formats, arithmetic, and the functions over them (to_char, age, date_trunc, extract).

Representations (see ``datatypes``): a date is int days since 2000-01-01, a time int
microseconds since midnight, timestamp / timestamptz int microseconds since 2000-01-01
(timestamptz: UTC), an interval a `minidb.types.Interval` (months, days, microseconds).
Vector forms are int64 arrays, intervals object arrays.

Input (``parse_*``) accepts what PostgreSQL accepts in its ISO DateStyle for the common
forms: dates ``YYYY-MM-DD`` (a time after it is ignored), ``today`` / ``yesterday`` /
``tomorrow`` / ``epoch``; times ``HH:MM[:SS[.f]]``, ``24:00:00``, ``allballs``; timestamps
with time zone ``date [time] [zone]`` where zone is ``Z``, ``+HH[[:]MM]``, ``-HH[[:]MM]``,
``UTC`` or an IANA name, else the session's TimeZone; intervals in PostgreSQL's own format
(``1 year 2 mons 3 days 04:05:06.5``, ``-1 day +02:00:00``, units singular, plural or
abbreviated, fractional amounts spilled to the smaller fields, ``@ ... ago``) and ISO 8601's
``P1Y2M3DT4H5M6S``.  A malformed value is 22007 (invalid_datetime_format), a field out of
range (month 13, Feb 30, 25:00) 22008, as in PostgreSQL.

Output (``format_*``) is PostgreSQL's with DateStyle ISO and IntervalStyle postgres:
``2020-01-02``, ``10:11:12.5``, ``2020-01-02 10:11:12.5+01`` (in the session's TimeZone),
``1 year 2 mons 3 days 04:05:06``.

Arithmetic follows PostgreSQL: adding an interval adds its months first (the day clamped to
the month's last), then its days, then its microseconds; for timestamptz the months and
days are added in the session's TimeZone (so a day is 23 or 25 hours across a DST change)
and the microseconds in UTC.  timestamp - timestamp is an interval of days and time
(justify_hours), date - date an integer.

Left out: infinite dates and timestamps, BC dates, DateStyles other than ISO, IntervalStyles
other than postgres, time with time zone.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import decimal
import math
import re

import numpy as np

import minidb.errors as errors
from minidb.types import (UTC, Interval, date_to_int, int_to_date, int_to_time,
                          int_to_timestamp, session_timezone, timestamp_to_int, timezone_named)

__all__ = ["parse_date", "parse_time", "parse_timestamptz", "parse_interval", "format_date",
           "format_time", "format_timestamptz", "format_interval", "tstz_to_local",
           "local_to_tstz", "add_interval_ts", "add_interval_tstz", "ts_diff", "interval_mul",
           "interval_div", "to_char", "age", "date_part_of", "date_trunc_of", "USECS_PER_DAY",
           "date_part", "date_trunc"]

USECS_PER_DAY = 86_400_000_000
USECS_PER_HOUR = 3_600_000_000
_PG_EPOCH = _dt.datetime(2000, 1, 1)
_PG_EPOCH_UTC = _dt.datetime(2000, 1, 1, tzinfo=UTC)


def _bad_format(t: str, text: str):
    return errors.DataError(f'invalid input syntax for type {t}: "{text}"', sqlstate="22007")


def _out_of_range(text: str):
    return errors.DatetimeFieldOverflow(f'date/time field value out of range: "{text}"')


# -- input -----------------------------------------------------------------------------------

_DATE_RE = re.compile(r"^(\d{4,})-(\d{1,2})-(\d{1,2})")
_TIME_RE = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d*))?)?")
_ZONE_RE = re.compile(r"^(?:z|([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?)$")


def _today_local() -> _dt.date:
    return _dt.datetime.now(session_timezone()).date()


def _special_date(low: str):
    if low == "today" or low == "now":
        return _today_local()
    if low == "yesterday":
        return _today_local() - _dt.timedelta(days=1)
    if low == "tomorrow":
        return _today_local() + _dt.timedelta(days=1)
    if low == "epoch":
        return _dt.date(1970, 1, 1)
    return None


def _ymd(m, text: str) -> _dt.date:
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    try:
        return _dt.date(y, mo, d)
    except ValueError:
        raise _out_of_range(text) from None


def parse_date(text: str) -> int:
    """A date literal -> days since 2000-01-01."""
    s = text.strip()
    low = s.lower()
    sp = _special_date(low)
    if sp is not None:
        return date_to_int(sp)
    m = _DATE_RE.match(s)
    if not m:
        raise _bad_format("date", text)
    rest = s[m.end():]
    if rest and not (rest[0] in " T" and _TIME_RE.match(rest[1:].strip())):
        raise _bad_format("date", text)
    return date_to_int(_ymd(m, text))


def _time_us(m, text: str) -> int:
    h, mi = int(m.group(1)), int(m.group(2))
    sec = int(m.group(3) or 0)
    frac = m.group(4) or ""
    us = round(int(frac) * 10 ** (6 - len(frac))) if frac and len(frac) <= 6 else \
        (round(decimal.Decimal("0." + frac) * 1_000_000) if frac else 0)
    if mi > 59 or sec > 60 or h > 24 or (h == 24 and (mi or sec or us)):
        raise _out_of_range(text)
    return ((h * 60 + mi) * 60 + sec) * 1_000_000 + us


def parse_time(text: str) -> int:
    """A time literal -> microseconds since midnight (a date before it and a zone after it
    are ignored, as PostgreSQL ignores them for time without time zone)."""
    s = text.strip()
    low = s.lower()
    if low == "allballs":
        return 0
    if low == "now":
        n = _dt.datetime.now(session_timezone())
        return ((n.hour * 60 + n.minute) * 60 + n.second) * 1_000_000 + n.microsecond
    d = _DATE_RE.match(s)
    if d:
        s = s[d.end():].lstrip(" T")
    m = _TIME_RE.match(s)
    if not m:
        raise _bad_format("time without time zone", text)
    rest = s[m.end():].strip()
    if rest and not (_ZONE_RE.match(rest.lower()) or rest.isalpha() or "/" in rest):
        raise _bad_format("time without time zone", text)
    return _time_us(m, text)


def _zone(text: str, zone: str):
    low = zone.lower()
    m = _ZONE_RE.match(low)
    if m:
        if not m.group(1):
            return UTC
        secs = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0)
        return _dt.timezone(_dt.timedelta(seconds=secs if m.group(1) == "+" else -secs))
    try:
        return timezone_named(zone)
    except errors.InvalidParameterValue:
        raise _bad_format("timestamp with time zone", text) from None


def parse_timestamptz(text: str) -> int:
    """A timestamp with time zone literal -> microseconds since 2000-01-01 00:00 UTC."""
    s = text.strip()
    low = s.lower()
    if low == "now":
        return local_to_tstz_dt(_dt.datetime.now(UTC))
    sp = _special_date(low)
    if sp is not None:
        return local_to_tstz_dt(_dt.datetime(sp.year, sp.month, sp.day))
    m = _DATE_RE.match(s)
    if not m:
        raise _bad_format("timestamp with time zone", text)
    day = _ymd(m, text)
    rest = s[m.end():]
    us = 0
    if rest[:1] in (" ", "T", "t"):
        r = rest[1:].lstrip()
        t = _TIME_RE.match(r)
        if t:
            us = _time_us(t, text)
            rest = r[t.end():]
    zone = rest.strip()
    tz = _zone(text, zone) if zone else session_timezone()
    local = _dt.datetime(day.year, day.month, day.day) + _dt.timedelta(microseconds=us)
    return local_to_tstz_dt(local.replace(tzinfo=tz))


def local_to_tstz_dt(d: _dt.datetime) -> int:
    """An aware datetime (naive: in the session's TimeZone) -> microseconds since 2000 UTC."""
    if d.tzinfo is None:
        d = d.replace(tzinfo=session_timezone())
    try:
        delta = d - _PG_EPOCH_UTC
    except OverflowError:
        raise errors.DatetimeFieldOverflow("timestamp out of range") from None
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def tstz_to_local(us: int, tz=None) -> _dt.datetime:
    """Microseconds since 2000 UTC -> an aware datetime in ``tz`` (the session's TimeZone)."""
    u = _PG_EPOCH_UTC + _dt.timedelta(microseconds=int(us))
    try:
        return u.astimezone(tz or session_timezone())
    except OverflowError:
        raise errors.DatetimeFieldOverflow("timestamp out of range") from None


def local_to_tstz(local_us: int, tz=None) -> int:
    """Wall-clock microseconds since 2000-01-01 in ``tz`` -> microseconds since 2000 UTC."""
    d = int_to_timestamp(local_us).replace(tzinfo=tz or session_timezone())
    return local_to_tstz_dt(d)


_UNITS = {}
for _names, _unit in ((("microsecond", "microseconds", "us", "usec", "usecs", "useconds"), "us"),
                      (("millisecond", "milliseconds", "ms", "msec", "msecs", "mseconds"), "ms"),
                      (("second", "seconds", "s", "sec", "secs"), "s"),
                      (("minute", "minutes", "m", "min", "mins"), "min"),
                      (("hour", "hours", "h", "hr", "hrs"), "h"),
                      (("day", "days", "d"), "d"),
                      (("week", "weeks", "w"), "w"),
                      (("month", "months", "mon", "mons"), "mon"),
                      (("year", "years", "y", "yr", "yrs"), "y"),
                      (("decade", "decades"), "dec"),
                      (("century", "centuries"), "c"),
                      (("millennium", "millennia", "millenniums"), "mil")):
    for _n in _names:
        _UNITS[_n] = _unit
_MONTHS_PER = {"mon": 1, "y": 12, "dec": 120, "c": 1200, "mil": 12000}
_US_PER = {"us": 1, "ms": 1000, "s": 1_000_000, "min": 60_000_000, "h": USECS_PER_HOUR}
_NUM_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_ISO_RE = re.compile(r"^p(?:([-\d.]+)y)?(?:([-\d.]+)m)?(?:([-\d.]+)w)?(?:([-\d.]+)d)?"
                     r"(?:t(?:([-\d.]+)h)?(?:([-\d.]+)m)?(?:([-\d.]+)s)?)?$")


class _Acc:
    """Accumulates interval fields as PostgreSQL does, fractions spilling downwards."""

    def __init__(self):
        self.months = 0
        self.days = 0
        self.us = decimal.Decimal(0)

    def add(self, amount: decimal.Decimal, unit: str):
        if unit in _MONTHS_PER:
            months = amount * _MONTHS_PER[unit]
            whole = int(months)
            self.months += whole
            days = (months - whole) * 30
            wd = int(days)
            self.days += wd
            self.us += (days - wd) * USECS_PER_DAY
        elif unit in ("d", "w"):
            days = amount * (7 if unit == "w" else 1)
            wd = int(days)
            self.days += wd
            self.us += (days - wd) * USECS_PER_DAY
        else:
            self.us += amount * _US_PER[unit]

    def result(self) -> Interval:
        us = int(self.us.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
        return Interval(self.months, self.days, us)


def parse_interval(text: str) -> Interval:
    """An interval literal (see the module docstring)."""
    s = text.strip().lower()
    if not s:
        raise _bad_format("interval", text)
    acc = _Acc()
    if s.startswith("p"):
        m = _ISO_RE.match(s)
        if not m or s == "p":
            raise _bad_format("interval", text)
        try:
            for g, unit in zip(m.groups(), ("y", "mon", "w", "d", "h", "min", "s")):
                if g is not None:
                    acc.add(decimal.Decimal(g), unit)
        except decimal.InvalidOperation:
            raise _bad_format("interval", text) from None
        return acc.result()
    ago = False
    if s.startswith("@"):
        s = s[1:].strip()
    if s.endswith(" ago") or s == "ago":
        ago = True
        s = s[:-3].strip()
    tokens = s.replace(",", " ").split()
    i, seen = 0, False
    pending_days = None
    while i < len(tokens):
        tok = tokens[i]
        t = _TIME_RE.match(tok.lstrip("+-"))
        if t and t.end() == len(tok.lstrip("+-")) and ":" in tok:
            sign = -1 if tok.startswith("-") else 1
            body = tok.lstrip("+-")
            parts = body.split(":")
            try:
                h = int(parts[0])
                mi = int(parts[1])
                sec = decimal.Decimal(parts[2]) if len(parts) > 2 else decimal.Decimal(0)
            except (ValueError, decimal.InvalidOperation):
                raise _bad_format("interval", text) from None
            if mi > 59 or sec >= 60:
                raise _out_of_range(text)
            if pending_days is not None:
                acc.add(pending_days, "d")
                pending_days = None
            acc.us += sign * ((h * 60 + mi) * 60_000_000 + sec * 1_000_000)
            i += 1
            seen = True
            continue
        m = _NUM_RE.fullmatch(tok)
        if m is None:
            # "1day", "2hours": a number glued to its unit
            g = re.fullmatch(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))([a-z]+)", tok)
            if g is None or g.group(2) not in _UNITS:
                raise _bad_format("interval", text)
            acc.add(decimal.Decimal(g.group(1)), _UNITS[g.group(2)])
            i += 1
            seen = True
            continue
        if pending_days is not None:
            raise _bad_format("interval", text)
        amount = decimal.Decimal(tok)
        unit = tokens[i + 1] if i + 1 < len(tokens) else None
        if unit is not None and unit in _UNITS:
            acc.add(amount, _UNITS[unit])
            i += 2
        elif unit is None:
            acc.add(amount, "s")        # a bare number at the end: seconds
            i += 1
        else:
            pending_days = amount       # "1 02:00:00": days then a time
            i += 1
        seen = True
    if pending_days is not None:
        raise _bad_format("interval", text)
    if not seen:
        raise _bad_format("interval", text)
    r = acc.result()
    return Interval(-r.months, -r.mdays, -r.usecs) if ago else r


# -- output ----------------------------------------------------------------------------------

def _frac(us: int) -> str:
    """'.5' for 500000 microseconds, '' for 0 (PostgreSQL trims trailing zeros)."""
    return f".{us:06d}".rstrip("0") if us else ""


def format_date(days: int) -> str:
    d = int_to_date(days)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def format_time(us: int) -> str:
    us = int(us)
    s, f = divmod(us, 1_000_000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return f"{h:02d}:{m:02d}:{s:02d}{_frac(f)}"


def _offset_text(off: _dt.timedelta) -> str:
    secs = int(off.total_seconds())
    sign = "-" if secs < 0 else "+"
    secs = abs(secs)
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    out = f"{sign}{h:02d}"
    if mi or s:
        out += f":{mi:02d}"
    if s:
        out += f":{s:02d}"
    return out


def format_timestamptz(us: int, tz=None) -> str:
    d = tstz_to_local(us, tz)
    return (f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:"
            f"{d.second:02d}{_frac(d.microsecond)}{_offset_text(d.utcoffset())}")


def format_interval(v: Interval) -> str:
    """IntervalStyle postgres: '1 year 2 mons -3 days +04:05:06.5', '00:00:00'."""
    months, days, us = v.months, v.mdays, v.usecs
    year, mon = int(months / 12), months - int(months / 12) * 12     # C's truncation
    parts = []
    is_before = False
    for value, unit in ((year, "year"), (mon, "mon"), (days, "day")):
        if value == 0:
            continue
        plus = "+" if is_before and value > 0 else ""
        parts.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
        is_before = value < 0
    if not parts or us != 0:
        minus = us < 0
        a = abs(us)
        h, rem = divmod(a, USECS_PER_HOUR)
        mi, rem = divmod(rem, 60_000_000)
        s, f = divmod(rem, 1_000_000)
        sign = "-" if minus else ("+" if is_before else "")
        parts.append(f"{sign}{h:02d}:{mi:02d}:{s:02d}{_frac(f)}")
    return " ".join(parts)


# -- arithmetic ------------------------------------------------------------------------------

def _add_months(d: _dt.datetime, months: int) -> _dt.datetime:
    if not months:
        return d
    total = d.year * 12 + (d.month - 1) + months
    y, m = divmod(total, 12)
    if not 1 <= y <= 9999:
        raise errors.DatetimeFieldOverflow("timestamp out of range")
    day = min(d.day, calendar.monthrange(y, m + 1)[1])
    return d.replace(year=y, month=m + 1, day=day)


def add_interval_ts(us: int, iv: Interval, sign: int = 1) -> int:
    """timestamp +/- interval (wall-clock arithmetic), microseconds in and out."""
    months, days, usecs = iv.months * sign, iv.mdays * sign, iv.usecs * sign
    if months:
        d = _add_months(int_to_timestamp(us), months)
        us = timestamp_to_int(d)
    r = us + days * USECS_PER_DAY + usecs
    _check_ts(r)
    return r


def add_interval_tstz(us: int, iv: Interval, sign: int = 1, tz=None) -> int:
    """timestamptz +/- interval: months and days on the session's wall clock, then the
    microseconds in absolute time."""
    months, days, usecs = iv.months * sign, iv.mdays * sign, iv.usecs * sign
    if months or days:
        tz = tz or session_timezone()
        if tz is UTC or isinstance(tz, _dt.timezone):
            us = add_interval_ts(us, Interval(months, days, 0))
        else:
            local = tstz_to_local(us, tz).replace(tzinfo=None)
            local = _add_months(local, months) + _dt.timedelta(days=days)
            us = local_to_tstz_dt(local.replace(tzinfo=tz))
    r = us + usecs
    _check_ts(r)
    return r


_TS_MIN = timestamp_to_int(_dt.datetime.min)
_TS_MAX = timestamp_to_int(_dt.datetime.max)


def _check_ts(us: int):
    if not _TS_MIN <= us <= _TS_MAX:
        raise errors.DatetimeFieldOverflow("timestamp out of range")


def ts_diff(a: int, b: int) -> Interval:
    """timestamp - timestamp: days and microseconds (justify_hours), as PostgreSQL."""
    d = a - b
    days = int(d / USECS_PER_DAY)           # truncation toward zero, as C
    return Interval(0, days, d - days * USECS_PER_DAY)


def interval_mul(iv: Interval, factor: float) -> Interval:
    """interval * number: PostgreSQL's interval_mul (fractions of months spill into days of
    30, fractions of days into microseconds)."""
    f = float(factor)
    if math.isnan(f) or math.isinf(f):
        raise errors.DatetimeFieldOverflow("interval out of range")
    months = iv.months * f
    rm = math.trunc(months)
    days = iv.mdays * f
    rd = math.trunc(days)
    month_rem_days = (months - rm) * 30
    extra = math.trunc(month_rem_days)
    sec_rem = (month_rem_days - extra + (days - rd)) * 86_400
    us = round(iv.usecs * f + sec_rem * 1_000_000)
    try:
        return Interval(int(rm), int(rd) + extra, int(us))
    except OverflowError:
        raise errors.DatetimeFieldOverflow("interval out of range") from None


def interval_div(iv: Interval, factor: float) -> Interval:
    if float(factor) == 0.0:
        raise errors.DivisionByZero("division by zero")
    months = iv.months / factor
    rm = math.trunc(months)
    days = iv.mdays / factor
    rd = math.trunc(days)
    month_rem_days = (months - rm) * 30
    extra = math.trunc(month_rem_days)
    sec_rem = (month_rem_days - extra + (days - rd)) * 86_400
    us = round(iv.usecs / factor + sec_rem * 1_000_000)
    return Interval(int(rm), int(rd) + extra, int(us))


def age(a: _dt.datetime, b: _dt.datetime) -> Interval:
    """age(a, b): years, months and days between two wall-clock timestamps, PostgreSQL's
    field-by-field subtraction with borrows (a month borrowed has the days of b's month)."""
    if a < b:
        r = age(b, a)
        return Interval(-r.months, -r.mdays, -r.usecs)
    us = (a.hour * 3600 + a.minute * 60 + a.second) * 1_000_000 + a.microsecond \
        - ((b.hour * 3600 + b.minute * 60 + b.second) * 1_000_000 + b.microsecond)
    days = a.day - b.day
    months = a.month - b.month
    years = a.year - b.year
    if us < 0:
        us += USECS_PER_DAY
        days -= 1
    if days < 0:
        # borrow the days of the month before a's month (PostgreSQL uses b's month when
        # the first timestamp is the later one, which it is here)
        pm = b.month
        py = b.year
        days += calendar.monthrange(py, pm)[1]
        months -= 1
    if months < 0:
        months += 12
        years -= 1
    return Interval(years * 12 + months, days, us)


# -- timestamp without time zone: date_part / date_trunc --------------------------------------------------------------------------------
def _as_dt(v) -> _dt.datetime:
    return v if isinstance(v, _dt.datetime) else int_to_timestamp(int(v))


def date_part(field: str, v) -> float:
    d = _as_dt(v)
    f = field.lower()
    if f in ("year", "years"):
        return float(d.year)
    if f in ("month", "months"):
        return float(d.month)
    if f in ("day", "days"):
        return float(d.day)
    if f in ("hour", "hours"):
        return float(d.hour)
    if f in ("minute", "minutes"):
        return float(d.minute)
    if f in ("second", "seconds"):
        return d.second + d.microsecond / 1e6
    if f in ("millisecond", "milliseconds"):
        return d.second * 1000 + d.microsecond / 1000
    if f in ("microsecond", "microseconds"):
        return float(d.second * 1_000_000 + d.microsecond)
    if f == "dow":
        return float(d.isoweekday() % 7)
    if f == "isodow":
        return float(d.isoweekday())
    if f == "doy":
        return float(d.timetuple().tm_yday)
    if f == "week":
        return float(d.isocalendar()[1])
    if f == "isoyear":
        return float(d.isocalendar()[0])
    if f == "quarter":
        return float((d.month - 1) // 3 + 1)
    if f == "epoch":
        return (d - _dt.datetime(1970, 1, 1)).total_seconds()
    if f == "decade":
        return float(d.year // 10)
    if f == "century":
        return float((d.year + 99) // 100)
    if f == "millennium":
        return float((d.year + 999) // 1000)
    raise errors.InvalidParameterValue(
        f'unit "{field}" not recognized for type timestamp without time zone')


def date_trunc(field: str, v) -> _dt.datetime:
    d = _as_dt(v)
    f = field.lower()
    if f == "microseconds":
        return d
    if f == "milliseconds":
        return d.replace(microsecond=d.microsecond // 1000 * 1000)
    if f == "second":
        return d.replace(microsecond=0)
    if f == "minute":
        return d.replace(second=0, microsecond=0)
    if f == "hour":
        return d.replace(minute=0, second=0, microsecond=0)
    day = d.replace(hour=0, minute=0, second=0, microsecond=0)
    if f == "day":
        return day
    if f == "week":
        return day - _dt.timedelta(days=d.weekday())
    if f == "month":
        return day.replace(day=1)
    if f == "quarter":
        return day.replace(day=1, month=(d.month - 1) // 3 * 3 + 1)
    if f == "year":
        return day.replace(day=1, month=1)
    if f == "decade":
        return day.replace(day=1, month=1, year=d.year // 10 * 10)
    if f == "century":
        return day.replace(day=1, month=1, year=(d.year - 1) // 100 * 100 + 1)
    if f == "millennium":
        return day.replace(day=1, month=1, year=(d.year - 1) // 1000 * 1000 + 1)
    raise errors.InvalidParameterValue(
        f'unit "{field}" not recognized for type timestamp without time zone')




# -- extract / date_trunc / to_char ----------------------------------------------------------

def date_part_of(field: str, v, tname: str):
    """extract(field from v) for date, time, timestamptz and interval values (vector
    scalars); returns a float or a Decimal for interval epoch."""
    f = field.lower()
    if tname == "date":
        d = int_to_date(v)
        if f in ("hour", "hours", "minute", "minutes", "second", "seconds", "millisecond",
                 "milliseconds", "microsecond", "microseconds"):
            raise errors.InvalidParameterValue(f'unit "{field}" not supported for type date')
        return date_part(f, _dt.datetime(d.year, d.month, d.day))
    if tname == "time":
        t = int_to_time(v)
        us = int(v)
        if f in ("hour", "hours"):
            return float(us // USECS_PER_HOUR)
        if f in ("minute", "minutes"):
            return float(t.minute)
        if f in ("second", "seconds"):
            return t.second + t.microsecond / 1e6
        if f in ("millisecond", "milliseconds"):
            return t.second * 1000 + t.microsecond / 1000
        if f in ("microsecond", "microseconds"):
            return float(t.second * 1_000_000 + t.microsecond)
        if f == "epoch":
            return us / 1e6
        raise errors.InvalidParameterValue(
            f'unit "{field}" not supported for type time without time zone')
    if tname == "timestamptz":
        if f == "epoch":
            return (int(v) + 946_684_800_000_000) / 1e6
        local = tstz_to_local(v)
        if f == "timezone":
            return float(local.utcoffset().total_seconds())
        if f == "timezone_hour":
            return float(int(local.utcoffset().total_seconds() / 3600))
        if f == "timezone_minute":
            return float(int(local.utcoffset().total_seconds() / 60) % 60)
        return date_part(f, local.replace(tzinfo=None))
    if tname == "interval":
        iv = v
        y = int(iv.months / 12)                 # C's truncating division
        if f == "epoch":
            return (iv.usecs / 1e6 + 365.25 * 86400 * y + 30 * 86400 * (iv.months - y * 12)
                    + 86400 * iv.mdays)
        mon = iv.months - y * 12
        us = iv.usecs
        h = int(us / USECS_PER_HOUR)
        rem = us - h * USECS_PER_HOUR
        mi = int(rem / 60_000_000)
        rem -= mi * 60_000_000
        table = {"year": y, "years": y, "month": mon, "months": mon, "day": iv.mdays,
                 "days": iv.mdays, "hour": h, "hours": h, "minute": mi, "minutes": mi,
                 "second": rem / 1e6, "seconds": rem / 1e6,
                 "millisecond": rem / 1e3, "milliseconds": rem / 1e3,
                 "microsecond": rem, "microseconds": rem,
                 "quarter": mon // 3 + 1, "decade": int(y / 10), "century": int(y / 100),
                 "millennium": int(y / 1000)}
        if f not in table:
            raise errors.InvalidParameterValue(f'unit "{field}" not supported for type interval')
        return float(table[f])
    raise errors.InternalError(tname)


def date_trunc_of(field: str, v, tname: str, zone=None):
    """date_trunc for timestamptz (truncated in the session's TimeZone, or ``zone``) and
    interval; vector scalars in and out."""
    f = field.lower()
    if tname == "timestamptz":
        tz = timezone_named(zone) if zone else session_timezone()
        local = tstz_to_local(v, tz).replace(tzinfo=None)
        return local_to_tstz_dt(date_trunc(f, local).replace(tzinfo=tz))
    if tname == "interval":
        iv = v
        us = iv.usecs
        cuts = {"microseconds": 1, "milliseconds": 1000, "second": 1_000_000,
                "minute": 60_000_000, "hour": USECS_PER_HOUR}
        if f in cuts:
            return Interval(iv.months, iv.mdays, int(us / cuts[f]) * cuts[f])
        if f == "day":
            return Interval(iv.months, iv.mdays, 0)
        mcuts = {"month": 1, "quarter": 3, "year": 12, "decade": 120, "century": 1200,
                 "millennium": 12000}
        if f in mcuts:
            return Interval(int(iv.months / mcuts[f]) * mcuts[f], 0, 0)
        raise errors.InvalidParameterValue(f'unit "{field}" not supported for type interval')
    raise errors.InternalError(tname)


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
# longest first, so that HH24 wins over HH and MONTH over MON
_PATTERNS = sorted([
    "HH24", "HH12", "HH", "MI", "SS", "MS", "US", "SSSS", "SSSSS", "AM", "PM", "am", "pm",
    "A.M.", "P.M.", "a.m.", "p.m.", "YYYY", "YYY", "YY", "Y", "Y,YYY", "IYYY", "MONTH",
    "Month", "month", "MON", "Mon", "mon", "MM", "DAY", "Day", "day", "DY", "Dy", "dy", "DDD",
    "DD", "D", "ID", "W", "WW", "IW", "CC", "J", "Q", "TZ", "tz", "OF", "RM", "rm"],
    key=len, reverse=True)


def to_char(d: _dt.datetime, fmt: str, offset: _dt.timedelta | None = None,
            zone_abbrev: str = "") -> str:
    """to_char(timestamp, text) with PostgreSQL's template patterns (FM fill mode, TH
    suffixes, "quoted" literal text, backslash escapes); ``offset`` / ``zone_abbrev`` are
    the time zone a timestamptz was shown in."""
    out = []
    i, n = 0, len(fmt)
    while i < n:
        fm = False
        if fmt.startswith(("FM", "fm"), i):
            fm = True
            i += 2
        if i < n and fmt[i] == '"':
            j = fmt.find('"', i + 1)
            j = n if j < 0 else j
            out.append(fmt[i + 1:j])
            i = j + 1
            continue
        if i < n and fmt[i] == "\\" and i + 1 < n:
            out.append(fmt[i + 1])
            i += 2
            continue
        pat = next((p for p in _PATTERNS if fmt.startswith(p, i)), None)
        if pat is None:
            if i < n:
                out.append(fmt[i])
            i += 1
            continue
        i += len(pat)
        text = _pattern(pat, d, fm, offset, zone_abbrev)
        th = fmt[i:i + 2]
        if th in ("TH", "th") and text.strip().isdigit():
            num = int(text)
            suf = "th" if 10 <= num % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(num % 10, "th")
            text += suf.upper() if th == "TH" else suf
            i += 2
        out.append(text)
    return "".join(out)


def _num(v: int, width: int, fm: bool) -> str:
    if fm:
        return str(v)
    return f"{v:0{width}d}" if v >= 0 else "-" + f"{-v:0{width}d}"


def _word(s: str, style: str, fm: bool, width: int) -> str:
    s = s.upper() if style == "upper" else s.lower() if style == "lower" else s
    return s if fm else s.ljust(width)


def _pattern(p: str, d: _dt.datetime, fm: bool, offset, zone_abbrev: str) -> str:
    if p == "HH24":
        return _num(d.hour, 2, fm)
    if p in ("HH12", "HH"):
        return _num(d.hour % 12 or 12, 2, fm)
    if p == "MI":
        return _num(d.minute, 2, fm)
    if p == "SS":
        return _num(d.second, 2, fm)
    if p == "MS":
        return _num(d.microsecond // 1000, 3, fm)
    if p == "US":
        return _num(d.microsecond, 6, fm)
    if p in ("SSSS", "SSSSS"):
        return str(d.hour * 3600 + d.minute * 60 + d.second)
    if p in ("AM", "PM"):
        return "PM" if d.hour >= 12 else "AM"
    if p in ("am", "pm"):
        return "pm" if d.hour >= 12 else "am"
    if p in ("A.M.", "P.M."):
        return "P.M." if d.hour >= 12 else "A.M."
    if p in ("a.m.", "p.m."):
        return "p.m." if d.hour >= 12 else "a.m."
    if p == "Y,YYY":
        return f"{d.year // 1000},{d.year % 1000:03d}"
    if p == "YYYY":
        return _num(d.year, 4, fm)
    if p == "YYY":
        return _num(d.year % 1000, 3, fm)
    if p == "YY":
        return _num(d.year % 100, 2, fm)
    if p == "Y":
        return str(d.year % 10)
    if p == "IYYY":
        return _num(d.isocalendar()[0], 4, fm)
    if p in ("MONTH", "Month", "month"):
        style = {"MONTH": "upper", "Month": "", "month": "lower"}[p]
        return _word(_MONTHS[d.month - 1], style, fm, 9)
    if p in ("MON", "Mon", "mon"):
        style = {"MON": "upper", "Mon": "", "mon": "lower"}[p]
        return _word(_MONTHS[d.month - 1][:3], style, True, 3)
    if p == "MM":
        return _num(d.month, 2, fm)
    if p in ("DAY", "Day", "day"):
        style = {"DAY": "upper", "Day": "", "day": "lower"}[p]
        return _word(_DAYS[d.isoweekday() % 7], style, fm, 9)
    if p in ("DY", "Dy", "dy"):
        style = {"DY": "upper", "Dy": "", "dy": "lower"}[p]
        return _word(_DAYS[d.isoweekday() % 7][:3], style, True, 3)
    if p == "DDD":
        return _num(d.timetuple().tm_yday, 3, fm)
    if p == "DD":
        return _num(d.day, 2, fm)
    if p == "D":
        return str(d.isoweekday() % 7 + 1)
    if p == "ID":
        return str(d.isoweekday())
    if p == "W":
        return str((d.day - 1) // 7 + 1)
    if p == "WW":
        return _num((d.timetuple().tm_yday - 1) // 7 + 1, 2, fm)
    if p == "IW":
        return _num(d.isocalendar()[1], 2, fm)
    if p == "CC":
        return _num((d.year + 99) // 100, 2, fm)
    if p == "J":
        return str(d.toordinal() + 1_721_425)
    if p == "Q":
        return str((d.month - 1) // 3 + 1)
    if p in ("RM", "rm"):
        r = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"][d.month - 1]
        r = r if p == "RM" else r.lower()
        return r if fm else r.ljust(4)
    if p in ("TZ", "tz"):
        return zone_abbrev.upper() if p == "TZ" else zone_abbrev.lower()
    if p == "OF":
        return _offset_text(offset) if offset is not None else "+00"
    raise errors.InternalError(p)


def ints_from_dates(values) -> np.ndarray:
    return np.fromiter((date_to_int(v) for v in values), dtype=np.int64, count=len(values))
