"""The pure parts of sharding: the ring, member states, and the assigner's plan."""

from __future__ import annotations

from collections import Counter

import pytest

from cronjob_operator.runtime.leaderelection import LeaderElectionRecord, Observation
from cronjob_operator.runtime.sharding._labels import (
    BUCKETS,
    bucket_of,
    bucket_selector,
    inherited_labels,
    owned_object_labels,
)
from cronjob_operator.runtime.sharding._membership import MemberState, member_name, member_state
from cronjob_operator.runtime.sharding._plan import (
    BUCKET_KEYS,
    Assign,
    Drain,
    Placement,
    bucket_owners,
    placement,
    plan,
)
from cronjob_operator.runtime.sharding._ring import Ring

KEYS = [f"ns-{i % 7}/cronjob-{i}" for i in range(10_000)]


def owners(ring: Ring) -> dict[str, str | None]:
    return {key: ring.owner(key) for key in KEYS}


def test_an_empty_ring_owns_nothing() -> None:
    assert Ring([]).owner("a/b") is None


def test_the_ring_is_deterministic_and_ignores_member_order() -> None:
    assert owners(Ring(["a", "b", "c"])) == owners(Ring(["c", "a", "b"]))


@pytest.mark.parametrize("count", [2, 3, 4, 8])
def test_each_member_owns_about_its_share(count: int) -> None:
    shares = Counter(owners(Ring([f"m-{i}" for i in range(count)])).values())
    fair = len(KEYS) / count
    assert len(shares) == count
    assert all(0.7 * fair <= share <= 1.3 * fair for share in shares.values()), shares


@pytest.mark.parametrize("count", [2, 3, 5])
def test_adding_a_member_moves_about_one_nth_of_the_keys_all_to_it(count: int) -> None:
    members = [f"m-{i}" for i in range(count)]
    before = owners(Ring(members))
    after = owners(Ring([*members, "new"]))
    moved = [key for key in KEYS if before[key] != after[key]]
    assert all(after[key] == "new" for key in moved)
    expected = len(KEYS) / (count + 1)
    assert 0.7 * expected <= len(moved) <= 1.3 * expected


def test_removing_a_member_moves_only_its_keys() -> None:
    before = owners(Ring(["a", "b", "c", "d"]))
    after = owners(Ring(["a", "b", "d"]))
    moved = {key for key in KEYS if before[key] != after[key]}
    assert moved == {key for key in KEYS if before[key] == "c"}


def test_member_names_are_label_values_and_unique() -> None:
    name = member_name("CronJob_Operator.Pod-" + "x" * 80)
    assert len(name) <= 63
    assert name == name.lower()
    assert name[0].isalnum()
    assert member_name("pod", suffix="0a1b2c3d") == "pod-0a1b2c3d"
    assert member_name("pod") != member_name("pod")
    assert member_name("___", suffix="ab").startswith("member-")


def observed(holder: str, at: float, duration: int = 15) -> Observation:
    return Observation(LeaderElectionRecord(holder, duration), at)


@pytest.mark.parametrize(
    ("holder", "now", "state"),
    [
        ("m", 14.9, MemberState.LIVE),
        ("m", 15.0, MemberState.EXPIRED),
        ("", 1.0, MemberState.GONE),  # released
        ("assigner_1", 1.0, MemberState.GONE),  # taken over
    ],
)
def test_member_state_counts_on_our_clock_from_when_we_saw_the_record(
    holder: str, now: float, state: MemberState
) -> None:
    assert member_state("m", observed(holder, 0.0), now) is state


def cronjob(name: str, labels: dict[str, str] | None = None, *, previous: str = "") -> Placement:
    return placement(
        {
            "metadata": {
                "namespace": "ns",
                "name": name,
                "uid": f"uid-{name}",
                "resourceVersion": "7",
                "labels": labels or {},
                "annotations": {PREVIOUS: previous} if previous else {},
            }
        }
    )


SHARD = "sharding.cronjob-operator.io/shard"
PREVIOUS = "sharding.cronjob-operator.io/previous-shard"
DRAIN = "sharding.cronjob-operator.io/drain"


def test_nothing_is_assigned_without_a_live_member() -> None:
    assert plan([cronjob("a")], {"m": MemberState.EXPIRED}, Ring([])) == []


def owner_of(ring: Ring, target: Placement) -> str:
    return bucket_owners(ring)[target.bucket]


def test_a_new_object_is_assigned_to_the_owner_of_its_bucket() -> None:
    ring = Ring(["m1", "m2"])
    targets = [cronjob(f"c{i}") for i in range(40)]
    actions = plan(targets, {"m1": MemberState.LIVE, "m2": MemberState.LIVE}, ring)
    assert actions == [Assign(t, str(owner_of(ring, t)), "new") for t in targets]
    assert {a.shard for a in actions if isinstance(a, Assign)} == {"m1", "m2"}


def test_every_object_of_a_bucket_has_one_owner_so_a_bucket_is_the_unit_that_moves() -> None:
    ring = Ring(["m1", "m2", "m3"])
    targets = [cronjob(f"c{i}") for i in range(5_000)]
    owners_by_bucket: dict[int, set[str]] = {}
    for action in plan(targets, dict.fromkeys(ring.members, MemberState.LIVE), ring):
        assert isinstance(action, Assign)
        owners_by_bucket.setdefault(action.target.bucket, set()).add(action.shard)
    assert all(len(owners) == 1 for owners in owners_by_bucket.values())
    assert len(owners_by_bucket) > BUCKETS // 2  # 5,000 objects fill most buckets


def test_buckets_are_stable_and_spread_evenly() -> None:
    assert bucket_of("ns", "a") == bucket_of("ns", "a")
    assert bucket_of("ns", "a") != bucket_of("other", "a") or bucket_of("ns", "b") != bucket_of(
        "other", "b"
    )
    counts = Counter(bucket_of(f"ns-{i % 7}", f"cronjob-{i}") for i in range(BUCKETS * 50))
    assert len(counts) == BUCKETS
    assert max(counts.values()) < 2 * 50


@pytest.mark.parametrize("count", [2, 3, 4])
def test_members_own_their_share_of_many_objects(count: int) -> None:
    owners = bucket_owners(Ring([f"pod-{i}-{count}" for i in range(count)]))
    shares = Counter(owners[bucket_of("ns", f"cj-{i}")] for i in range(20_000))
    fair = 20_000 / count
    assert all(0.95 * fair <= share <= 1.05 * fair for share in shares.values()), shares


def draws(count: int) -> list[list[str]]:
    """Thirty sets of ``count`` member names as a Deployment's Pods get them."""
    return [
        [f"cronjob-operator-{draw:03d}{i:x}-{draw * i:05x}" for i in range(count)]
        for draw in range(30)
    ]


def largest_plain_share(ring: Ring) -> int:
    """How many buckets the plain ring gives its largest member."""
    return max(Counter(ring.owner(key) for key in BUCKET_KEYS).values())


def test_the_plain_ring_leaves_some_member_well_above_its_share() -> None:
    """Why ``place`` bounds the loads: over 30 draws of 3 names, the plain ring's
    largest member held more than 1.1x its share of the buckets at least once."""
    worst = max(largest_plain_share(Ring(names)) for names in draws(3))
    assert worst > 1.1 * BUCKETS / 3


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_bounded_loads_give_no_member_more_than_its_share_rounded_up(count: int) -> None:
    for names in draws(count):
        loads = Counter(Ring(names).place(BUCKET_KEYS))
        assert sorted(loads) == sorted(names)
        assert max(loads.values()) == -(-BUCKETS // count), loads


def test_the_plan_gives_no_member_more_buckets_than_its_share_rounded_up() -> None:
    """On the draw where the plain ring is most uneven, the assigner's plan still splits
    the buckets of 20,000 new CronJobs evenly."""
    names = max(draws(3), key=lambda names: largest_plain_share(Ring(names)))
    targets = [cronjob(f"c{i}") for i in range(20_000)]
    actions = plan(targets, dict.fromkeys(names, MemberState.LIVE), Ring(names))
    buckets: dict[str, set[int]] = {}
    for action in actions:
        assert isinstance(action, Assign)
        buckets.setdefault(action.shard, set()).add(action.target.bucket)
    assert max(len(owned) for owned in buckets.values()) <= -(-BUCKETS // 3)


def test_placing_on_an_empty_ring_places_nothing() -> None:
    assert Ring([]).place(BUCKET_KEYS) == []
    assert bucket_owners(Ring([])) == []


def test_bounded_loads_keep_the_ring_owner_while_it_has_room() -> None:
    """Only overflow leaves the ring owner: one member takes everything, and with room
    for all (two keys, two members) every key stays with its ring owner."""
    assert set(Ring(["only"]).place(BUCKET_KEYS)) == {"only"}
    ring = Ring(["a", "b"])
    keys = next(
        [first, second]
        for first in BUCKET_KEYS
        for second in BUCKET_KEYS
        if ring.owner(first) != ring.owner(second)
    )
    assert ring.place(keys) == [ring.owner(key) for key in keys]


def test_bounded_loads_send_a_full_members_keys_clockwise() -> None:
    """Four keys whose ring owner is the same member, over 2 members: it takes the
    first two in order and the next member clockwise, the only other, takes the rest."""
    ring = Ring(["a", "b"])
    keys = [key for key in BUCKET_KEYS if ring.owner(key) == "a"][:4]
    assert ring.place(keys) == ["a", "a", "b", "b"]


@pytest.mark.parametrize("count", [2, 3, 5])
def test_a_change_of_one_member_moves_about_one_nth_of_the_buckets(count: int) -> None:
    """Bounded loads move a little more than the plain ring (keys cascade off members
    that are full), never much more: on average within 1.15x of 1/(N+1) over 30 draws."""
    moved = []
    for names in draws(count + 1):
        before = Ring(names[:count]).place(BUCKET_KEYS)
        after = Ring(names).place(BUCKET_KEYS)
        moved.append(sum(old != new for old, new in zip(before, after, strict=True)))
        back = Ring(names[1:]).place(BUCKET_KEYS)
        moved.append(sum(old != new for old, new in zip(after, back, strict=True)))
    expected = BUCKETS / (count + 1)
    assert expected <= sum(moved) / len(moved) <= 1.15 * expected


def test_a_sharded_owner_gives_what_it_creates_its_bucket_and_an_unsharded_one_nothing() -> None:
    sharded = {"metadata": {"namespace": "ns", "name": "a", "labels": {SHARD: "m1"}}}
    assert inherited_labels(sharded) == {
        "sharding.cronjob-operator.io/bucket": str(bucket_of("ns", "a"))
    }
    assert inherited_labels({"metadata": {"namespace": "ns", "name": "a"}}) == {}


def test_a_job_gets_no_sharding_label_from_its_template_only_its_cronjobs_bucket() -> None:
    forged = {"team": "a", "sharding.cronjob-operator.io/bucket": "7", SHARD: "m9"}
    unsharded = {"metadata": {"namespace": "ns", "name": "a"}}
    assert owned_object_labels(forged, unsharded) == {"team": "a"}
    sharded = {"metadata": {"namespace": "ns", "name": "a", "labels": {SHARD: "m1"}}}
    assert owned_object_labels(forged, sharded) == {
        "team": "a",
        "sharding.cronjob-operator.io/bucket": str(bucket_of("ns", "a")),
    }


def test_a_bucket_selector_names_each_bucket_once_and_an_empty_one_matches_nothing() -> None:
    assert bucket_selector([3, 1, 3]) == "sharding.cronjob-operator.io/bucket in (1,3)"
    assert bucket_selector([]) == "sharding.cronjob-operator.io/bucket in (none)"


def test_an_acknowledged_drain_is_assigned_again() -> None:
    ring = Ring(["m1"])
    target = cronjob("a", previous="m0")
    assert plan([target], {"m1": MemberState.LIVE}, ring) == [Assign(target, "m1", "drained")]


@pytest.mark.parametrize("members", [{"m0": MemberState.GONE}, {}])
def test_objects_of_a_gone_member_move_without_a_drain(members: dict[str, MemberState]) -> None:
    target = cronjob("a", {SHARD: "m0"})
    live = {**members, "m1": MemberState.LIVE}
    assert plan([target], live, Ring(["m1"])) == [Assign(target, "m1", "orphaned")]


def test_objects_of_an_expired_member_wait_for_the_takeover() -> None:
    target = cronjob("a", {SHARD: "m0"})
    assert plan([target], {"m0": MemberState.EXPIRED, "m1": MemberState.LIVE}, Ring(["m1"])) == []


def test_an_object_on_a_live_member_that_is_not_its_owner_is_drained_once() -> None:
    members = {"m0": MemberState.LIVE, "m1": MemberState.LIVE}
    on_m0 = [cronjob(f"c{i}", {SHARD: "m0"}) for i in range(50)]
    ring = Ring(["m0", "m1"])
    actions = plan(on_m0, members, ring)
    assert actions
    assert actions == [Drain(t) for t in on_m0 if owner_of(ring, t) == "m1"]
    draining = [cronjob(t.target.name, {SHARD: "m0", DRAIN: "true"}) for t in actions]
    assert plan(draining, members, ring) == []
