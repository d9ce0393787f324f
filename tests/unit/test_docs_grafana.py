"""docs/grafana/clusterkit.json, the Grafana dashboard of `top --prometheus`: a dashboard
Grafana imports (panels with ids, places on its 24-column grid, queries on the
dashboard's Prometheus data source), whose queries name exactly the metrics
training/prometheus.py exports, each with labels it has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clusterkit.training.prometheus import METRICS

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "clusterkit.json"
SELECTOR = re.compile(r"\b(clusterkit_[a-z_]+)(?:\{([^}]*)\})?")
MATCHER = re.compile(r'\s*([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*"[^"]*"\s*')
PANEL_TYPES = {"stat", "timeseries", "table"}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(dashboard: dict) -> list[str]:
    found = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return found + [v["definition"] for v in dashboard["templating"]["list"]
                    if v["type"] == "query"]


def test_it_is_a_dashboard_grafana_imports(dashboard):
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"],
                                                                   int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) > 10
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["title"], panel
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
    for expr in queries(dashboard):
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}")
        used = set(re.findall(r"\$(\w+)", expr))
        assert used <= set(variables), (expr, used)


def test_its_queries_name_exactly_the_exported_metrics(dashboard):
    named = {m.group(1) for q in queries(dashboard) for m in SELECTOR.finditer(q)}
    assert named == set(METRICS), (named ^ set(METRICS))


def test_each_selector_and_grouping_uses_labels_the_metric_has(dashboard):
    for query in queries(dashboard):
        labels_here: set[str] = set()
        for match in SELECTOR.finditer(query):
            name, matchers = match.groups()
            have = set(METRICS[name][1])
            labels_here |= have
            given = MATCHER.findall(matchers or "")
            assert len(given) == len([m for m in (matchers or "").split(",") if m.strip()])
            assert set(given) <= have, (query, name, set(given) - have)
        for group in re.findall(r"\bby \(([^)]*)\)", query):
            assert {g.strip() for g in group.split(",")} <= labels_here, query
