"""Which replica serves a call under ``--prompt-layout shared``: one per question's round (pure, no Ray).

In the ``paper`` layout each agent keeps one replica for the whole run
(:func:`actors.layout.assign_replicas`): its growing transcript is its own prefix, and it keeps
hitting that replica's prefix cache. In the ``shared`` layout the agents that read the same
answers in a round send prompts that begin with the same long text (the question and one board
of answers per earlier round), so a prefix cache computes that text once per replica that sees
it. Spreading one question's readers over replicas would compute it once per replica; the
coordinator instead sends every call of one question's round to ONE replica of each model
(:class:`RoundRouter`): the replica with the fewest calls in flight when the round's first call
goes out, ties going to the replica the question's previous round used (under full memory that
round's shared text begins this round's, so its cache still holds it), then to the lowest index.
The choice travels on the turn (:attr:`engine.records.Turn.replica`, an index into the model's
replicas in layout order); an agent actor knows all replicas of its model
(:attr:`actors.agent_actor.AgentSetup.replicas`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.protocols.layout import is_shared


def routes_rounds(cfg) -> bool:
    """Whether ``cfg``'s calls are routed per question's round rather than per agent: only when its
    prompts are laid out ``shared`` (:func:`engine.protocols.layout.is_shared`). A protocol that
    ignores the option (CoT, CoT-SC, RECONCILE) keeps agent affinity, so its run, whose id the
    option does not change, is served as under ``paper``; a config without the option is a
    paper-layout run."""
    return is_shared(cfg)


def least_loaded(in_flight: Sequence[int], prefer: int | None = None) -> int:
    """The index of the replica with the fewest calls in flight: ``prefer`` when it is among the
    fewest, else the lowest such index. ``in_flight`` must not be empty."""
    low = min(in_flight)
    if prefer is not None and 0 <= prefer < len(in_flight) and in_flight[prefer] == low:
        return prefer
    return in_flight.index(low)


class RoundRouter:
    """The replica of each question's round, per model, and the calls in flight on every replica.

    ``replicas``: each model's number of replicas. :meth:`route` is called as each call goes out
    and :meth:`done` when it has come back; :meth:`forget` when the question is finished."""

    def __init__(self, replicas: Mapping[str, int]):
        if any(n < 1 for n in replicas.values()):
            raise ValueError(f"every model needs a replica: {dict(replicas)}")
        self.in_flight = {model: [0] * n for model, n in replicas.items()}
        self._rounds: dict[str, dict[str, tuple[int, int]]] = {}  # question -> model -> (round, replica)

    def route(self, question: str, round_: int, model: str) -> int:
        """The replica of ``question``'s round ``round_`` on ``model``: chosen by :func:`least_loaded`
        at the round's first call, the same for the round's later calls; counts the call in flight."""
        chosen = self._rounds.setdefault(question, {})
        last = chosen.get(model)
        if last is None or last[0] != round_:
            last = (round_, least_loaded(self.in_flight[model], last[1] if last else None))
            chosen[model] = last
        self.in_flight[model][last[1]] += 1
        return last[1]

    def done(self, model: str, replica: int) -> None:
        """A call routed to ``replica`` of ``model`` came back (answered or failed)."""
        self.in_flight[model][replica] -= 1

    def forget(self, question: str) -> None:
        """The question is finished: its rounds' choices are dropped."""
        self._rounds.pop(question, None)


__all__ = ["RoundRouter", "least_loaded", "routes_rounds"]
