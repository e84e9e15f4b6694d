"""Delta-debugging reduction of failing ONNX models.

`ddmin.py` and `tester.py` are generic (items, a predicate, a cache, bounds, jobs);
`candidate.py` (a model and its inputs, as the reducer tests them), `edit.py` and
`passes.py` are the ONNX side; `driver.reduce_case` runs the
passes to a fixpoint. Only onnx, numpy and pydantic are imported: the predicate, and
how tensor values are computed, come from the caller (bot/reduce/candidates.py for findings).
"""
