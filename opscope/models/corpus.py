"""Real English text that ships offline: sentences of the Python Language Reference.

Why this corpus: `pydoc_data.topics.topics` is the prose of the Python Language Reference
that CPython installs with itself (what `help("assert")` prints), so it is on every machine
that runs opscope, needs no network, no download and no licence file of ours, and it is
ordinary technical English written by people (~465k characters in 3.11). Its text depends
on the Python version (3.11 and 3.12 ship different revisions), so the sentence list is
fixed per interpreter, not across interpreters.

How sentences are cut, in a fixed order: topics by sorted name; paragraphs split on blank
lines; paragraphs with indented lines (code, grammar rules, tables) and heading underlines
dropped; the rest joined into one line and split after `.`/`!`/`?` before a capital or a
quote. A sentence is kept when it is 40–160 characters, 8 or more words, starts with a
capital letter, ends with a full stop, contains none of `_=*|<>{}[]\\#@$%^~` (code), is at
least 90 % letters and spaces, and was not kept before. Python 3.11.7 gives 574 sentences.
"""

from __future__ import annotations

import functools
import re

from opscope.errors import OpscopeError

MIN_CHARS, MAX_CHARS, MIN_WORDS, MIN_LETTERS = 40, 160, 8, 0.9
CODE_CHARS = frozenset("_=*|<>{}[]\\#@$%^~`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"])")
_UNDERLINE = re.compile(r"[*=\-^~]+")


def _paragraphs(text: str) -> list[str]:
    """Prose paragraphs of one topic, each joined into one line (code and headings dropped)."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.split("\n")
        if any(line.startswith((" ", "\t")) for line in lines):
            continue
        lines = [line.strip() for line in lines if not _UNDERLINE.fullmatch(line.strip())]
        if lines:
            out.append(" ".join(lines))
    return out


def _is_clean(s: str) -> bool:
    """A sentence of plain prose: length, words, capital start, full stop, no code characters."""
    if not (MIN_CHARS <= len(s) <= MAX_CHARS and s[0].isupper() and s.endswith(".")):
        return False
    if len(s.split()) < MIN_WORDS or any(c in CODE_CHARS for c in s):
        return False
    return sum(c.isalpha() or c == " " for c in s) / len(s) >= MIN_LETTERS


@functools.lru_cache(maxsize=1)
def _all_sentences() -> tuple[str, ...]:
    """Every clean sentence, in topic order, once (computed once per process)."""
    from pydoc_data.topics import topics

    seen: dict[str, None] = {}
    for name in sorted(topics):
        for para in _paragraphs(topics[name]):
            for s in _SENTENCE_END.split(para):
                s = s.strip()
                if _is_clean(s) and s not in seen:
                    seen[s] = None
    return tuple(seen)


def sentences(n: int | None = None) -> list[str]:
    """The first `n` clean sentences of the Python Language Reference (all when n is None)."""
    every = _all_sentences()
    if n is None:
        return list(every)
    if n < 0 or n > len(every):
        raise OpscopeError(f"corpus: {n} sentences asked for, the Python Language Reference gives {len(every)}")
    return list(every[:n])
