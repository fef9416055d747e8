"""Configuration parts: dataclasses whose fields are run options.

A part (:class:`ConfigPart`) is one concern of a run's configuration (the experiment, sampling,
the cluster, engine tuning, output, one backend's own settings). Each field is declared once,
with :func:`option`: its type is the field's annotation, its default the field's default, and
the option's help, bounds and choices sit beside it; :func:`config_part` turns the fields into
:class:`~engine.options.Option` objects (``cls.OPTIONS``), from which come the flag and its
``--help`` line, the YAML key, the value check and whether the run id hashes it. The flat flag
and key names are the field names (:mod:`engine.config.flat` maps them to their parts).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from engine.options import Option

OPTION = "option"  # the field metadata key holding an option's declaration
P = TypeVar("P", bound="ConfigPart")


def option(default: Any, help: str = "", **declared: Any) -> Any:
    """A part's field that is a run option: ``default`` (an empty ``{}`` or ``[]`` gives each
    config its own), the ``--help`` line, and the :class:`~engine.options.Option` settings
    (``choices``, ``low``/``high``, ``cli``, ``hashed``, ``parse``, ``old_name`` ...)."""
    meta = {OPTION: {"help": help, **declared}}
    if isinstance(default, (dict, list)):
        if default:
            raise TypeError("a part's mutable default must be empty ({} or [])")
        return dataclasses.field(default_factory=type(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class ConfigPart:
    """One part of a run's configuration; its option fields are :attr:`OPTIONS`."""

    GROUP: ClassVar[str] = ""  # the ``debate run --help`` section of its options
    OPTIONS: ClassVar[tuple[Option[Any], ...]] = ()

    def items(self) -> dict[str, Any]:
        """Option name -> value."""
        return {opt.name: getattr(self, opt.name) for opt in self.OPTIONS}

    def check(self, models: list[str]) -> None:
        """Checks of this part that need the run's ``models`` (each option's own check is run
        anyway); none unless a part has some."""

    def hashed_items(self) -> dict[str, Any]:
        """The options that change results (``Option.hashed``), name -> value."""
        return {opt.name: getattr(self, opt.name) for opt in self.OPTIONS if opt.hashed}


def config_part(group: str, hashed: bool = True) -> Callable[[type[P]], type[P]]:
    """Make a dataclass's :func:`option` fields its :attr:`ConfigPart.OPTIONS`, listed under
    ``group`` in ``--help``; ``hashed=False``: none of them changes results unless its own
    declaration says so (``hashed=True``)."""

    def wrap(cls: type[P]) -> type[P]:
        hints = typing.get_type_hints(cls)
        opts: list[Option[Any]] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            declared = f.metadata.get(OPTION)
            if declared is None:
                continue
            typ, also = _option_types(hints[f.name])
            default = f.default if f.default is not dataclasses.MISSING else _empty_default(typ)
            opts.append(Option(f.name, typ, default, group=group, also=also, **{"hashed": hashed, **declared}))
        cls.GROUP, cls.OPTIONS = group, tuple(opts)
        return cls

    return wrap


def _empty_default(typ: type) -> Any:
    """The option default of a field made with an empty ``{}`` / ``[]``: None / ``()``."""
    return () if typ is list else None


def _option_types(hint: Any) -> tuple[type, tuple[type, ...]]:
    """The option's type and its ``also`` types from a field's annotation (``float | None``:
    float; ``float | dict[str, float]``: float, also dict; ``list[Any]``: list)."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    members = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    kinds = [typing.get_origin(m) or m for m in members]
    return kinds[0], tuple(kinds[1:])
