"""The manager refuses an API server older than the oldest supported release, at start,
with one line naming the release found and the one needed, after one ``GET /version``.

The fake API server is a plain HTTP server on 127.0.0.1 that answers ``/version`` only
and records every path it is asked for, so a test also sees that the refusal comes
before anything else is requested.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from cronjob_operator import cli
from cronjob_operator.runtime import Manager
from cronjob_operator.runtime.client import RestClient, ServerVersion

REPO = Path(__file__).resolve().parents[2]


class FakeApiServer:
    """Answers ``GET /version`` with ``info``; 404 for anything else; records each path."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.paths: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.paths.append(self.path)
                found = self.path == "/version"
                body = json.dumps(fake.info if found else {"kind": "Status", "code": 404})
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[FakeApiServer] = []

    def start(git_version: str, major: str = "1", minor: str | None = None) -> FakeApiServer:
        release = re.match(r"v\d+\.(\d+)", git_version)
        info = {
            "major": major,
            "minor": minor or (release[1] if release else ""),
            "gitVersion": git_version,
        }
        started.append(FakeApiServer(info))
        return started[-1]

    yield start
    for server in started:
        server.close()


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "fake", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        )
    )
    return path


def refuse_to_run(manager: Manager) -> int:
    raise AssertionError("the manager started against an unsupported server")


def test_an_older_server_is_refused_with_one_line_after_one_request(
    serve: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Manager, "run", refuse_to_run)
    server = serve("v1.33.9")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url)
    code = cli.main(["run", "--kubeconfig", str(kubeconfig), "--log-format", "text"])
    err = capfd.readouterr().err
    assert code == 1
    problems = [line for line in err.splitlines() if "ERROR" in line]
    assert len(problems) == 1, err
    assert "Kubernetes v1.33.9" in problems[0]
    assert "needs 1.34 or newer" in problems[0]
    assert server.url in problems[0]
    assert server.paths == ["/version"]


@pytest.mark.parametrize(
    ("git_version", "minor"),
    [("v1.34.0", None), ("v1.37.2", None), ("v1.34.12-gke.1200", "34+"), ("v2.0.0", None)],
)
def test_a_supported_server_passes_the_check(
    serve: Any, git_version: str, minor: str | None
) -> None:
    server = serve(git_version, minor=minor)
    rest = RestClient(k8s_client.Configuration(host=server.url))
    assert cli._server_release_problem(rest) is None
    assert server.paths == ["/version"]


def test_a_server_naming_no_release_is_refused_with_what_it_said(serve: Any) -> None:
    server = serve("", major="", minor="")
    rest = RestClient(k8s_client.Configuration(host=server.url))
    problem = cli._server_release_problem(rest)
    assert problem is not None
    assert "cannot read the Kubernetes release" in problem
    assert "names no Kubernetes release" in problem


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"major": "1", "minor": "34", "gitVersion": "v1.34.12"}, (1, 34)),
        ({"major": "1", "minor": "33+", "gitVersion": "v1.33.5-eks-1a2b"}, (1, 33)),
        ({"major": "1", "minor": "36+", "gitVersion": "unknown"}, (1, 36)),
    ],
)
def test_the_release_is_parsed_from_what_providers_report(
    info: dict[str, str], expected: tuple[int, int]
) -> None:
    found = ServerVersion.parse(info)
    assert (found.major, found.minor) == expected


def pinned_release(name: str) -> ServerVersion:
    """The release ``hack/versions.env`` pins as ``name``."""
    pins = dict(
        line.split("=", 1)
        for line in (REPO / "hack" / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    return ServerVersion.parse({"gitVersion": pins[name]})


def test_the_oldest_supported_release_is_the_one_the_compatibility_tests_pin() -> None:
    compat = pinned_release("COMPAT_KUBERNETES_VERSION")
    assert (compat.major, compat.minor) == cli.OLDEST_SUPPORTED_RELEASE


@pytest.mark.parametrize("doc", ["README.md", "docs/install.md"])
def test_the_docs_state_the_tested_range(doc: str) -> None:
    oldest = pinned_release("COMPAT_KUBERNETES_VERSION")
    newest = pinned_release("KUBERNETES_VERSION")
    text = " ".join((REPO / doc).read_text().split())
    assert f"Supported Kubernetes: {oldest.release} to {newest.release}" in text
    for pinned in (oldest, newest):  # the patch releases the docs say the tests ran on
        assert pinned.git_version.removeprefix("v") in text, pinned.git_version
