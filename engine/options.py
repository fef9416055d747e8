"""A run option (:class:`Option`), and the error a bad option value raises.

The engine's own options are fields of the configuration parts (:mod:`engine.config`, made
with :func:`engine.config.fields.option`, which builds their Options); a backend's own are fields
of its settings part (:class:`~engine.config.fields.ConfigPart`).

A protocol's own options (S2-MAD's ``tau``, GroupDebate's ``groups``, ...) are declared next to
its generator, in its :class:`~engine.protocols.spec.ProtocolSpec` (``settings``), and read typed
(``cfg.option(TAU)``: a float). From the Options the engine makes the ``debate run`` flags and
their help, the YAML keys, the checks of their values, what the run id hashes and which sweep
axes a protocol reads. This module imports nothing from the engine, so protocol modules and the config
can both use it.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generic, TypeVar, cast

from engine.errors import UserError

_TYPE_NAMES = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "a mapping",
    list: "a list",
}

# Bounds of the run's numbers (Option low/high; --help states each range), shared by the engine's
# options and the protocols'.
MAX_AGENTS = 10_000  # scale tests run 1,000 simulated agents; engine/footprint.py says what more need
MAX_ROUNDS = 100  # papers debate 2-10 rounds
MAX_QUESTIONS = 1_000_000  # --limit: a million questions is a run of millions of calls
MAX_OFFSET = 10_000_000
MAX_SEED = 2**31 - 1  # agent i samples with seed*1000+i, well inside a 64-bit sampler seed
MAX_AGENT_SEED = 2**63 - 1  # an agent's own seed (agent_settings): what vLLM and torch take
MAX_TEMPERATURE = 2  # the OpenAI API's limit; higher only samples noise
MAX_TOKENS = 2**20  # a reply of a million tokens; no model generates more
MAX_CONTEXT = 2**24  # a context of 16M tokens, past the longest any model has
MAX_CPUS = 4096
MAX_GPUS = 1024


# Engine settings of the model-serving backends (flags, YAML keys, and per model under
# placement_resources). They change speed and memory, not what is computed, so they are not part
# of the run id -- except dtype and max_model_len, which change texts and context overflows.
ENGINE_KEYS = (
    "dtype",
    "max_model_len",
    "max_batch",
    "max_num_batched_tokens",
    "chunked_prefill",
    "gpu_memory_utilization",
    "kv_cache_bytes",
    "block_size",
    "cpu_reserved_cores",
)
RESULT_ENGINE_KEYS = ("dtype", "max_model_len")
VLLM_ONLY_KEYS = (
    "max_num_batched_tokens",
    "chunked_prefill",
    "gpu_memory_utilization",
    "kv_cache_bytes",
    "block_size",
    "cpu_reserved_cores",
)


# The sections of ``debate run --help`` an engine option is listed in (``Option.group``), in order,
# with what each holds; a protocol's own options are listed under that protocol instead.
GROUPS: dict[str, str] = {
    "experiment": "what is debated and how: protocol, agents, rounds, data set, seeds",
    "model and sampling": "which models answer and how they sample",
    "output": "where and what results are written",
    "engine tuning": "speed and memory of the serving engine and the run; results stay the same",
    "cluster": "where replicas run on the Ray cluster",
    "simulator": "the fake model of --backend simulated",
    "openai server": "the server of --backend openai",
}


class ConfigError(UserError, ValueError):
    """A bad flag or config key. The message names the flag (``--density``) or file key."""


T = TypeVar("T")


@dataclass(frozen=True)
class Option(Generic[T]):
    """One ``debate run`` option: an engine or backend option (a configuration part's field) or
    one that only some protocols read (their ``ProtocolSpec.settings``); ``T`` is its type.

    name:     the option's flat name; the flag is ``--name-with-dashes``, the YAML key either spelling.
    type:     bool (a ``--x/--no-x`` flag), int, float, str, dict or list (dict and list: YAML only).
    default:  its value when not given; None makes the option optional (``type | None``); ``()``
              for a list: an empty list.
    help:     one line for ``--help``; the protocols that read the option are put in front of it.
              Empty: ``--help`` shows the default only.
    choices:  the allowed values (a str option), or None.
    low/high: bounds of a number (inclusive; ``low_open``: ``low`` itself is out), required for
              an int or float option: every number a run takes is finite and within a range that
              ``--help`` states (:attr:`range_text`); infinity and NaN are always refused.
              ``bound_error``: the message of a value out of bounds, after the flag (default
              ``must be within [low, high]``); it must hold for both ends.
    also:     other types a YAML file or sweep grid may give (``groups: 3``, ``groups: [2, 2, 4]``);
              the protocol reads them.
    cli:      False for options given in YAML only (mappings such as ``model_info``).
    hashed:   whether the run id hashes it (engine options: False for those that change speed,
              memory or where output goes, not results; see ``engine.config.UNHASHED``; a
              protocol option: False for another way to give a hashed one, ``--degree``).
    hash_default: a protocol option's: False, the run id hashes it only at a value other than
              its default (an option added after runs were recorded, whose default is how those
              runs ran: ``--prompt-layout``; they keep their run ids).
    hash_as:  for a file option, what the run id hashes in place of the value given (the file's
              checked content, so a moved file keeps the run id and an edited one changes it);
              it must give the same for the path and for what it returns.
    parse:    reads the value as text (the flag's, or a YAML string) when the type's own reading
              is not enough: :func:`parse_number` takes ``2/5`` for a float. The flag passes its
              text through; a RunConfig parses string values when made, and its check reports
              text that does not parse (the ConfigError ``parse`` raises, naming the flag).
    group:    the ``debate run --help`` section of an engine option (one of :data:`GROUPS`); a
              protocol's options leave it empty (they are listed under their protocol).
    old_name: the option's former name, or None. It still works as a flag and YAML key (with one
              warning; both names with different values is an error), result folders written
              before the rename are read under the new name, and the run id hashes the value
              under the old name, so run ids do not change with the rename.
    default_shown: how ``--help``, ``debate protocols`` and the docs show a None default that
              stands for a value chosen elsewhere (``--memory``: ``full; last for group``, each
              protocol's own); None: :attr:`default_text` shows the default itself.
    """

    name: str
    # builtins.type: inside the class body the field name ``type`` shadows the builtin
    type: builtins.type[T]
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    also: tuple[builtins.type, ...] = ()
    cli: bool = True
    low_open: bool = False
    bound_error: str | None = None
    hashed: bool = True
    hash_default: bool = True
    hash_as: Callable[[Any], Any] | None = None
    parse: Callable[[str, str], Any] | None = None
    group: str = ""
    old_name: str | None = None
    default_shown: str | None = None

    def __post_init__(self) -> None:
        if self.group and self.group not in GROUPS:
            raise TypeError(f"option {self.name}: group must be one of {', '.join(GROUPS)} (got {self.group!r})")
        if self.type not in _TYPE_NAMES:
            raise TypeError(f"option {self.name}: type must be one of bool, int, float, str, dict, list")
        if self.type in (dict, list) and self.cli:
            raise TypeError(
                f"option {self.name}: a {self.type.__name__} has no flag; declare it with cli=False (YAML only)"
            )
        if self.type in (int, float) and not all(
            isinstance(b, (int, float)) and math.isfinite(b) for b in (self.low, self.high)
        ):
            raise TypeError(f"option {self.name}: a number needs finite bounds low and high (--help states them)")
        if isinstance(self.default, (dict, list)):
            raise TypeError(
                f"option {self.name}: a mutable default is shared by every config; use None "
                f"(type dict options default to an empty mapping)"
            )

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def old_flag(self) -> str | None:
        """The flag of :attr:`old_name` (``--placement``), or None."""
        return None if self.old_name is None else "--" + self.old_name.replace("_", "-")

    @property
    def default_text(self) -> str:
        """The default as ``--help`` and ``debate protocols`` show it: ``on``/``off`` for a switch,
        ``none`` when unset, else the value; :attr:`default_shown` when the option has one."""
        if self.default_shown is not None:
            return self.default_shown
        if self.default is None or self.default == ():
            return "none"
        if self.type is bool:
            return "on" if self.default else "off"
        return str(self.default)

    @property
    def range_text(self) -> str | None:
        """The bounds of a number option as ``--help`` and its errors show them (``[1, 10000]``,
        ``(0, 1]``); None for other options."""
        if self.type not in (int, float):
            return None
        return _bounds(self.low, self.high, self.low_open)

    def check(self, value: Any, name: str | None = None) -> None:
        """Raise a ConfigError naming the flag (or ``name``: ``agent_settings[2].temperature``)
        when ``value`` is not a valid value of this option."""
        where = name or self.flag
        if value is None and self.default is None:
            return
        if self.parse is not None and isinstance(value, str):
            value = self.parse(value, where)  # raises on text it cannot read
        if not any(_is_type(value, t) for t in (self.type, *self.also)):
            kinds = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in (self.type, *self.also))
            raise ConfigError(f"{where} must be {kinds} (got {value!r})")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{where} {value!r} is not one of {', '.join(map(str, self.choices))}")
        if self.type in (int, float) and _is_type(value, self.type):  # not a value of an ``also`` type
            if not math.isfinite(value):
                raise ConfigError(f"{where} must be a finite number within {self.range_text} (got {value})")
            low, high = cast(float, self.low), cast(float, self.high)  # both set: __post_init__
            if (value <= low if self.low_open else value < low) or value > high:
                raise ConfigError(f"{where} {self.bound_error or f'must be within {self.range_text}'} (got {value})")


def parse_number(text: str, flag: str) -> float:
    """A number written as a decimal or a fraction (``0.4``, ``2/5``, ``1``) as a float, read
    exactly (:class:`fractions.Fraction`, never ``eval``); a ConfigError naming ``flag`` otherwise."""
    try:
        return float(Fraction(text.strip().replace(" ", "")))
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"{flag} {text!r} is not a number or a fraction such as 2/5") from None


def _is_type(value: Any, typ: type) -> bool:
    if typ is bool:
        return isinstance(value, bool)
    if typ is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typ is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, typ)


def _bounds(low: float | None, high: float | None, low_open: bool = False) -> str:
    left = "(-inf" if low is None else f"{'(' if low_open else '['}{_number(low)}"
    return f"{left}, {'inf)' if high is None else f'{_number(high)}]'}"


def _number(x: float) -> str:
    """A bound as written: ``10000`` (not ``1e+04``), ``0.5``."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def merge_options(declared: dict[str, list[Option]], reserved: set[str]) -> dict[str, Option]:
    """name -> Option over every protocol's ``settings`` (``declared``: protocol -> its options).
    Two protocols reading one option must declare the same Option (import it from the module that
    owns it); an option may not reuse a name the engine itself has (``reserved``)."""
    out: dict[str, Option] = {}
    owner: dict[str, str] = {}
    for protocol, options in declared.items():
        for opt in options:
            if opt.name in reserved:
                raise TypeError(f"protocol {protocol}: option {opt.name!r} is already a run option of the engine")
            if opt.name in out and out[opt.name] != opt:
                raise TypeError(
                    f"protocol {protocol}: option {opt.name!r} differs from protocol "
                    f"{owner[opt.name]}'s; declare it once and import it"
                )
            out.setdefault(opt.name, opt)
            owner.setdefault(opt.name, protocol)
    return out


__all__ = ["GROUPS", "ConfigError", "Option", "merge_options", "parse_number"]
