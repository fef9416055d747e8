"""The run configuration: typed parts (:mod:`engine.config.run`) with flat names at the edge
(:mod:`engine.config.flat`). The names importable from ``engine.config`` before it became a
package still are."""

from engine.config.cluster import DEVICES, EMBEDDING_DEVICES, ClusterConfig
from engine.config.experiment import TIE_BREAKS, ExperimentConfig
from engine.config.fields import ConfigPart, config_part, option
from engine.config.flat import (
    config_from_mapping,
    did_you_mean,
    load_config_file,
    new_names,
    stored_config,
)
from engine.config.output import OutputConfig
from engine.config.run import (
    AGENT_SEED,
    CORE_PARTS,
    ENGINE_OPTIONS,
    HASHED_AS_OLD,
    OLD_NAMES,
    PLACEMENT_OPTIONS,
    PROTOCOL_OPTIONS,
    RESOURCE_AMOUNT,
    AgentSpec,
    ProtocolOptions,
    RunConfig,
    engine_option,
    engine_options,
    option_readers,
    resolve_backend,
    unhashed_options,
)
from engine.config.sampling import CONTEXT_OVERFLOW, DEFAULT_MODEL, DTYPES, SamplingConfig
from engine.config.tuning import TuningConfig
from engine.options import ConfigError

__all__ = [
    "AGENT_SEED",
    "CONTEXT_OVERFLOW",
    "CORE_PARTS",
    "DEFAULT_MODEL",
    "DEVICES",
    "DTYPES",
    "EMBEDDING_DEVICES",
    "ENGINE_OPTIONS",
    "HASHED_AS_OLD",
    "OLD_NAMES",
    "PLACEMENT_OPTIONS",
    "PROTOCOL_OPTIONS",
    "RESOURCE_AMOUNT",
    "TIE_BREAKS",
    "AgentSpec",
    "ClusterConfig",
    "ConfigError",
    "ConfigPart",
    "ExperimentConfig",
    "OutputConfig",
    "ProtocolOptions",
    "RunConfig",
    "SamplingConfig",
    "TuningConfig",
    "config_from_mapping",
    "config_part",
    "did_you_mean",
    "engine_option",
    "engine_options",
    "load_config_file",
    "new_names",
    "option",
    "option_readers",
    "resolve_backend",
    "stored_config",
    "unhashed_options",
]
