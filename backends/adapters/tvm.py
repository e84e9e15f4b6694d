"""Apache TVM (Relax) on the `llvm` target, through its ONNX frontend.

In Relax an optimization level is a choice of pass pipeline; PassContext's opt_level
alone changes almost nothing. fuzzbot's levels are the two pipelines users reach for:

- `O0`: the build-only lowering (`default_build`: LegalizeOps, memory planning, VM
  lowering) with no FoldConstant and no operator fusion, at PassContext opt_level 0;
- `default`: the target's default pipeline (`relax.get_default_pipeline(target)`:
  LegalizeOps, FoldConstant, FuseOps, FuseTIR, then the same lowering), at opt_level 3.

The configurations TVM's own tutorials and users run on an imported model before that
pipeline are levels too, each a list of Relax passes on the high-level module
(`PREPARATIONS`), then `default`. Each takes paths the default pipeline never does:

- `fold`: FoldConstant on the high-level ops, which evaluates a constant subgraph at
  compile time with the op's own legalization, before LegalizeOps ever sees it;
- `inference`: DecomposeOpsForInference, then FoldConstant: BatchNorm and LayerNorm become
  arithmetic whose constant parts are folded into the weights;
- `nhwc`: ConvertLayout of every conv2d to NHWC (weights OHWI), the CPU layout users ask
  for, with the layout transforms it inserts around each op in between.

apache-tvm 0.25 to 0.27 differ in small ways; each difference is probed with getattr
here rather than by version number, so a nightly between releases works too.

Rewrites (at every level but `O0`, which fuses nothing) are read off the built VM executable's text
(`as_text()`, a fraction of a millisecond): FuseOps and FuseTIR leave one PrimFunc per group
of two or more ops, named `fused_<op>_<op>...` (a lone op keeps its own name, no `fused_`),
and each is counted by the VM instructions that call it, as `tvm::fused_<ops>` with the
digits TVM appends to keep names unique dropped (`fused_matmul1_add2` is
`tvm::fused_matmul_add`). An op whose own name ends in a digit (`log2`) loses it too.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from backends.adapters.base import Adapter


class TvmAdapter(Adapter):
    name = "tvm"
    system_modules = ("tvm",)
    coverage_modules: ClassVar[tuple[str, ...] | None] = ("tvm.relax.frontend",)
    """The ONNX frontend is Python (its passes are C++ behind Python wrappers)."""
    PREPARATIONS: ClassVar[dict[str, tuple[tuple[str, tuple[Any, ...]], ...]]] = {
        "fold": (("FoldConstant", ()),),
        "inference": (("DecomposeOpsForInference", ()), ("FoldConstant", ())),
        "nhwc": (("ConvertLayout", ({"relax.nn.conv2d": ["NHWC", "OHWI"]},)),),
    }
    """Level -> the `relax.transform` passes (name, arguments) run on the imported module
    before the default pipeline; the repro script writes the same calls."""
    levels = ("O0", "default", *PREPARATIONS)
    default_level = "default"
    level_help = (
        "O0: default_build lowering only (no FoldConstant, no fusion); default: get_default_pipeline(llvm);"
        " fold, inference, nhwc: FoldConstant / DecomposeOpsForInference+FoldConstant / ConvertLayout(conv2d NHWC)"
        " on the imported module, then default"
    )
    opsets = (1, 22)
    unsupported = (
        r"OpNotImplemented",
        r"OpAttributeUnImplemented",
        r"not (?:yet |currently )?supported",
        r"[Nn]ot (?:yet )?implemented",
        r"(?:is|are) (?:currently )?unsupported",
        r"Unsupported (?:input type|PRelu slope shape|output datatype|coordinate_transformation_mode"
        r"|kernel size|tile size|layout)",
        r"param datatype should be one of",
        r"(?<!emit_te now )[Oo]nly supports?\b",
        r"supported only",
        r"\b[Oo]nly [\w /-]+? (?:is |are )?(?:currently )?supported",
        r"requires (?:a )?(?:statically (?:known|typed)|known input rank)",
        r"must be a [Cc]onstant",
        r"for Relax frontend",
        r"ShapeExpr input|static shape is unknown|Cannot broadcast symbolic|cannot be proven",
    )
    """TVM's own wording for what it does not handle, from the Relax ONNX frontend's raises
    and asserts, topi's computes (Resize's `Unsupported coordinate_transformation_mode:
    half_pixel_symmetric`, a Resize-19 mode, was a crash report on 0.26 -> 0.27) and the
    legalizers' messages (tests/backends/test_tvm_limits.py reads them from the installed
    TVM's source and checks each is classified, and no invalid-model error is).
    Not one: LegalizeOps' `emit_te now only supports Tensor that has ShapeExpr shape`, which
    a frontend op that lost a symbolic input's shape leads to (Sub of `[batch,1]` and
    `[2,1]`, then Div, in 0.25-0.27): the static model runs, so it is a bug to report.
    A model whose inputs declare dim_params is compiled with them as Relax symbolic vars
    (from_onnx keeps them) and run at the feeds' sizes."""
    repro_requires = ("onnx", "apache-tvm=={version}")
    worker_requires = ("onnx",)
    options = {"threads": "TVM_NUM_THREADS for the compiled code [1]", "target": "TVM target string [llvm]"}
    count_options = ("threads",)

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        os.environ.setdefault("TVM_NUM_THREADS", str(options.get("threads", 1)))
        import onnx
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        self.onnx, self.tvm, self.relax, self.from_onnx = onnx, tvm, relax, from_onnx
        self.target = tvm.target.Target(str(options.get("target", "llvm")))
        self.device = tvm.cpu()

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.tvm.__version__, "commit": self._commit()}

    def _commit(self) -> str | None:
        version_mod = getattr(self.tvm, "_version", None)
        commit = getattr(version_mod, "__commit_id__", None)
        if not commit:
            libinfo: dict[str, str] = getattr(getattr(self.tvm, "support", None), "libinfo", dict)()
            commit = libinfo.get("GIT_COMMIT_HASH")
        return str(commit).removeprefix("g") if commit else None

    def convert(self, model: bytes) -> Any:
        proto = self.onnx.load_from_string(model)
        return self.from_onnx(proto), [o.name for o in proto.graph.output], _runtime_inputs(proto)

    def compile(self, model: Any, level: str) -> Any:
        mod, outputs, inputs = model
        with self.tvm.transform.PassContext(opt_level=0 if level == "O0" else 3):
            for name, args in self.PREPARATIONS.get(level, ()):
                make = getattr(self.relax.transform, name, None)
                if make is None:  # a build without the pass declines the level; it is no crash
                    raise NotImplementedError(f"relax.transform.{name} is not supported by this TVM build")
                mod = make(*args)(mod)
            executable = self._build(mod, self._pipeline(level))
        vm = self.relax.VirtualMachine(executable, self.device)
        return vm, outputs, inputs, executable if level != "O0" else None

    def rewrites(self, compiled: Any) -> dict[str, int]:
        """`tvm::fused_<ops>` -> calls of such fused functions in the VM program."""
        executable = compiled[3]
        return fused_functions(executable.as_text()) if executable is not None else {}

    def _pipeline(self, level: str) -> Any:
        relax = self.relax
        if level == "O0":
            names = getattr(getattr(relax, "pipeline", None), "PIPELINE_MAP", {})
            return relax.get_pipeline("default_build" if "default_build" in names else "default")
        if hasattr(relax, "get_default_pipeline"):
            return relax.get_default_pipeline(self.target)
        return self.tvm.transform.Sequential([relax.get_pipeline("zero"), relax.get_pipeline("default_build")])

    def _build(self, mod: Any, pipeline: Any) -> Any:
        build = getattr(self.tvm, "compile", None)  # tvm.compile from 0.20; relax.build before and beside it
        if build is not None:
            return build(mod, target=self.target, relax_pipeline=pipeline)
        return self.relax.build(mod, target=self.target, relax_pipeline=pipeline)

    def _tensor(self, value: np.ndarray) -> Any:
        runtime = self.tvm.runtime
        make = getattr(runtime, "tensor", None) or self.tvm.nd.array  # NDArray was renamed Tensor
        return make(np.require(value, requirements="C"), self.device)  # keeps a 0-d input 0-d

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vm, outputs, names, _ = compiled
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"missing inputs {missing}")
        result = vm["main"](*(self._tensor(inputs[n]) for n in names))
        values = _flatten(result)
        if len(values) != len(outputs):
            raise RuntimeError(f"TVM returned {len(values)} outputs for {len(outputs)} graph outputs")
        return dict(zip(outputs, values, strict=True))

    @classmethod
    def repro_snippet(cls, level: str, options: Mapping[str, str] | None = None) -> str:
        pipeline = 'relax.get_pipeline("default_build")' if level == "O0" else "relax.get_default_pipeline(target)"
        opt = 0 if level == "O0" else 3
        prepare = "".join(
            f"\n        mod = relax.transform.{name}({', '.join(map(repr, args))})(mod)"
            for name, args in cls.PREPARATIONS.get(level, ())
        )
        return f"""def run(model_bytes, inputs):
    import numpy as np
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    proto = onnx.load_from_string(model_bytes)
    target = tvm.target.Target("llvm")
    with tvm.transform.PassContext(opt_level={opt}):
        mod = from_onnx(proto){prepare}
        executable = tvm.compile(mod, target=target, relax_pipeline={pipeline})
    vm = relax.VirtualMachine(executable, tvm.cpu())
    initializers = {{t.name for t in proto.graph.initializer}}
    args = [tvm.runtime.tensor(inputs[i.name]) for i in proto.graph.input if i.name not in initializers]
    result = vm["main"](*args)
    # A Shape output comes back as a tuple of ints, not a tensor.
    single = hasattr(result, "numpy") or all(isinstance(v, int) for v in result)
    values = [result] if single else list(result)

    def as_array(v):
        return v.numpy() if hasattr(v, "numpy") else np.asarray(list(v), dtype=np.int64)

    return {{o.name: as_array(v) for o, v in zip(proto.graph.output, values)}}
"""


_DECLARED = re.compile(r"^@(fused_\w+) packed_func;", re.MULTILINE)
_CALL = re.compile(r"^\s*call\s+(fused_\w+)\s+in:", re.MULTILINE)


def fused_functions(vm_text: str) -> dict[str, int]:
    """Fused functions in a Relax VM executable's text, by op names, with how often the VM
    program calls them (once at least: a call through a builtin names it elsewhere)."""
    calls = Counter(_CALL.findall(vm_text))
    keys: Counter[str] = Counter()
    for name in set(_DECLARED.findall(vm_text)) | set(calls):
        parts = [p.rstrip("0123456789") for p in name.split("_")]
        keys["tvm::" + "_".join(p for p in parts if p)] += max(calls[name], 1)
    return dict(sorted(keys.items()))


def _runtime_inputs(proto: Any) -> list[str]:
    """Graph inputs that are not initializers, in order: the Relax `main` parameters."""
    initializers = {t.name for t in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in initializers]


def _flatten(value: Any) -> list[np.ndarray]:
    """Tensors in output order. A Shape (or Size) output comes back from the VM as a
    ShapeTuple of Python ints, not a tensor: it is the int64 tensor ONNX means."""
    if hasattr(value, "numpy"):
        return [np.asarray(value.numpy())]
    items = list(value)
    if all(isinstance(item, int) for item in items) and type(value) not in (list, tuple):
        return [np.asarray(items, dtype=np.int64)]
    out: list[np.ndarray] = []
    for item in items:
        out.extend(_flatten(item))
    return out
