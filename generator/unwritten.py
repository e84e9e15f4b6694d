"""The ONNX standard op types fuzzbot never writes, each with the reason.

A compiler's bugs live in the ops it runs; an op a build runs and the generator never
writes is a blind spot. So every default-domain op type of the installed onnx is either a
registered spec or named here with why, and `tests/generator/test_generator.py` fails when onnx
brings an op that is neither. `bench/op_reach.py` counts, per build, the ops it runs that
fall here.
"""

from __future__ import annotations

RANDOM = "random values: no two runs (or builds) agree on them, so there is nothing to compare"
STRINGS = "string tensors: fuzzbot writes numeric and bool element types only"
SEQUENCES = "sequence and optional values: the generator grows tensor-typed graphs only"
TOO_NEW = "arrives after opset 26, the newest opset any build fuzzbot runs loads (onnxruntime 1.31.1)"

RANDOM_OPS = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)
"""The ops whose values the spec leaves to a random generator: outputs computed from them
are judged by whether a build runs, never by value (oracles.case.CaseEvidence.random)."""

NOT_WRITTEN: dict[str, str] = {
    **dict.fromkeys(sorted(RANDOM_OPS), RANDOM),
    **dict.fromkeys(("RegexFullMatch", "StringConcat", "StringNormalizer", "StringSplit"), STRINGS),
    "TfIdfVectorizer": STRINGS + " (its int form counts n-grams of token ids, a text pipeline's op)",
    **dict.fromkeys(("ConcatFromSequence", "SequenceAt", "SequenceConstruct", "SequenceEmpty"), SEQUENCES),
    **dict.fromkeys(("SequenceErase", "SequenceInsert", "SequenceLength", "SequenceMap"), SEQUENCES),
    **dict.fromkeys(("SplitToSequence", "Optional", "OptionalGetElement", "OptionalHasElement"), SEQUENCES),
    **dict.fromkeys(("CausalConvWithState", "LinearAttention", "SwiGLU"), TOO_NEW),
    "ImageDecoder": "decodes encoded image bytes: a data-loading op no compiler under test lowers",
    "Constant": "written inside Loop bodies only: elsewhere the generator's constants are initializers",
    "Scatter": "deprecated since opset 11 for ScatterElements, which is written",
    "Upsample": "deprecated since opset 10 for Resize, which is written",
}
"""Op type -> why the generator does not write it."""
