"""Which of a build's rewrites changed a graph, read from the build's own log.

onnxruntime (1.18 and later) logs a line per graph transformer at INFO,
`GraphTransformer <Name> modified: <0|1> ...`, and its `disabled_optimizers` turns one off
by that name (the adapter's `disable` option). Together they say which rewrite a failure
needs (bot.reduce.rewrite_blame). Older releases log nothing, and a build that logs nothing
names no rewrite.
"""

from __future__ import annotations

import re

_CHANGED = re.compile(r"GraphTransformer (\S+) modified: 1\b")

_NOT_ONE_BUG = re.compile(r"RuleBasedTransformer$|^ConstantFolding$")
"""Names a failure is not pinned on. A rule-based transformer holds dozens of rewrite rules
(identity elimination, Conv+BatchNorm fusion, ...) and logs none of them by name, so two
bugs in two of its rules would be one. Constant folding runs the folded op's own kernel at
load time: what goes wrong there is that kernel's, which its name already says."""


def rewrites_that_changed(log: str) -> list[str]:
    """The rewrites that changed the graph, in the order they first did."""
    return list(dict.fromkeys(_CHANGED.findall(log)))


def one_rewrite(name: str) -> bool:
    """Whether `name` is a single rewrite a bug can be named by."""
    return not _NOT_ONE_BUG.search(name)
