"""A side's wheels from a GitHub Actions artifact: the build the compiler's own CI made.

A compiler's CI already builds wheels on every push and keeps them as artifacts, so a fuzz
job needs no build of its own: the head's wheels are an artifact of this run (or of the
build workflow a `workflow_run` job follows), the base's one of the base commit's run. An
artifact is fetched through the REST API with the job's token (PyGithub): its listing by
run, then its zip, which GitHub answers with a redirect to short-lived storage. Both steps
are GETs, safe to repeat, so urllib3's retries take 5xx answers and lost connections, and
PyGithub's take rate limits; what is left is one error line. A side is below reporting
(bot.github), whose own retry policy exists for writes that must never be repeated. An
artifact's id names its bytes for good, so the extracted files are kept in the cache under
it and fetched once.

Environment, as a GitHub runner sets it: `GITHUB_TOKEN` (the Action passes its
`github-token`), `GITHUB_API_URL`, `GITHUB_REPOSITORY`, `GITHUB_RUN_ID`.
"""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import requests
from github import Auth, Github, GithubException, GithubRetry
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from bot.errors import UserError
from bot.files import file_lock
from bot.sides.config import ArtifactSpec

COMPLETE = ".complete"
MAX_BYTES = 8 << 30
"""The largest artifact fetched: a CI's wheels for every Python are a few hundred MB; past
this the artifact holds something else, and the disk would fill before it said so."""
TIMEOUT_S = 60
TRIES = 5


class ArtifactError(UserError):
    """An artifact that cannot be had; the message is one line and names the side."""


@dataclass(frozen=True)
class Where:
    """The repository, the run and the API an artifact is fetched from, with the token."""

    repo: str
    run: int
    api: str
    token: str

    @classmethod
    def of(cls, spec: ArtifactSpec, env: Mapping[str, str], which: str) -> Where:
        repo = spec.repo or env.get("GITHUB_REPOSITORY", "")
        given = env.get("GITHUB_RUN_ID", "").strip()
        run = spec.run or (int(given) if given.isdigit() else 0)
        token = env.get("GITHUB_TOKEN", "")
        if not repo:
            raise ArtifactError(f"{which}: {spec.label}: no repository (set artifact.repo or $GITHUB_REPOSITORY)")
        if not run:
            raise ArtifactError(f"{which}: {spec.label}: no run (set artifact.run or $GITHUB_RUN_ID)")
        if not token:
            raise ArtifactError(f"{which}: {spec.label}: no token in $GITHUB_TOKEN (it needs actions: read)")
        return cls(repo, run, env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"), token)


def fetch_artifact(spec: ArtifactSpec, cache_dir: Path, which: str, env: Mapping[str, str] | None = None) -> Path:
    """The folder holding the artifact's files, fetched and extracted unless already cached."""
    where = Where.of(spec, os.environ if env is None else env, which)
    try:
        artifact_id, size, url = _find(spec, where)
    except (GithubException, requests.RequestException) as e:
        raise ArtifactError(f"{which}: {spec.label}: {_why(e, f'the artifacts of run {where.run}')}") from e
    if artifact_id is None:
        raise ArtifactError(f"{which}: {spec.label}: {url}")
    if size > MAX_BYTES:
        raise ArtifactError(f"{which}: {spec.label}: {size} bytes, more than the {MAX_BYTES} fetched")
    folder = cache_dir / "artifacts" / f"{where.repo.replace('/', '+')}-{artifact_id}"
    with file_lock(folder.with_suffix(".lock")):
        if not (folder / COMPLETE).exists():
            try:
                data = _download(url, where.token)
            except (GithubException, requests.RequestException) as e:
                raise ArtifactError(f"{which}: {spec.label}: {_why(e, f'artifact {artifact_id}')}") from e
            _extract(data, folder, f"{which}: {spec.label}")
    return folder


def _why(e: Exception, what: str) -> str:
    if isinstance(e, GithubException):
        message = e.data.get("message") if isinstance(e.data, dict) else e.data
        return f"GitHub refused {what}: {e.status} {' '.join(str(message or '').split())[:200]}"
    return f"GitHub unavailable ({what}): {type(e).__name__}"


def _retries() -> Retry:
    """Five tries of a GET, a second, two, four and eight apart."""
    return Retry(total=TRIES - 1, backoff_factor=1.0, status_forcelist=range(500, 600), allowed_methods={"GET"})


def _find(spec: ArtifactSpec, where: Where) -> tuple[int | None, int, str]:
    """(id, size, zip URL) of the run's newest unexpired artifact of that name; with no id,
    the third is why (what the run holds instead)."""
    gh = Github(
        auth=Auth.Token(where.token),
        base_url=where.api,
        timeout=TIMEOUT_S,
        retry=GithubRetry(total=TRIES - 1, backoff_factor=1.0, max_rate_limit_wait=60),
        lazy=True,
        user_agent="fuzzbot",
        per_page=100,
    )
    artifacts = list(gh.get_repo(where.repo).get_workflow_run(where.run).get_artifacts())
    named = [a for a in artifacts if a.name == spec.name and not a.expired]
    if not named:
        held = ", ".join(sorted({a.name + (" (expired)" if a.expired else "") for a in artifacts})) or "none"
        return None, 0, f"not among run {where.run}'s artifacts in {where.repo} ({held})"
    newest = max(named, key=lambda a: (a.created_at, a.id))
    return newest.id, newest.size_in_bytes, newest.archive_download_url


def _download(url: str, token: str) -> bytes:
    """The zip. GitHub answers the API's URL with a redirect to signed storage, which is
    followed without the token: the signature is the storage's credential, and a second
    one is refused there (and would hand the token to another host)."""
    with requests.Session() as session:
        session.mount("http://", HTTPAdapter(max_retries=_retries()))
        session.mount("https://", HTTPAdapter(max_retries=_retries()))
        headers = {"Authorization": f"Bearer {token}", "User-Agent": "fuzzbot"}
        response = session.get(url, headers=headers, timeout=TIMEOUT_S, allow_redirects=False)
        if response.is_redirect and "location" in response.headers:
            response = session.get(response.headers["location"], timeout=TIMEOUT_S)
        if response.status_code != 200:
            raise GithubException(response.status_code, {"message": response.text[:200]}, dict(response.headers))
        return response.content


def wheel_glob(folder: Path) -> str:
    """The wheels of a fetched artifact, at any depth: a build matrix uploads dist/ folders."""
    return str(folder / "**" / "*.whl")


def _extract(data: bytes, folder: Path, what: str) -> None:
    """Unzip into `folder`, refusing any member that would land outside it. A half-written
    extraction stays under `.partial` and is cleared by the next fetch."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise ArtifactError(f"{what}: not a zip ({e})") from e
    with archive:
        for member in archive.namelist():
            path = PurePosixPath(member)
            if path.is_absolute() or ".." in path.parts:
                raise ArtifactError(f"{what}: the zip names {member!r}, outside its folder")
        archive.extractall(partial)
    (partial / COMPLETE).touch()
    shutil.rmtree(folder, ignore_errors=True)
    partial.replace(folder)
