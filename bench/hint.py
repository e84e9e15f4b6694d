"""What the diff hint reads off two builds of a system (bot.campaign.hint), for people to judge.

`--base-python` and `--head-python` are two interpreters that each have a build of the
system (`--module`, e.g. tvm); `--repo` with `--base` and `--head` reads `git diff` instead.
The package is found without importing it (importlib's find_spec), so a slow import (TVM's
4 to 12 s) costs nothing. Prints JSON: the files that changed, the functions and classes
touched, and the op types and op pairs generation is weighed toward, with the time it took.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bot.campaign.hint import git_changes, package_root, read_hint, source_changes
from generator.ops import registry

FIND = "import importlib.util, sys; print(importlib.util.find_spec(sys.argv[1]).origin)"


def origin(python: str, module: str) -> Path:
    done = subprocess.run([python, "-c", FIND, module], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"{python} has no {module}: {done.stderr.strip()[-200:]}")
    root = package_root(done.stdout.strip())
    if root is None:
        raise SystemExit(f"{module} in {python} is not a package")
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-python")
    parser.add_argument("--head-python")
    parser.add_argument("--module", default="tvm")
    parser.add_argument("--repo")
    parser.add_argument("--base")
    parser.add_argument("--head")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.repo:
        changes = git_changes(args.repo, args.base, args.head)
        source = f"git diff {args.base} {args.head}"
    else:
        base, head = origin(args.base_python, args.module), origin(args.head_python, args.module)
        changes = source_changes(base, head)
        source = f"{args.module} sources: {base} -> {head}"
    summary, layer = read_hint(changes, registry(), source)
    report = {
        "source": source,
        "seconds": round(time.perf_counter() - t0, 2),
        "files_changed": summary.files,
        "files": [c.path for c in changes][:40],
        "scopes": summary.scopes,
        "ops": summary.ops,
        "pairs": summary.pairs,
        "ops_weighed": len(layer.ops),
        "note": summary.note,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
