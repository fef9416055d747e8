"""Where and what results are written."""

from __future__ import annotations

from dataclasses import dataclass

from engine.config.fields import ConfigPart, config_part, option


@config_part("output", hashed=False)
@dataclass
class OutputConfig(ConfigPart):
    """Output: none of it changes results."""

    out: str | None = option(None, "output directory (default runs/<timestamp>)")
    out_shared: bool = option(
        False, ("--out is storage every node sees, so the writer may run on any node (default: on the driver's node)")
    )
    progress: bool = option(True, "progress bar of the questions on stderr (default on)")
    wait: bool = option(
        False,
        (
            "when another process is running this run (same run id, same --out), wait for it to end "
            "and then resume what it left, instead of stopping with an error naming it (default off)"
        ),
    )
    store_prompts: bool = option(
        True,
        (
            "store the messages every call sent (the prompts table, each distinct text once; "
            "calls.prompt lists a call's); off leaves both empty (default on)"
        ),
    )
    # a name engine.results.sinks registers; checked by actors/prepare.py (the registry is open)
    sink: str = option(
        "parquet",
        "where the writer stores the rows: a results sink registered by name (engine/results/sinks.py); "
        "parquet (default) is the one resume, debate report and show read",
    )
