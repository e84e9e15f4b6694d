"""The `compiler:` section of fuzzbot.yml: which two builds a regression campaign compares.

A side is either a git ref of the compiler's repository, built by the recipe in its
own venv, or a pip requirement list for a released version (from PyPI or from another
index, a nightly feed), or wheels the compiler's own CI built (files here, or a GitHub
Actions artifact of this run or another), or an interpreter that already has the build (a
CI job that built it earlier).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ArtifactSpec(BaseModel):
    """A GitHub Actions artifact holding the wheels of a side (bot.sides.artifact)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="the artifact's name, as actions/upload-artifact gave it")
    run: int | None = Field(
        None, ge=1, description="the workflow run that uploaded it (default: this run, $GITHUB_RUN_ID)"
    )
    repo: str | None = Field(
        None,
        pattern=r"^[\w.-]+/[\w.-]+$",
        description="owner/name of the repository whose run it is (default: $GITHUB_REPOSITORY)",
    )

    @property
    def label(self) -> str:
        run = f"run {self.run}" if self.run else "this run"
        return f"artifact {self.name} ({run}{f' of {self.repo}' if self.repo else ''})"


class SideSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str | None = Field(None, description="git ref (branch, tag, SHA) of compiler.repo, built by compiler.build")
    pip: list[str] | None = Field(None, description="pip requirements of a release, e.g. [onnxruntime==1.30.0]")
    python: str | None = Field(None, description="an interpreter that already has this side's build")
    wheel: str | None = Field(
        None,
        description="wheels the compiler's CI built: a .whl file, a folder of wheels or a glob (dist/*.whl);"
        " the side's venv is rebuilt when a wheel's bytes change",
    )
    index: str | None = Field(
        None, description="with pip: the package index its requirements come from, e.g. a nightly feed"
    )
    artifact: ArtifactSpec | None = Field(
        None,
        description="wheels in a GitHub Actions artifact, fetched through the API with $GITHUB_TOKEN:"
        " {name, run, repo}; the side's venv is rebuilt when a wheel's bytes change",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> SideSpec:
        given = [k for k in ("ref", "pip", "wheel", "artifact", "python") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                f"a side needs exactly one of ref, pip, wheel, artifact or python (got {', '.join(given) or 'none'})"
            )
        if self.index and not self.pip:
            raise ValueError("index names where a side's pip requirements come from: it needs pip")
        return self

    @property
    def label(self) -> str:
        """How reports name the side before its commit is known."""
        if self.ref:
            return self.ref
        if self.pip:
            return " ".join(self.pip) + (f" from {_no_userinfo(self.index)}" if self.index else "")
        if self.artifact:
            return self.artifact.label
        return str(self.wheel or self.python)


def _no_userinfo(url: str) -> str:
    """A private feed's URL may carry a token (https://user:token@host/...): reports show
    the host and path only."""
    return re.sub(r"^([a-z+]+://)[^/@]*@", r"\1", url)


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
