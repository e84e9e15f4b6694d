"""NVIDIA TensorRT 10+ on a CUDA GPU, through the tensor-name API: the ONNX parser
builds the network, `builder_optimization_level` is the level, and each run binds
buffers with `set_input_shape`/`set_tensor_address` and calls `execute_async_v3`.

Device memory and the stream come from torch's CUDA allocator, so the worker's
environment needs torch with CUDA beside `tensorrt`. Without a CUDA device the
adapter raises `Unavailable` with a one-line reason before importing TensorRT.
TF32 is switched off: fuzzbot compares with a float32 reference, and TF32's
10-bit mantissa would make every large matmul a wrong-result report.

No rewrites are reported: the engine's layers (and the fusions in their names) are only
listed by the engine inspector of an engine built with detailed profiling verbosity, a
build setting that is not what users run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from backends.adapters.base import Adapter, Unavailable


class TensorRtAdapter(Adapter):
    name = "tensorrt"
    system_modules = ("tensorrt",)
    coverage_modules: ClassVar[tuple[str, ...] | None] = ()
    """Its builder is C++."""
    level_numbers = {"O0": 0, "O1": 1, "O2": 2, "default": 3, "O4": 4, "O5": 5}
    """fuzzbot level -> IBuilderConfig.builder_optimization_level (3 is TensorRT's default)."""
    levels = tuple(level_numbers)
    default_level = "default"
    level_help = "IBuilderConfig.builder_optimization_level 0-5; default is 3"
    opsets = (9, 22)
    unsupported = (
        r"UNSUPPORTED_NODE",
        r"No importer registered for op",
        r"is not supported",
        r"does not support",
        r"no optimization profile has been defined",
    )
    """TensorRT's own refusals, and the adapter's: it builds no optimization profile yet, so
    a model with a symbolic input dim (GenConfig.symbolic_dims) cannot become an engine
    ("Network has dynamic or shape inputs, but no optimization profile has been defined")."""
    repro_requires = ("tensorrt=={version}", "torch")
    repro_note = "Needs a CUDA GPU, and torch built with CUDA (device buffers come from torch)."
    options = {"device": "CUDA device index [0]", "workspace_mb": "builder workspace limit in MiB [1024]"}
    count_options = ("device", "workspace_mb")
    fresh_by_fork = False
    """`__init__` asks torch.cuda.is_available(), which initializes CUDA, and a process forked
    after that cannot use it ("Cannot re-initialize CUDA in forked subprocess", pytorch#68861):
    a fresh run restarts the worker."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        try:
            import torch
        except ImportError as e:
            raise Unavailable("tensorrt: the worker needs torch (with CUDA) for device memory") from e
        if not torch.cuda.is_available():
            raise Unavailable("tensorrt: no CUDA device")
        try:
            import tensorrt
        except ImportError as e:
            raise Unavailable(f"tensorrt: the package is not installed ({e})") from e
        if int(tensorrt.__version__.split(".")[0]) < 10:
            raise Unavailable(f"tensorrt: version {tensorrt.__version__} predates the tensor-name API (need 10+)")
        self.torch, self.trt = torch, tensorrt
        self.device = torch.device("cuda", int(options.get("device", 0)))
        self.workspace = int(options.get("workspace_mb", 1024)) << 20
        self.logger = _make_logger(tensorrt)

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.trt.__version__, "commit": None}

    def compile(self, model: Any, level: str) -> Any:
        trt = self.trt
        self.logger.errors.clear()
        builder = trt.Builder(self.logger)
        network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
        parser = trt.OnnxParser(network, self.logger)
        if not parser.parse(model):
            errors = [str(parser.get_error(i).desc()) for i in range(parser.num_errors)]
            raise RuntimeError("ONNX parser: " + "; ".join(errors or self.logger.errors))
        config = builder.create_builder_config()
        config.builder_optimization_level = self.level_numbers[level]
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, self.workspace)
        config.clear_flag(trt.BuilderFlag.TF32)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RuntimeError("engine build failed: " + "; ".join(self.logger.errors or ["no message"]))
        engine = trt.Runtime(self.logger).deserialize_cuda_engine(plan)
        if engine is None:
            raise RuntimeError("engine deserialization failed: " + "; ".join(self.logger.errors))
        return engine, engine.create_execution_context()

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        engine, context = compiled
        trt, torch = self.trt, self.torch
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        is_input = {n: engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        keep: dict[str, Any] = {}  # device buffers stay alive until the stream is done
        for name in (n for n in names if is_input[n]):
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            host = np.ascontiguousarray(inputs[name], dtype=dtype)
            keep[name] = torch.from_numpy(host).to(self.device)
            context.set_input_shape(name, tuple(host.shape))
            context.set_tensor_address(name, keep[name].data_ptr())
        for name in (n for n in names if not is_input[n]):
            shape = tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise RuntimeError(f"output {name} has a data-dependent shape, which this adapter does not support")
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            keep[name] = torch.empty(shape, dtype=torch.from_numpy(np.empty(0, dtype)).dtype, device=self.device)
            context.set_tensor_address(name, keep[name].data_ptr())
        stream = torch.cuda.current_stream(self.device)  # the stream the input copies were queued on
        if not context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("execute_async_v3 failed: " + "; ".join(self.logger.errors))
        stream.synchronize()
        return {n: keep[n].cpu().numpy() for n in names if not is_input[n]}

    @classmethod
    def repro_snippet(cls, level: str, options: Mapping[str, str] | None = None) -> str:
        return f"""def run(model_bytes, inputs):
    import numpy as np
    import torch

    if not torch.cuda.is_available():
        raise Unavailable("tensorrt: no CUDA device")
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(model_bytes), [parser.get_error(i).desc() for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    config.builder_optimization_level = {cls.level_numbers[level]}
    config.clear_flag(trt.BuilderFlag.TF32)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    context = engine.create_execution_context()
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    outputs, keep = [], {{}}
    for name in names:
        dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            keep[name] = torch.from_numpy(np.ascontiguousarray(inputs[name], dtype=dtype)).cuda()
            context.set_input_shape(name, tuple(keep[name].shape))
        else:
            outputs.append(name)
    for name in outputs:
        dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
        shape = tuple(context.get_tensor_shape(name))
        keep[name] = torch.empty(shape, dtype=torch.from_numpy(np.empty(0, dtype)).dtype, device="cuda")
    for name in names:
        context.set_tensor_address(name, keep[name].data_ptr())
    stream = torch.cuda.current_stream()
    context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    return {{name: keep[name].cpu().numpy() for name in outputs}}
"""


def _make_logger(trt: Any) -> Any:
    """A TensorRT logger that keeps error messages for the failure report."""

    class Logger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity <= trt.ILogger.Severity.ERROR:
                self.errors.append(msg)

    return Logger()
