"""Slurm hostlist expansion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synestra_cli.hostlist import MAX_HOSTS, HostlistError, expand


def test_ranges_and_singles_in_one_group_keep_zero_padding():
    assert expand("gpu-[001-004,009]") == ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-009"]


def test_padding_follows_the_range_start_as_written():
    assert expand("n[8-10]") == ["n8", "n9", "n10"]
    assert expand("n[08-10]") == ["n08", "n09", "n10"]


def test_several_bracket_groups_form_a_product_in_order():
    assert expand("cpn-k[07-08]-05-[01-02]") == ["cpn-k07-05-01", "cpn-k07-05-02", "cpn-k08-05-01", "cpn-k08-05-02"]


def test_plain_comma_lists_and_mixed_items():
    assert expand("cdr735,gpu-[1-2],login") == ["cdr735", "gpu-1", "gpu-2", "login"]


@pytest.mark.parametrize("text", ["None assigned", "(null)", "", None])
def test_unassigned_means_no_hosts(text):
    assert expand(text) == []


@pytest.mark.parametrize("text", ["gpu-[001-004", "gpu-[a-b]", "gpu-[5-1]", "a,,b", "x]y["])
def test_malformed_expressions_raise(text):
    with pytest.raises(HostlistError):
        expand(text)


def test_huge_ranges_are_refused_not_expanded():
    with pytest.raises(HostlistError):
        expand(f"n[0-{MAX_HOSTS * 10}]")


@pytest.mark.heavy
@given(
    prefix=st.from_regex(r"[a-z][a-z-]{0,5}", fullmatch=True),
    nums=st.lists(st.integers(0, 999), min_size=1, max_size=20, unique=True),
    width=st.integers(1, 4),
)
def test_property_listing_numbers_expands_to_exactly_those_names(prefix, nums, width):
    nums = sorted(nums)
    spec = ",".join(str(n).zfill(width) for n in nums)
    expected = [f"{prefix}{str(n).zfill(width)}" for n in nums]
    assert expand(f"{prefix}[{spec}]") == expected
    assert expand(",".join(expected)) == expected
