"""The bot's own memory bound: what a campaign may ask of this process for one case.

The bot computes on models nobody wrote by hand (generation's values, the torch reference,
onnx.reference, the reducer's candidates), and any of them may ask for a tensor of any
size: a 60-second demo campaign once grew to 23 GB and was killed by the kernel, summary
and all. Proving a bound before each allocation would mean a size rule per op and per
library (torch, numpy, onnx's C++, z3); a child process per computation would copy each
case and its tensors across a pipe. A soft `RLIMIT_DATA` on the bot's own process costs
nothing and covers every library at once: the allocation past the bound fails where it is
made (numpy and Python raise MemoryError, torch a RuntimeError naming its allocator, onnx's
C++ a MemoryError), the stack unwinds and frees it, and the case is dropped and counted.

The bound is headroom over what the process holds when the block starts, as a worker's
address-space cap is over what its system maps at rest (backends.worker.limit_memory): a
long-lived process (a test session, a service running campaign after campaign) may hold
gigabytes already, and an absolute bound would starve it. It is soft, the hard limit stays
as it was, so a backend worker lifts it at its start.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

OVER_BOUND = "over_memory_bound"
"""The reason a case dropped for asking too much is counted under (summary.json `dropped`)."""
_ALLOCATOR_MARKERS = ("can't allocate memory", "std::bad_alloc", "Cannot allocate memory", "out of memory")
"""How an allocation failure reads when a library turns it into a RuntimeError (torch's
DefaultCPUAllocator, a C++ bad_alloc, z3's memory manager)."""


def out_of_memory(e: BaseException) -> bool:
    """An allocation failed: MemoryError, or a library's own words for it."""
    if isinstance(e, MemoryError):
        return True
    return isinstance(e, RuntimeError | OSError) and any(m in str(e) for m in _ALLOCATOR_MARKERS)


def over_bound(e: BaseException) -> bool:
    """An allocation failed while the bound is in force: the case asked more than the bot
    allows, and is to be dropped. Outside a bound (a user's own model in `fuzzbot check`, a
    test), a failed allocation is the machine's answer, and the computation merely has no
    result, as before there was a bound."""
    return out_of_memory(e) and bound_in_force()


def bound_in_force() -> bool:
    if not hasattr(resource, "RLIMIT_DATA"):
        return False
    return resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY


def within_bound(compute: Callable[[], T], dropped: Callable[[], None]) -> T | None:
    """`compute()`, or None (after `dropped()`) when it asked for more memory than the bound:
    one case given up, the campaign going on. Any other error is not this function's."""
    try:
        return compute()
    except (MemoryError, RuntimeError, OSError) as e:
        if not out_of_memory(e):
            raise
        dropped()
        return None


def physical_bytes() -> int | None:
    """This machine's memory, or None where the system will not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def data_in_use() -> int:
    """This process's data segment now, as RLIMIT_DATA counts it (0 where /proc cannot say)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def effective(headroom: int) -> int:
    """`headroom`, or three quarters of the machine when it has less: a bound the kernel's
    OOM killer reaches first bounds nothing."""
    machine = physical_bytes()
    return min(headroom, machine * 3 // 4) if machine else headroom


@contextlib.contextmanager
def bounded(headroom: int | None) -> Iterator[int | None]:
    """The process's data segment held (soft) to what it holds now plus `headroom` bytes
    inside the block, and put back after it: builds, bisection's and pip's children run
    outside. Yields the bound in force, in bytes of data segment (None: unbounded, `headroom`
    None or the platform has no RLIMIT_DATA)."""
    if not headroom or not hasattr(resource, "RLIMIT_DATA"):
        yield None
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    bound = data_in_use() + effective(headroom)
    if hard != resource.RLIM_INFINITY:
        bound = min(bound, hard)
    if soft != resource.RLIM_INFINITY:
        bound = min(bound, soft)  # an outer bound (the Action's, a test's) stays the tighter
    resource.setrlimit(resource.RLIMIT_DATA, (bound, hard))
    try:
        yield bound
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def lift() -> None:
    """A backend worker's start: the bot's bound is for the bot's own computations, and the
    system under test has its own cap (backends.worker.limit_memory)."""
    if hasattr(resource, "RLIMIT_DATA"):
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if soft != hard:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
