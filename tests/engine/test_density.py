"""``--density`` as a fraction, snapped to a possible regular graph, and ``--degree`` (sparse MAD);
run ids of densities given before stay (engine/protocols/mad.py, engine/options.py)."""

from __future__ import annotations

import logging

import pytest

from app.sweep import normalise
from engine.config import RunConfig, config_from_mapping
from engine.options import ConfigError, parse_number
from engine.protocols.mad import DEGREE, DENSITY


def sparse(**kw) -> RunConfig:
    return config_from_mapping({"protocol": "sparse", "backend": "simulated", **kw})


def test_a_fraction_is_read_exactly_and_is_the_same_run_as_its_decimal():
    assert parse_number("2/5", "--density") == 0.4 and parse_number(" 1 / 3 ", "--density") == 1 / 3
    a, b = sparse(agents=6, density="2/5"), sparse(agents=6, density=0.4)
    assert a.option(DENSITY) == 0.4 and a.run_id() == b.run_id()
    with pytest.raises(ConfigError, match=r"--density '2/x' is not a number or a fraction such as 2/5"):
        sparse(agents=6, density="2/x").validate()
    with pytest.raises(ConfigError, match="--density '1/0'"):
        sparse(agents=6, density="1/0").validate()


def test_run_ids_of_densities_given_before_are_unchanged():
    """Ids computed by the engine before fractions and snapping existed."""
    assert sparse(agents=6, density=0.4).run_id() == "sparse-2d2e0b4151"
    assert sparse(agents=4, density=0.333333).run_id() == "sparse-faada9b3d5"  # accepted then: kept as given
    assert sparse(agents=4, density=0.333333).option(DENSITY) == 0.333333


def test_a_density_within_1e_3_of_a_possible_one_snaps_with_one_note(caplog):
    with caplog.at_level(logging.WARNING, logger="engine.protocols.mad"):
        a = sparse(agents=4, density=0.333)
        b = sparse(agents=4, density=0.333)
    assert a.option(DENSITY) == 1 / 3 and a.run_id() == sparse(agents=4, density="1/3").run_id() == b.run_id()
    notes = [r.getMessage() for r in caplog.records if "0.333" in r.getMessage()]
    assert notes == ["--density 0.333 with --agents 4 has no regular graph; using the nearest, 1/3 (k=1)"]
    a.validate()
    far = sparse(agents=4, density=0.5)  # 0.167 away from 1/3 and 2/3: an error listing both
    assert far.option(DENSITY) == 0.5
    with pytest.raises(Exception, match=r"1/3 \(k=1\), 2/3 \(k=2\), 1 \(k=3\)"):
        from engine.protocols import validate_protocol

        validate_protocol(far.validate())


def test_probmad_density_is_a_probability_and_never_snaps():
    p = config_from_mapping({"protocol": "probmad", "agents": 4, "density": 0.333})
    assert p.option(DENSITY) == 0.333
    assert config_from_mapping({"protocol": "probmad", "agents": 4, "density": "2/5"}).option(DENSITY) == 0.4


def test_degree_is_another_way_to_give_the_density():
    by_degree = sparse(agents=6, degree=2)
    assert by_degree.option(DENSITY) == 0.4 and by_degree.run_id() == sparse(agents=6, density=0.4).run_id()
    sparse(agents=6, degree=2, density="2/5").validate()  # both, agreeing
    disagree = r"--degree 2 and --density 0.6 disagree with --agents 6 \(degree 2 is density 0.4\)"
    with pytest.raises(ConfigError, match=disagree):
        sparse(agents=6, degree=2, density=0.6).validate()
    with pytest.raises(ConfigError, match=r"--degree 3 with --agents 5: no regular graph .*degrees possible: 0, 2, 4"):
        sparse(agents=5, degree=3).validate()
    with pytest.raises(ConfigError, match=r"--degree 6 with --agents 6: .*0 to 5 peers"):
        sparse(agents=6, degree=6).validate()
    with pytest.raises(ConfigError, match=r"--density \(or --degree\) is required"):
        sparse(agents=6).validate()
    # not read with another graph or protocol: a sweep resets it
    ring = sparse(agents=6, topology="ring", degree=2)
    assert ring.option(DENSITY) is None and normalise(ring).option(DEGREE) is None
    assert normalise(config_from_mapping({"protocol": "mad", "degree": 2})).option(DEGREE) is None


def test_the_flags_take_a_fraction_and_a_degree():
    import argparse

    from app.cli import _add_run_flags, parse_run_config

    parser = argparse.ArgumentParser()
    _add_run_flags(parser)

    def flags(*argv: str) -> RunConfig:
        return parse_run_config(parser.parse_args(["--backend", "simulated", "--protocol", "sparse", *argv]))

    by_fraction, by_degree = flags("--agents", "6", "--density", "2/5"), flags("--agents", "6", "--degree", "2")
    assert by_fraction.option(DENSITY) == by_degree.option(DENSITY) == 0.4
    assert by_fraction.run_id() == by_degree.run_id() == sparse(agents=6, density=0.4).run_id()
    with pytest.raises(ConfigError, match="--density 'two' is not a number"):
        flags("--agents", "6", "--density", "two")
