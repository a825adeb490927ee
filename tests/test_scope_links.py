"""JobScope looks a link up by either end, and a host's rack, from an index built once (a big job has
thousands of links and explain asks once per signal): each answer is the one a scan of the links in
their order gives, with ends that hold no port or NIC (None) and hosts listed on several links."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from synestra_cli.signals.scope import JobScope, Link

NAMES = st.sampled_from(["gpu-001", "gpu-002", "leaf-01", "leaf-02"])
PARTS = st.one_of(st.none(), st.sampled_from(["mlx5_0", "mlx5_1", "Ethernet1", "Ethernet2"]))
LINKS = st.lists(
    st.builds(Link, NAMES, PARTS, st.one_of(st.none(), NAMES), PARTS, st.one_of(st.none(), st.sampled_from("AB"))),
    max_size=12,
)


def _scan(links: list[Link], switch_end: tuple, host_end: tuple) -> Link | None:
    return next(
        (lk for lk in links if (lk.switch, lk.switch_port) == switch_end or (lk.host, lk.nic) == host_end), None
    )


@settings(max_examples=300, deadline=None)
@given(LINKS, NAMES, PARTS, PARTS)
def test_a_link_by_either_end_and_a_hosts_rack_are_those_a_scan_finds(links, host, port, nic):
    scope = JobScope("j", [], ["gpu-001"], links)
    assert scope.link_at((host, port), (host, nic)) is _scan(links, (host, port), (host, nic))
    assert scope.rack_of(host) == next((lk.rack for lk in links if lk.host == host and lk.rack), None)


def test_the_first_link_in_order_wins_when_both_ends_match_different_links():
    a = Link("gpu-001", "mlx5_0", "leaf-01", "Ethernet1", "A")
    b = Link("gpu-002", "mlx5_1", "leaf-02", "Ethernet2", "B")
    scope = JobScope("j", [], ["gpu-001", "gpu-002"], [a, b])
    # the switch end names b, the host end names a: a comes first
    assert scope.link_at(("leaf-02", "Ethernet2"), ("gpu-001", "mlx5_0")) is a
    assert scope.link_at(("leaf-02", "Ethernet2"), ("gpu-009", None)) is b
    assert scope.link_at(("leaf-09", None), ("gpu-009", None)) is None
