"""A flood of random bearer tokens on /metrics against the real API server.

The manager's controllers' client is limited as kube-controller-manager's is (20 qps,
burst 30) on a bucket that counts who took each token (``bench.metrics_flood``, which
prints the same flood's latencies). While 16 clients send 300 requests with tokens of
their own, a reconcile thread sends its requests through that client. Asserted on
counts, not times: the controllers' bucket gave no token to a review and never made a
reconcile request wait; every flood request got a 401 (reviewed) or a 429 (shed), and
the API server received exactly one TokenReview per 401; a scraper whose token was
reviewed before the flood is served during it.
"""

from __future__ import annotations

from bench.metrics_flood import run_flood
from cronjob_operator.envtest import ControlPlane

TOKENS = 300
THREADS = 16
RECONCILES = 20
"""Fewer than the bucket's burst of 30: the reconcile requests alone never wait."""


def test_a_token_flood_takes_no_token_of_the_controllers_and_is_shed(
    control_plane: ControlPlane,
) -> None:
    # Failed before: the reviews went through the controllers' client, so the flood took
    # one token of the controllers' bucket per TokenReview (hundreds) and the reconcile
    # requests waited behind them. (When a request is shed is timing; the unit tests
    # in tests/unit/test_metrics_auth.py hold reviews in flight to check the bounds.)
    result = run_flood(control_plane, TOKENS, THREADS, RECONCILES)
    assert result.controllers_tokens_to_reviews == 0
    assert result.reconcile_waits == [0.0] * RECONCILES
    assert set(result.statuses) <= {401, 429}, result.statuses
    assert sum(result.statuses.values()) == TOKENS
    assert result.reviews_at_server == result.statuses[401]
    assert (result.scraper_before, result.scraper_during) == (200, 200)
