"""Rewrite templates and their near misses (see generator.patterns.base), and the choice
of which one a model gets next (generator.patterns.choose)."""

from __future__ import annotations

import functools

from generator.patterns import activation, conv, dynamic, matmul, norm, qdq, quant, shape
from generator.patterns.base import Pattern, variants

TEMPLATES: tuple[type[Pattern], ...] = (
    *norm.TEMPLATES,
    *activation.TEMPLATES,
    *matmul.TEMPLATES,
    *quant.TEMPLATES,
    *qdq.TEMPLATES,
    *conv.TEMPLATES,
    *shape.TEMPLATES,
    *dynamic.TEMPLATES,
)


@functools.cache
def all_variants() -> tuple[type[Pattern], ...]:
    """Every template in every variant, in a fixed order (one class each, made once)."""
    return tuple(v for t in TEMPLATES for v in variants(t))
