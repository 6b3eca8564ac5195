"""The cycles of waits (analysis/holders.cycles): each cycle once, from its smallest thread,
whatever thread the walk entered it from; chains into a cycle and chains that end are not
cycles; a dump-sized chain is walked once."""

from __future__ import annotations

from dumpkit.analysis.holders import cycles


def test_each_cycle_once_from_its_smallest_thread_in_their_order():
    edges = {9: 4, 4: 7, 7: 9, 2: 3, 3: 2, 5: 5}
    assert cycles(edges) == [[2, 3], [4, 7, 9], [5]]


def test_a_chain_into_a_cycle_and_a_chain_that_ends_are_not_cycles():
    # 1 -> 2 -> 3 -> 2 (1 waits on the cycle, it is not in it); 10 -> 11 -> 12 (12 waits on
    # nobody the dump shows)
    assert cycles({1: 2, 2: 3, 3: 2, 10: 11, 11: 12}) == [[2, 3]]
    assert cycles({}) == []


def test_a_chain_of_a_million_threads_ending_in_a_cycle():
    n = 1_000_000
    edges = {k: k + 1 for k in range(n)}
    edges[n] = n - 2  # n-2 -> n-1 -> n -> n-2
    assert cycles(edges) == [[n - 2, n - 1, n]]
