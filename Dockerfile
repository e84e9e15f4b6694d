# The fuzzbot GitHub Action (action.yml: `runs: using: docker`).
#
# Python and git only: each side of a campaign is built by the user's recipe in its own
# venv inside this container. Every version is pinned (base image tag, the git package,
# fuzzbot's own requirements in pyproject.toml), so a rebuild gives the same tools.
FROM python:3.11.14-slim-bookworm

# git checks out base and head as worktrees. The pin is the bookworm package at the
# time of writing: bump it when Debian's security update replaces it (the build fails).
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends git=1:2.39.5-0+deb12u3 \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/fuzzbot
COPY pyproject.toml README.md LICENSE ./
COPY generator/ generator/
COPY backends/ backends/
COPY oracles/ oracles/
COPY reducers/ reducers/
COPY bot/ bot/
# torch==2.13.0 resolves to the CPU wheel from PyTorch's index (as in CI), not the CUDA one.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu "./[onnxruntime]"

# No USER: GitHub runs Docker actions as root with the runner's workspace mounted at
# /github/workspace, and its docs advise against USER, since another user could not
# write the outputs, the step summary or fuzzbot-out/ there. The entrypoint keeps the
# token away from the build of the PR's code instead (see bot/github/entrypoint.py).
# -P: the working directory (the user's repo) must not shadow fuzzbot's packages.
ENTRYPOINT ["python", "-P", "-m", "bot.github.entrypoint"]
