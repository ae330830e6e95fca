"""The workflow engine runs each role with its model's prompt profile
(marag.roles.model_profiles) under method.role_prompts."""

from __future__ import annotations

import pytest

from marag.llm.scripted import ScriptedLLM
from marag.types import Passage, Question
from marag.workflows.engine import Run


class Recording(ScriptedLLM):
    def __init__(self) -> None:
        super().__init__({"AG": "<answer>1982</answer>"})
        self.seen: list = []

    async def generate(self, batch, params):  # type: ignore[no-untyped-def]
        self.seen.append(batch[0])
        return await super().generate(batch, params)


@pytest.mark.parametrize(("model", "extra", "profiled"), [
    ("qwen2.5-coder-0.5b", [], True),
    ("qwen2.5-coder-0.5b", ["method.role_prompts.AG=zeroshot-best-last"], False),
    ("qwen2.5-coder-0.5b", ["method.model_prompts=false"], False),
    ("smollm2", [], False)])
async def test_the_engine_builds_the_prompt_the_profile_names(ctx_for, model, extra,
                                                              profiled):
    llm = Recording()
    ctx = ctx_for(llm, None, f"llms.default.model={model}", *extra)
    q = Question(id="q1", question="When did Canada become independent?",
                 golden_answers=["1982"], dataset="t")
    run = Run(ctx, q, "vanilla")
    root = run.add_node(q.question)
    docs = [Passage("a", "Canada", "Canada became independent in 1982.")]
    parsed, _ = await run.call("AG", root.id, question=q.question, docs=docs)
    messages = llm.seen[0]
    # Qwen's profile: a worked example whose answer is a fact (the Eiffel Tower's year)
    assert any("Eiffel Tower" in m["content"] for m in messages) is profiled
    assert parsed.value == "1982"
