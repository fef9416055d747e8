import pytest

from engine.config import ConfigError, RunConfig, config_from_mapping


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
        RunConfig(**kwargs).validate()


def test_yaml_keys_and_agent_settings():
    cfg = config_from_mapping({"max-tokens": 64, "agents": 2, "agent_settings": [{"temperature": 0.0, "model": "x"}]})
    specs = cfg.validate().agent_specs()
    assert cfg.max_tokens == 64 and specs[0].temperature == 0.0 and specs[0].model == "x"
    assert specs[1].temperature == 0.7 and specs[1].max_tokens == 64 and specs[0].seed != specs[1].seed
    with pytest.raises(ConfigError, match="unknown key 'agnets'"):
        config_from_mapping({"agnets": 3})
    with pytest.raises(ConfigError, match=r"agent_settings\[0\]: unknown key"):
        config_from_mapping({"agent_settings": [{"temp": 1}]}).validate()


def test_run_id_is_deterministic_and_ignores_output_dir():
    a, b = RunConfig(out="x"), RunConfig(out="y")
    assert a.run_id() == b.run_id()
    assert RunConfig(seed=1).run_id() != a.run_id()
