"""traceq.threads.ordered_map: results in the order of the items, and never more than
`in_flight` of them computed ahead of the consumer (bounded memory)."""
from __future__ import annotations

import threading
import time

import pytest

from traceq.threads import ordered_map


@pytest.mark.parametrize("n_workers, in_flight", [(1, None), (2, None), (2, 2), (3, 1)])
def test_results_come_in_item_order(n_workers, in_flight):
    def slow_for_even(i):
        time.sleep(0.002 if i % 2 == 0 else 0)   # later items often finish first
        return i * i

    assert list(ordered_map(slow_for_even, range(40), n_workers, in_flight)) == [i * i for i in range(40)]


@pytest.mark.parametrize("in_flight, limit", [(None, 4), (2, 2), (1, 1)])
def test_at_most_in_flight_items_are_taken_ahead(in_flight, limit):
    """When result k is yielded, at most k + limit items have been taken from the iterator
    (the default limit: 2 x workers)."""
    taken = []
    lock = threading.Lock()

    def items():
        for i in range(30):
            with lock:
                taken.append(i)
            yield i

    ahead = []
    for k, r in enumerate(ordered_map(lambda i: i, items(), 2, in_flight)):
        assert r == k
        with lock:
            ahead.append(len(taken) - k)
    assert max(ahead) == limit
