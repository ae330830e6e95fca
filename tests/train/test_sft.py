"""Supervised warm start: example selection, MMOA-RAG's selector labels, and training."""

from __future__ import annotations

import asyncio

import pytest
import torch

from marag.cli import main
from marag.config import SFTConfig, load_config
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.retrieval.base import Retriever
from marag.roles import role_for
from marag.train import sft
from marag.types import Hits, Node, Passage, Question, Step, Trace


def _trace(f1, valid=True, status="ok"):
    steps = [Step(role="planner", messages=[{"role": "user", "content": "q"}],
                  raw="<workflow>R, AG</workflow>", valid=valid),
             Step(role="R", raw="q"),
             Step(role="AG", messages=[{"role": "user", "content": "q"}],
                  raw="<answer>Paris</answer>")]
    return Trace(id="t", question="q", method="jade", steps=steps, status=status,
                 metrics={"f1": f1})


def test_rejection_sampling_keeps_valid_steps_of_good_traces():
    got = sft.examples_from_traces([_trace(1.0), _trace(0.4), _trace(1.0, valid=False),
                                    _trace(1.0, status="failed")], [], min_f1=0.5)
    assert [e.role for e in got] == ["planner", "AG", "AG"]  # invalid plan dropped
    assert got[0].target == "<workflow>R, AG</workflow>"
    only_ag = sft.examples_from_traces([_trace(1.0)], ["AG"], min_f1=0.5)
    assert [e.role for e in only_ag] == ["AG"]


def test_replies_the_decoder_ended_early_are_not_examples():
    # an IRCoT step stopped once its first sentence was settled ends mid-text
    cut = Step(role="ircot", messages=[{"role": "user", "content": "q"}],
               raw=" Paris is in France. So", valid=True,
               sampling={"temperature": 0.0, "stop_when": "marag.roles.ircot.sentence_done"})
    whole = Step(role="ircot", messages=[{"role": "user", "content": "q"}],
                 raw="So the answer is: Paris.", valid=True, sampling={"temperature": 0.0})
    t = Trace(id="t", question="q", method="ircot", steps=[cut, whole], metrics={"f1": 1.0})
    got = sft.examples_from_traces([t], [], min_f1=0.5)
    assert [e.target for e in got] == ["So the answer is: Paris."]


def test_selector_labels_from_word_overlap():
    docs = [Passage("a", "France", "Paris is the capital of France."),
            Passage("b", "Pizza", "Pizza is a dish from Italy."),
            Passage("c", "Lyon", "Lyon is a city in France.")]
    # an answer word (paris) in doc 0; half the question's content words (france) in doc 2
    assert sft.useful_documents("What is the capital of France?", ["Paris"], docs, 0.5) == [0, 2]
    assert sft.useful_documents("What is the capital of France?", ["Paris"], docs, 1.0) == [0]


class Pool(Retriever):
    """Twelve passages, the answer's in two of them; records the k it was asked for."""

    name = "pool"

    def __init__(self) -> None:
        self.asked: list[int] = []

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        self.asked.append(k)
        docs = [Passage(f"d{i}", f"Town {i}", f"Town {i} is a small place with a market.")
                for i in range(12)]
        docs[2] = Passage("d2", "France", "Paris is the capital of France.")
        docs[7] = Passage("d7", "Paris", "Paris lies on the Seine.")
        return [Hits(q, docs[:k], [1.0] * k) for q in queries]


Q = [Question("q1", "Which city is the capital of France?", ["Paris"])]


def _recipe(*overrides):
    cfg = load_config(None, ["method.name=mmoa-rag", *overrides])
    pool = Pool()
    return cfg, pool, asyncio.run(sft.examples_mmoa(Q, pool, cfg))


def test_mmoa_recipe_shows_the_selector_k_10_candidates():
    cfg, pool, ex = _recipe()
    assert pool.asked == [10] and cfg.method.candidates == 10  # S5.1.3: K = 10, not top_k
    ds, ag = ex
    assert (ds.role, ag.role) == ("DS", "AG")
    shown = ds.messages[-1]["content"]
    assert "Document9:" in shown and "Document10:" not in shown
    assert ds.target == "<id>2, 7</id>"
    role = role_for("DS", "default", "mmoa-rag")
    parsed = role.read(ds.target, {"docs": [None] * 10})
    assert parsed.valid and parsed.value == [2, 7]
    # the generator sees the selected documents (Eq. 7) and learns the golden answer
    prompt = " ".join(m["content"] for m in ag.messages)
    assert "Seine" in prompt and "market" not in prompt
    assert ag.target == "<answer>Paris</answer>"


def test_mmoa_recipe_labels_in_the_runs_own_formats():
    # prompts: paper -- Table 1's selector and its Document0,Document4 vocabulary (Eq. 5)
    _, _, (ds, _) = _recipe("method.prompts=paper")
    assert ds.target == "Document2,Document7"
    assert "Document0,Document4,Document6" in ds.messages[-1]["content"]
    paper = role_for("DS", "paper", "mmoa-rag")
    assert set(ds.target.replace(",", " , ").replace("Document", "Document ").split()) <= set(
        paper.constraint({"docs": [None] * 10}))
    assert paper.read(ds.target, {"docs": [None] * 10}).value == [2, 7]
    # a role whose reply marag opens is trained on the rest of it, after the open turn
    _, _, (ds, ag) = _recipe("method.role_prompts={DS: open, AG: zeroshot-best-last-open}")
    assert ds.messages[-1] == {"role": "assistant", "content": "<id>"}
    assert ds.target == "2, 7</id>"
    assert ag.messages[-1] == {"role": "assistant", "content": "<answer>"}
    assert ag.target == "Paris</answer>"


class Shelf(Retriever):
    """Twelve passages ranked by how many of the query's words they share (ties by number);
    records every query. The answer "Paris" is in passages 2 and 7; passage 3 mentions
    "Lyon" after 120 words, past the 100 an AG prompt shows."""

    name = "shelf"

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.docs = [Passage(f"d{i}", f"Town {i}", f"Town {i} is a small place with a market.")
                     for i in range(12)]
        self.docs[2] = Passage("d2", "France", "Paris is the capital of France.")
        self.docs[3] = Passage("d3", "Rivers", "water " * 120 + "Lyon has many bridges.")
        self.docs[7] = Passage("d7", "Paris", "Paris lies on the Seine.")

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        self.queries += queries
        out = []
        for q in queries:
            words = set(q.lower().strip("?").split())
            ranked = sorted(self.docs, key=lambda d: -len(
                words & set(f"{d.title} {d.text}".lower().replace(".", "").split())))
            out.append(Hits(q, ranked[:k], [1.0] * k))
        return out


def _answers(questions, *overrides):
    cfg = load_config(None, ["method.name=jade", *overrides])
    shelf, tally = Shelf(), {}
    return shelf, asyncio.run(sft.examples_answers(questions, shelf, cfg, tally)), tally


def test_answer_labels_are_what_jades_ag_reads_after_r_ag():
    from marag.llm.scripted import ScriptedLLM
    from marag.workflows import run_method
    from marag.workflows.engine import Context

    shelf, [ex], _ = _answers(Q, "method.top_k=3")
    assert shelf.queries == [Q[0].question]  # the question is the query, never the answer
    assert ex.role == "AG" and ex.target == "<answer>Paris</answer>"
    llm = ScriptedLLM({"planner": "<workflow>R, AG</workflow>", "AG": "<answer>Paris</answer>"})
    cfg = load_config(None, ["llms.default.backend=scripted", "method.top_k=3"])
    trace = asyncio.run(run_method("jade", Q[0], Context(llms={"default": llm}, config=cfg,
                                                         retriever=Shelf())))
    [ag] = [s for s in trace.steps if s.role == "AG"]
    assert ag.messages == ex.messages  # same prompt, documents and order as the engine's
    assert "capital of France" in " ".join(m["content"] for m in ex.messages)


def test_retrobust_mix_shows_low_ranked_documents_with_the_golden_answer():
    qs = [Question(f"q{i}", "Which city is the capital of France?", ["Paris"]) for i in range(40)]
    shelf, got, tally = _answers(qs, "method.top_k=3", "sft.irrelevant_share=1.0")
    assert tally["irrelevant"] == 40 and all(e.target == "<answer>Paris</answer>" for e in got)
    shown = " ".join(m["content"] for m in got[0].messages)
    top = shelf.search_batch([qs[0].question], 9)[0].passages
    assert all(f"({p.title})" not in shown for p in top[:3])  # the top 3 are not what it reads
    assert all(f"({p.title})" in shown for p in top[6:9])  # ranks 7-9 are
    _, _, tally = _answers(qs, "method.top_k=3", "sft.irrelevant_share=0.5")
    assert 10 <= tally["irrelevant"] <= 30 and tally["kept"] == 40
    assert _answers(qs, "method.top_k=3", "sft.irrelevant_share=0.5")[2] == tally  # seeded


def test_answer_labels_keep_only_answers_a_reader_can_find():
    qs = [Question("lyon", "Which French city has the most bridges?", ["Lyon"]),  # clipped off
          Question("two", "Which city is the capital of France?", ["Lutetia", " paris "]),
          Question("cmp", "Is Rome or Town 9 older?", ["Rome"]),  # an option the question names
          Question("named", "Which French town is on the Seine, like Rome?", ["Rome"]),
          Question("yn", "Is Town 1 a small place?", ["yes"]),
          Question("part", "Which city is the capital of France?", ["Par"]),  # not a whole word
          Question("none", "Which town?", ["  "])]
    _, got, tally = _answers(qs)
    assert [e.target for e in got] == ["<answer>paris</answer>", "<answer>Rome</answer>",
                                       "<answer>yes</answer>"]
    assert tally == {"kept": 3, "no answer": 1, "no documents": 0, "unsupported": 3,
                     "irrelevant": 0}
    _, every, tally = _answers(qs, "sft.answer_evidence=any")
    assert [e.target for e in every] == [
        "<answer>Lyon</answer>", "<answer>paris</answer>", "<answer>Rome</answer>",
        "<answer>Rome</answer>", "<answer>yes</answer>", "<answer>Par</answer>"]
    assert tally["kept"] == 6 and tally["no answer"] == 1


def test_answer_labels_follow_the_models_prompt_profile():
    # Qwen's profile opens the reply with <answer>: the label is the rest of it
    _, [ag], _ = _answers(Q, "llms.default.model=qwen2.5-coder-0.5b")
    assert ag.messages[-1] == {"role": "assistant", "content": "<answer>"}
    assert ag.target == "Paris</answer>"
    variant = role_for("AG", "default", "jade", {"AG": "fact-example-best-last-open"})
    assert ag.messages[:-1] == variant.build(
        question=Q[0].question, docs=Shelf().search_batch([Q[0].question], 5)[0].passages)


def test_answer_labels_refuse_a_method_without_r_ag(capsys):
    with pytest.raises(ValueError, match="does not run"):
        _answers(Q, "method.name=mmoa-rag")
    assert main(["sft", "--method", "m-ask", "--recipe", "answers", "--dataset", "q.jsonl",
                 "--out", "o"]) == 2
    assert "vanilla | mao-arag | jade" in capsys.readouterr().err  # registry order


def test_an_inference_only_method_is_refused_before_anything_loads(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["sft", "--method", "self-rag", "--recipe", "self-distill", "--dataset",
                 "q.jsonl", "--out", str(out)]) == 2
    assert "method 'self-rag' is inference-only" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_answers_recipe_cli_trains_the_generator_on_real_questions(tmp_path, qa_data,
                                                                   capsys):
    import json

    from marag.retrieval import build_index

    index = build_index(qa_data / "nq_open.corpus.jsonl", tmp_path / "idx", kind="bm25",
                        show_progress=False)
    out = tmp_path / "sft"
    command = ["sft", "--method", "jade", "--recipe", "answers", "--index", str(index),
               "--dataset", str(qa_data / "nq_open.questions.jsonl"), "--out", str(out),
               "--no-progress", "--set", "sft.max_examples=6", "--set", "sft.batch_size=2",
               "--set", "sft.lora.r=4"]
    assert main(command) == 0
    run = json.loads((out / "run.json").read_text())
    assert set(run["examples"]) == {"AG"} and 1 <= run["examples"]["AG"] <= 6
    assert (out / "policy" / "adapter_config.json").is_file()
    capsys.readouterr()
    # another learning rate cannot continue the checkpoint: refused before the folder's
    # record (config.yaml) is rewritten
    assert main(command + ["--set", "sft.lr=0.001"]) == 2
    assert "settings.lr: 0.0001 in the checkpoint, 0.001 now" in capsys.readouterr().err
    assert "lr: 0.0001" in (out / "config.yaml").read_text()
    assert main(command) == 0  # the same command: finished, nothing left to train
    assert "(0 in this call)" in capsys.readouterr().out
    assert main(["sft", "--recipe", "answers", "--out", str(out)]) == 2  # no --dataset


def test_sft_lowers_the_loss_and_writes_an_adapter(tmp_path):
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok)
    ex = [sft.Example("AG", [{"role": "user", "content": "What is the capital of France?"}],
                      "<answer>Paris</answer>")] * 4
    cfg = SFTConfig(epochs=8, batch_size=4, micro_batch_size=2, lr=1e-2,
                    lora={"r": 4, "target_modules": ["q_proj", "v_proj"]})
    rows = sft.train_sft(backend, ex, cfg, tmp_path)
    assert len(rows) == 8 and rows[-1]["loss"] < 0.5 * rows[0]["loss"]
    assert (tmp_path / "policy" / "adapter_config.json").is_file()
    assert backend.weights_version == 1  # rollouts now sample from the tuned weights
    with pytest.raises(ValueError, match="no SFT examples"):
        sft.train_sft(backend, [], cfg, tmp_path / "empty")


def test_sft_refuses_a_misspelt_role(capsys):
    code = main(["sft", "--traces", "x.jsonl", "--out", "o", "--set", "roles.planer=default"])
    assert code == 2 and "planner" in capsys.readouterr().err


def _run_trace(qid, f1, plan_steps, status="ok"):
    plan = [s.role for s in plan_steps]
    return Trace(id=qid, question=f"question {qid}?",
                 method="vanilla" if "R" in plan else "llm-only", steps=plan_steps,
                 nodes=[Node(0, f"question {qid}?", workflow=plan)], status=status,
                 metrics={"f1": f1})


def _ag(answer):
    return Step(role="AG", messages=[{"role": "user", "content": "docs + q"},
                                     {"role": "assistant", "content": "<answer>"}],
                raw=answer)


def test_plan_labels_pick_each_questions_best_plan():
    planner = role_for("planner", "default", "jade")
    no_docs = [_run_trace("a", 1.0, [_ag("Paris")]), _run_trace("b", 0.0, [_ag("x")]),
               _run_trace("c", 0.6, [_ag("Rome")]), _run_trace("d", 0.0, [_ag("y")])]
    docs = [_run_trace("a", 1.0, [Step(role="R", raw="question a?"), _ag("Paris")]),
            _run_trace("b", 0.8, [Step(role="R", raw="question b?"), _ag("Lyon")]),
            _run_trace("c", 0.2, [Step(role="R", raw="question c?"), _ag("Milan")]),
            # a failed trace never labels, whatever its F1 says
            _run_trace("d", 1.0, [Step(role="R", raw="question d?"), _ag("z")], "failed")]
    got = sft.examples_best_plan([("AG", no_docs), ("R, AG", docs)], planner, [], 0.5)
    plans = [(e.messages[-2]["content"], e.target) for e in got if e.role == "planner"]
    # a: a tie goes to the plan listed first (the cheaper); b: retrieval won; c: the
    # answer without documents won; d: nothing reached min_f1, so no example at all
    assert [t for _, t in plans] == ["AG</workflow>", "R, AG</workflow>", "AG</workflow>"]
    assert [q for q, _ in plans] == [planner.build("question a?")[-1]["content"],
                                     planner.build("question b?")[-1]["content"],
                                     planner.build("question c?")[-1]["content"]]
    assert all(e.messages[-1] == {"role": "assistant", "content": "<workflow>"}
               for e in got if e.role == "planner")
    assert [e.target for e in got if e.role == "AG"] == ["Paris", "Lyon", "Rome"]
    only_planner = sft.examples_best_plan([("AG", no_docs), ("R, AG", docs)], planner,
                                          ["planner"], 0.5)
    assert {e.role for e in only_planner} == {"planner"} and len(only_planner) == 3
    with pytest.raises(ValueError, match="not a plan"):
        sft.examples_best_plan([("AG, R", docs)], planner, [], 0.5)
    # the root's decomposition switch is the engine's (0 < method.max_depth)
    flat = sft.examples_best_plan([("AG", no_docs)], planner, ["planner"], 0.5,
                                  allow_decompose=False)[0]
    assert flat.messages == [*planner.build("question a?", allow_decompose=False),
                             {"role": "assistant", "content": "<workflow>"}]
    assert flat.messages != got[0].messages


def test_plan_labels_refuse_traces_of_another_plan_or_prompt():
    planner = role_for("planner", "default", "jade")
    docs = [_run_trace("a", 1.0, [Step(role="R", raw="question a?"), _ag("Paris")])]
    # traces of a run that retrieved, offered as the no-retrieval plan
    with pytest.raises(ValueError, match=r"plan 'AG': question a \(vanilla\) ran R, AG"):
        sft.examples_best_plan([("AG", docs)], planner, [], 0.5)

    def paper(role, method):  # as the CLI compares them under method.prompts: paper
        return role_for(role, "paper", "jade") == role_for(role, "paper", method)

    with pytest.raises(ValueError, match="vanilla prompts AG differently"):
        sft.examples_best_plan([("R, AG", docs)], planner, [], 0.5, same_prompt=paper)
    # the planner's labels alone do not need the executors' prompts
    assert len(sft.examples_best_plan([("R, AG", docs)], planner, ["planner"], 0.5,
                                      same_prompt=paper)) == 1


def test_plan_labels_take_a_decomposition_run_and_skip_its_empty_decompositions(caplog):
    planner = role_for("planner", "default", "jade")
    chat = [{"role": "user", "content": "prompt"}, {"role": "assistant", "content": ""}]
    qds = Step(role="QDS", messages=chat, raw="<q1>part one?</q1><q2>part two?</q2>")
    split = Trace(id="a", question="question a?", method="jade",
                  steps=[qds, Step(role="R", node_id=1), _ag("1844"), Step(role="R", node_id=2),
                         _ag("1989"), Step(role="AS", messages=chat, raw="Paris")],
                  nodes=[Node(0, "question a?", workflow=["QDS"], children=[1, 2]),
                         Node(1, "part one?", parent=0, workflow=["R", "AG"]),
                         Node(2, "part two?", parent=0, workflow=["R", "AG"])],
                  metrics={"f1": 1.0})
    # QDS came back empty at the root, which then ran the fallback R, AG
    fell_back = Trace(id="b", question="question b?", method="jade",
                      steps=[Step(role="QDS", raw="no split", valid=False), Step(role="R"),
                             _ag("Lyon")],
                      nodes=[Node(0, "question b?", workflow=["R", "AG"])], metrics={"f1": 1.0})
    docs = [_run_trace("a", 0.5, [Step(role="R", raw="question a?"), _ag("Rome")]),
            _run_trace("b", 0.5, [Step(role="R", raw="question b?"), _ag("Lyon")])]
    with caplog.at_level("WARNING"):
        got = sft.examples_best_plan([("R, AG", docs), ("QDS", [split, fell_back])], planner,
                                     [], 0.5)
    assert "on 1 question(s) the decomposition gave no sub-questions" in caplog.text
    labels = {e.messages[-2]["content"]: e.target for e in got if e.role == "planner"}
    assert labels == {planner.build("question a?")[-1]["content"]: "QDS</workflow>",
                      planner.build("question b?")[-1]["content"]: "R, AG</workflow>"}
    # the decomposition's own steps teach the decomposer and the parts' answers
    assert [e.target for e in got if e.role in ("QDS", "AS")] == [qds.raw, "Paris"]
    # a decomposition a budget ended labels nothing, however it scored
    cut = Trace(id="b", question="question b?", method="jade", steps=split.steps,
                nodes=split.nodes, status="budget", metrics={"f1": 1.0})
    with caplog.at_level("WARNING"):
        got = sft.examples_best_plan([("QDS", [cut])], planner, [], 0.5)
    assert got == [] and "1 trace(s) ended at a budget" in caplog.text
    # a run that never tried QDS is still refused as the QDS plan's traces
    with pytest.raises(ValueError, match="plan 'QDS': question a"):
        sft.examples_best_plan([("QDS", docs)], planner, [], 0.5)


def test_plan_labels_cli_refuses_bad_input(tmp_path, capsys):
    assert main(["sft", "--plans", "R, AG", "--out", str(tmp_path)]) == 2
    assert "PLAN=FILE" in capsys.readouterr().err
    assert main(["sft", "--method", "vanilla", "--plans", f"AG={tmp_path}/t.jsonl",
                 "--out", str(tmp_path)]) == 2
    assert "labels a planner" in capsys.readouterr().err
    # missing and broken trace files are errors that name the file, not tracebacks
    assert main(["sft", "--method", "jade", "--plans", f"AG={tmp_path}/missing.jsonl",
                 "--out", str(tmp_path)]) == 2
    assert "--plans AG:" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"id": "a", \n')
    assert main(["sft", "--method", "jade", "--plans", f"AG={tmp_path}/bad.jsonl",
                 "--out", str(tmp_path)]) == 2
    assert "bad.jsonl:1: invalid JSON" in capsys.readouterr().err
    assert main(["sft", "--traces", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path)]) == 2
    assert "--traces:" in capsys.readouterr().err


def test_sft_update_does_not_depend_on_the_micro_batch_split(tmp_path):
    from marag.train.policy import full_trainable

    ex = [sft.Example("AG", [{"role": "user", "content": "What is the capital of " + c + "?"}],
                      "<answer>" + a + "</answer>")
          for c, a in [("France", "Paris"), ("Italy", "Rome"), ("Peru", "Lima"),
                       ("the United Kingdom of Great Britain", "London")]]
    got = []
    for micro in (1, 4):
        model, tok = build_tiny_model(seed=0)
        backend = HFBackend("tiny", model=model, tokenizer=tok)
        cfg = SFTConfig(epochs=1, batch_size=4, micro_batch_size=micro, lr=1e-2,
                        dtype="float32", lora={"r": 4, "target_modules": ["q_proj", "v_proj"]})
        sft.train_sft(backend, ex, cfg, tmp_path / str(micro))
        got.append({k: v.clone() for k, v in full_trainable(model).items()})
    assert got[0].keys() == got[1].keys() and got[0]
    for k in got[0]:
        torch.testing.assert_close(got[0][k], got[1][k], rtol=1e-4, atol=1e-6)


def test_the_adapter_folder_records_its_config_and_command(tmp_path):
    import json

    import yaml

    from marag.commands.sft import record

    config = load_config(None, ["method.name=jade", "sft.epochs=2"])
    examples = [sft.Example("planner", [], "R, AG</workflow>"), sft.Example("AG", [], "x")] * 2
    record(tmp_path / "out", config, examples)
    saved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert saved["sft"]["epochs"] == 2 and saved["method"]["name"] == "jade"
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["examples"] == {"AG": 2, "planner": 2} and run["command"]


def _capitals():
    return [sft.Example("AG", [{"role": "user", "content": f"What is the capital of {c}?"}],
                        f"<answer>{a}</answer>")
            for c, a in [("France", "Paris"), ("Italy", "Rome"), ("Peru", "Lima"),
                         ("Spain", "Madrid"), ("Japan", "Tokyo"), ("Kenya", "Nairobi")]]


def _sft_run(out, monkeypatch=None, kill_at=None, **settings):
    """Train the tiny model on six examples (three steps an epoch); ``kill_at``: stop as a
    kill would, right after that step's update and before its checkpoint."""
    from marag.train.logbook import Logbook
    from marag.train.policy import full_trainable

    if kill_at is not None:
        write = Logbook.write

        def dying(self, row):
            write(self, row)
            if row["iteration"] == kill_at:
                raise KeyboardInterrupt

        monkeypatch.setattr(Logbook, "write", dying)
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok)
    cfg = SFTConfig(**{"epochs": 2, "batch_size": 2, "micro_batch_size": 2, "lr": 1e-2,
                       "dtype": "float32", "save_every": 1,
                       # dropout draws random numbers: a resume must restore the RNG too
                       "lora": {"r": 4, "dropout": 0.1, "target_modules": ["q_proj", "v_proj"]},
                       **settings})
    try:
        rows = sft.train_sft(backend, _capitals(), cfg, out)
    finally:
        if kill_at is not None:
            monkeypatch.setattr(Logbook, "write", write)
    return rows, {k: v.clone() for k, v in full_trainable(model).items()}


def test_sft_killed_mid_epoch_resumes_to_the_unbroken_runs_weights(tmp_path, monkeypatch):
    import json

    rows, whole = _sft_run(tmp_path / "whole")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(KeyboardInterrupt):  # killed during the second epoch
        _sft_run(tmp_path / "broken", monkeypatch, kill_at=5)
    state = json.loads((tmp_path / "broken/checkpoints/iter-000004/state.json").read_text())
    assert state["iteration"] == 4
    again, resumed = _sft_run(tmp_path / "broken")  # the same command again
    # step 5 (whose row the kill left in the metrics) is redone from step 4's checkpoint
    assert [r["iteration"] for r in again] == [1, 2, 3, 4, 5, 6]
    assert [r["loss"] for r in again] == pytest.approx([r["loss"] for r in rows], rel=1e-5)
    assert whole.keys() == resumed.keys() and whole
    for k in whole:
        torch.testing.assert_close(resumed[k], whole[k], rtol=1e-5, atol=1e-7)
    assert (tmp_path / "broken/policy/adapter_config.json").is_file()


def test_sft_takes_another_epoch_but_refuses_other_settings_or_examples(tmp_path):
    one, _ = _sft_run(tmp_path / "a", epochs=1)
    assert len(one) == 3
    two, more = _sft_run(tmp_path / "a", epochs=2)  # one more epoch over the same examples
    _, whole = _sft_run(tmp_path / "b", epochs=2)
    assert len(two) == 6
    for k in whole:
        torch.testing.assert_close(more[k], whole[k], rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match=r"settings.lr: 0.01 in the checkpoint, 0.005 now"):
        _sft_run(tmp_path / "a", lr=5e-3)
    with pytest.raises(ValueError, match="at step 6, past the 3 steps of sft.epochs=1"):
        _sft_run(tmp_path / "a", epochs=1)
    again, same = _sft_run(tmp_path / "a", epochs=2)  # finished: nothing left, same weights
    assert len(again) == 6
    for k in whole:
        torch.testing.assert_close(same[k], whole[k], rtol=1e-5, atol=1e-7)
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok)
    with pytest.raises(ValueError, match="other examples"):
        sft.train_sft(backend, _capitals()[:4], SFTConfig(
            epochs=2, batch_size=2, lr=1e-2, dtype="float32",
            lora={"r": 4, "dropout": 0.1, "target_modules": ["q_proj", "v_proj"]}),
            tmp_path / "a")
