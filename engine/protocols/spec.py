"""What the engine knows about a protocol, in one place: :class:`ProtocolSpec`.

Each protocol module declares the spec(s) of its protocol(s); ``engine/protocols/__init__.py``
lists them (the one registration point). Everything else reads the spec: the config (which
protocols exist, their checks, how many agents and rounds they use), the CLI (help), prompts
(the stages a protocol adds), the run options (``settings``: read as ``cfg.option(X)``, flags, help, YAML
keys, value checks, run id; :mod:`engine.options`), sweeps (the options a protocol reads), the
driver (embeddings),
placement (the protocol's fixed graph), the report (label) and the cost model. Adding a protocol
is one module with its generator, its spec and its options, one line in the registry, and its
tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.options import Option
from engine.protocols.base import ProtocolFn


def _never(cfg) -> bool:
    return False


def _none(cfg) -> set[str]:
    return set()


def _as_configured(cfg) -> tuple[int, int]:
    return cfg.experiment.agents, cfg.experiment.rounds


def _no_label(cfg: Mapping[str, Any]) -> list[str]:
    return []


COST_KINDS = ("exact", "bound", "estimate")  # ProtocolSpec.cost_kind

Revote = Callable[[Mapping[str, Any], Sequence[Sequence[Any]], Sequence[Sequence[Any]], Any], Any]  # -> base.Votes


@dataclass(frozen=True)
class ProtocolSpec:
    """One protocol (``--protocol name``).

    run:              the protocol's generator function (:mod:`engine.protocols.base`).
    help:             one line for ``--help`` (what it is, its paper).
    settings:         the run options this protocol reads beyond the engine's own (an
                      :class:`~engine.options.Option` each: type, default, help, allowed values).
                      They become values of ``RunConfig.protocol_options`` and ``debate run`` flags; an option several
                      protocols read is one Option object (:mod:`engine.protocols.shared`). The
                      run id hashes the ones a run reads; a sweep resets the others to their
                      defaults, so equal runs share a run id.
    unused:           names among ``settings`` that this particular config does not read
                      (e.g. S2-MAD's ``tau`` with answer similarity).
    shape:            (agents, rounds) the protocol really uses (CoT: one agent, one round).
    check:            the config's own checks, run by ``RunConfig.validate`` (a ConfigError naming
                      the flag, e.g. a missing ``--density``).
    resolve:          sets options derived from others whenever a RunConfig is made, before its
                      run id is taken (sparse: ``--density`` from ``--degree``, or snapped to the
                      nearest possible one); lenient: what it cannot resolve is left for ``check``.
    validate:         deeper checks before a run starts (a TopologyError naming ``--density`` and
                      ``--agents`` when no graph exists; models; groups).
    stages:           prompt stages the protocol adds (:mod:`engine.prompts`); ``stage_fields``:
                      placeholders a user override of a stage may use besides the default's.
    needs_embeddings: whether a run of this config needs the embedding actor.
    topology:         the graph ``--strong-agents`` ranks agents on (who gets the strong models);
                      None: the protocol has no fixed graph (groups, similarity or learned
                      weights decide who reads whom).
    cost:             the closed-form token cost (:func:`engine.cost_predict.predict` calls it with
                      its keyword arguments); None: no cost model.
    cost_kind:        what ``cost`` gives: ``"exact"`` (the calls and tokens of the run, given the
                      question and reply lengths), ``"bound"`` (an upper bound: S2-MAD with no
                      skips, no dedup, no early stop) or ``"estimate"`` (an expectation or a
                      typical case: ProbMAD's random reads, CortexDebate's pruning, RECONCILE's
                      answer groups and consensus stop). ``debate sweep --list`` marks the last
                      two ``≤`` and ``~``.
    label:            the name reports use; ``label_parts(config dict)`` adds what tells two runs
                      of it apart (density, groups).
    revote:           for a protocol whose vote is not the majority of the agents' answers
                      (RECONCILE): ``revote(config dict, answers_by_round, texts_by_round, tie_key)``
                      gives its vote after each round from re-read answers and each agent's latest
                      reply text (None: failed or none) and whether the final one was a tie
                      (:class:`~engine.protocols.base.Votes`), for ``debate rescore``; None: the majority.
    example:          the ``debate run`` flags beyond ``--protocol`` of a typical run of it (its
                      paper's shape and settings), shown on its docs page with ``--backend
                      simulated`` and with the default model; tests/test_docs.py checks each is a
                      valid run configuration.
    """

    name: str
    run: ProtocolFn
    help: str
    label: str
    settings: tuple[Option, ...] = ()
    unused: Callable[[Any], set[str]] = _none
    shape: Callable[[Any], tuple[int, int]] = _as_configured
    check: Callable[[Any], None] | None = None
    resolve: Callable[[Any], None] | None = None
    validate: Callable[[Any], None] | None = None
    stages: Mapping[str, str] = field(default_factory=dict)
    stage_fields: Mapping[str, set[str]] = field(default_factory=dict)
    needs_embeddings: Callable[[Any], bool] = _never
    topology: Callable[[Any], Any] | None = None
    cost: Callable[..., Any] | None = None
    cost_kind: str = "exact"
    label_parts: Callable[[Mapping[str, Any]], list[str]] = _no_label
    revote: Revote | None = None
    example: str = ""

    def __post_init__(self) -> None:
        if self.cost_kind not in COST_KINDS:
            raise TypeError(f"protocol {self.name}: cost_kind must be one of {', '.join(COST_KINDS)}")

    @property
    def options(self) -> frozenset[str]:
        """The names of the options this protocol reads (its ``settings``)."""
        return frozenset(o.name for o in self.settings)


__all__ = ["ProtocolSpec"]
