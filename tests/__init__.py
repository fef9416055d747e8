"""The test suite, grouped by area (README "Tests"); shared helpers in :mod:`tests.support`.

A regular package, so that pytest puts the repository root on ``sys.path`` (its default
``prepend`` import mode) and ``tests.support`` imports under a plain ``pytest`` from anywhere."""
