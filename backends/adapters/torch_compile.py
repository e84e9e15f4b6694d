"""torch.compile (Dynamo + Inductor) on the torch module of the graph: PyTorch's own
compiler, tested on the same op implementations the reference runs eagerly.

Design: the worker rebuilds the module from the ONNX bytes with the generator's
operator registry, whose `reference` functions are the eager torch semantics of each
op. This is the one adapter that puts `generator` on the worker's path
(`worker_packages`); the alternatives were worse: shipping a pickled module breaks
the no-pickle rule, and exporting torch code as text would duplicate every op. So a
torch.compile worker needs torch, numpy, onnx and z3 (the registry's own imports),
and it compiles exactly the graph every other backend received.

Inductor compiles on the first call, so `warmup` makes that call inside the compile
stage with the real inputs; `run` then times and checks the compiled code alone.
Dynamo's caches are reset before each model: every model is a new graph, and a warm
cache would hit its recompile limit and silently fall back to eager.

No rewrites are reported (no `rewrites` method): torch.compile exposes nothing cheap that
names them. Dynamo's `counters["inductor"]` only totals pattern matches, process-wide, and
stays still when the FX graph cache answers a graph compiled before; Inductor's kernel names
(`cpp_fused_add_relu_0`) are only in its output-code logs, which cost a logging handler and a
text parse per model.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from backends.adapters.base import Adapter


class TorchCompileAdapter(Adapter):
    name = "torch.compile"
    system_modules = ("torch",)
    coverage_modules: ClassVar[tuple[str, ...] | None] = ()
    """Dynamo and inductor are Python, but tracing them costs more than a compile: name them
    in guide.coverage_modules to measure them."""
    level_args: dict[str, dict[str, Any]] = {
        "aot_eager": {"backend": "aot_eager"},
        "default": {"backend": "inductor"},
        "max-autotune": {"backend": "inductor", "mode": "max-autotune-no-cudagraphs"},
        "dynamic": {"backend": "inductor", "dynamic": True},
    }
    """fuzzbot level -> torch.compile keyword arguments."""
    levels = tuple(level_args)
    default_level = "default"
    level_help = (
        "aot_eager: Dynamo+AOTAutograd, no codegen; default: Inductor; max-autotune: Inductor autotuning;"
        " dynamic: Inductor with dynamic=True (every size a symbol)"
    )
    opsets = (7, 22)
    unsupported = (r"not implemented for '", r"not supported by the torch module builder")
    probe = False
    options = {"threads": "torch intra-op threads [1]", "fullgraph": "1 to fail on graph breaks [0]"}
    count_options = ("threads", "fullgraph")
    worker_packages = ("generator",)
    repro_requires = ("onnx", "z3-solver", "torch=={version}")
    worker_requires = ("onnx",)
    repro_note = (
        "Also needs fuzzbot's checkout on PYTHONPATH: the torch module is rebuilt from the model "
        "with fuzzbot's generator (its op registry)."
    )

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        import torch
        import torch._dynamo
        import torch._inductor.config

        self.torch = torch
        torch.set_num_threads(int(options.get("threads", 1)))
        torch._inductor.config.compile_threads = 1  # compile in this process: its crashes are the worker's
        self.fullgraph = str(options.get("fullgraph", "0")) == "1"

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.torch.__version__, "commit": self.torch.version.git_version}

    def convert(self, model: bytes) -> Any:
        import onnx

        from backends.adapters.torch_graph import OnnxModule

        return OnnxModule(onnx.load_from_string(model))

    def compile(self, model: Any, level: str) -> Any:
        self.torch._dynamo.reset()
        compiled = self.torch.compile(model, fullgraph=self.fullgraph, **self.level_args[level])
        return model, compiled

    def warmup(self, compiled: Any, inputs: dict[str, np.ndarray]) -> None:
        self._call(compiled, inputs)

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._call(compiled, inputs)

    def _call(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        module, fn = compiled
        args = [self.torch.from_numpy(np.array(inputs[n], copy=True)) for n in module.input_names]
        with self.torch.no_grad():
            values = fn(*args)
        return {n: v.detach().cpu().numpy().copy() for n, v in zip(module.output_names, values, strict=True)}
