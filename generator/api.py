"""The generator's entry point: seed and config in, a runnable test case out."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import onnx
from pydantic import BaseModel, ConfigDict, Field

from generator.binning import solve_with_bins
from generator.dtypes import DType
from generator.emit import IR_VERSION, draw_values, emit_model
from generator.grow import Grower
from generator.ops import registry
from generator.symbolic import SymCtx, TType

DEFAULT_OPSET = 17
"""Accepted by onnxruntime 1.15-1.31 and the TVM 0.25-0.27 Relax frontend alike."""


class GenConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(10, ge=1, le=200, description="operators per model")
    opset: int = Field(DEFAULT_OPSET, ge=min(IR_VERSION), le=max(IR_VERSION))
    max_elements: int = Field(4096, ge=16, description="cap on elements in any tensor or weight")
    weight_prob: float = Field(0.3, ge=0.0, le=1.0, description="chance a placeholder becomes an initializer")
    bins: int = Field(7, ge=1, le=16, description="k of the exponential attribute bins")
    ops: list[str] | None = Field(None, description="restrict to these op types")


@dataclass
class Case:
    seed: int
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]


def op_specs(only: list[str] | None = None) -> list[type]:
    specs = registry()
    if only is not None:
        unknown = sorted(set(only) - set(specs))
        if unknown:
            raise ValueError(f"unknown op types {unknown}; known: {sorted(specs)}")
        return [specs[name] for name in sorted(set(only))]
    return [specs[name] for name in sorted(specs)]


def generate(seed: int, cfg: GenConfig | None = None) -> Case:
    cfg = cfg or GenConfig()
    rng = random.Random(seed)
    sc = SymCtx(rng, max_elements=cfg.max_elements)
    dtypes = [TType(DType.float32, r) for r in (1, 2, 3, 4)]
    grower = Grower(sc, op_specs(cfg.ops), dtypes)
    graph = grower.grow(cfg.nodes, max_attempts=cfg.nodes * 30)
    assert grower.model is not None
    model = solve_with_bins(grower.solver, grower.model, sc.binnable, cfg.bins, rng)
    placeholders = sorted(graph.placeholders)
    keep_input = rng.choice(placeholders)
    as_weight = {p for p in placeholders if p != keep_input and rng.random() < cfg.weight_prob}
    proto, inputs = emit_model(graph, model, cfg.opset, np.random.default_rng(seed), as_weight)
    return Case(seed, proto, inputs)


def inputs_for_model(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded values for a model's graph inputs, for models fuzzbot did not generate."""
    rng = np.random.default_rng(seed)
    initialized = {i.name for i in model.graph.initializer}
    inputs: dict[str, np.ndarray] = {}
    for v in model.graph.input:
        if v.name in initialized:
            continue
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        if any(d < 0 for d in dims):
            raise ValueError(f"input {v.name!r} has a dynamic shape; supply a bundle with inputs.npz")
        inputs[v.name] = draw_values(rng, dims, DType.from_onnx(t.elem_type))
    return inputs
