"""An all-reduce estimated from one GPU-to-GPU copy: step counts of ring and tree for 2 to 16 ranks."""

from __future__ import annotations

import math

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.all_reduce_estimate import (
    estimate_allreduce,
    not_an_allreduce,
    ring_steps,
    tree_steps,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from hypothesis import given
from hypothesis import strategies as st

HOP = 13.7  # the incident's GPU-to-GPU copy of 12 KB through host memory


@pytest.mark.parametrize("ranks", range(2, 17))
def test_ring_waits_two_n_minus_one_hops(ranks: int) -> None:
    estimate = estimate_allreduce(ranks, 12288, HOP)
    assert estimate["ring"]["steps"] == 2 * (ranks - 1) == ring_steps(ranks)
    assert estimate["ring"]["time_us"] == pytest.approx(2 * (ranks - 1) * HOP)
    # Without a bandwidth the data term is left out, and says so.
    assert estimate["ring"]["data_us"] == 0.0
    assert any("no bandwidth measured" in a for a in estimate["assumptions"])


@pytest.mark.parametrize("ranks", range(2, 17))
def test_tree_on_one_host_is_a_chain_and_the_ring_is_picked(ranks: int) -> None:
    # NCCL's tuning.cc: tree latency 2 x ((n/nodes - 1) intra + log2(nodes) inter hops). One node: 2(n-1).
    estimate = estimate_allreduce(ranks, 12288, HOP, bus_gbps=32.6)
    assert estimate["tree"]["steps"] == 2 * (ranks - 1)
    # Same hops, and the ring moves 2(n-1)/n of the bytes where the tree moves 2x: NCCL's model picks ring.
    assert estimate["nccl_pick"] == "ring"
    assert estimate["time_us"] == pytest.approx(2 * (ranks - 1) * HOP + (2 * (ranks - 1) / ranks) * 12288 / 32.6e3)


@pytest.mark.parametrize("ranks", [2, 4, 8, 16])
def test_tree_with_one_gpu_per_node_is_the_binary_tree(ranks: int) -> None:
    estimate = estimate_allreduce(ranks, 12288, HOP, nodes=ranks)
    assert estimate["tree"]["steps"] == 2 * int(math.log2(ranks)) == estimate["binary_tree_steps"]
    assert tree_steps(ranks, ranks) == 2 * int(math.log2(ranks))
    # For 4 ranks and more the binary tree waits fewer hops than the ring, and NCCL's model takes it.
    assert estimate["nccl_pick"] == ("tree" if ranks >= 4 else "ring")


@pytest.mark.parametrize(("ranks", "expected"), [(3, 4), (5, 6), (6, 6), (12, 8), (16, 8)])
def test_binary_tree_steps_round_log2_up(ranks: int, expected: int) -> None:
    assert estimate_allreduce(ranks, 4096, 1.0)["binary_tree_steps"] == expected


def test_two_nodes_of_eight() -> None:
    # 2 x ((8 - 1) + log2(2)) = 16 hops for the tree, 30 for the ring.
    estimate = estimate_allreduce(16, 12288, HOP, nodes=2)
    assert (estimate["ring"]["steps"], estimate["tree"]["steps"]) == (30, 16)
    assert estimate["nccl_pick"] == "tree"


def test_the_incident_all_reduce_is_of_the_order_of_two_hundred_microseconds() -> None:
    estimate = estimate_allreduce(8, 12288, HOP, 32.6)
    assert 190 < estimate["time_us"] < 195
    assert estimate["assumptions"][0].startswith("14 dependent hops (ring")


def test_one_rank_costs_nothing() -> None:
    estimate = estimate_allreduce(1, 12288, HOP)
    assert estimate["time_us"] == 0.0 and estimate["binary_tree_steps"] == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"ranks": 0}, "ranks as a whole number above 0; found 0"),
    ({"ranks": 8.0}, "ranks as a whole number above 0; found 8.0"),
    ({"message_bytes": -1}, "message size in bytes as a whole number above 0"),
    ({"hop_latency_us": float("nan")}, "per-pair copy latency in us as a number above 0; found nan"),
    ({"bus_gbps": 0}, "bus bandwidth in GB/s as a number above 0; found 0"),
    ({"nodes": 3}, r"ranks \(8\) spread evenly over the nodes \(3\)"),
])
def test_bad_inputs_say_what_was_expected(kwargs: dict, message: str) -> None:
    args = {"ranks": 8, "message_bytes": 12288, "hop_latency_us": HOP, **kwargs}
    with pytest.raises(ModelError, match=message):
        estimate_allreduce(**args)


@given(ranks=st.integers(2, 64), hop=st.floats(0.1, 1000), size=st.integers(1, 2**30))
def test_property_never_faster_than_the_fewest_hops(ranks: int, hop: float, size: int) -> None:
    estimate = estimate_allreduce(ranks, size, hop)
    assert estimate["time_us"] >= min(estimate["ring"]["steps"], estimate["tree"]["steps"]) * hop * (1 - 1e-9)


def test_a_transfer_read_as_an_all_reduce_is_refused() -> None:
    reason = not_an_allreduce(8, 13.7, 13.9)
    assert reason and "waits 14 dependent transfers" in reason and "transfer test, not an all-reduce" in reason
    # A real 8-GPU all-reduce is slower than two copies; two ranks and unknowns say nothing.
    assert not_an_allreduce(8, 120.0, 13.9) is None
    assert not_an_allreduce(2, 13.7, 13.9) is None
    assert not_an_allreduce(8, 13.7, None) is None
    assert not_an_allreduce(None, 13.7, 13.9) is None
