"""Checks of what a user points the engine at, each failure one line naming the flag or file.

* :func:`load_yaml`: a YAML file (``--config``, a sweep file, ``--reconcile-samples``) read with
  bounds: a file over :data:`MAX_YAML_BYTES` is refused before it is read, and aliases (``*name``)
  may repeat at most :data:`MAX_ALIAS_NODES` nodes in all, so a "billion laughs" file (aliases of
  aliases, each a list of the one before) fails at once instead of filling the memory; an alias
  inside its own anchor (a cycle) is refused too.
* :func:`check_out_dir`: an output folder that can be created and written in.
* :func:`bad_text`: text that cannot be written as UTF-8 (a lone surrogate, from a JSON
  ``"\\ud800"`` escape or from bytes of a file name or argument that are not UTF-8).

This module imports nothing from the engine but its errors, so the config, the protocols and the
data loaders can all use it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from engine.errors import UserError

MAX_YAML_BYTES = 16 * 2**20  # a config or sweep file is a few KiB; samples files a few MiB
MAX_ALIAS_NODES = 100_000  # nodes that aliases may add to what the file writes out

__all__ = ["MAX_ALIAS_NODES", "MAX_YAML_BYTES", "bad_text", "check_out_dir", "load_yaml"]


def load_yaml(path: str | os.PathLike[str], where: str, error: Callable[[str], UserError], kind: str = "YAML") -> Any:
    """The one YAML document of the file ``path`` (None for an empty file), read safely
    (:class:`yaml.SafeLoader`) and with the bounds of the module docstring. Every problem (no
    such file, too large, not UTF-8, not valid YAML, nested too deeply, aliases expanding too far)
    raises ``error(message)``; the message starts with ``where`` (``--config c.yaml``) and calls
    the file's format ``kind`` (``YAML or JSON`` for a file that may be either)."""
    p = Path(path)
    if not p.is_file():
        raise error(f"{where}: no such file")
    size = p.stat().st_size
    if size > MAX_YAML_BYTES:
        limit = MAX_YAML_BYTES // 2**20
        raise error(f"{where}: {size / 2**20:.1f} MiB is too large for a {kind} file here (at most {limit} MiB)")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{where}: line {line}: not valid UTF-8 ({exc.reason})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_aliases(node, where, error)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise error(f"{where}: not valid {kind}: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply to read") from None
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_aliases(root: yaml.Node, where: str, error: Callable[[str], UserError]) -> None:
    """Refuse a node graph whose aliases repeat more than :data:`MAX_ALIAS_NODES` nodes when
    expanded, or that holds a cycle. Counts each node once (a depth-first walk with the size of
    every node kept), so the check takes time in the file's length, not in the expanded size."""
    size: dict[int, int] = {}  # node id -> nodes it expands to
    open_: set[int] = set()  # nodes on the current path
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            continue
        if key in size:
            continue
        open_.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_:
                line = child.start_mark.line + 1
                raise error(f"{where}: line {line}: an alias refers to a value that holds it (a cycle)")
            stack.append((child, False))
    repeated = size[id(root)] - len(size)
    if repeated > MAX_ALIAS_NODES:
        raise error(
            f"{where}: its aliases (*name) repeat {repeated:,} values, more than the {MAX_ALIAS_NODES:,} allowed; "
            f"write the values out or use fewer aliases"
        )


def check_out_dir(path: str | os.PathLike[str], flag: str, error: Callable[[str], UserError]) -> None:
    """Make sure ``path`` is a folder the run can write in: create it (and its parents) if it is
    not there, then create and remove a file in it. A file in its place, a folder that cannot be
    created or one that cannot be written in (read-only, no permission) raises ``error`` with one
    line naming ``flag``."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise error(f"{flag} {path}: is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"{flag} {path}: cannot create the folder ({exc.strerror or exc})") from None
    try:
        fd, probe = tempfile.mkstemp(dir=p, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise error(f"{flag} {path}: cannot write in the folder ({exc.strerror or exc})") from None


def bad_text(value: Any) -> str | None:
    """Why ``value`` (a string, or a list, tuple or mapping holding strings at any depth) cannot
    be written as UTF-8 text, e.g. ``character 3 is '\\udcff', a lone surrogate``; None when it
    can (or holds no string)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"character {exc.start + 1} is {value[exc.start]!r}, a lone surrogate"
        return None
    if isinstance(value, dict):
        return next((why for item in value.items() if (why := bad_text(item)) is not None), None)
    if isinstance(value, (list, tuple)):
        return next((why for item in value if (why := bad_text(item)) is not None), None)
    return None
