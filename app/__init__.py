"""The commands: ``debate`` and its subcommands, the floor above :mod:`actors`.

``app.cli`` parses the flags and hands a :class:`engine.config.RunConfig` to the driver
(:mod:`actors.driver`); ``app.sweep`` runs a grid of runs; ``app.report``, ``app.show`` (with
``app.page`` for ``--html``), ``app.transcript`` and ``app.rescore`` read result folders; and
``app.plan_table`` lays out ``debate sweep --list``. Below it, :mod:`engine` (the pure core) and
:mod:`backends` import nothing from here.
"""
