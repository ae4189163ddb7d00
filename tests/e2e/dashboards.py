"""The Grafana dashboards' queries, read once for the tests that run them against metrics.

config/grafana's dashboards are JSON; each panel's targets hold PromQL with Grafana's
variables. The panels under the "Sharding" row need a manager running ``--sharded``, so
tests/e2e/test_observability.py runs the other panels against one manager and
tests/e2e/test_sharding.py checks the sharding row against sharded replicas.
"""

from __future__ import annotations

import json
import re

from tests.integration.support import REPO

DASHBOARDS = sorted((REPO / "config" / "grafana").glob("*.json"))
# Grafana's variables, as Grafana would fill them for a short time range.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "5m"}
SHARDING_ROW = "Sharding (--sharded)"
_GROUPING = re.compile(r"\b(?:by|without)\s*\([^)]*\)")
_METRIC_NAME = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(?:\[|\{|\))")


def panel_queries(*, sharding: bool = False) -> list[tuple[str, str]]:
    """(``dashboard / panel``, expression) for every target of every panel in the sharding
    row (``sharding=True``) or outside it; a row holds the panels below it up to the next."""
    queries = []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        row = None
        for panel in dashboard["panels"]:
            if panel["type"] == "row":
                row = panel["title"]
                continue
            if (row == SHARDING_ROW) != sharding:
                continue
            for target in panel["targets"]:
                expr = target["expr"]
                for variable, value in GRAFANA_VARIABLES.items():
                    expr = expr.replace(variable, value)
                queries.append((f"{dashboard['title']} / {panel['title']}", expr))
    return queries


def metric_names(expr: str) -> set[str]:
    """The metric names a simple PromQL expression selects (``name[`` ``name{`` ``name)``):
    functions are followed by ``(``, and ``by (...)`` clauses are left out first."""
    return set(_METRIC_NAME.findall(_GROUPING.sub("", expr)))
