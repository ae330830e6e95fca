"""Best-of-n self-distillation (``marag sft --recipe self-distill``): each question's best
sample is the one trained on, questions whose samples never clear ``sft.min_f1`` give no
example, and a rerun reads the samples already drawn instead of drawing them again."""

from __future__ import annotations

import json

import pytest

from marag.cli import main
from marag.config import load_config
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.retrieval.base import Retriever
from marag.train import self_distill as sd
from marag.types import Completion, Cost, Hits, Passage, Question, Step, Trace
from marag.workflows.engine import Context

QUESTIONS = [Question("fr", "Which city is the capital of France?", ["Paris"]),
             Question("it", "Which city is the capital of Italy?", ["Rome"]),
             Question("xx", "Which city is the capital of Atlantis?", ["Poseidonia"])]
ANSWERS = ("Paris", "Rome", "Lyon", "Milan")


def pick(seed: int | None) -> str:
    """The answer a sampled call gives: a function of the call's seed, which the engine
    derives from the base seed, the question and the sample number."""
    assert seed is not None
    return ANSWERS[seed % len(ANSWERS)]


class Dice:
    """An LLM whose answer depends on the call's seed only; counts its calls."""

    name = "dice"
    model = "dice"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, batch, params):
        assert params.temperature > 0
        self.calls += len(batch)
        return [Completion(text=f"<answer>{pick(params.seed)}</answer>", completion_tokens=3,
                           model=self.model) for _ in batch]

    async def aclose(self) -> None:
        pass


class TinyDice(HFBackend):
    """The tiny model (trained by the SFT step) answering as :class:`Dice` does."""

    def __init__(self) -> None:
        model, tok = build_tiny_model(seed=0)
        super().__init__("tiny", model=model, tokenizer=tok)
        self.calls = 0

    async def generate(self, batch, params):
        self.calls += len(batch)
        return [Completion(text=f"<answer>{pick(params.seed)}</answer>", completion_tokens=3,
                           model="tiny") for _ in batch]


class One(Retriever):
    name = "one"

    def search_batch(self, queries, k):
        return [Hits(q, [Passage("d", "Capitals", "Paris, Rome.")], [1.0]) for q in queries]


def _config(*overrides):
    return load_config(None, ["llms.default.backend=scripted", "method.name=vanilla",
                              "method.top_k=1", "sft.min_f1=0.5", *overrides])


def _trace(qid, sample, f1, *, invalid=0, tokens=5, status="ok"):
    steps = [Step(role="AG", messages=[{"role": "user", "content": qid}], raw=f"a{sample}",
                  valid=i >= invalid) for i in range(2)]
    return Trace(id=qid, question=qid, method="vanilla", sample=sample, steps=steps,
                 status=status, metrics={"f1": f1}, cost=Cost(completion_tokens=tokens))


def test_best_sample_per_question_and_the_tie_rule():
    got = sd.best_per_question([
        _trace("a", 0, 0.5), _trace("a", 1, 1.0, tokens=9), _trace("a", 2, 1.0, tokens=4),
        _trace("a", 3, 1.0, tokens=4),                      # a tie in everything: the first
        _trace("b", 0, 1.0, invalid=1, tokens=1), _trace("b", 1, 1.0, tokens=8),
        _trace("c", 0, 0.4), _trace("c", 1, 0.2),           # nothing clears min_f1: dropped
        _trace("d", 0, 1.0, status="failed"), _trace("d", 1, 0.6)], min_f1=0.5)
    assert [(t.id, t.sample) for t in got] == [("a", 2), ("b", 1), ("d", 1)]
    assert sd.best_per_question([_trace("e", 0, 1.0, status="failed")], 0.0) == []


def _distill(tmp_path, llm, n, *overrides):
    cfg = _config(*overrides)
    ctx = Context(llms={"default": llm}, config=cfg, retriever=One())
    return sd.self_distill(QUESTIONS, ctx, n, 1.0, tmp_path)


def test_self_distill_trains_on_each_questions_best_sample(tmp_path):
    llm = Dice()
    examples, tally = _distill(tmp_path, llm, 6)
    samples = [json.loads(x) for x in (tmp_path / sd.SAMPLES).read_text().splitlines()]
    assert llm.calls == 18 and len(samples) == 18
    assert sorted((s["id"], s["sample"]) for s in samples) == sorted(
        (q.id, k) for q in QUESTIONS for k in range(6))
    assert all(s["steps"][-1]["sampling"]["temperature"] == 1.0 for s in samples)
    by_q = {q.id: [s for s in samples if s["id"] == q.id] for q in QUESTIONS}
    assert len({s["answer"] for s in by_q["fr"]}) > 1  # the samples differ
    chosen = json.loads((tmp_path / "chosen.json").read_text())
    # each question's chosen sample is its first that scored the best F1 (all the same length)
    for qid in ("fr", "it"):
        best = max(s["metrics"]["f1"] for s in by_q[qid])
        first = min(s["sample"] for s in by_q[qid] if s["metrics"]["f1"] == best)
        assert best == 1.0 and chosen[qid] == {"sample": first, "f1": 1.0}
    assert any(chosen[q]["sample"] > 0 for q in ("fr", "it"))  # not simply the first drawn
    assert "xx" not in chosen  # no sample answers Poseidonia: no example
    assert tally == {"questions": 3, "drawn": 18, "kept": 2, "dropped": 1, "examples": 2}
    assert [e.role for e in examples] == ["AG", "AG"]
    assert [e.target for e in examples] == ["<answer>Paris</answer>", "<answer>Rome</answer>"]
    assert "France" in examples[0].messages[-1]["content"]


def test_a_rerun_reads_the_samples_instead_of_drawing_them(tmp_path):
    _, first = _distill(tmp_path, Dice(), 4)
    before = (tmp_path / sd.SAMPLES).read_text()
    again = Dice()
    _, tally = _distill(tmp_path, again, 4)
    assert again.calls == 0 and tally["drawn"] == 0 and tally["kept"] == first["kept"]
    assert (tmp_path / sd.SAMPLES).read_text() == before
    # more samples: only the new ones are drawn, the old ones stay as they were
    more = Dice()
    _, tally = _distill(tmp_path, more, 5)
    assert more.calls == 3 and tally["drawn"] == 3
    assert (tmp_path / sd.SAMPLES).read_text().startswith(before)
    # a kill mid-line: the cut-off sample is dropped and drawn again, nothing else
    text = (tmp_path / sd.SAMPLES).read_text()
    (tmp_path / sd.SAMPLES).write_text(text[:-40])
    cut = Dice()
    _, tally = _distill(tmp_path, cut, 5)
    assert cut.calls == 1 and tally["drawn"] == 1
    lines = [json.loads(x) for x in (tmp_path / sd.SAMPLES).read_text().splitlines()]
    old = json.loads(text.splitlines()[-1])
    assert len(lines) == 15  # the same sample again
    assert [lines[-1][k] for k in ("id", "sample", "answer")] == [old[k] for k in
                                                                  ("id", "sample", "answer")]


def test_samples_of_another_policy_are_refused(tmp_path):
    _distill(tmp_path, Dice(), 2)
    with pytest.raises(ValueError, match="other settings.*method"):
        _distill(tmp_path, Dice(), 2, "method.top_k=2")
    with pytest.raises(ValueError, match="temperature above 0"):
        sd.sampling_config(_config(), 0.0)


def test_self_distill_cli_on_the_tiny_model(tmp_path, monkeypatch, capsys):
    import marag.api

    backends: list[TinyDice] = []

    def build_context(config, **kw):
        backends.append(TinyDice())
        return Context(llms={"default": backends[-1]}, config=config, retriever=One())

    monkeypatch.setattr(marag.api, "build_context", build_context)
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q.to_dict()) + "\n" for q in QUESTIONS))
    banned = tmp_path / "banned.ids"
    banned.write_text("it\n")
    out = tmp_path / "sft"
    command = ["sft", "--method", "vanilla", "--recipe", "self-distill", "--dataset",
               str(qfile), "--exclude-ids", str(banned), "--samples", "3", "--out", str(out),
               "--no-progress", "--set", "sft.min_f1=0.5", "--set", "sft.batch_size=2",
               "--set", "sft.lora.r=4", "--set", "sft.lora.target_modules=[q_proj, v_proj]"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "2 questions x 3 samples (6 drawn in this call): best sample kept for 1" in printed
    assert backends[0].calls == 6
    assert (out / "policy" / "adapter_config.json").is_file()
    assert json.loads((out / "run.json").read_text())["examples"] == {"AG": 1}
    assert {json.loads(x)["id"] for x in (out / sd.SAMPLES).read_text().splitlines()} == {
        "fr", "xx"}  # the excluded question is never sampled
    assert main(command) == 0  # the same command: nothing drawn, nothing left to train
    printed = capsys.readouterr().out
    assert backends[1].calls == 0 and "(0 drawn in this call)" in printed
    assert "(0 in this call)" in printed
    assert main([*command, "--temperature", "0"]) == 2
    assert "--temperature > 0" in capsys.readouterr().err
