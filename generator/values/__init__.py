"""NaN/Inf-free test values: the unsafe-op table, the gradient-guided search with its
sampling fallback, and the margin check the oracles reuse."""

from generator.values.find import Found, Method, NoValidValues, ValueOutcome, apply_values, find_values
from generator.values.interp import UnsupportedModel
from generator.values.margin import MarginHit, margin_hits
from generator.values.predicate import MARGIN, Predicate
from generator.values.unsafe import UNSAFE

__all__ = [
    "MARGIN",
    "UNSAFE",
    "Found",
    "MarginHit",
    "Method",
    "NoValidValues",
    "Predicate",
    "UnsupportedModel",
    "ValueOutcome",
    "apply_values",
    "find_values",
    "margin_hits",
]
