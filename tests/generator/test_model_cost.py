"""The cost of evaluating a generated model: the per-op work cap, and pooling references that
pad and reduce one spatial dim at a time, which must give exactly what padding the whole tensor
and pooling it in one go gave (the straightforward form, kept here as the oracle)."""

from __future__ import annotations

import math
import random
from typing import Any

import onnx
import onnx.shape_inference
import pytest
import torch
import torch.nn.functional as F

from generator.api import GenConfig, generate
from generator.binning import Solution
from generator.grow import Grower
from generator.ops import registry
from generator.ops.base import MAX_WORK, OpSpec
from generator.ops.conv import Conv, ConvTranspose
from generator.ops.nn import torch_pads, widen
from generator.ops.pool import MaxPool
from generator.ops.windows import _pool_padding, window_params, window_sum

_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def _old_max_pool(attrs: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    kernel, strides, dil, _ = window_params(attrs, x)
    pads = _pool_padding(attrs, x, kernel, strides, dil)
    xp = F.pad(widen(x) if x.dtype.is_floating_point else x.float(), torch_pads(pads), value=float("-inf"))
    return _MAX_POOL[x.dim() - 2](xp, kernel, stride=strides, dilation=dil).to(x.dtype)


def _old_average_pool(attrs: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    n = x.dim() - 2
    kernel, strides, dil, pads = window_params(attrs, x)
    full = _pool_padding(attrs, x, kernel, strides, dil)
    overhang = [0] * n + [full[i + n] - pads[i + n] for i in range(n)]
    xw = widen(x)
    total = window_sum(F.pad(xw, torch_pads(full)), kernel, strides, dil)
    ones = torch.ones([1, 1, *x.shape[2:]], dtype=xw.dtype)
    if attrs.get("count_include_pad", 0):
        cells = F.pad(F.pad(ones, torch_pads(pads), value=1.0), torch_pads(overhang))
    else:
        cells = F.pad(ones, torch_pads(full))
    return (total / window_sum(cells, kernel, strides, dil)).to(x.dtype)


def _old_lp_pool(attrs: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    p = int(attrs.get("p", 2))
    kernel, strides, dil, _ = window_params(attrs, x)
    pads = _pool_padding(attrs, x, kernel, strides, dil)
    powered = F.pad(widen(x).abs() ** p, torch_pads(pads))
    return (window_sum(powered, kernel, strides, dil) ** (1.0 / p)).to(x.dtype)


OLD = {"MaxPool": _old_max_pool, "AveragePool": _old_average_pool, "LpPool": _old_lp_pool}


def _pool_case(op: str, rng: random.Random) -> tuple[dict[str, Any], torch.Tensor]:
    """Random pool attributes of every form the generator emits, with pads up to a kernel width."""
    n = rng.randint(1, 3)
    shape = [rng.randint(1, 3), rng.randint(1, 3), *(rng.randint(1, 9) for _ in range(n))]
    kernel = [rng.randint(1, 7) for _ in range(n)]
    dil = [rng.randint(1, 2) for _ in range(n)]
    attrs: dict[str, Any] = {"kernel_shape": kernel, "strides": [rng.randint(1, 3) for _ in range(n)]}
    auto = rng.choice(("NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    if auto != "NOTSET":
        attrs["auto_pad"] = auto
        dil = [1] * n
    else:
        # Pads short of a kernel width, and none on a dilated dim: every window holds a real cell.
        attrs["pads"] = [
            rng.randint(0, k - 1) if d == 1 else 0 for k, d in zip(kernel + kernel, dil + dil, strict=True)
        ]
        attrs["ceil_mode"] = int(rng.random() < 0.4)
    for i in range(n):
        shape[2 + i] = max(shape[2 + i], dil[i] * (kernel[i] - 1) + 1)
    attrs["dilations"] = dil
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.random() < 0.5)
    if op == "LpPool":
        attrs["p"] = rng.choice((1, 2, 3))
    dtype = rng.choice((torch.float32, torch.float64, torch.float16))
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    if op == "MaxPool" and rng.random() < 0.3:
        x = torch.randint(-3, 3, shape).to(dtype)  # ties, and -0.0 against 0.0
        x[x == 0] = -0.0 if rng.random() < 0.5 else 0.0
    if rng.random() < 0.1:
        x.view(-1)[rng.randrange(x.numel())] = float("nan")
    return attrs, x


@pytest.mark.parametrize("op", sorted(OLD))
def test_separable_pools_equal_the_padded_whole_tensor_forms(op: str) -> None:
    rng = random.Random(op)
    ref = registry()[op].reference
    for _ in range(300):
        attrs, x = _pool_case(op, rng)
        new = ref(attrs, [x])[0]
        old = OLD[op](attrs, x)
        assert new.shape == old.shape, (attrs, x.shape)
        torch.testing.assert_close(new, old, rtol=0, atol=0, equal_nan=True, msg=str(attrs))
        assert torch.equal(new.signbit(), old.signbit()), (attrs, x.shape)


def test_separable_max_pool_routes_the_gradient_to_the_same_cells() -> None:
    """The value search differentiates through MaxPool: the separable form must pick the very
    cell max_poolNd picks, ties included (tests/generator/test_ops_nn.py checks generated MaxPools against
    onnx.reference and onnxruntime)."""
    rng = random.Random(7)
    ref = registry()["MaxPool"].reference
    for _ in range(100):
        attrs, x = _pool_case("MaxPool", rng)
        x = x.double().nan_to_num(0.0)
        a = x.clone().requires_grad_(True)
        b = x.clone().requires_grad_(True)
        ref(attrs, [a])[0].sum().backward()
        OLD["MaxPool"](attrs, b).sum().backward()
        assert a.grad is not None and b.grad is not None
        assert torch.equal(a.grad, b.grad), attrs


def test_huge_windows_over_padded_input_stay_small() -> None:
    """The shape that made AveragePool pad a 50x1x1 input into ten million cells: the
    per-dim form never holds more than the input padded along one dim."""
    x = torch.randn(9, 5, 50, 1, 1)
    attrs = {
        "ceil_mode": 1,
        "count_include_pad": 1,
        "kernel_shape": [45, 88, 28],
        "pads": [6, 87, 1, 0, 13, 26],
        "strides": [2, 2, 3],
    }
    got = registry()["AveragePool"].reference(attrs, [x])[0]
    assert tuple(got.shape) == (9, 5, 7, 8, 1)
    torch.testing.assert_close(got, _old_average_pool(attrs, x), rtol=0, atol=0)


WINDOWED = ("Conv", "ConvInteger", "ConvTranspose", "MaxPool", "AveragePool", "LpPool")


def _work_in_models(nodes: int, seeds: range) -> list[tuple[str, int]]:
    """(op type, work) of every windowed node of the generated models, read off the ONNX
    graph itself: MACs of a conv are its output cells times a weight's [C/group, *kernel]
    (a transposed conv's, its input cells times [M/group, *kernel]); a pool visits its
    output cells times the kernel."""
    out: list[tuple[str, int]] = []
    for seed in seeds:
        model = onnx.shape_inference.infer_shapes(generate(seed, GenConfig(nodes=nodes, values="none")).model)
        g = model.graph
        shapes = {i.name: list(i.dims) for i in g.initializer}
        for v in [*g.input, *g.value_info, *g.output]:
            shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
        for node in g.node:
            if node.op_type not in WINDOWED:
                continue
            x, y = shapes[node.input[0]], shapes[node.output[0]]
            if node.op_type.startswith("Conv"):
                w = shapes[node.input[1]]
                work = math.prod(x if node.op_type == "ConvTranspose" else y) * math.prod(w[1:])
            else:
                kernel = next(a.ints for a in node.attribute if a.name == "kernel_shape")
                work = math.prod(y) * math.prod(kernel)
            out.append((node.op_type, work))
    return out


def test_no_generated_op_exceeds_the_work_cap() -> None:
    found = _work_in_models(20, range(250)) + _work_in_models(30, range(500, 600))
    assert {op for op, _ in found} == set(WINDOWED)  # the cap leaves every windowed op in the mix
    assert max(work for _, work in found) <= MAX_WORK


def _ops(nodes: int, seeds: range) -> list[tuple[OpSpec, Solution]]:
    """The placed op specs of the generated graphs, with their solutions."""
    grown: list[tuple[OpSpec, Solution]] = []
    real = Grower.grow

    def grow(self: Grower, *args: Any, **kwargs: Any) -> Any:
        graph = real(self, *args, **kwargs)
        grown.extend((node.op, node.solution) for node in graph.nodes)
        return graph

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Grower, "grow", grow)
        for seed in seeds:
            generate(seed, GenConfig(nodes=nodes, values="none"))
    return grown


def test_work_counts_macs_of_convs_and_cells_of_pools() -> None:
    ops = _ops(20, range(120, 280))
    seen = set()
    for op, solution in ops:
        val = solution.eval
        if not isinstance(op, ConvTranspose | Conv | MaxPool):
            continue
        seen.add(op.op_type)
        kernel = math.prod(val(k) for k in op.kernel)
        x = [val(d) for d in op.inputs[0].shape]
        if isinstance(op, ConvTranspose):
            want = math.prod(x) * (val(op.out_channels) // op.group) * kernel
        else:
            out = [x[0], x[1], *(val(d) for d in op.spatial_out(op.inputs))]
            want = math.prod(out) * kernel
            if isinstance(op, Conv):
                want = want // x[1] * val(op.out_channels) * (x[1] // op.group)
        assert op.work(val) == want
    assert seen == {"Conv", "ConvTranspose", "MaxPool"}
