"""An LLM task: a prompt template, the JSON schema its answer must follow, and how an answer
becomes a result.

Every kind of call curate makes is one ``LLMTask``: brainstorming task descriptions, writing an
example (``generate``, and ``--from-pairs``, which is the same task with the query and positive
given), and the two judges' verdicts. The stage around a task only decides *what* to ask (which
variables, which seed, how many at once) and what to do with results; rendering, the request and
reading the answer happen here, the same way for all of them. A new kind of call is one task:

    task = LLMTask("summary", "my/summary.j2", {"type": "object", ...}, parse=lambda d: d["text"])
    result = await task.run(backend, {"passage": text}, seed=7)
    if result.ok: use(result.value)

``parse`` turns a schema-valid answer into the stage's value; a ``ValueError`` it raises makes the
result fail with that reason (the answer stays on the result for the failure log).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from curate.llm.embedded import answer_token_cap, bundled_schema, capped_params, is_bundled
from curate.llm.templates import load_template, render, template_hash

if TYPE_CHECKING:  # the client pulls in openai; a task needs only its answers
    from curate.llm.client import Answer

T = TypeVar("T")


@dataclass(frozen=True)
class Prompt:
    messages: list[dict[str, str]]
    template: str
    template_hash: str

    def provenance(self) -> dict[str, str]:
        """What a record keeps of its prompt: the template's name and the hash of its source."""
        return {"template": self.template, "template_hash": self.template_hash}


@dataclass
class Result(Generic[T]):
    answer: Answer
    prompt: Prompt
    value: T | None = None
    parse_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.answer.ok and self.parse_error is None

    @property
    def reason(self) -> str | None:
        return self.answer.reason or self.parse_error


@dataclass(frozen=True)
class LLMTask(Generic[T]):
    name: str  # the schema's name in the request (and in the request cache's key)
    template: str  # a template file, looked up in prompt_dirs and then the shipped prompts/
    schema: dict[str, Any]
    parse: Callable[[Any], T]
    params: Mapping[str, Any] = field(default_factory=dict)  # request parameters (temperature, ...)
    system: str | None = None
    prompt_dirs: Sequence[str] = ()

    @cached_property
    def for_bundled(self) -> tuple[dict[str, Any], int | None]:
        """The schema and ``max_tokens`` cap sent to the bundled model, made once per task (the
        client keeps one validator per schema object)."""
        schema = bundled_schema(self.schema)
        return schema, answer_token_cap(schema)

    def request(self, backend, params: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The answer schema and request parameters ``backend`` is sent (``params`` replacing the
        task's): the bundled model's answers are held to what a record needs (curate.llm.embedded)."""
        sent = dict(self.params if params is None else params)
        if not is_bundled(backend):
            return self.schema, sent
        schema, cap = self.for_bundled
        return schema, capped_params(sent, cap)

    def check(self) -> None:
        """Load the template now, so a missing or broken one stops a run before any request."""
        load_template(self.template, self.prompt_dirs)

    def prompt(self, variables: Mapping[str, Any]) -> Prompt:
        """The chat messages for these variables (rendered in Jinja's sandbox)."""
        template = load_template(self.template, self.prompt_dirs)
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": render(template, dict(variables))})
        return Prompt(messages, self.template, template_hash(template))

    async def run(self, backend, variables: Mapping[str, Any], seed: int, *,
                  params: Mapping[str, Any] | None = None, fresh: bool = False) -> Result[T]:
        """Ask ``backend`` once (its own re-asks aside) and parse a valid answer; ``params``
        replaces the task's request parameters for this call."""
        prompt = self.prompt(variables)
        schema, params_sent = self.request(backend, params)
        answer = await backend.ask_json(prompt.messages, schema, params_sent, seed, name=self.name, fresh=fresh)
        result: Result[T] = Result(answer, prompt)
        if answer.ok:
            try:
                result.value = self.parse(answer.data)
            except (ValueError, KeyError, TypeError) as e:
                result.parse_error = f"parse: {e}"[:300]
        if result.parse_error and answer.cached and not answer.sent and not fresh:
            # an unusable answer from the cache is not the server's last word: ask it again
            return await self.run(backend, variables, seed, params=params, fresh=True)
        return result
