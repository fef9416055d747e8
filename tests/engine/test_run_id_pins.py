"""Run ids (and the stored config) of today's configurations never change under a refactor.

tests/data/pinned_run_ids.json holds configurations of every protocol and backend, each engine
option and each protocol option at a value other than its default, as flat flag-named mappings
(what a YAML file or the flags give), with the run id the engine gave them when the file was
written (before the configuration became typed parts). A run id that moves would make every
result folder of that configuration start over, or mix two configurations under one id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import config_from_mapping

PINS = json.loads((Path(__file__).parents[1] / "data" / "pinned_run_ids.json").read_text())


def test_the_pins_cover_every_protocol_and_backend():
    from backends.registry import backend_choices
    from engine.protocols import SPECS

    pairs = {(p["options"].get("protocol", "mad"), p["options"]["backend"]) for p in PINS}
    assert {(p, b) for p in SPECS for b in backend_choices() if b != "auto"} <= pairs


@pytest.mark.parametrize("pin", PINS, ids=lambda p: json.dumps(p["options"], sort_keys=True)[:90])
def test_run_id_is_the_pinned_one(pin):
    assert config_from_mapping(dict(pin["options"]), "pins").run_id() == pin["run_id"]


@pytest.mark.parametrize("pin", [p for p in PINS if "config" in p], ids=lambda p: p["options"]["protocol"])
def test_the_stored_config_is_the_pinned_one(pin):
    """The runs row's ``config`` JSON keeps its flat keys and values (report and show read it)."""
    assert json.loads(config_from_mapping(dict(pin["options"]), "pins").to_json()) == pin["config"]
