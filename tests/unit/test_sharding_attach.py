"""``sharding.attach``: what it adds to a manager, without a cluster (nothing is run)."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import cronjob
from cronjob_operator.runtime import sharding
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.sharding import Assigner, DrainAcknowledger, Shard


def manager(*, leader_election: bool = True) -> Manager:
    election = LeaderElectionConfig(name="lead", namespace="ops", identity="pod_1")
    options = Options(leader_election=election if leader_election else None)
    return Manager(RestClient(k8s_client.Configuration()), options)


def test_sharding_needs_leader_election() -> None:
    with pytest.raises(ValueError, match="needs leader election"):
        sharding.attach(manager(leader_election=False), group="g", kind=CRONJOB, owned=(JOB,))


def test_attach_filters_the_caches_and_runs_a_member_and_an_assigner() -> None:
    host = manager()
    shard = sharding.attach(host, group="g", kind=CRONJOB, owned=(JOB,), member="pod-1234abcd")
    controller = cronjob.setup(host, shard=shard)
    selectors = {kind: host.cache.informer(kind)._reflector._selection for kind in (CRONJOB, JOB)}
    assert selectors == {
        CRONJOB: {"labelSelector": "sharding.cronjob-operator.io/shard=pod-1234abcd"},
        # No bucket yet: the member selects its Jobs' buckets once CronJobs are its own.
        JOB: {"labelSelector": "sharding.cronjob-operator.io/bucket in (none)"},
    }
    runnables = host._runnables
    assert [type(r) for r in runnables if isinstance(r, Shard | Assigner)] == [Shard, Assigner]
    assert shard.needs_leader_election is False
    assert next(r for r in runnables if isinstance(r, Assigner)).needs_leader_election
    assert controller not in runnables  # the shard runs it, on every replica
    assert isinstance(controller.reconciler, DrainAcknowledger)
    assert controller.base_context is shard.controller_options.base_context
    assert shard.config.namespace == "ops"
    assert shard.config.lease_duration == 15.0


def test_the_member_lease_does_not_count_as_a_leader() -> None:
    host = manager()
    sharding.attach(host, group="g", kind=CRONJOB, owned=(JOB,), member="pod-1234abcd")
    registry = host.metrics.registry
    assert registry.get_sample_value("leader_election_master_status", {"name": "lead"}) == 0
    assert (
        registry.get_sample_value("leader_election_master_status", {"name": "pod-1234abcd"}) is None
    )


def test_without_a_shard_the_controller_is_the_managers() -> None:
    host = manager()
    controller = cronjob.setup(host)
    assert controller in host._runnables
    assert not isinstance(controller.reconciler, DrainAcknowledger)
