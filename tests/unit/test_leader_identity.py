"""The leader-election identity: the Pod's name (``POD_NAME``, from the downward API) or,
outside a Pod, the host name, made unique per ``LeaderElectionConfig``.
"""

from __future__ import annotations

import socket

import pytest

from cronjob_operator.runtime.leaderelection import LeaderElectionConfig


def test_leader_identity_names_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "cronjob-operator-controller-manager-7d9f-abcde")
    identity = LeaderElectionConfig(name="lease", namespace="system").identity
    assert identity.startswith("cronjob-operator-controller-manager-7d9f-abcde_")


def test_leader_identity_falls_back_to_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    identity = LeaderElectionConfig(name="lease", namespace="system").identity
    assert identity.startswith(f"{socket.gethostname()}_")


def test_two_configs_in_one_pod_have_distinct_identities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "manager-0")
    first = LeaderElectionConfig(name="lease", namespace="system").identity
    second = LeaderElectionConfig(name="lease", namespace="system").identity
    assert first != second
