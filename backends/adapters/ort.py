"""onnxruntime, driven the way its users drive it: an InferenceSession per model at
a chosen graph optimization level on a chosen execution provider.

Above `disable`, each session also saves the graph its optimizer made
(`SessionOptions.optimized_model_filepath`), and `rewrites` compares it with the model
given: which fusions and eliminations this build performed, with no instrumentation.

`parallel` is the configuration a serving deployment runs, where races live: every
optimization of `all`, the parallel executor (`ExecutionMode.ORT_PARALLEL`, independent
nodes at once on 2 inter-op threads) and 2 intra-op threads per kernel, or the `threads`
option when that asks for more.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from backends.adapters.base import Adapter, Unavailable
from backends.adapters.rewrites import onnx_op_counts, rewrite_keys, tensor_producers

SAVING_PROVIDERS = frozenset({"CPUExecutionProvider"})
"""Providers whose sessions save the optimized graph. One that compiles nodes (TensorRT,
the OpenVINO provider) cannot serialize them and would fail the session, so the saving is
kept to the providers known to save."""


@contextmanager
def optimized_file() -> Iterator[tuple[str, Callable[[], bytes]]]:
    """A path for onnxruntime to write the optimized graph to, and how to read it back: an
    anonymous in-memory file where Linux has them (no disk, nothing left behind by a worker
    that crashes mid-compile), a scratch folder elsewhere."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("fuzzbot-optimized")
        try:
            yield f"/proc/self/fd/{fd}", lambda: os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="fuzzbot-ort-") as tmp:
        path = os.path.join(tmp, "optimized.onnx")

        def read() -> bytes:
            with open(path, "rb") as f:
                return f.read()

        yield path, read


_NOT_FUSED = r"(?s)^(?!.*Fusion/')"
"""A message that names no node a fusion made (onnxruntime names them `<node>/<Name>Fusion/`)."""


class OrtAdapter(Adapter):
    name = "onnxruntime"
    system_modules = ("onnxruntime",)
    coverage_modules: ClassVar[tuple[str, ...] | None] = ()
    """Its optimizer is C++."""
    level_names = {
        "disable": "ORT_DISABLE_ALL",
        "basic": "ORT_ENABLE_BASIC",
        "extended": "ORT_ENABLE_EXTENDED",
        "all": "ORT_ENABLE_ALL",
        "parallel": "ORT_ENABLE_ALL",
    }
    """fuzzbot level -> GraphOptimizationLevel member, shared by sessions and repro scripts."""
    PARALLEL_THREADS = 2
    """Inter-op threads of `parallel`, and its least intra-op threads: the fewest that race."""
    levels = tuple(level_names)
    default_level = "all"
    level_help = (
        "SessionOptions.graph_optimization_level: ORT_DISABLE_ALL, ORT_ENABLE_BASIC, _EXTENDED, _ALL;"
        " parallel: _ALL with ExecutionMode.ORT_PARALLEL and 2 inter-op and intra-op threads"
    )
    opsets = (7, 26)
    """1.25 and later load 26, older releases less: the support probe asks each build (bot.sides.opset_probe)."""
    unsupported = (
        _NOT_FUSED + r".*NOT_IMPLEMENTED",
        _NOT_FUSED + r".*Could not find an implementation for",
        _NOT_FUSED + r".*is not (?:currently )?supported",
        r"Unsupported model IR version",
        r"official support for domain \S+ is till opset",
        r"operations \(layout == 1\) are not supported",
        r"does not support \w+ yet",
        r"only supports NHW and NCHW reduction for axes attribute",
        r"is_onesided and inverse attributes cannot be enabled at the same time",
        r"block_size must be 0 for per-tensor quantization",
    )
    """Also a model newer than the build reads (its IR version or opset): a declared limit,
    not a crash of the build (`fuzzbot check` judged an IR-14 model a crash on 1.31.1); and
    the recurrent kernels' own refusals: "Batchwise recurrent operations (layout == 1) are
    not supported", "GRU operator does not support double yet"; and MeanVarianceNormalization's
    before 1.19, which takes only the axes [0, 2] and [0, 2, 3] ("CPU EP only supports NHW and
    NCHW reduction for axes attribute"), reported as a crash on 1.15.1; and a DFT with both
    `inverse` and `onesided` (an irfft), which the spec left unclear until onnx#7574 and the
    releases before onnxruntime#27028 refuse by their schema, reported as a crash on every old
    pair triaged (1.17.1 -> 1.17.3, 1.19.0 -> 1.19.2); and a `block_size` over a scale of one
    element, which the kernels read as per-tensor, as QuantizeLinear-21's spec reads a rank-1
    input ("block_size must be 0 for per-tensor quantization"). But a kernel missing for a
    node the build's own optimizer made (`<node>/QuickGeluFusion/`: a float64 x * Sigmoid(x)
    * 1.702 becomes a com.microsoft.QuickGelu, which has no float64 kernel, so a model that
    runs at `disable` fails to load at `all`) is no declared limit but the optimizer's bug,
    and stays an error."""
    refused_node = r"for (?:[\w.]*\.)?(?P<op>\w+)\(\d+\) (?:\(node:|node with name )'(?P<node>[^']+)'"
    """"Failed to find kernel for com.microsoft.QuickGelu(1) (node:'QuickGelu' ...)", "Could
    not find an implementation for Softplus(1) node with name 'n3'"."""
    repro_requires = ("onnxruntime=={version}",)
    options = {
        "provider": "execution provider(s), '+'-separated in priority order [CPUExecutionProvider]",
        "threads": "intra-op threads [1]",
        "trace": "1: log each graph transformer as it runs, so a crash inside one is named by it [0]",
        "disable": "graph transformers or rewrite rules to turn off, '+'-separated: how a failure's "
        "guilty rewrite is found (a repro does not carry it) []",
    }
    count_options = ("threads",)

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        import onnxruntime

        self.ort = onnxruntime
        self.providers = str(options.get("provider", "CPUExecutionProvider")).split("+")
        self.threads = int(options.get("threads", 1))
        self.trace = options.get("trace", "0") == "1"
        self.disabled = [n for n in str(options.get("disable", "")).split("+") if n]
        have = onnxruntime.get_available_providers()
        missing = [p for p in self.providers if p not in have]
        if missing:
            build = f"onnxruntime {onnxruntime.__version__}"
            raise Unavailable(f"{build} has no {', '.join(missing)}; it has {', '.join(have)}")
        self._saved: tuple[weakref.ref[Any], bytes, bytes] | None = None
        """The last session, the model it was made from and the graph its optimizer saved."""

    def info(self) -> dict[str, Any]:
        build = getattr(self.ort, "get_build_info", lambda: "")()
        m = re.search(r"git-commit-id=([0-9a-f]+)", build)
        return {"name": self.name, "version": self.ort.__version__, "commit": m.group(1) if m else None}

    def _options(self, level: str) -> Any:
        so = self.ort.SessionOptions()
        so.graph_optimization_level = getattr(self.ort.GraphOptimizationLevel, self.level_names[level])
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        if level == "parallel":
            so.execution_mode = self.ort.ExecutionMode.ORT_PARALLEL
            so.inter_op_num_threads = self.PARALLEL_THREADS
            so.intra_op_num_threads = max(self.threads, self.PARALLEL_THREADS)
        so.log_severity_level = 1 if self.trace else 3
        return so

    def compile(self, model: Any, level: str) -> Any:
        self._saved = None
        saves = level != "disable" and isinstance(model, bytes) and SAVING_PROVIDERS.issuperset(self.providers)
        off = {"disabled_optimizers": self.disabled} if self.disabled else {}
        if not saves:
            return self.ort.InferenceSession(model, self._options(level), providers=self.providers, **off)
        with optimized_file() as (path, read):
            so = self._options(level)
            so.optimized_model_filepath = path
            session = self.ort.InferenceSession(model, so, providers=self.providers, **off)
            with contextlib.suppress(OSError):
                optimized = read()
                if optimized:
                    self._saved = (weakref.ref(session), model, optimized)
        return session

    def rewrites(self, compiled: Any) -> dict[str, int]:
        """Node types the optimized graph has more (`+`) or fewer (`-`) of than the model;
        nothing at `disable`, where no graph is saved."""
        saved = self._saved
        if saved is None or saved[0]() is not compiled:
            return {}
        return rewrite_keys(onnx_op_counts(saved[1]), onnx_op_counts(saved[2]))

    def kernels(self, compiled: Any) -> dict[str, str]:
        """Tensor -> the optimized graph's node type that computes it, for every tensor the
        optimized graph has (the kernel a wrong output came from, which names the bug);
        nothing at `disable`, where the model's own nodes ran."""
        saved = self._saved
        if saved is None or saved[0]() is not compiled:
            return {}
        return tensor_producers(saved[2])

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in compiled.get_outputs()]
        values = compiled.run(names, inputs)
        return {n: np.asarray(v) for n, v in zip(names, values, strict=False)}

    @classmethod
    def repro_snippet(cls, level: str, options: Mapping[str, str] | None = None) -> str:
        const = cls.level_names[level]
        threads = int((options or {}).get("threads", 1))
        if level == "parallel":
            parallel = (
                f"\n    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL"
                f"\n    so.inter_op_num_threads = {cls.PARALLEL_THREADS}"
                f"\n    so.intra_op_num_threads = {max(threads, cls.PARALLEL_THREADS)}"
            )
        else:
            parallel = f"\n    so.intra_op_num_threads = {threads}\n    so.inter_op_num_threads = 1"
        return f"""def run(model_bytes, inputs):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.{const}{parallel}
    session = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))
"""
