"""Every ``docs/...`` path the project names, and every relative Markdown link, exists.

Docstrings, comments, tests, scripts and the README point readers at ``docs/*.md``; a
citation of a page that was never written (or was renamed) is a dead end, so the paths
are collected from every source and documentation file and checked against the tree.
URLs that merely contain ``/docs/`` (``https://kubernetes.io/docs/...``) are not ours
and are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("cronjob_operator", "tests", "bench", "hack", "config", "docs")
SCANNED_FILES = ("README.md", "Dockerfile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".env", ""}

DOCS_PATH = re.compile(r"(?<![\w/.:-])docs/[\w./-]*[\w/]")
"""``docs/...`` not preceded by a path or URL character (so ``kubernetes.io/docs/`` is
not a match); the trailing character excludes sentence punctuation."""

MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def scanned_files() -> list[Path]:
    files = [REPO / name for name in SCANNED_FILES if (REPO / name).is_file()]
    for directory in SCANNED_DIRS:
        files += [
            path
            for path in sorted((REPO / directory).rglob("*"))
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts
        ]
    return files


def cited_docs_paths() -> dict[str, list[str]]:
    """Each ``docs/...`` path named anywhere, with the files that name it."""
    cited: dict[str, list[str]] = {}
    for path in scanned_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in DOCS_PATH.findall(text):
            cited.setdefault(match.rstrip("/"), []).append(str(path.relative_to(REPO)))
    return cited


def test_the_scan_finds_the_citations_it_must_check() -> None:
    cited = cited_docs_paths()
    for page in ("cronjob-semantics.md", "configdeployment.md", "local-control-plane.md"):
        assert f"docs/{page}" in cited, f"docs/{page} is cited in code; the scan missed it"
    assert not [path for path in cited if "kubernetes.io" in path or "installation" in path]


@pytest.mark.parametrize("cited", sorted(cited_docs_paths()))
def test_every_cited_docs_path_exists(cited: str) -> None:
    where = sorted(set(cited_docs_paths()[cited]))
    assert (REPO / cited).exists(), f"{cited} is named in {', '.join(where)} but does not exist"


def markdown_files() -> list[Path]:
    return [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *(REPO / "bench").glob("*.md"),
    ]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_markdown_links_resolve(page: Path) -> None:
    targets = [
        link
        for link in MARKDOWN_LINK.findall(page.read_text())
        if not re.match(r"[a-z][a-z0-9+.-]*:", link)  # http:, https:, mailto:
    ]
    missing = [link for link in targets if not (page.parent / link).exists()]
    assert missing == [], f"{page.relative_to(REPO)} links to missing files: {missing}"


SOURCE_PATH = re.compile(r"(?<![\w/.:-])((?:cronjob_operator|tests|examples|bench)/[\w/]*\w\.py)\b")
"""A Python file of the project named by its path (``cronjob_operator/runtime/objects.py``)."""

PATH_PATTERNS = {"cronjob_operator/a/b.py"}
"""Paths written as a pattern, not a citation (hack/mutation.sh explains a mapping)."""


def cited_source_paths() -> dict[str, list[str]]:
    """Each project ``.py`` path named anywhere, with the files that name it."""
    cited: dict[str, list[str]] = {}
    for path in [*scanned_files(), *sorted((REPO / "examples").rglob("*.py"))]:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in SOURCE_PATH.findall(text):
            if match not in PATH_PATTERNS:
                cited.setdefault(match, []).append(str(path.relative_to(REPO)))
    return cited


def test_the_source_path_scan_finds_a_citation() -> None:
    assert "cronjob_operator/runtime/objects.py" in cited_source_paths()


@pytest.mark.parametrize("cited", sorted(cited_source_paths()))
def test_every_cited_source_path_exists(cited: str) -> None:
    where = sorted(set(cited_source_paths()[cited]))
    assert (REPO / cited).exists(), f"{cited} is named in {', '.join(where)} but does not exist"


README_REPO_PATH = re.compile(r"(?<![\w/.:-])((?:config|hack|dist|docs|examples|bench)/[\w./-]*\w)")
"""A file or directory of the repository named in the README (``config/default``,
``hack/run-local.sh``)."""


def test_the_readme_indexes_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text()
    unlisted = [
        page.name
        for page in sorted((REPO / "docs").glob("*.md"))
        if f"](docs/{page.name})" not in readme
    ]
    assert unlisted == [], (
        f"README.md's documentation table does not link {unlisted}: add a row each"
    )


def test_every_path_the_readme_names_exists() -> None:
    named = set(README_REPO_PATH.findall((REPO / "README.md").read_text()))
    assert "config/default" in named, "the scan missed the install path"
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert missing == [], f"README.md names {missing}, which do not exist"
