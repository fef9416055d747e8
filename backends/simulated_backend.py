"""A seeded SIMULATED model, for fast tests and cost planning only.

It does not read the question: it reads the gold answer and the peers' answers that the agent
puts in ``GenRequest.meta``. Every output row of a run on this backend is labelled
``simulated=True`` and ``backend="simulated"``; ``debate run`` never uses it unless asked.

Behaviour of one call, drawn from ``random.Random(request.seed)``:

1. with probability ``invalid`` the reply has no readable answer;
2. else, in a debate round, with probability ``follow`` it adopts the majority of the answers it
   read (its own previous answer included);
3. else it answers correctly with probability ``accuracy``, otherwise a wrong answer drawn from a
   small set of nearby values (so that wrong answers can collide and win votes, as real ones do);
4. it ends with "Confidence: x" (x uniform in [0.6, 1] when right, [0.2, 0.8] when wrong).

A *judging* call (``meta["judging"]``: a side call, e.g. a PRD review or a CortexDebate peer score)
states no answer: with probability ``invalid`` nothing readable, else a score s of the answers it
judges (``peer_answers``), an integer uniform in 6..10 when they are all right (equal to the gold
answer) and in 1..7 otherwise, ending "Score: s/10 Confidence: s/10" — so a stated score and a
confidence in the judgement are both higher on average when the judged answer is right.

What it does not model: learning from peers. A reply that does not follow is a fresh draw at
``accuracy`` whatever it read, so a debate's rounds add nothing its first vote lacked, and its
accuracy by round is no prediction of real debate (papers report real models' accuracy rising
over rounds on arithmetic); calls, tokens and who reads whom are exact.

Reply length is exactly ``reply_tokens`` whitespace tokens, the first a word drawn from the call's
seed (:func:`reply_tag`: two replies part at their first token, as sampled ones do, so a prefix
cache count of its prompts is a real model's, :mod:`engine.prefix`), and token counts use the same
whitespace tokenizer over a fixed chat layout (:func:`engine.word_tokens.count_tokens`: 4 tokens
of framing per message plus 3 for the generation prompt), so closed-form cost models can be
checked exactly against it.

It accepts questions with images (so such runs can be planned and tested) and never looks at them:
an image counts 0 tokens here (:func:`count_tokens` counts text parts only), whereas a real model's
server counts its image tokens (several hundred per image for GPT-4o-class models); like every
number of this backend, such counts are labelled SIMULATED.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from backends.base import Backend
from engine.config.fields import ConfigPart, config_part, option
from engine.options import MAX_TOKENS, ConfigError, parse_number
from engine.records import GenRequest, GenResult, Message
from engine.word_tokens import count_tokens

DEFAULT_ACCURACY_KEY = "default"  # --sim-accuracy 'big=0.9,default=0.5': the models not named


def parse_accuracy(text: str, flag: str = "--sim-accuracy") -> float | dict[str, float]:
    """``--sim-accuracy``'s text: one number (``0.6``, ``3/5``) for every model, or per model
    ``big=0.8,small=0.4`` (a ``default=X`` entry for the models not named). The values' bounds
    and the names are checked by :meth:`SimulatedSettings.check`; a ConfigError naming ``flag``
    here for text that is neither."""
    if "=" not in text:
        try:
            return parse_number(text, flag)
        except ConfigError:
            raise ConfigError(
                f"{flag} {text!r}: write one number (0.6, 3/5), or model=number pairs such as 'big=0.8,small=0.4'"
            ) from None
    out: dict[str, float] = {}
    for part in text.split(","):
        name, eq, value = (x.strip() for x in part.partition("="))
        if not eq or not name:
            raise ConfigError(f"{flag} {text!r}: write one number, or model=number pairs such as 'big=0.8,small=0.4'")
        if name in out:
            raise ConfigError(f"{flag} {text!r}: model {name!r} is given twice")
        out[name] = parse_number(value, f"{flag} {name}=")
    return out


@config_part("simulator")
@dataclass
class SimulatedSettings(ConfigPart):
    """The simulated backend's own settings (``--sim-*``). The run id hashes them for runs of
    every backend, as it did before they moved here (:attr:`BackendSpec.hash_settings_always`)."""

    sim_accuracy: float | dict[str, float] = option(
        0.6,
        "--backend simulated: chance that a reply not following its peers is right (default 0.6); per model "
        "as 'big=0.8,small=0.4' (names as in --models; default=X for models not named)",
        low=0,
        high=1,
        parse=lambda text, flag: parse_accuracy(text, flag),
    )
    sim_follow: float = option(
        0.5,
        "--backend simulated: chance that a debate reply adopts the majority of the answers it read (default 0.5)",
        low=0,
        high=1,
    )
    sim_reply_tokens: int = option(
        60,
        "--backend simulated: length of every reply in whitespace tokens, at least 8: room for the answer and "
        "its confidence (default 60)",
        low=8,
        high=MAX_TOKENS,
    )
    sim_invalid: float = option(
        0.0, "--backend simulated: chance that a reply has no readable answer (default 0.0)", low=0, high=1
    )
    sim_latency_s: float = option(
        0.0,
        "--backend simulated: seconds each call sleeps, standing in for a model's latency (default 0.0)",
        low=0,
        high=600,
    )

    def backend_options(self) -> dict[str, Any]:
        """The :class:`SimulatedBackend` keyword arguments these settings give."""
        return {
            "accuracy": self.sim_accuracy,
            "follow": self.sim_follow,
            "reply_tokens": self.sim_reply_tokens,
            "invalid": self.sim_invalid,
            "latency_s": self.sim_latency_s,
        }

    def check(self, models: list[str]) -> None:
        """A per-model ``--sim-accuracy``: numbers in [0, 1], every run model given (or a
        ``default``), no name that is not one of the run's ``models``."""
        acc: Any = self.sim_accuracy
        if not isinstance(acc, dict):
            return
        flag = "--sim-accuracy"
        for name, value in acc.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
                raise ConfigError(f"{flag} {name}={value!r}: an accuracy is a number within [0, 1]")
        stray = [str(m) for m in acc if m != DEFAULT_ACCURACY_KEY and m not in models]
        if stray:
            raise ConfigError(
                f"{flag} names {', '.join(stray)}, not a model of this run (its models: {', '.join(models)})"
            )
        missing = [m for m in models if m not in acc]
        if missing and DEFAULT_ACCURACY_KEY not in acc:
            raise ConfigError(
                f"{flag} gives no accuracy for {', '.join(missing)} (this run's models: {', '.join(models)}); "
                f"name each, or add {DEFAULT_ACCURACY_KEY}=X"
            )


_FILLER = ("let", "me", "work", "through", "this", "step", "by", "carefully", "and", "check", "each", "part")


def reply_tag(seed: int) -> str:
    """The first word of a simulated reply: six letters drawn from the call's seed. Sampled
    replies differ from their first tokens on; so do these, so a prefix cache shares no more of
    a prompt that quotes them than it would with a real model (the replies' common filler would
    otherwise be shared: :mod:`engine.prefix`)."""
    letters = []
    for _ in range(6):
        seed, r = divmod(seed, 26)
        letters.append(chr(ord("a") + r))
    return "".join(letters)


def _wrong_answer(gold: str, task: str, n_choices: int, rng: random.Random) -> str:
    if task in ("choice", "pair"):
        letters = [chr(65 + i) for i in range(n_choices if task == "choice" else 2)]
        others = [x for x in letters if x != gold] or letters
        return rng.choice(others)
    offset = rng.choice((-2, -1, 1, 2))
    try:
        value = Fraction(gold.replace(",", ""))
        value += offset
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    except (ValueError, ZeroDivisionError):
        return f"{gold}+{offset}"


def model_accuracy(accuracy: float | Mapping[str, float], model: str) -> float:
    """The accuracy of ``model``'s replies: ``accuracy`` itself, or its entry for ``model`` (else
    its ``default`` entry) when it is per model. A model with neither is a ValueError (the run's
    config check, :meth:`engine.config.RunConfig.validate`, names such a model first)."""
    if not isinstance(accuracy, Mapping):
        return float(accuracy)
    value = accuracy.get(model, accuracy.get(DEFAULT_ACCURACY_KEY))
    if value is None:
        raise ValueError(f"--sim-accuracy gives no accuracy for model {model!r} (and no {DEFAULT_ACCURACY_KEY}=)")
    return float(value)


class SimulatedBackend(Backend):
    """Seeded simulated model (see module docstring). Pure Python, no Ray."""

    mode = "batch"
    simulated = True
    accepts_images = True  # counted as 0 tokens, never looked at (module docstring)

    def __init__(
        self,
        model: str = "simulated",
        accuracy: float | Mapping[str, float] = 0.6,
        follow: float = 0.5,
        reply_tokens: int = 60,
        invalid: float = 0.0,
        latency_s: float = 0.0,
        load_s: float = 0.0,
        gpu_memory_utilization: float | None = None,
    ):
        """``load_s``: seconds a model load takes (a placement test's stand-in for a real one);
        ``gpu_memory_utilization``: the share of a GPU a vLLM engine on this replica would take,
        recorded in ``settings`` (the simulated model takes vLLM's placement settings, so a
        cluster layout can be tried on CPUs that declare GPUs). ``accuracy``: one for every
        model, or per model name (``--sim-accuracy 'big=0.8,small=0.4'``; :func:`model_accuracy`)."""
        if reply_tokens < 8:
            raise ValueError("sim_reply_tokens must be at least 8 (room for the answer and confidence)")
        self.model = f"simulated:{model}"
        self.accuracy = model_accuracy(accuracy, model)
        self.follow = follow
        self.reply_tokens = reply_tokens
        self.invalid = invalid
        self.latency_s = latency_s
        if gpu_memory_utilization is not None:
            self.settings = {"gpu_memory_utilization": gpu_memory_utilization}
        if load_s:
            time.sleep(load_s)

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        return count_tokens(messages)

    def _answer(self, req: GenRequest, rng: random.Random) -> str | None:
        meta = req.meta
        gold = str(meta.get("gold", "0"))
        task = meta.get("task", "numeric")
        n_choices = int(meta.get("n_choices", 4) or 4)
        if rng.random() < self.invalid:
            return None
        heard = [a for a in meta.get("peer_answers", []) if a is not None]
        own = meta.get("own_answer")
        if meta.get("kind") == "summary":  # a summary states the majority of what it summarises
            return Counter(heard).most_common(1)[0][0] if heard else None
        if heard and rng.random() < self.follow:
            pool = heard + ([own] if own is not None else [])
            counts = Counter(pool)
            best = max(counts.values())
            return next(a for a in pool if counts[a] == best)
        if rng.random() < self.accuracy:
            return gold
        return _wrong_answer(gold, task, n_choices, rng)

    def _text(self, answer: str | None, task: str, confidence: float, max_tokens: int, seed: int) -> str:
        conf = ["Confidence:", f"{confidence:.2f}"]
        if answer is None:
            tail = ["I", "cannot", "decide", "on", "this", "one."]
        elif task in ("choice", "pair"):
            tail = ["So", "the", "answer", "is", f"({answer})."] + conf
        else:
            tail = ["So", "the", "answer", "is", f"\\boxed{{{answer}}}."] + conf
        return self._pad(tail, max_tokens, seed)

    def _pad(self, tail: list[str], max_tokens: int, seed: int) -> str:
        """``tail`` after filler words whose first is the call's tag (:func:`reply_tag`): exactly
        ``reply_tokens`` whitespace tokens. Filler that a cut at ``max_tokens`` (:meth:`generate`)
        would drop whole is never made, so a reply longer than ``max_tokens`` costs no more memory
        than ``max_tokens`` words."""
        n = min(self.reply_tokens - len(tail), max_tokens + 1)  # >= 1: reply_tokens >= 8 > len(tail)
        return " ".join([reply_tag(seed)] + [_FILLER[i % len(_FILLER)] for i in range(1, n)] + tail)

    def _judgement(self, req: GenRequest, rng: random.Random) -> str:
        """A judging call's reply (module docstring): a stated score, higher when the judged
        answers are right; no answer of its own."""
        if rng.random() < self.invalid:
            tail = ["I", "cannot", "judge", "this", "one."]
        else:
            judged = req.meta.get("peer_answers") or [None]
            right = all(a is not None and a == str(req.meta.get("gold")) for a in judged)
            score = rng.randint(6, 10) if right else rng.randint(1, 7)
            tail = ["Score:", f"{score}/10", "Confidence:", f"{score}/10"]
        return self._pad(tail, req.max_tokens, req.seed)

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        out = []
        for req in requests:
            start = time.perf_counter()
            rng = random.Random(req.seed)
            if req.meta.get("judging"):
                text = self._judgement(req, rng)
            else:
                answer = self._answer(req, rng)
                # a stated confidence (CortexDebate reads it): higher on average when right
                right = answer is not None and answer == str(req.meta.get("gold"))
                confidence = rng.uniform(0.6, 1.0) if right else rng.uniform(0.2, 0.8)
                text = self._text(answer, req.meta.get("task", "numeric"), confidence, req.max_tokens, req.seed)
            finish = "stop"
            words = text.split()
            if len(words) > req.max_tokens:  # honour max_tokens like a real model: cut, say so
                text, finish = " ".join(words[: req.max_tokens]), "length"
            if self.latency_s:
                time.sleep(self.latency_s)
            out.append(
                GenResult(
                    text=text,
                    prompt_tokens=count_tokens(req.messages),
                    completion_tokens=len(text.split()),
                    latency_s=time.perf_counter() - start,
                    finish_reason=finish,
                )
            )
        return out
