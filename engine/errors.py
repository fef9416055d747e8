"""The base class of the mistakes a user can fix (:class:`UserError`).

This module imports nothing from the engine, so every module (config, tasks, topologies,
actors) can subclass it without an import cycle.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input that the user can fix, found before or while a run starts.

    What counts: a bad flag or config key or value, a dataset file or row that cannot be read, a
    protocol setting its topology cannot build, a model that cannot be found or loaded, an
    endpoint that does not answer, resources no node offers within --placement-timeout. The
    message names the flag, file or row; ``debate`` prints it as one line (``debate: error: ...``)
    and exits with status 2. Anything else the engine did not expect, a plain ``ValueError``
    included, is a bug: it surfaces with its traceback and exit status 1.
    """
