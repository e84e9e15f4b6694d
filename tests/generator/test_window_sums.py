"""The pooling references' window sums: exact per window where a prefix-sum difference
loses a small window beside a huge one, and equal to a plain sum on any stride, dilation
and padding."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from generator.ops import windows
from oracles.references import read_reference


def _plain(y: torch.Tensor, k: int, s: int, d: int) -> torch.Tensor:
    n = y.shape[-1]
    count = (n - (k - 1) * d - 1) // s + 1
    windows = [torch.stack([y[..., i * s + j * d] for j in range(k)], -1).sum(-1) for i in range(count)]
    return torch.stack(windows, -1)


@pytest.mark.parametrize(("k", "s", "d"), [(1, 1, 1), (3, 1, 1), (3, 2, 1), (2, 3, 2), (4, 1, 3)])
def test_window_sums_match_a_plain_sum_on_both_paths(k: int, s: int, d: int, monkeypatch: pytest.MonkeyPatch) -> None:
    y = torch.tensor(np.random.default_rng(k * 7 + s + d).normal(size=(2, 3, 17)))
    want = _plain(y, k, s, d)
    assert torch.allclose(windows._window_sum_1d(y, k, s, d), want, rtol=0, atol=1e-12)
    monkeypatch.setattr(windows, "DIRECT_SUM_CELLS", 0)  # the prefix-sum path, for huge windows
    assert torch.allclose(windows._window_sum_1d(y, k, s, d), want, rtol=0, atol=1e-12)


def test_a_small_window_beside_a_huge_one_keeps_its_value() -> None:
    """Found by a campaign on onnxruntime 1.31.1: LpPool p=3, kernel 1, on [1.77, 15252.9,
    -0.005]; the prefix-sum reference said 0 where onnxruntime (rightly) said 0.005."""
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[1], p=3)
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node], "g", [value("x", TensorProto.FLOAT, [1, 1, 3])], [value("y", TensorProto.FLOAT, [1, 1, 3])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([[[1.7739897, 15252.881, -5.0043464e-3]]], np.float32)
    outputs = read_reference(model, {"x": x}).outputs
    assert outputs is not None
    y = outputs["y"]
    np.testing.assert_allclose(y, np.abs(x), rtol=1e-6)
    onnx.checker.check_model(model)
