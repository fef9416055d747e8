"""Ray actor classes, typed for mypy: the decorator that makes them and the handle that starts them.

Ray's own typing (ray 2.x) misses two things every actor here needs:

* ``ray.remote(**options)`` is typed with the options of remote *functions* only, so an actor
  option such as ``max_concurrency`` matches none of its overloads;
* mypy does not let a class decorator change what the decorated name is (python/mypy#3135), so a
  ``@ray.remote`` class still reads as the plain class, whose ``.options(...)`` and ``.remote()``
  it does not know.

Define an actor with ``@actor(**options)`` (the same call as ``@ray.remote(**options)``) and start
it through ``actor_class(Cls).options(...).remote(...)``. The handle that returns is typed
``Any``: an actor handle's methods are made at runtime, so mypy cannot check
``handle.method.remote(...)`` either way. Importing this module does not import Ray (the driver
imports it before Ray is needed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ray.actor import ActorClass

T = TypeVar("T")


class ActorStarter(Protocol):
    """What ``ActorClass.options(...)`` returns: ``remote(*args, **kwargs)`` starts one actor."""

    def remote(self, *args: Any, **kwargs: Any) -> Any: ...


class ActorFactory(ActorStarter, Protocol):
    """A Ray actor class: ``remote(...)`` starts an actor with its default options,
    ``options(**overrides).remote(...)`` with some of them replaced."""

    def options(self, **options: Any) -> ActorStarter: ...


def actor(**options: Any) -> Callable[[type[T]], ActorClass[T]]:
    """``ray.remote(**options)`` as a class decorator, typed for actor options (``max_concurrency``
    and the rest) that Ray's overloads leave out."""
    # function-level: importing ray here keeps it off start-up
    import ray

    decorate: Callable[[type[T]], ActorClass[T]] = ray.remote(**options)
    return decorate


def actor_class(cls: object) -> ActorFactory:
    """The Ray actor class that ``@actor(...)`` made of ``cls`` (mypy still sees the plain class
    under its name). Raises ``TypeError`` for a class that is not a Ray actor."""
    # function-level: importing ray.actor here keeps it off start-up
    from ray.actor import ActorClass

    if not isinstance(cls, ActorClass):
        raise TypeError(f"{cls!r} is not a Ray actor class (decorate it with @actor(...))")
    return cls


def by_value(obj: object) -> None:
    """Have Ray pickle the module that defines ``obj`` (a class, a function) by value, so an actor
    in another process or on another node gets it without importing that module (a plug-in
    registered in the driver, a test module). Nothing for a module not loaded, or ``__main__``
    (pickled by value anyway)."""
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is not None and module.__name__ != "__main__":
        # function-level: importing ray here keeps it off start-up
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(module)


def probe_all(refs: list, timeout: float = 60.0) -> list[Any]:
    """The results of ``refs`` (calls of actors' no-argument methods, waited on together), None
    for an actor that is dead or does not answer within ``timeout`` seconds."""
    # function-level: importing ray here keeps it off start-up
    import ray

    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    done = set(ready)
    out = []
    for ref in refs:
        try:
            out.append(ray.get(ref) if ref in done else None)
        except ray.exceptions.RayActorError:
            out.append(None)
    return out
