"""Gradient-guided value search (NNSmith Algorithm 3, with proxy derivatives and margins).

Each step evaluates the model up to its first unsafe op, then takes one Adam step on that
op's margin loss. Adam matters because losses differ by orders of magnitude between ops;
its state is reset whenever the loss being optimised changes (another op or another
predicate), so momentum gathered for one constraint never pushes against the next, and
its rate halves when a step overshoots or the search comes back to a loss it had left, so
two constraints with a narrow window between them do not trade places for ever.
Values with no gradient path to the loss (all-zero gradient) are redrawn instead, and
integer operands are repaired directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from generator.values.interp import Failure, Program
from generator.values.leaves import Leaves
from generator.values.repair import redraw_upstream, repair_integer

LEARNING_RATE = 0.5
MIN_LEARNING_RATE = LEARNING_RATE / 4096
BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


@dataclass
class Budget:
    """A search's limits, in steps and samples only: the same seed gives the same values on
    any machine at any load."""

    max_steps: int
    max_samples: int


@dataclass
class Tally:
    steps: int = 0
    repairs: int = 0
    restarts: int = 0
    samples: int = 0
    last: str | None = None


class Adam:
    """Adam on one flat vector, a few tensor ops per step."""

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.t = 0

    def reset(self) -> None:
        self.m = self.v = None
        self.t = 0

    def step(self, theta: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        b1, b2 = BETAS
        self.t += 1
        self.m = grad * (1 - b1) if self.m is None else self.m * b1 + grad * (1 - b1)
        g2 = grad * grad
        self.v = g2 * (1 - b2) if self.v is None else self.v * b2 + g2 * (1 - b2)
        m_hat = self.m / (1 - b1**self.t)
        v_hat = self.v / (1 - b2**self.t)
        return theta.detach() - self.lr * m_hat / (v_hat.sqrt() + ADAM_EPS)


def evaluate(program: Program, leaves: Leaves, grad: bool) -> Failure | None:
    with torch.set_grad_enabled(grad):
        return program.first_failure(program.env(leaves.tensors(grad)))


class StepSizes:
    """Adam's learning rate per loss: LEARNING_RATE at first, halved when a step overshot
    (the same loss grew) or when the search comes back to a loss it had left (two
    constraints pulling against each other), so that the step shrinks to fit the window
    between them instead of jumping across it for ever."""

    def __init__(self) -> None:
        self.lr: dict[tuple[int, str], float] = {}
        self.key: tuple[int, str] | None = None
        self.value = 0.0

    def next(self, key: tuple[int, str], value: float) -> tuple[float, bool]:
        """The rate for this step, and whether the loss is another one than last step's."""
        changed = key != self.key
        if key not in self.lr:
            # A constraint not met before: the cycle (if any) is broken, start afresh.
            self.lr = dict.fromkeys(self.lr, LEARNING_RATE)
            self.lr[key] = LEARNING_RATE
        elif changed or value > self.value:
            self.lr[key] = max(self.lr[key] * 0.5, MIN_LEARNING_RATE)
        self.key, self.value = key, value
        return self.lr[key], changed


def gradient_search(
    program: Program, leaves: Leaves, rng: np.random.Generator, budget: Budget, tally: Tally
) -> str | None:
    """None once every op is safe; otherwise why the search stopped."""
    adam = Adam(LEARNING_RATE)
    sizes = StepSizes()
    while True:
        failure = evaluate(program, leaves, grad=True)
        if failure is None:
            return None
        tally.last = failure.describe()
        if failure.error is not None:
            return f"reference error at {tally.last}"
        if tally.steps >= budget.max_steps:
            return "step limit"
        tally.steps += 1
        if failure.predicate is not None and failure.predicate.integer:
            if not repair_integer(program, leaves, failure, rng):
                return f"no free value reaches {tally.last}"
            tally.repairs += 1
            continue
        loss = failure.loss()
        adam.lr, changed = sizes.next(failure.key, float(loss.detach()))
        if changed:
            adam.reset()
        grad = _gradient(loss, leaves.theta)
        if grad is None:
            if not redraw_upstream(program, leaves, failure, rng):
                return f"no free value reaches {tally.last}"
            adam.reset()
            sizes.key = None
            tally.restarts += 1
            continue
        leaves.theta = adam.step(leaves.theta, grad)
        leaves.sanitize(rng)


def _gradient(loss: torch.Tensor, theta: torch.Tensor) -> torch.Tensor | None:
    """d loss / d theta, or None when it is zero everywhere (nothing would move)."""
    if not loss.requires_grad:
        return None
    (grad,) = torch.autograd.grad(loss, theta, allow_unused=True)
    if grad is None:
        return None
    grad = torch.nan_to_num(grad, nan=0.0, posinf=1.0, neginf=-1.0)
    return grad if bool(grad.any()) else None
