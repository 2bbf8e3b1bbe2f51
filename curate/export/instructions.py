"""Query-side instructions, written into the exported texts.

``auto`` (the default): ``e5`` when the export holds more than one task text, ``none`` when
it holds one.  With one task (data mined from one dataset) the instruction is the same
prefix on every query: it tells the student nothing, and a student that is not
instruction-tuned (MiniLM, BGE-small, ...) is then used and evaluated without it, so the
prefix only makes training and use differ.  Several tasks need it to tell them apart, and a
model trained that way is used with instructions.
``e5``: ``Instruct: {task}\\nQuery: {query}`` (E5-mistral, also NV-Embed's form);
``nv``: ``{task}: {query}`` (NV-Retriever); ``none``; anything else is a user template
(a Jinja string, or a file holding one) with the variables ``task`` and ``query``, rendered
in the sandbox of ``curate.llm.templates``. Symmetric tasks (sts, bitext, or a record whose meta
says ``symmetric``) get the instruction on the positive and negatives too, as NV-Embed does
for STS: both sides of a symmetric pair play the same role. A record without task text gets
no instruction.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from curate.core.errors import CurateError
from curate.llm.templates import render, template_from_string

PRESETS = {
    "e5": "Instruct: {{ task }}\nQuery: {{ query }}",
    "nv": "{{ task }}: {{ query }}",
}
_MARK = "\x00query\x00"


def _user_source(spec: str) -> str:
    if "{{" in spec or "{%" in spec:
        return spec
    try:
        return Path(spec).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise CurateError(f"--instruction {spec!r}: not e5, nv, none, a Jinja template or a readable "
                          f"template file") from None


def resolve(spec: str, tasks: set[str]) -> str:
    """``auto`` made concrete for an export whose records carry these task texts."""
    if spec != "auto":
        return spec
    return "e5" if len({t.strip() for t in tasks if t and t.strip()}) > 1 else "none"


class Instruction:
    def __init__(self, spec: str = "none"):
        self.spec = spec
        self._cache: dict[str, tuple[str, str]] = {}
        if spec == "none":
            self.template = None
            return
        source = PRESETS.get(spec) or _user_source(spec)
        try:
            self.template = template_from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise CurateError(f"--instruction: template syntax error at line {e.lineno}: {e.message}") from None
        if _MARK not in self.apply("task", _MARK):
            raise CurateError(f"--instruction {spec!r}: the template must place {{{{ query }}}} in its output "
                              f"(or use e5, nv, none)")

    def apply(self, task: str, text: str) -> str:
        if self.template is None or not task.strip():
            return text
        if self.spec in PRESETS:  # they place the text verbatim: render once per task, then join
            before, after = self._parts(task)
            return before + text + after
        return render(self.template, {"task": task, "query": text})

    def _parts(self, task: str) -> tuple[str, str]:
        parts = self._cache.get(task)
        if parts is None:
            before, _, after = render(self.template, {"task": task, "query": _MARK}).partition(_MARK)
            parts = self._cache[task] = (before, after)
        return parts

    def prefix(self, task: str) -> str:
        """What comes before the query: the prompt a prompt-aware trainer would prepend itself."""
        return self.apply(task, _MARK).split(_MARK, 1)[0] if self.template is not None and task.strip() else ""
