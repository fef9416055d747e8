"""What a replica needs from a model backend: the :class:`Backend` abstract class.

A backend says how the replica feeds it with :attr:`Backend.mode`:

* ``"batch"`` — ``generate(requests)`` answers a list at once (the simulated model); the replica
  hands it up to ``max_batch`` pending requests per hop, in a worker thread;
* ``"continuous"`` — ``add``/``step``/``has_work``/``abort_all`` (transformers): new requests join
  the running batch between decode steps;
* ``"async"`` — ``agenerate(request)`` (vLLM's ``AsyncLLM``, an OpenAI-compatible server): each
  request is awaited in the replica's event loop; the backend bounds its own requests in flight.

Every backend also answers ``generate(requests)`` (benchmarks and tests call it directly), says
whether it is ``simulated`` and whether it ``accepts_images``, and reports its resolved engine ``settings`` and counters
(``stats``). ``check_alive`` raises :class:`~engine.records.BackendDead` when its engine died for
good, and ``kill_engine_processes`` ends the engine's processes before the replica exits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from backends import model_store
from engine.errors import UserError
from engine.records import GenRequest, GenResult

MODES = ("batch", "continuous", "async")


class Backend(ABC):
    mode: ClassVar[str] = "batch"
    simulated: ClassVar[bool] = False
    # Whether requests may carry image content parts (questions with an image, engine.tasks). The
    # class says whether the backend can send images at all, which the driver checks before any
    # actor starts; a backend whose answer depends on the loaded model (vLLM) sets it on the
    # instance once loaded, and the driver checks the replicas' answer before the first call.
    accepts_images: ClassVar[bool] = False
    settings: dict[str, Any] = {}  # resolved engine settings (dtype, context, ...), set by the backend
    stats: dict[str, Any] = {}  # the backend's own counters (retries, cached tokens, ...)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.mode not in MODES:
            raise TypeError(f"{cls.__name__}.mode must be one of {MODES}, not {cls.mode!r}")

    @abstractmethod
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Answer ``requests`` (one result each, in order)."""

    # mode "continuous"
    def add(self, rid: Any, req: GenRequest) -> None:
        raise NotImplementedError(f"{type(self).__name__} is a {self.mode} backend")

    def step(self) -> list[tuple[Any, GenResult]]:
        raise NotImplementedError(f"{type(self).__name__} is a {self.mode} backend")

    def has_work(self) -> bool:
        return False

    def abort_all(self, error: str) -> list[tuple[Any, GenResult]]:
        raise NotImplementedError(f"{type(self).__name__} is a {self.mode} backend")

    # mode "async"
    async def agenerate(self, req: GenRequest) -> GenResult:
        raise NotImplementedError(f"{type(self).__name__} is a {self.mode} backend")

    # Whether the backend loads model files here (backends.model_store.resolve_model: a local folder,
    # a GGUF converted once, a hub id downloaded once per node), which prepare() fetches first.
    loads_model_files: ClassVar[bool] = False

    @classmethod
    def prepare(cls, model: str) -> None:
        """Fetch what loading ``model`` needs (a hub download, a GGUF conversion) before the replica
        waits its turn on a GPU it shares; the engine's own load then finds it in the cache."""
        if cls.loads_model_files:
            model_store.resolve_model(model)

    # health
    def check_alive(self) -> None:  # noqa: B027 (optional hook: most backends have nothing to check)
        """Raise BackendDead if the engine died for good (default: nothing to check)."""

    def kill_engine_processes(self) -> int:
        """End the engine's own processes (default: none); returns how many."""
        return 0


class ImagesNotSupported(UserError, ValueError):
    """A data set whose questions carry images, run on a backend (or model) that takes text only."""


class VLLMBuildError(UserError, ValueError):
    """CPU replicas asked of vLLM's GPU build, which cannot run on a CPU."""


__all__ = ["MODES", "Backend", "ImagesNotSupported", "VLLMBuildError"]
