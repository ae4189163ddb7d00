"""The API server's Kubernetes release, read once (``GET /version``) when a program starts.

A program that supports a range of releases checks the server before it starts anything,
so an older server is refused at once with one line, instead of failing later on an API
or a field it lacks (controller-runtime reads the same endpoint through discovery).
Providers append build suffixes (``v1.34.12-gke.1``, minor ``"34+"``); only the major
and minor numbers are compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronjob_operator.runtime.client._rest import RestClient

VERSION_PATH = "/version"
_RELEASE = re.compile(r"v?(\d+)\.(\d+)")
_LEADING_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, order=True, slots=True)
class ServerVersion:
    """A Kubernetes release as ``(major, minor)``, ordered; ``git_version`` as reported."""

    major: int
    minor: int
    git_version: str = field(default="", compare=False)

    @property
    def release(self) -> str:
        """``major.minor``, as the release is named (``1.34``)."""
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, info: dict[str, Any]) -> ServerVersion:
        """The release in a ``/version`` answer: ``gitVersion`` when it names one, else the
        ``major`` and ``minor`` fields' leading digits. ``ValueError`` when neither does."""
        git_version = str(info.get("gitVersion", ""))
        if match := _RELEASE.match(git_version):
            return cls(int(match[1]), int(match[2]), git_version)
        major = _LEADING_NUMBER.match(str(info.get("major", "")))
        minor = _LEADING_NUMBER.match(str(info.get("minor", "")))
        if major is None or minor is None:
            raise ValueError(f"{VERSION_PATH} names no Kubernetes release: {info!r}")
        return cls(int(major[0]), int(minor[0]), git_version or f"v{major[0]}.{minor[0]}")


def server_version(rest: RestClient) -> ServerVersion:
    """The release the API server behind ``rest`` runs: one ``GET /version``."""
    return ServerVersion.parse(rest.request("GET", VERSION_PATH))
