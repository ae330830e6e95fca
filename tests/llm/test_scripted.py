import pytest

from marag.llm.base import LLM, LLMError, SamplingParams, current_role
from marag.llm.scripted import ScriptedLLM


async def test_rules_by_role_regex_list_and_callable():
    llm = ScriptedLLM({
        "planner": ["<workflow>QDS</workflow>", "<workflow>R, AG</workflow>"],
        "re:capital of (\\w+)": lambda m: "<answer>Paris</answer>",
        "AG": "<answer>x</answer>",
    })
    assert isinstance(llm, LLM)
    p = SamplingParams()
    token = current_role.set("planner")
    try:
        a = await llm.generate([[{"role": "user", "content": "q"}]] * 2, p)
    finally:
        current_role.reset(token)
    assert [c.text for c in a] == ["<workflow>QDS</workflow>", "<workflow>R, AG</workflow>"]
    b = await llm.generate([[{"role": "user", "content": "what is the capital of France"}]], p)
    assert b[0].text == "<answer>Paris</answer>"
    assert b[0].prompt_tokens == 6 and b[0].completion_tokens == 1
    token = current_role.set("planner")
    try:
        with pytest.raises(LLMError, match="no reply left"):
            await llm.generate([[{"role": "user", "content": "q"}]], p)
    finally:
        current_role.reset(token)


async def test_unmatched_call_fails_loudly_and_stop_strings_apply():
    llm = ScriptedLLM({"AG": "<answer>Paris</answer> trailing"})
    with pytest.raises(LLMError, match="no rule for role ''"):
        await llm.generate([[{"role": "user", "content": "hello"}]], SamplingParams())
    token = current_role.set("AG")
    try:
        out = await llm.generate([[{"role": "user", "content": "q"}]], SamplingParams(stop=("</answer>",)))
    finally:
        current_role.reset(token)
    assert out[0].text == "<answer>Paris"
    assert llm.calls[-1][0] == "AG"
