"""Operator reach: which ONNX standard op types the generator writes, per opset, and which
op types each build runs that it never writes.

For each opset from 13 to 26: the registered specs that exist there. For the installed onnx:
the default-domain op types, those registered, and those not (`generator.unwritten` says why
for each). For each build named (`--ort PYTHON`, `--tvm PYTHON`: the interpreter of a venv
holding it; the project venv's by default): the op types it runs, read from the build itself
(onnxruntime's CPU kernel registry, which misses ops it runs by expanding their function body;
TVM's Relax ONNX converter table), and which of those the generator never writes. Prints one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import onnx

from generator.emit import IR_VERSION
from generator.ops import registry
from generator.unwritten import NOT_WRITTEN

ORT_OPS = """
import json
from onnxruntime.capi import _pybind_state as C
print(json.dumps(sorted({k.op_name for k in C.get_all_opkernel_def()
    if k.domain in ("", "ai.onnx") and k.provider == "CPUExecutionProvider"})))
"""
TVM_OPS = """
import json
from tvm.relax.frontend.onnx import onnx_frontend
print(json.dumps(sorted(onnx_frontend._get_convert_map())))
"""


def _build_ops(python: str, snippet: str) -> set[str]:
    out = subprocess.run([python, "-c", snippet], capture_output=True, text=True, check=True, timeout=300)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def reach(builds: dict[str, str]) -> dict[str, object]:
    specs = registry()
    standard = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}
    unwritten = sorted(standard - set(specs))
    per_build = {}
    for name, python in builds.items():
        runs = _build_ops(python, ORT_OPS if name == "onnxruntime" else TVM_OPS) & standard
        missed = sorted(runs - set(specs))
        per_build[name] = {
            "standard_ops_run": len(runs),
            "run_and_never_written": missed,
            "without_a_reason": [op for op in missed if op not in NOT_WRITTEN],
        }
    return {
        "registered_per_opset": {o: sum(s.exists_at(o) for s in specs.values()) for o in sorted(IR_VERSION)},
        "standard_op_types": len(standard),
        "written": len(standard & set(specs)),
        "never_written": unwritten,
        "never_written_without_a_reason": [op for op in unwritten if op not in NOT_WRITTEN],
        "builds": per_build,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ort", default=sys.executable, help="python of a venv with onnxruntime")
    parser.add_argument("--tvm", default=sys.executable, help="python of a venv with apache-tvm ('' to skip)")
    args = parser.parse_args()
    builds = {"onnxruntime": args.ort, **({"tvm": args.tvm} if args.tvm else {})}
    print(json.dumps(reach(builds), indent=1))


if __name__ == "__main__":
    main()
