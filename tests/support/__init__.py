"""Helpers shared by the tests (plain modules, no fixtures: fixtures are in the conftest.py files,
which no module imports). Some are also run as scripts by path (orphan_check, vllm_check,
vllm_images_check). Test modules import from here only, never from each other or a conftest
(tests/test_layout.py checks it)."""
