"""The run configuration as the modules below :mod:`engine.config.run` read it.

:class:`~engine.config.run.RunConfig` is built from the protocols' option declarations, so the
protocols cannot import it; they type the configuration they are handed as :class:`RunView`, the
part of ``RunConfig``'s interface they read (mypy checks that ``RunConfig`` has it).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from engine.config.experiment import ExperimentConfig
from engine.config.sampling import AgentSpec, SamplingConfig
from engine.options import Option

T = TypeVar("T")


class RunView(Protocol):
    """What a protocol reads of its run: the experiment's and the sampling's parts, the shape it
    runs at, its own options (``cfg.option(TAU)``) and each agent's settings."""

    @property
    def experiment(self) -> ExperimentConfig: ...

    @property
    def sampling(self) -> SamplingConfig: ...

    @property
    def n_agents(self) -> int: ...

    @property
    def n_rounds(self) -> int: ...

    def option(self, opt: Option[T]) -> T: ...

    def value(self, name: str) -> Any: ...

    def set_value(self, name: str, value: Any) -> None: ...

    def agent_specs(self) -> list[AgentSpec]: ...

    def options_read(self) -> frozenset[str]: ...
