"""The `compiler:` section of fuzzbot.yml: which two builds a regression campaign compares.

A side is either a git ref of the compiler's repository, built by the recipe in its
own venv, or a pip requirement list for a released version, or an interpreter that
already has the build (a CI job that built it earlier).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SideSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str | None = Field(None, description="git ref (branch, tag, SHA) of compiler.repo, built by compiler.build")
    pip: list[str] | None = Field(None, description="pip requirements of a release, e.g. [onnxruntime==1.30.0]")
    python: str | None = Field(None, description="an interpreter that already has this side's build")

    @model_validator(mode="after")
    def _exactly_one(self) -> SideSpec:
        given = [k for k in ("ref", "pip", "python") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"a side needs exactly one of ref, pip or python (got {', '.join(given) or 'none'})")
        return self

    @property
    def label(self) -> str:
        """How reports name the side before its commit is known."""
        if self.ref:
            return self.ref
        if self.pip:
            return " ".join(self.pip)
        return str(self.python)


class CompilerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo: str | None = Field(None, description="git repository of the compiler: a path or a URL (needed by ref sides)")
    build: list[str] = Field(
        default_factory=lambda: ["pip install ."],
        description="shell commands run in each checkout with that side's venv active",
    )
    packages: list[str] = Field(
        default_factory=lambda: ["numpy"],
        description="pip requirements installed into every side's venv before the build (the worker needs numpy)",
    )
    base: SideSpec
    head: SideSpec

    @model_validator(mode="after")
    def _repo_for_refs(self) -> CompilerConfig:
        if (self.base.ref or self.head.ref) and not self.repo:
            raise ValueError("a side given by ref needs compiler.repo")
        return self
