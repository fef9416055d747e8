"""Run options that protocols of different families read: one :class:`~engine.options.Option`
each, listed in the ``settings`` of every protocol that reads it."""

from __future__ import annotations

from engine.options import Option

FORGETTING = Option("forgetting", bool, False, "agents keep only the previous round in context")
EARLY_STOP = Option("early_stop", bool, True, "stop a question when the agents' views agree (--no-early-stop: ablation)")
EMBEDDING_MODEL = Option("embedding_model", str, "all-minilm-l6-v2",
                         "sentence-embedding model: alias, local folder or hub name (from the offline cache)")

__all__ = ["EARLY_STOP", "EMBEDDING_MODEL", "FORGETTING"]
