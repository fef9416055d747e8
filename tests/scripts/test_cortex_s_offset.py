"""scripts/cortex_s_offset.py: the sensitivity sweep of CortexDebate's S offset (README numbers)."""

from __future__ import annotations

import json

import pytest

from tests.support.needs import need_packaged_minilm
from tests.support.scripts import load_script


def _script():
    return load_script("cortex_s_offset")


@pytest.mark.ray
@pytest.mark.slow  # 20 s of simulated sweep: CI runs it
def test_the_literal_formula_keeps_every_edge_and_the_default_is_the_reference(tmp_path, capsys, ray_local):
    need_packaged_minilm()  # Cortex's similarity: the real embedding model
    mod = _script()
    argv = ["--backend", "simulated", "--limit", "3", "--agents", "4", "--rounds", "3", "--offsets", "0,0.5"]
    assert mod.main([*argv, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "[SIMULATED model]" in printed
    report = json.loads((tmp_path / "cortex_s_offset.json").read_text())
    rows = {r["cortex_s_offset"]: r for r in report["rows"]}
    assert set(rows) == {0.0, 0.5, 1.0}  # the default offset is added as the reference
    # offset 0 is eq. 8 as printed: S_1 = 0, W = inf (0 where C R I = 0), so round 1 keeps (almost) all
    assert rows[0.0]["kept_in_degree_by_round"]["1"] > rows[1.0]["kept_in_degree_by_round"]["1"] + 0.5
    # with any positive offset round 1's S is the offset for everyone: the same sparse graph
    assert rows[0.5]["kept_in_degree_by_round"]["1"] == rows[1.0]["kept_in_degree_by_round"]["1"] < 3
    assert rows[0.5]["differs_from_default_by_round"]["1"] == 0 and rows[0.0]["differs_from_default_by_round"]["1"] > 0
    assert all(v == 0 for v in rows[1.0]["differs_from_default_by_round"].values())
    assert report["simulated"] and report["commit"]
