"""Young/Daly interval advice against the published validation cases."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synestra_cli.accounting.interval import advise, daly_interval, expected_waste, young_interval

MIN = 60.0
HOUR = 3600.0


@pytest.mark.parametrize(("mtbf", "expected_min"), [(24 * HOUR, 117.0), (6 * HOUR, 57.0), (15 * MIN, 9.1)])
def test_daly_reproduces_his_own_validation_cases(mtbf, expected_min):
    # Daly 2006: delta = 5 min; the figure captions give the optimum in minutes (rounded).
    assert daly_interval(5 * MIN, mtbf) / MIN == pytest.approx(expected_min, abs=0.6)


def test_daly_caps_at_mtbf_when_saves_cost_more_than_two_mtbf():
    assert daly_interval(3 * HOUR, 1 * HOUR) == 1 * HOUR


def test_young_is_sqrt_2cm():
    assert young_interval(60.0, 3.1 * HOUR) == pytest.approx(math.sqrt(2 * 60 * 3.1 * 3600))


@given(st.floats(1, 600), st.floats(HOUR, 1000 * HOUR))
def test_young_minimises_the_first_order_waste(save, mtbf):
    t = young_interval(save, mtbf)

    # first-order waste C/T + T/2M is minimal at Young's T (the +C in the denominator is second order)
    def w(x: float) -> float:
        return save / x + x / (2 * mtbf)

    assert w(t) <= w(t * 1.1) and w(t) <= w(t * 0.9)


def test_advice_refuses_to_estimate_mtbf_from_one_failure():
    a = advise(save_cost_s=60, failures=1, wall_s=10 * HOUR, current_interval_s=1800, restart_s=300)
    assert a.mtbf_s is None and a.daly_s is None and "too few" in a.note


def test_advice_recommends_less_waste_than_a_too_frequent_interval():
    a = advise(save_cost_s=60, failures=4, wall_s=24 * HOUR, current_interval_s=120, restart_s=300)
    assert a.mtbf_s == 6 * HOUR
    assert a.waste_recommended < a.waste_current
    assert a.waste_current == pytest.approx(expected_waste(120, 60, 6 * HOUR, 300))
