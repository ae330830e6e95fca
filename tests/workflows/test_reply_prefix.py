"""Roles whose reply starts inside the format (``Role.reply_prefix``) and the planner's
restricted decoding (``method.constrained_planner``)."""

from __future__ import annotations

from dataclasses import replace

from marag.llm.base import SamplingParams
from marag.llm.scripted import ScriptedLLM
from marag.roles import answer
from marag.types import Completion, Passage, Question
from marag.workflows import run_method
from marag.workflows.engine import Run

Q = Question(id="q1", question="When did Canada become independent?",
             golden_answers=["1982"], dataset="t")


class Continuing(ScriptedLLM):
    """A scripted backend that, like the hf backend, continues an open assistant turn."""

    continues_reply = True

    def __init__(self, text: str, finish: str = "stop") -> None:
        super().__init__({})
        self.text, self.finish, self.seen = text, finish, []

    async def generate(self, batch, params: SamplingParams):  # type: ignore[no-untyped-def]
        self.seen.append((batch[0], params))
        return [Completion(text=self.text, finish_reason=self.finish)]


async def _ag_call(llm, ctx_for):  # type: ignore[no-untyped-def]
    ctx = ctx_for(llm, None, "method.role_prompts.AG=zeroshot-best-last-open")
    run = Run(ctx, Q, "vanilla")
    root = run.add_node(Q.question)
    docs = [Passage("a", "Canada", "Canada became independent in 1982.")]
    return await run.call("AG", root.id, question=Q.question, docs=docs)


async def test_the_prefix_opens_the_reply_and_the_parser_reads_it(ctx_for):
    llm = Continuing("1982")
    parsed, step = await _ag_call(llm, ctx_for)
    messages, _ = llm.seen[0]
    assert messages[-1] == {"role": "assistant", "content": "<answer>"}
    assert (parsed.value, parsed.valid) == ("1982", True)
    # the step keeps what the model wrote, and the prompt it continued
    assert step.raw == "1982" and step.messages[-1]["content"] == "<answer>"


async def test_a_reply_that_runs_out_of_tokens_is_not_closed(ctx_for):
    parsed, step = await _ag_call(Continuing("Canada became independent in", "length"), ctx_for)
    assert parsed.value == "Canada became independent in" and not parsed.valid
    assert "before it was closed" in step.reason


async def test_backends_that_cannot_continue_get_no_prefix(ctx_for):
    llm = ScriptedLLM({"AG": "<answer>1982</answer>"})
    ctx = ctx_for(llm, None, "method.role_prompts.AG=zeroshot-best-last-open")
    run = Run(ctx, Q, "vanilla")
    root = run.add_node(Q.question)
    parsed, step = await run.call("AG", root.id, question=Q.question, docs=None)
    assert step.messages[-1]["role"] == "user" and (parsed.value, parsed.valid) == ("1982", True)


async def test_constrained_planner_passes_the_plan_vocabulary(ctx_for):
    seen = []

    class Recording(ScriptedLLM):
        async def generate(self, batch, params):  # type: ignore[no-untyped-def]
            seen.append(params)
            return await super().generate(batch, params)

    llm = Recording({"planner": "<workflow>AG</workflow>", "AG": "<answer>1982</answer>"})
    t = await run_method("jade", Q, ctx_for(llm, None, "method.constrained_planner=true"))
    assert t.answer == "1982"
    allowed = seen[0].allowed_text
    assert {"<workflow>", "</workflow>", "R", " AG", "QDS"} <= set(allowed)
    assert "AS" not in allowed and seen[1].allowed_text == ()
    # off by default on a backend that cannot restrict
    seen.clear()
    await run_method("jade", Q, ctx_for(llm, None))
    assert seen[0].allowed_text == ()


def test_planner_allowed_text_at_the_summary_turn_is_as_only():
    from marag.roles.planner import allowed_text

    assert set(allowed_text(pairs=[("a", "b")])) == {"<workflow>", "</workflow>", ",", " ",
                                                     "AS", " AS"}
    assert "QDS" not in allowed_text(allow_decompose=False)


def test_variant_roles_keep_the_default_parser():
    from marag.roles.variants import VARIANTS

    for name, role in VARIANTS["AG"].items():
        assert replace(role, build=answer.AG.build, reply_prefix="") == answer.AG, name


def test_open_variants_start_the_reply_with_their_tag_and_keep_the_role():
    from marag.roles.registry import get_role
    from marag.roles.variants import VARIANTS

    for name, variants in VARIANTS.items():
        if name in ("AG", "planner"):
            continue
        base = get_role(name)
        assert variants["example"] is base, name
        opened = variants["open"]
        assert opened.reply_prefix.startswith("<") and opened.reply_prefix.endswith(">")
        assert replace(opened, reply_prefix="") == base, name
        # the parser reads the opened reply: prefix + completion
        assert opened.name == base.name and opened.parse is base.parse


async def test_the_planner_reply_is_opened_with_its_tag(ctx_for):
    llm = Continuing("R, AG")  # what a continuing backend writes after "<workflow>"
    run = Run(ctx_for(llm, None), Q, "jade")
    root = run.add_node(Q.question)
    parsed, _ = await run.call("planner", root.id, question=Q.question)
    messages, _ = llm.seen[0]
    assert messages[-1] == {"role": "assistant", "content": "<workflow>"}
    assert (list(parsed.value), parsed.valid) == (["R", "AG"], True)
    # the measured variants keep the prompts they were measured with
    from marag.roles.variants import VARIANTS

    assert VARIANTS["planner"]["menu"].reply_prefix == ""
    assert VARIANTS["planner"]["tools"].reply_prefix == ""
