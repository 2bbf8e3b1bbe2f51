"""Turn a spec step plus drawn variables into chat messages, and remember how."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from curate.taskspec import PromptStep
from curate.templates import load_template, render, template_hash


def draw_variables(step: PromptStep, seed: int, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Placeholder values for one item from its own seed; ``overrides`` pin chosen placeholders."""
    values = step.draw(random.Random(seed))
    values.update(overrides or {})
    return values


def build_messages(
    step: PromptStep, variables: dict[str, Any], prompt_dirs: Sequence[str | Path] = ()
) -> tuple[list[dict[str, str]], dict[str, str]]:
    """Render the step's template; return the messages and the template's name and hash."""
    template = load_template(step.template, prompt_dirs)
    messages = []
    if step.system:
        messages.append({"role": "system", "content": step.system})
    messages.append({"role": "user", "content": render(template, variables)})
    return messages, {"template": step.template, "template_hash": template_hash(template)}
