"""One question per row and task kind: the gold-answer rules of :mod:`engine.tasks.files`.

Each builder takes a row (:class:`engine.tasks.row.Row`: the record, where it came from and
how to complain about it) and returns its :class:`~engine.tasks.Question` or raises the row's
:class:`~engine.tasks.DatasetError`. The field names each looks for are here too.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from engine.latex import last_boxed
from engine.tasks import LETTERS, Question, type_name
from engine.tasks.row import (
    ANSWER_KEYS,
    CHOICE_KEYS,
    LABEL_KEYS,
    PAIR_KEYS,
    QUESTION_KEYS,
    SOLUTION_KEYS,
    Row,
)

PAIR_QUESTION = "Which dialogue is better, A or B?"


def _scalar_text(r: Row, key: str, value: Any) -> str:
    """A gold value as a stripped string; ints and finite floats are accepted."""
    if isinstance(value, bool):
        raise r.error(f"field {key!r} must be a string or a number, got bool")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise r.error(f"field {key!r} is {value!r}, not a usable answer")
        return repr(value)
    if not isinstance(value, str):
        raise r.error(f"field {key!r} must be a string or a number, got {type_name(value)}")
    return r.text(key, value)


# --------------------------------------------------------------------------- numbers

_NUMBER_RE = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")
_FRACTION_RE = re.compile(r"[+-]?\d+\s*/\s*(\d+)")


def is_number(s: str) -> bool:
    """Plain number: sign, digits (thousands commas allowed), decimals, or a fraction a/b."""
    if _NUMBER_RE.fullmatch(s):
        return True
    m = _FRACTION_RE.fullmatch(s)
    return m is not None and int(m.group(1)) != 0


# --------------------------------------------------------------------------- builders


def _after_marker(r: Row, key: str, text: str) -> str:
    """The answer after the last ``####`` of field ``key``'s ``text`` (GSM8K's answer line)."""
    gold = text.rsplit("####", 1)[1].strip()
    if not gold:
        raise r.error(f"field {key!r} has nothing after '####'")
    return gold


def _build_numeric(r: Row) -> Question:
    text = r.question_text()
    key, value = r.find("answer", ANSWER_KEYS)
    if key is not None:
        r.used.add(key)
        gold = _scalar_text(r, key, value)
        if "####" in gold:
            gold = _after_marker(r, key, gold)
    else:
        skey, solution = r.find("solution", SOLUTION_KEYS)
        if skey is None or not isinstance(solution, str) or "####" not in solution:
            raise r.missing(
                "answer", ANSWER_KEYS, "" if skey is None else f" and field {skey!r} has no '####' answer line"
            )
        key = skey
        gold = _after_marker(r, key, solution)
    if not is_number(gold):
        raise r.error(f"numeric gold answer {gold!r} (field {key!r}) is not a number")
    return r.question("numeric", text, gold)


def _build_math(r: Row) -> Question:
    text = r.question_text()
    key, value = r.find("answer", ANSWER_KEYS)
    if key is not None:
        r.used.add(key)
        gold = _scalar_text(r, key, value)
    else:
        skey, solution = r.find("solution", SOLUTION_KEYS)
        if skey is None:
            raise r.missing("answer", ANSWER_KEYS)
        if not isinstance(solution, str):
            raise r.error(f"field {skey!r} must be a string, got {type_name(solution)}")
        boxed = last_boxed(solution)
        if not boxed:
            raise r.missing("answer", ANSWER_KEYS, f" and field {skey!r} has no complete \\boxed{{...}}")
        gold = boxed
    return r.question("math", text, gold)


def _choice_list(r: Row) -> tuple[str, ...]:
    key, value = r.find("choices", CHOICE_KEYS)
    if key is None:
        if "choices" in r.overrides:
            raise r.missing("choices", CHOICE_KEYS)
        items = []
        for letter in LETTERS:
            if r.rec.get(letter) is None:
                break
            items.append((letter, r.rec[letter]))
            r.used.add(letter)
        if not items:
            raise r.error(f"missing field 'choices' (have: {r.have()}; also looked for options and columns A, B, ...)")
    else:
        r.used.add(key)
        if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise r.error(f"field {key!r} is a string that is not a JSON list") from None
        if isinstance(value, Mapping):
            keys = [str(k).strip().upper() for k in value]
            if keys != list(LETTERS[: len(keys)]):
                raise r.error(f"field {key!r} is a mapping whose keys are not A, B, C, ... in order")
            items = [(k, v) for k, v in zip(keys, value.values())]
        elif isinstance(value, (list, tuple)):
            items = [(f"{key}[{i}]", v) for i, v in enumerate(value)]
        else:
            raise r.error(f"field {key!r} must be a list of choices, got {type_name(value)}")
    choices = []
    for where, v in items:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise r.error(f"choice {where} must be a string, got {type_name(v)}")
        choices.append(v.strip() if isinstance(v, str) else str(v))
    if len(choices) < 2:
        raise r.error(f"need at least 2 choices, got {len(choices)}")
    if len(choices) > len(LETTERS):
        raise r.error(f"at most {len(LETTERS)} choices are supported, got {len(choices)}")
    return tuple(choices)


_LETTER_RE = re.compile(r"\(?([A-Za-z])[).:]?")


def _choice_gold(r: Row, key: str, value: Any, choices: tuple[str, ...]) -> str:
    n = len(choices)
    valid = f"{LETTERS[0]}-{LETTERS[n - 1]}"
    if isinstance(value, bool):
        raise r.error(f"answer field {key!r} must be a letter or an index, got bool")
    if isinstance(value, int):
        if 0 <= value < n:
            return LETTERS[value]
        raise r.error(f"answer index {value} (field {key!r}) is out of range for {n} choices (0-based)")
    if not isinstance(value, str):
        raise r.error(f"answer field {key!r} must be a letter or an index, got {type_name(value)}")
    s = value.strip()
    m = _LETTER_RE.fullmatch(s)
    if m and m.group(1).upper() in LETTERS[:n]:
        return m.group(1).upper()
    if s in choices:
        return LETTERS[choices.index(s)]
    if s.isdigit():
        if int(s) < n:
            return LETTERS[int(s)]
        raise r.error(f"answer index {s} (field {key!r}) is out of range for {n} choices (0-based)")
    if m:
        raise r.error(f"answer {s!r} (field {key!r}) is not one of the {n} choices {valid}")
    raise r.error(f"answer {s!r} (field {key!r}) is not a letter {valid}, a 0-based index or a choice text")


def _build_choice(r: Row) -> Question:
    question = r.question_text()
    choices = _choice_list(r)
    key, value = r.require("answer", ANSWER_KEYS)
    r.used.add(key)
    gold = _choice_gold(r, key, value, choices)
    lines = "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(choices))
    return r.question("choice", f"{question}\n{lines}", gold, choices)


def _dialogue(r: Row, key: str, value: Any) -> str:
    if isinstance(value, str):
        return r.text(key, value)
    if isinstance(value, (list, tuple)):
        if not value:
            raise r.error(f"field {key!r} is an empty dialogue")
        lines = []
        for i, msg in enumerate(value, 1):
            if not isinstance(msg, Mapping):
                raise r.error(f"field {key!r}: message {i} is not a {{role, content}} object (got {type_name(msg)})")
            role = msg.get("role", msg.get("from"))
            content = msg.get("content", msg.get("value"))
            if not isinstance(role, str) or not isinstance(content, str):
                raise r.error(f"field {key!r}: message {i} needs string 'role' and 'content'")
            lines.append(f"{role.strip()}: {content.strip()}")
        return "\n".join(lines)
    raise r.error(f"field {key!r} must be a string or a list of messages, got {type_name(value)}")


_PAIR_LABELS = {"a": "A", "b": "B", "model_a": "A", "model_b": "B", "0": "A", "1": "B"}


def _pair_label(r: Row, key: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return "AB"[value]
    if isinstance(value, str) and value.strip().lower() in _PAIR_LABELS:
        return _PAIR_LABELS[value.strip().lower()]
    raise r.error(
        f"label {value!r} (field {key!r}) is not a preference for A or B "
        "(expected A/B, model_a/model_b or 0/1; ties must be filtered out)"
    )


def _build_pair(r: Row) -> Question:
    prompt_key, prompt = r.find("question", QUESTION_KEYS)
    if prompt_key is not None:
        r.used.add(prompt_key)
        if not isinstance(prompt, str):
            raise r.error(f"field {prompt_key!r} must be a string, got {type_name(prompt)}")
        prompt = prompt.strip()

    if "a" in r.overrides or "b" in r.overrides:
        pairs: tuple[tuple[str, str], ...] = ((r.overrides.get("a", "a"), r.overrides.get("b", "b")),)
    elif "chosen" in r.overrides or "rejected" in r.overrides:
        pairs = ()
    else:
        pairs = PAIR_KEYS
    ranked = (r.overrides.get("chosen", "chosen"), r.overrides.get("rejected", "rejected"))

    def present(k: str) -> bool:
        return r.rec.get(k) is not None

    found = None
    for ka, kb in pairs:
        if present(ka) or present(kb):
            if not (present(ka) and present(kb)):
                have, miss = (ka, kb) if present(ka) else (kb, ka)
                raise r.error(f"field {have!r} has no partner {miss!r} (have: {r.have()})")
            found = (ka, kb)
            break

    if found is not None:
        ka, kb = found
        r.used.update(found)
        a = _dialogue(r, ka, r.rec[ka])
        b = _dialogue(r, kb, r.rec[kb])
        lkey, lvalue = r.require("answer", LABEL_KEYS)
        r.used.add(lkey)
        gold = _pair_label(r, lkey, lvalue)
    else:
        kc, kr = ranked
        if not (present(kc) and present(kr)):
            wanted = [f"{x}/{y}" for x, y in pairs] + [f"{kc}/{kr}"]
            raise r.error(f"missing dialogue fields (looked for {', '.join(wanted)}; have: {r.have()})")
        r.used.update(ranked)
        chosen = _dialogue(r, kc, r.rec[kc])
        rejected = _dialogue(r, kr, r.rec[kr])
        # The file order (chosen first) would leak the label: shuffle per question, from the
        # row's content (not its id, which may come from the file name: renaming the file must
        # not change the gold letters).
        digest = hashlib.sha256(json.dumps([prompt or "", chosen, rejected]).encode()).digest()
        if digest[0] < 128:
            a, b, gold = chosen, rejected, "A"
        else:
            a, b, gold = rejected, chosen, "B"

    parts = [prompt] if prompt else []
    parts += [f"Dialogue A:\n{a}", f"Dialogue B:\n{b}", PAIR_QUESTION]
    return r.question("pair", "\n\n".join(parts), gold)


#: The builder of each task kind: a row in, its question out.
BUILDERS: dict[str, Callable[[Row], Question]] = {
    "numeric": _build_numeric,
    "math": _build_math,
    "choice": _build_choice,
    "pair": _build_pair,
}
