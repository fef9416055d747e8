"""Strong/weak model placement (sparse-topology paper, sec. 6) and its RunConfig wiring."""

from __future__ import annotations

import pytest

from engine.config import ConfigError, RunConfig
from topologies import (
    TopologyError,
    assign_models,
    centrality_order,
    from_edges,
    fully_connected,
    make_topology,
    paper_placement_graph,
    parse_models,
    placement_order,
    regular,
    ring,
    star,
)

RANKED6 = ["s0", "s1", "s2", "s3", "s4", "s5"]  # s0 strongest


# ---------------------------------------------------------------- parse_models
def test_parse_counts_and_lists():
    assert parse_models("big*1,small*5", 6) == ["big"] + ["small"] * 5
    assert parse_models(" big * 2 ,  small ", 3) == ["big", "big", "small"]
    assert parse_models("a,b,b,b", 4) == ["a", "b", "b", "b"]
    # the order is kept (strongest first), repeated names allowed
    assert parse_models("x,y*2,x", 4) == ["x", "y", "y", "x"]


@pytest.mark.parametrize(
    "spec,n,needle",
    [
        ("big*1,small*4", 6, "--models lists 5 agents but --agents is 6"),
        ("big*1,small*6", 6, "--models lists 7 agents but --agents is 6"),
        ("m*0,small*6", 6, "'m*0'"),
        ("m*x,small*5", 6, "'m*x'"),
        ("m*-1,small*7", 6, "'m*-1'"),
        ("a,,b", 2, "empty item"),
        ("*3", 3, "missing model name"),
        ("", 3, "--models"),
    ],
)
def test_parse_errors(spec, n, needle):
    with pytest.raises(TopologyError) as err:
        parse_models(spec, n)
    assert needle in str(err.value)
    assert "--models" in str(err.value)
    assert isinstance(err.value, ValueError)


# ---------------------------------------------------------------- assignment
def test_none_keeps_list_order():
    assert assign_models(RANKED6, star(6, center=3), "none") == RANKED6


def test_star_central_puts_strongest_on_centre():
    models = ["big"] + ["small"] * 5
    assert assign_models(models, star(6, center=3), "central") == ["small", "small", "small", "big", "small", "small"]
    # full ranking: centre gets rank 0, leaves ranks 1.. in id order
    assert assign_models(RANKED6, star(6, center=3), "central") == ["s1", "s2", "s3", "s0", "s4", "s5"]


def test_star_peripheral_puts_strongest_on_a_leaf_and_weakest_on_centre():
    models = ["big"] + ["small"] * 5
    got = assign_models(models, star(6, center=0), "peripheral")
    assert got == ["small", "big", "small", "small", "small", "small"]
    assert assign_models(RANKED6, star(6, center=0), "peripheral") == ["s5", "s0", "s1", "s2", "s3", "s4"]


@pytest.mark.parametrize("topo", [ring(6), fully_connected(6), regular(6, 0.6), regular(6, 0.8)])
@pytest.mark.parametrize("placement", ["central", "peripheral"])
def test_all_tied_topologies_equal_none(topo, placement):
    assert assign_models(RANKED6, topo, placement) == RANKED6


def test_probmad_is_all_tied():
    topo = make_topology("probmad", 6, density=0.5, seed=3)
    assert assign_models(RANKED6, topo, "central", key=12345) == RANKED6
    assert assign_models(RANKED6, topo, "peripheral", key=7) == RANKED6


def test_path_graph_orders_by_degree_then_betweenness():
    # path 0-1-2-3-4: degrees 1,2,2,2,1; betweenness of 2 is highest (4/6), 1 and 3 tie (3/6)
    path = from_edges(5, "0-1,1-2,2-3,3-4")
    assert placement_order(path, "central") == [2, 1, 3, 0, 4] == centrality_order(path)
    # peripheral reverses the tie classes, keeping ascending ids inside a class
    assert placement_order(path, "peripheral") == [0, 4, 1, 3, 2]
    assert assign_models(["A", "B", "C", "D", "E"], path, "peripheral") == ["A", "C", "E", "D", "B"]


def test_directed_graph_uses_readers_count():
    # 0->1, 0->2, 1->2: agent 0 is read by two agents, 1 by one, 2 by nobody
    topo = from_edges(3, "0->1,0->2,1->2")
    assert assign_models(["big", "mid", "small"], topo, "central") == ["big", "mid", "small"]
    assert assign_models(["big", "mid", "small"], topo, "peripheral") == ["small", "mid", "big"]


def test_assign_errors():
    with pytest.raises(TopologyError, match="--models lists 5 agents but --agents is 6"):
        assign_models(RANKED6[:5], star(6), "central")
    with pytest.raises(TopologyError, match="--strong-agents .middle."):
        assign_models(RANKED6, star(6), "middle")


# ---------------------------------------------------------------- paper graph
def test_paper_placement_graph_degrees():
    topo = paper_placement_graph()
    deg = topo.degrees()
    assert deg[0] == 5 and sorted(deg.values()) == [1, 1, 1, 1, 1, 5]
    assert topo.peers(1)[1] == [0]  # the degree-1 node reads only the hub
    assert topo.density == pytest.approx(1 / 3)
    models = parse_models("gpt-3.5*1,mistral-7b*5", 6)
    central = assign_models(models, topo, "central")
    peripheral = assign_models(models, topo, "peripheral")
    strong_c, strong_p = central.index("gpt-3.5"), peripheral.index("gpt-3.5")
    assert (deg[strong_c], deg[strong_p]) == (5, 1)
    with pytest.raises(TopologyError):
        paper_placement_graph(1)


# ---------------------------------------------------------------- RunConfig wiring
def _cfg(**kw) -> RunConfig:
    base = dict(protocol="sparse", agents=6, topology="star", backend="simulated")
    base.update(kw)
    return RunConfig.flat(**base).validate()


def test_agent_specs_central_and_peripheral_on_star():
    central = [s.model for s in _cfg(models="big*1,small*5", strong_agents="central", center=2).agent_specs()]
    assert central == ["small", "small", "big", "small", "small", "small"]
    peripheral = [s.model for s in _cfg(models="big*1,small*5", strong_agents="peripheral", center=2).agent_specs()]
    assert peripheral == ["big", "small", "small", "small", "small", "small"]  # agent 0 is a leaf here
    none = [s.model for s in _cfg(models="small*5,big*1", strong_agents="none", center=2).agent_specs()]
    assert none == ["small"] * 5 + ["big"]


def test_agent_specs_without_models_uses_model_flag():
    assert [s.model for s in _cfg(model="m").agent_specs()] == ["m"] * 6


def test_agent_settings_model_overrides_placement():
    cfg = _cfg(
        models="big*1,small*5", strong_agents="central", center=2, agent_settings=[{}, {}, {"model": "override"}]
    )
    assert [s.model for s in cfg.agent_specs()] == ["small", "small", "override", "small", "small", "small"]


def test_agent_specs_ring_and_group_protocols_are_tied():
    ring_cfg = _cfg(topology="ring", models="a,b,c,d,e,f", strong_agents="peripheral")
    assert [s.model for s in ring_cfg.agent_specs()] == list("abcdef")
    group = RunConfig.flat(
        protocol="group", agents=4, backend="simulated", models="a,b,c,d", strong_agents="central"
    ).validate()
    assert [s.model for s in group.agent_specs()] == list("abcd")


def test_validate_placement_needs_models():
    with pytest.raises(ConfigError) as err:
        RunConfig.flat(protocol="sparse", agents=6, topology="star", strong_agents="central").validate()
    assert "--strong-agents" in str(err.value) and "--models" in str(err.value)
    RunConfig.flat(protocol="sparse", agents=6, topology="star", strong_agents="none").validate()  # fine


def test_validate_reports_bad_models_as_config_error():
    with pytest.raises(ConfigError, match="--models lists 5 agents but --agents is 6"):
        RunConfig.flat(protocol="mad", agents=6, models="a*5").validate()
