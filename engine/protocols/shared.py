"""Run options that protocols of different families read: one :class:`~engine.options.Option`
each, listed in the ``settings`` of every protocol that reads it."""

from __future__ import annotations

from engine.options import ConfigError, Option

MEMORY_MODES = ("full", "last", "summary", "summary-last")

FORGETTING = Option("forgetting", bool, False, "agents keep only the previous round in context (= --memory last)")
MEMORY = Option(
    "memory",
    str,
    None,
    "what an agent keeps between rounds and how peers reach it: full (its whole transcript), last (its first "
    "prompt and previous reply; --forgetting), summary (whole transcript; the peers' replies arrive as one LLM "
    "summary per agent and round: Du et al.'s summarisation, GroupDebate's MAD baseline), summary-last (both: "
    "GroupDebate's 'MAD+Forget'); group's last is its paper's, full its 'MAD+Group' ablation",
    choices=MEMORY_MODES,
    default_shown="full; last for group",
)
TALK = Option(
    "talk",
    str,
    "simultaneous",
    "talk order in a debate round: simultaneous (everyone reads the previous round) or one-by-one "
    "(agents speak in id order; each reads the replies already given this round, the previous round's "
    "for the rest)",
    choices=("simultaneous", "one-by-one"),
)
EARLY_STOP = Option(
    "early_stop",
    bool,
    True,
    "stop a question early once the protocol's agreement test passes: S2-MAD, every group summary similar to "
    "the others; CortexDebate and RECONCILE, every agent's answer the same (--no-early-stop: ablation)",
)
EMBEDDING_MODEL = Option(
    "embedding_model",
    str,
    "all-minilm-l6-v2",
    "sentence-embedding model: alias, local folder or hub name (from the offline cache)",
)


def resolve_memory(memory: str | None, forgetting: bool, default: str) -> str:
    """The memory a run uses: ``--memory``, else ``last`` with ``--forgetting``, else the
    protocol's ``default`` (the one rule; the protocols and their cost functions both use it)."""
    if memory is not None:
        return memory
    return "last" if forgetting else default


def memory_mode(cfg, default: str) -> str:
    """:func:`resolve_memory` of a run config."""
    return resolve_memory(cfg.option(MEMORY), cfg.option(FORGETTING), default)


def check_memory(cfg, allowed: tuple[str, ...] = MEMORY_MODES) -> None:
    """``--forgetting`` is ``--memory last``: any other ``--memory`` beside it is a contradiction;
    ``allowed``: the modes this protocol has."""
    if cfg.option(FORGETTING) and cfg.option(MEMORY) not in (None, "last"):
        raise ConfigError(f"--forgetting means --memory last; it contradicts --memory {cfg.option(MEMORY)}")
    if cfg.option(MEMORY) is not None and cfg.option(MEMORY) not in allowed:
        raise ConfigError(
            f"--memory {cfg.option(MEMORY)} is not a memory of --protocol {cfg.experiment.protocol} "
            f"(it has {', '.join(allowed)})"
        )


__all__ = [
    "EARLY_STOP",
    "EMBEDDING_MODEL",
    "FORGETTING",
    "MEMORY",
    "MEMORY_MODES",
    "TALK",
    "check_memory",
    "memory_mode",
    "resolve_memory",
]
