"""Finding bundles on disk: model.onnx, inputs.npz, reference.npz, finding.json, repro.py.

A bundle is written into a temporary folder and renamed into place, so a reader
(or a crash halfway) never sees a partial finding.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from pydantic import BaseModel, Field, ValidationError

from backends.results import BackendInfo
from bot import __version__
from bot.errors import UserError
from generator import onnx_checks
from generator.api import GenConfig
from oracles.sides import CrossKey, Localization
from oracles.verdict import Judgement, Verdict


class BundleError(UserError):
    """A bundle or model file that cannot be read; the message fits on one line."""


class DtypeEvidence(BaseModel):
    """The element types a reduced trigger was tried at, by what each showed (bot.reduce.generalize)."""

    dtype: str
    """The type the trigger was found with (its first input's)."""
    fails: list[str] = Field(default_factory=list)
    passes: list[str] = Field(default_factory=list)
    untestable: list[str] = Field(default_factory=list)

    @property
    def needs_dtype(self) -> bool:
        """Whether the failure depends on the type: only a type that passes says so."""
        return bool(self.passes)

    def describe(self) -> str:
        """For people: where the bug shows and where it does not."""
        shown = f"fails at {', '.join(self.fails)}"
        return shown + (f"; passes at {', '.join(self.passes)}" if self.passes else "")


class Finding(Judgement):
    """A judgement plus where it came from: what finding.json holds."""

    schema_version: int = 1
    backend: BackendInfo
    """The build whose failure this is (head, or base for a fixed bug)."""
    base_backend: BackendInfo | None = None
    """The base build of a two-build campaign."""
    side: str = "head"
    spec: str = ""
    """The backend spec the campaign ran (a plugin's `module:Class:LEVEL` is not its name)."""
    seed: int | None = None
    generator: GenConfig | None = None
    stderr_tail: str = ""
    across: CrossKey = ""
    """The verdict across sides (persistent, new_regression, ...; flaky or filtered:<rule> when set aside)."""
    runs: list[Verdict] = Field(default_factory=list)
    """The verdict of each of the k runs on the failing side."""
    rule_detail: str = ""
    localization: Localization | None = None
    note: str = ""
    base_failure: str = ""
    """Of a persistent finding whose base failed the original differently: base's failure
    (oracles.sides.CrossJudgement.base_failure), until the reduced model settles the label."""
    dtypes: DtypeEvidence | None = None
    """Of a reduced finding: the types its trigger fails and passes at (bot.reduce.generalize)."""
    blamed: str = ""
    """Of a reduced finding: the first wrong tensor upstream of what was seen, as `<kind of
    mismatch> at <kernel>` (bot.reduce.blame), when the build computed one wrong before the
    failing output or the crashing node; the report's identity, over the failure's own."""
    rewrite: str = ""
    """Of a reduced finding that needs the optimizer: the one rewrite whose absence alone
    makes the build right (bot.reduce.rewrite_blame); the report's identity, over the kernel's."""
    form: str = ""
    """Of a reduced finding: the spelling whose rewriting alone makes the build right
    (`Resize with negative axes`: bot.reduce.form_blame); the report's identity, over the
    kernel's and the check's."""
    kept: dict[str, str] = Field(default_factory=dict)
    """Of a reduced finding: what every candidate had to keep on each side (`head: wrong_result`,
    `base: pass`), so a reader knows the reduction never drifted onto a bug base shares."""
    fuzzbot_version: str = __version__
    created: str = ""

    @property
    def spec_text(self) -> str:
        """The backend spec that reproduces this finding: the campaign's own, else (a
        finding.json from before specs were recorded) the build's name and level."""
        info = self.backend
        return self.spec or (f"{info.name}:{info.level}" if info.level else info.name)


@dataclass
class Bundle:
    path: Path
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray] | None
    finding: Finding | None


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]


def load_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise BundleError(f"cannot read {path}: {e}") from e


def write_bundle(
    dest: Path,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    reference: dict[str, np.ndarray] | None,
    finding: Finding | None = None,
    repro: str | None = None,
) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        (tmp / "model.onnx").write_bytes(model.SerializeToString())
        save_npz(tmp / "inputs.npz", inputs)
        if reference is not None:
            save_npz(tmp / "reference.npz", reference)
        if finding is not None:
            if not finding.created:
                finding.created = datetime.now(UTC).isoformat(timespec="seconds")
            (tmp / "finding.json").write_text(finding.model_dump_json(indent=2) + "\n")
        if repro is not None:
            (tmp / "repro.py").write_text(repro)
            os.chmod(tmp / "repro.py", 0o755)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def load_model(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise BundleError(f"no such file: {path}")
    try:
        model = onnx.load(str(path))
    except (DecodeError, ValueError, RuntimeError, OSError) as e:
        raise BundleError(f"{path} is not a readable ONNX model ({type(e).__name__})") from e
    if not model.graph.node and not model.graph.output:
        raise BundleError(f"{path} is not a readable ONNX model (empty graph)")
    try:
        onnx_checks.check_model(model)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "invalid"
        raise BundleError(f"{path} fails the ONNX checker: {first}") from e
    return model


def _as_declared(values: Iterable[onnx.ValueInfoProto], arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`arrays` with each one np.load read back as raw bytes viewed as the type its graph
    value declares. np.savez writes ml_dtypes' types (bfloat16, the float8s) as void, and a
    reduced trigger whose input is a bfloat16 tensor once took the campaign down in its
    reference ("can't convert np.ndarray of type numpy.void")."""
    declared = {v.name: v.type.tensor_type.elem_type for v in values if v.type.HasField("tensor_type")}
    for name, array in arrays.items():
        if array.dtype.kind == "V" and declared.get(name):
            want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(declared[name]))
            if want.itemsize == array.dtype.itemsize:
                arrays[name] = array.view(want)
    return arrays


def load_bundle(path: Path) -> Bundle:
    if not path.exists():
        raise BundleError(f"no such file or folder: {path}")
    if path.is_file():
        return Bundle(path, load_model(path), {}, None, None)
    model = load_model(path / "model.onnx")
    inputs = _as_declared(model.graph.input, load_npz(path / "inputs.npz")) if (path / "inputs.npz").exists() else {}
    reference = load_npz(path / "reference.npz") if (path / "reference.npz").exists() else None
    if reference is not None:
        reference = _as_declared(model.graph.output, reference)
    finding = None
    if (path / "finding.json").exists():
        try:
            finding = Finding.model_validate(json.loads((path / "finding.json").read_text()))
        except (ValueError, ValidationError) as e:
            raise BundleError(f"{path / 'finding.json'} is not a valid finding: {str(e).splitlines()[0]}") from e
    return Bundle(path, model, inputs, reference, finding)


def move_bundle(bundle: Path, dest: Path) -> Path:
    """Move a bundle folder to `dest`, replacing a bundle already there: the same name is
    the same label, fingerprint and seed, so the same case, left by an earlier campaign
    into this output folder (running `make fuzz` twice)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() and dest != bundle:
        shutil.rmtree(dest)
    bundle.rename(dest)
    return dest
