"""The configuration's flat edge: option names as flags and YAML keys give them.

:func:`config_from_mapping` makes a :class:`~engine.config.run.RunConfig` from a mapping with
flag-named keys (a ``--config`` YAML file, a sweep cell), with one line for an unknown key
naming the closest known one; options renamed since (:data:`OLD_NAMES`) still work under their
old names, with a warning, and result folders written before a rename read under the name now
(:func:`stored_config`).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.config.run import OLD_NAMES, RunConfig
from engine.inputs import load_yaml
from engine.options import ConfigError


def stored_config(config: dict[str, Any]) -> dict[str, Any]:
    """A runs row's ``config`` (parsed JSON) with the options stored by an old name (a folder
    written before ``placement`` became ``strong_agents``) under their names now, so old and new
    result folders read alike."""
    out = dict(config)
    for old, new in OLD_NAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def new_names(data: dict[Any, Any], source: str) -> tuple[dict[Any, Any], list[str]]:
    """``data`` (option -> value; dashed or underscored keys) with each option given by its old
    name (:data:`OLD_NAMES`) moved to its name now, and one warning line per old name used
    (``--placement is now --strong-agents; the old name still works``). ``source`` says where
    ``data`` came from: ``"flags"`` (lines name the flags) or a file (lines name it and its keys).
    Both names given with different values: a ConfigError naming both."""
    out = {k: v for k, v in data.items() if str(k).replace("-", "_") not in OLD_NAMES}
    lines = []
    for key, value in data.items():
        new = OLD_NAMES.get(str(key).replace("-", "_"))
        if new is None:
            continue
        old_name = str(key).replace("-", "_")
        if source == "flags":
            old, now, where = f"--{old_name.replace('_', '-')}", f"--{new.replace('_', '-')}", ""
        else:
            old, now, where = old_name, new, f"{source}: "
        given = [k for k in out if str(k).replace("-", "_") == new]
        if given and out[given[0]] != value:
            raise ConfigError(
                f"{where}{old} {value!r} and {now} {out[given[0]]!r} are both given; keep {now} ({old} is its old name)"
            )
        if not given:
            out[new] = value
        lines.append(f"{where}{old} is now {now}; the old name still works")
    return out, lines


def did_you_mean(word: str, known: Iterable[str], quote: bool = False) -> str:
    """`` (did you mean 'x'?)`` naming the closest of ``known`` to a mistyped ``word``
    (:func:`difflib.get_close_matches`), else ``; see debate run --help``. An option's old name
    (:data:`OLD_NAMES`) comes with its name now: `` (did you mean 'placement', now 'strong_agents'?)``."""
    close = difflib.get_close_matches(word, list(known), n=1)
    if not close:
        return "; see debate run --help"
    name, now = (repr(close[0]), repr(OLD_NAMES.get(close[0]))) if quote else (close[0], OLD_NAMES.get(close[0]))
    return f" (did you mean {name}, now {now}?)" if close[0] in OLD_NAMES else f" (did you mean {name}?)"


def config_from_mapping(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Build a RunConfig from a mapping with flag-named keys (dashes or underscores); an unknown
    key is one line naming ``source``, the key and the closest known key. An option's old name
    (:data:`OLD_NAMES`) works as its name now, with a warning (:func:`new_names`)."""
    fields = {opt.name for opt in RunConfig.all_options()}
    data, renamed = new_names(data, source)
    for line in renamed:
        logging.getLogger(__name__).warning(line)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise ConfigError(f"{source}: unknown key {key!r}{did_you_mean(name, [*fields, *OLD_NAMES], quote=True)}")
        kwargs[name] = value
    return RunConfig.from_options(kwargs)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The option -> value mapping of a ``--config`` YAML file (:func:`engine.inputs.load_yaml`:
    bounded in size and aliases); a ConfigError naming the file otherwise."""
    data = load_yaml(path, f"--config {path}", ConfigError) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: top level must be a mapping of option: value")
    return data
