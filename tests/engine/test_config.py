import pytest

from engine.config import ConfigError, RunConfig, config_from_mapping
from engine.protocols.group_debate import GROUPS
from engine.protocols.s2mad import TAU


@pytest.mark.parametrize(
    "kwargs, flag",
    [
        ({"protocol": "nope"}, "--protocol"),
        ({"agents": 0}, "--agents"),
        ({"rounds": 0}, "--rounds"),
        ({"protocol": "probmad"}, "--density"),
        ({"protocol": "sparse"}, "--density"),
        ({"density": 1.5}, "--density"),
        ({"limit": 0}, "--limit"),
        ({"top_p": 0}, "--top-p"),
        ({"backend": "gpu"}, "--backend"),
        ({"protocol": "sparse", "topology": "edges"}, "--edges"),
    ],
)
def test_bad_values_name_their_flag(kwargs, flag):
    with pytest.raises(ConfigError, match=flag):
        RunConfig.flat(**kwargs).validate()


def test_yaml_keys_and_agent_settings():
    cfg = config_from_mapping({"max-tokens": 64, "agents": 2, "agent_settings": [{"temperature": 0.0, "model": "x"}]})
    specs = cfg.validate().agent_specs()
    assert cfg.sampling.max_tokens == 64 and specs[0].temperature == 0.0 and specs[0].model == "x"
    assert specs[1].temperature == 0.7 and specs[1].max_tokens == 64 and specs[0].seed != specs[1].seed
    with pytest.raises(ConfigError, match="unknown key 'agnets'"):
        config_from_mapping({"agnets": 3})
    with pytest.raises(ConfigError, match=r"agent_settings\[0\]: unknown key"):
        config_from_mapping({"agent_settings": [{"temp": 1}]}).validate()


def test_run_id_is_deterministic_and_ignores_output_dir():
    a, b = RunConfig.flat(out="x"), RunConfig.flat(out="y")
    assert a.run_id() == b.run_id()
    assert RunConfig.flat(seed=1).run_id() != a.run_id()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"tau": "abc"}, "--tau must be a number (got 'abc')"),
        ({"filter": "no"}, "--filter must be true or false (got 'no')"),
        ({"stage_rounds": 1.5}, "--stage-rounds must be an integer (got 1.5)"),
        ({"stage_rounds": 0}, "--stage-rounds must be within [1, 100] (got 0)"),
        ({"similarity": "cosine"}, "--similarity 'cosine' is not one of answer, embedding"),
        ({"cortex_s_offset": float("inf")}, "--cortex-s-offset must be a finite number within [0, 1000] (got inf)"),
        ({"groups": 2.5}, "--groups must be a string or an integer or a list (got 2.5)"),
        ({"model_info": [1]}, "--model-info must be a mapping (got [1])"),
    ],
)
def test_protocol_options_are_checked_by_their_declaration(data, message):
    """A protocol option's type, allowed values and bounds come from its Option (engine.options)."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping(data).validate()
    assert str(err.value) == message


def test_protocol_options_accept_what_the_protocols_read():
    for groups in ("2+1", "2", 2, [2, 1]):
        assert config_from_mapping({"protocol": "group", "groups": groups}).validate().option(GROUPS) == groups
    assert config_from_mapping({"tau": 0, "density": 1}).validate().option(TAU) == 0  # YAML ints for floats


def test_run_id_hashes_the_protocol_options_a_run_reads():
    mad = RunConfig().run_id()
    assert RunConfig.flat(tau=0.1, groups="3", cortex_memory="full").run_id() == mad  # other protocols' options
    s2 = RunConfig.flat(protocol="s2mad")
    assert RunConfig.flat(protocol="s2mad", groups="3").run_id() != s2.run_id()
    assert RunConfig.flat(protocol="s2mad", tau=0.1).run_id() == s2.run_id()  # tau unused with answer similarity
    emb = RunConfig.flat(protocol="s2mad", similarity="embedding")
    assert RunConfig.flat(protocol="s2mad", similarity="embedding", tau=0.1).run_id() != emb.run_id()
    assert (
        RunConfig.flat(protocol="sparse", density=0.5, center=1).run_id()
        == RunConfig.flat(protocol="sparse", density=0.5).run_id()
    )
    assert (
        RunConfig.flat(protocol="sparse", topology="star", center=1).run_id()
        != RunConfig.flat(protocol="sparse", topology="star").run_id()
    )


def test_two_protocols_sharing_an_option_declare_it_once():
    from engine.options import Option, merge_options

    a = Option("memory", str, "full", "x")
    assert merge_options({"p": [a], "q": [a]}, set()) == {"memory": a}
    with pytest.raises(TypeError, match="option 'memory' differs from protocol p's"):
        merge_options({"p": [a], "q": [Option("memory", str, "last", "x")]}, set())
    with pytest.raises(TypeError, match="option 'seed' is already a run option"):
        merge_options({"p": [Option("seed", int, 0, "x", low=0, high=9)]}, {"seed"})


def test_engine_options_are_declared_once():
    """Every engine field is an Option in ENGINE_OPTIONS; the run id leaves out exactly the ones
    declared ``hashed=False`` (unhashed_options()), which include the backends' speed/memory settings."""
    from engine.config import PROTOCOL_OPTIONS, engine_options, unhashed_options
    from engine.options import ENGINE_KEYS, RESULT_ENGINE_KEYS

    names = [o.name for o in RunConfig.all_options()]
    assert names == [o.name for o in engine_options()] + list(PROTOCOL_OPTIONS)
    assert len(set(names)) == len(names) == len(RunConfig().to_dict())  # one declaration, one flat key each
    assert set(unhashed_options()) == {o.name for o in engine_options() if not o.hashed}
    assert {k for k in ENGINE_KEYS if k not in RESULT_ENGINE_KEYS} <= set(unhashed_options())
    assert not set(RESULT_ENGINE_KEYS) & set(unhashed_options())
    base = RunConfig()
    for name in unhashed_options():
        assert name in base.to_dict()
    assert RunConfig.flat(dtype="float32").run_id() != base.run_id()
    assert RunConfig.flat(replicas=4, max_batch=8).run_id() == base.run_id()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"replicas": 0}, "--replicas must be within [1, 1024] (got 0)"),
        ({"call_retries": -1}, "--call-retries must be within [0, 1000] (got -1)"),
        ({"top_p": 0.0}, "--top-p must be in (0, 1] (got 0.0)"),
        ({"dtype": "fp8"}, "--dtype 'fp8' is not one of auto, bfloat16, float32"),
        ({"temperature": "hot"}, "--temperature must be a number (got 'hot')"),
        ({"max_error_rate": 1.5}, "--max-error-rate is a fraction of calls in [0, 1]; 1 never stops (got 1.5)"),
        (
            {"gpus_per_replica": 0},
            "--gpus-per-replica must be a positive number of GPUs up to 1024, fractions allowed (got 0)",
        ),
    ],
)
def test_engine_options_are_checked_by_their_declaration(data, message):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(data).validate()
    assert str(err.value) == message
