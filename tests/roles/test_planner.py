import pytest

from marag.roles import get_role

planner = get_role("planner")


@pytest.mark.parametrize(
    "text,codes",
    [
        ("<workflow>R, DS, AG</workflow>", ["R", "DS", "AG"]),
        ("<workflow>AG</workflow>", ["AG"]),
        ("<workflow>QR, R, AG", ["QR", "R", "AG"]),  # closing tag cut by the stop string
        ("<Workflow> r -> ds -> ag </Workflow>", ["R", "DS", "AG"]),
        ("<workflow>QR,R,DS,AG</workflow> extra text", ["QR", "R", "DS", "AG"]),
        ("<workflow>QDS</workflow>", ["QDS"]),
        ("<workflow>QDP</workflow>", ["QDP"]),
    ],
)
def test_valid_plans(text, codes):
    p = planner.parse(text)
    assert (p.value, p.valid, p.reason) == (codes, True, "")


@pytest.mark.parametrize(
    "text,allow,value,reason",
    [
        ("<workflow>QDS, AG</workflow>", True, ["QDS", "AG"], "only code"),
        ("<workflow>DS, AG</workflow>", True, ["DS", "AG"], "DS without R"),
        ("<workflow>R, DS</workflow>", True, ["R", "DS"], "does not end with AG"),
        ("<workflow>R, XX, AG</workflow>", True, ["R", "XX", "AG"], "unknown code(s): XX"),
        ("<workflow>AG, R</workflow>", True, ["AG", "R"], "out of order"),
        ("<workflow>R, R, AG</workflow>", True, ["R", "R", "AG"], "repeated code(s): R"),
        ("<workflow>AS</workflow>", True, ["AS"], "this node has none"),
        ("<workflow></workflow>", True, [], "empty workflow"),
        ("<workflow>QDS</workflow>", False, ["QDS"], "not allowed at this depth"),
        ("<workflow>QDP</workflow>", False, ["QDP"], "not allowed at this depth"),
        ("I would use R, DS and then AG.", True, ["R", "DS", "AG"], "no <workflow> tag"),
        ("Retrieve then answer.", True, [], "no <workflow> tag"),
        ("", True, [], "no <workflow> tag"),
    ],
)
def test_invalid_plans(text, allow, value, reason):
    p = planner.parse(text, allow_decompose=allow)
    assert p.valid is False
    assert p.value == value
    assert reason in p.reason


def test_parse_ignores_unrelated_context():
    assert planner.parse("<workflow>R, AG</workflow>", depth=2).valid


def test_build_contains_question_example_and_decomposition_choice():
    msgs = planner.build(question="Who wrote Hamlet?")
    text = "\n".join(m["content"] for m in msgs)
    assert "Who wrote Hamlet?" in msgs[-1]["content"]
    (example,) = [m["content"] for m in msgs if m["role"] == "assistant"]
    assert example.startswith("<workflow>") and planner.parse(example).valid
    assert "QDS" in text and "QDP" in text
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]

    no_split = "\n".join(m["content"] for m in planner.build("Who wrote Hamlet?", allow_decompose=False))
    assert "QDS" not in no_split and "QDP" not in no_split


def test_decoding_limits():
    assert "</workflow>" in planner.stop
    assert 8 <= planner.max_tokens <= 64


def test_the_retrieve_first_menu_lists_every_plan_of_the_default_menu_and_keeps_its_rules():
    from marag.roles import planner
    from marag.roles.variants import VARIANTS

    for name in ("menu-retrieve-open", "menu-retrieve-open-zeroshot"):
        role = VARIANTS["planner"][name]
        assert role.reply_prefix == "<workflow>" and role.parse is planner.ROLE.parse
        system = role.build("Who wrote Hamlet?")[0]["content"]
        default = planner.build("Who wrote Hamlet?")[0]["content"]
        plans = [line for line in default.splitlines() if line.startswith("<workflow>")]
        assert sorted(plans) == sorted(
            line for line in system.splitlines() if line.startswith("<workflow>"))
        # the first plan offered retrieves
        assert system.splitlines()[1] == "<workflow>R, AG</workflow>"
        # below the root, and for solved sub-questions, the default prompts are kept
        assert role.build("q", allow_decompose=False) == planner.build("q", False)
        assert role.build("q", pairs=[["a", "b"]]) == planner.build("q", pairs=[["a", "b"]])
    assert len(VARIANTS["planner"]["menu-retrieve-open"].build("q")) == 4
    assert len(VARIANTS["planner"]["menu-retrieve-open-zeroshot"].build("q")) == 2
