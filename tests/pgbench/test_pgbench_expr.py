"""pgbench's expression language (``\\set``): arithmetic as pgbench's, the random functions'
ranges and shapes (counted over many draws with a seeded generator, never timed).

Not proven here: that the random streams equal pgbench's (they do not: pgbench uses
xoshiro128**, minidb Python's Mersenne Twister); only the distributions' documented shapes."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minidb.pgbench.expr import INT64_MAX, INT64_MIN, ExprError, compile_expression


def ev(text, **variables):
    return compile_expression(text).eval(variables, random.Random(7))


@pytest.mark.parametrize("text, value", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("-7 / 2", -3), ("7 / -2", -3), ("-7 % 3", -1),
    ("7 % -3", 1), ("7.0 / 2", 3.5), ("1 + 0.5", 1.5), ("abs(-3)", 3), ("abs(-2.5)", 2.5),
    ("least(3, 1, 2)", 1), ("greatest(3, 1, 2.0)", 3.0), ("least(1, 2.5)", 1.0),
    ("mod(-7, 3)", -1), ("int(5.9)", 5), ("int(-5.9)", -5), ("double(3)", 3.0),
    ("sqrt(16)", 4.0), ("pow(2, 10)", 1024.0), ("power(2, 0.5)", math.sqrt(2)),
    ("5 # 3", 6), ("5 & 3", 1), ("5 | 3", 7), ("~0", -1), ("1 << 4", 16), ("256 >> 4", 16),
    ("1 < 2", True), ("2 <= 1", False), ("1 = 1.0", True), ("1 <> 2", True), ("1 != 1", False),
    ("not 1 = 1 or 2 > 1", True), ("1 = 1 and 0", False), ("case when 1 > 2 then 10 "
                                                             "when 2 > 1 then 20 else 30 end", 20),
    ("case when false then 1 end", None), ("null + 1", None), ("null is null", True),
    ("1 is not null", True), ("1 notnull", True), ("null and false", False),
    ("null or true", True), ("2e3", 2000.0), ("100000 * :scale", 1_000_000),
    ("-:x", -5), ("pi()", math.pi),
])
def test_values(text, value):
    got = ev(text, scale=10, x=5)
    assert got == value and type(got) is type(value), (got, value)


@pytest.mark.parametrize("text, message", [
    ("9223372036854775807 + 1", "bigint out of range"),
    ("1 / 0", "division by zero"), ("1 % 0", "division by zero"),
    ("1.0 / 0", "division by zero"),
    ("random(5, 1)", "empty range given to random"),
    ("random_gaussian(1, 10, 1.5)", "gaussian parameter must be at least 2.0"),
    ("random_exponential(1, 10, 0)", "exponential parameter must be greater than zero"),
    ("random_zipfian(1, 10, 1.0)", "zipfian parameter must be in range [1.001, 1000]"),
    (":nosuch + 1", 'undefined variable "nosuch"'),
    ("true + 1", "cannot coerce boolean"),
])
def test_evaluation_errors(text, message):
    with pytest.raises(ExprError, match=message.replace("[", r"\[").replace("(", r"\(")):
        ev(text)


@pytest.mark.parametrize("text, pos", [
    ("1 +", 3), ("foo(1)", 0), ("random(1)", 0), ("(1 + 2", 6), ("1 2", 2), ("hash(1)", 0),
    ("1 < 2 < 3", 6), ("$", 0),
])
def test_syntax_errors_carry_their_position(text, pos):
    with pytest.raises(ExprError) as e:
        compile_expression(text)
    assert e.value.pos == pos


def c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@settings(max_examples=300, deadline=None)
@given(st.integers(INT64_MIN // 2, INT64_MAX // 2), st.integers(-10**9, 10**9))
def test_integer_arithmetic_is_c_int64(a, b):
    """+ - * / % on integers behave as int64 arithmetic in C (truncating division)."""
    v = {"a": a, "b": b}
    assert compile_expression(":a + :b").eval(v, None) == a + b
    assert compile_expression(":a - :b").eval(v, None) == a - b
    if b != 0:
        q = c_div(a, b)
        assert compile_expression(":a / :b").eval(v, None) == q
        assert compile_expression(":a % :b").eval(v, None) == a - b * q
    p = a * b
    if INT64_MIN <= p <= INT64_MAX:
        assert compile_expression(":a * :b").eval(v, None) == p
    else:
        with pytest.raises(ExprError, match="bigint out of range"):
            compile_expression(":a * :b").eval(v, None)


@settings(max_examples=100, deadline=None)
@given(st.integers(-10**6, 10**6), st.integers(0, 10**6), st.integers(0, 2**32))
def test_random_functions_stay_in_range(lo, width, seed):
    hi = lo + width
    rng = random.Random(seed)
    v = {"lo": lo, "hi": hi}
    for text in ("random(:lo, :hi)", "random_exponential(:lo, :hi, 3.0)",
                 "random_gaussian(:lo, :hi, 2.5)", "random_zipfian(:lo, :hi, 1.5)"):
        e = compile_expression(text)
        for _ in range(20):
            x = e.eval(v, rng)
            assert type(x) is int and lo <= x <= hi, (text, x)


def draws(text, n=20000, seed=1):
    e = compile_expression(text)
    rng = random.Random(seed)
    return [e.eval({}, rng) for _ in range(n)]


def test_uniform_covers_the_range_evenly():
    c = Counter(draws("random(1, 10)"))
    assert set(c) == set(range(1, 11))
    assert max(c.values()) < 1.15 * min(c.values())


def test_exponential_is_skewed_toward_the_low_end():
    """pgbench's density exp(-p (x - min) / (max - min + 1)): with p = 5 the first tenth
    of the range gets 1 - exp(-0.5) / (1 - exp(-5)) ~ 39.5% of the draws."""
    xs = draws("random_exponential(1, 1000, 5.0)")
    first_tenth = sum(1 for x in xs if x <= 100) / len(xs)
    assert abs(first_tenth - (1 - math.exp(-0.5)) / (1 - math.exp(-5))) < 0.02
    assert min(xs) == 1


def test_gaussian_is_centred_with_the_documented_spread():
    """With p = 2.5, the middle 67.8% of draws falls within one standard deviation of the
    middle: +-1/2.5 of the half-range (PHI(1) - PHI(-1) over the truncated mass)."""
    xs = draws("random_gaussian(1, 1000, 2.5)")
    mean = sum(xs) / len(xs)
    assert abs(mean - 500.5) < 10
    within = sum(1 for x in xs if abs(x - 500.5) <= 500 / 2.5) / len(xs)
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    expect = (phi(1) - phi(-1)) / (phi(2.5) - phi(-2.5))
    assert abs(within - expect) < 0.02


def test_zipfian_frequencies_follow_the_power_law():
    """P(k) ~ k**-s: with s = 2, value 1 comes about 4 times as often as value 2."""
    c = Counter(draws("random_zipfian(1, 100, 2.0)", n=40000))
    assert c[1] > c[2] > c[3] > c[10]
    assert 3.4 < c[1] / c[2] < 4.6


def test_same_seed_same_values():
    assert draws("random(1, 1000000)", 100, seed=5) == draws("random(1, 1000000)", 100, seed=5)


@pytest.mark.parametrize("text, lo, hi", [
    ("random(1, 100000 * :scale)", 1, 1_000_000),   # constant lower bound (select-only's)
    ("random(-5000, 5000)", -5000, 5000),            # both constant
    ("random(:lo, :hi)", -3, 7),                     # both from variables
    ("random(1, :one)", 1, 1),                       # a one-value range
])
def test_uniform_draws_are_randints_draws(text, lo, hi):
    """random(lb, ub) on integers is exactly Random.randint(lb, ub), draw for draw (the
    compiled closure takes its draw without randint's argument checks)."""
    e = compile_expression(text)
    rng, ref = random.Random(11), random.Random(11)
    vs = {"scale": 10, "lo": lo, "hi": hi, "one": 1}
    assert [e.eval(vs, rng) for _ in range(2000)] == [ref.randint(lo, hi) for _ in range(2000)]


@pytest.mark.parametrize("text, value", [
    ("random(1, null)", None), ("random(null, 3)", None), ("random(2, 2.0)", 2),
])
def test_uniform_null_and_double_bounds(text, value):
    assert ev(text) == value


def test_uniform_constant_lower_bound_above_the_upper():
    with pytest.raises(ExprError, match="empty range given to random"):
        ev("random(5, :x)", x=1)
