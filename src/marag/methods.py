"""Every method marag runs, one record each: the single place a method is registered.

A record names the workflow body that answers a question (as ``module:function`` under
``marag.workflows``, resolved there, so this ground-floor module imports nothing), the LLM
roles the method runs, the roles ``marag train`` trains by default (the paper's choice), the
reward kind ``train.rewards.kind: auto`` gives its traces, whether it needs a retriever,
the ``marag sft --recipe`` recipes that build its warm start, how its trainable steps
become training sequences, and the paper it comes from.

Adding a method is one workflow file, one record here and one preset under ``configs/``;
``tests/test_methods.py`` walks this table (every method answers on the scripted LLM, takes
one training step on the tiny model unless it is inference-only, and has its row in
docs/fidelity.md).

An inference-only method (``inference_only``: why) trains no role: its ``trained`` is empty
and :func:`check_trainable` refuses it with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

_PLANNER_TEAM = ("planner", "QR", "QDS", "QDP", "DS", "AG", "AS")
_MASK_TEAM = ("mask.plan", "mask.search", "mask.summary", "mask.update", "mask.answer")
_DEEPNOTE_TEAM = ("deepnote.init", "deepnote.query", "deepnote.update", "deepnote.compare",
                  "deepnote.answer")


@dataclass(frozen=True, slots=True)
class MethodSpec:
    name: str
    summary: str  # one line: what runs at inference
    body: str  # "module:function" under marag.workflows
    roles: tuple[str, ...]  # every LLM role the method can run
    trained: tuple[str, ...]  # roles trained when train.roles is empty
    reward: str  # a kind of marag.train.rewards.PAPER_REWARDS
    retrieves: bool = True
    sft_recipes: tuple[str, ...] = ()  # marag sft warm starts that fit it (adaptive: --plans A= B= C=)
    # "steps": every trainable LLM call is one training sequence (prompt -> reply);
    # "trajectory": a trace's calls of one role form one sequence (prompt, then every reply
    # and every observation between them), observations masked out of the loss (Search-R1)
    sequences: Literal["steps", "trajectory"] = "steps"
    paper: str = ""  # the paper whose algorithm it follows ("" for marag's own baselines)
    # why marag cannot train it ("" for every method it can train); such a method trains no role
    inference_only: str = ""

    def __post_init__(self) -> None:
        if bool(self.inference_only) == bool(self.trained):
            raise ValueError(f"method {self.name!r}: an inference-only method trains no role, "
                             "and every other method trains one at least")


REGISTRY: tuple[MethodSpec, ...] = (
    MethodSpec("llm-only", "AG answers from the model's own knowledge, no retrieval",
               "static:llm_only", ("AG",), ("AG",), "final", retrieves=False,
               paper="baseline (no retrieval)"),
    MethodSpec("vanilla", "retrieve top-k for the question, then AG answers",
               "static:vanilla", ("AG",), ("AG",), "final", sft_recipes=("answers",),
               paper="baseline (standard RAG)"),
    MethodSpec("mmoa-rag", "fixed pipeline: sub-question rewriting, retrieval (K=10 split), "
               "selection, answer", "static:mmoa", ("mmoa.QR", "DS", "AG"),
               ("mmoa.QR", "DS", "AG"), "mmoa-rag", sft_recipes=("mmoa",),
               paper="MMOA-RAG (Chen et al., 2025)"),
    MethodSpec("rrr", "Rewrite-Retrieve-Read: the rewriter's queries retrieve the pool, AG "
               "reads it (MMOA-RAG's rebuild: only the rewriter trained)", "static:rrr",
               ("mmoa.QR", "AG"), ("mmoa.QR",), "final",
               paper="Rewrite-Retrieve-Read (Ma et al., 2023), as MMOA-RAG S5.1.3 rebuilt it"),
    MethodSpec("bgm", "the question retrieves the pool, a bridge (DS) keeps the helpful "
               "documents, AG reads them (MMOA-RAG's rebuild: only the bridge trained)",
               "static:bgm", ("DS", "AG"), ("DS",), "final",
               paper="BGM (Ke et al., 2024), as MMOA-RAG S5.1.3 rebuilt it"),
    MethodSpec("adaptive-rag", "a classifier routes each question to no retrieval, one "
               "retrieval (vanilla) or multi-step retrieval (ircot)", "adaptive:adaptive_rag",
               ("adaptive.classify", "AG", "ircot"), ("adaptive.classify",), "final",
               sft_recipes=("adaptive",), paper="Adaptive-RAG (Jeong et al., 2024)"),
    MethodSpec("mao-arag", "the planner loop; executors may run on another backend",
               "planner:mao_arag", _PLANNER_TEAM, ("planner",), "mao-arag",
               sft_recipes=("answers",), paper="MAO-ARAG (Chen et al., 2025)"),
    MethodSpec("jade", "a planner builds a workflow per (sub-)question; every role shares one "
               "backbone", "planner:jade", _PLANNER_TEAM, _PLANNER_TEAM, "jade",
               sft_recipes=("answers",), paper="JADE (2026)"),
    MethodSpec("m-ask", "plan, then turns of search / summary / knowledge update, then answer",
               "mask:mask", _MASK_TEAM, _MASK_TEAM, "m-ask", paper="M-ASK (2026)"),
    MethodSpec("search-r1", "one LLM reasons in <think>, searches with <search>, reads "
               "<information> and answers in <answer>", "search_r1:search_r1",
               ("search-r1",), ("search-r1",), "search-r1", sequences="trajectory",
               sft_recipes=("answers",),
               paper="Search-R1 (Jin et al., 2025)"),
    MethodSpec("search-o1", "a reasoning model searches mid-thought between "
               "<|begin_search_query|> markers; a Reason-in-Documents call condenses the top "
               "documents into the reasoning; the answer in \\boxed{}", "search_o1:search_o1",
               ("search-o1", "search-o1.rid"), ("search-o1", "search-o1.rid"), "final",
               paper="Search-o1 (Li et al., 2025)"),
    MethodSpec("ircot", "retrieve for the question, then one chain-of-thought sentence at a "
               "time, each sentence retrieving more paragraphs, until 'So the answer is:'",
               "ircot:ircot", ("ircot",), ("ircot",), "final",
               paper="IRCoT (Trivedi et al., 2023)"),
    MethodSpec("deepnote", "a note written from the first retrieval, then rounds of new "
               "queries, retrieval and note updates, each kept only when judged better, until "
               "one is not; the answer from the best note", "deepnote:deepnote",
               _DEEPNOTE_TEAM, _DEEPNOTE_TEAM, "final",
               paper="DeepNote (Wang et al., 2024)"),
    MethodSpec("self-rag", "a Self-RAG checkpoint decides to retrieve, continues each "
               "passage, and the continuation its reflection tokens score best answers",
               "self_rag:self_rag", ("self-rag",), (), "final",
               paper="Self-RAG (Asai et al., 2024)",
               inference_only="Self-RAG runs its released checkpoints, trained by supervised "
                              "learning on reflection-token data marag does not have; marag "
                              "runs them for inference only (an openai endpoint serving one)"),
)

METHODS: dict[str, MethodSpec] = {m.name: m for m in REGISTRY}
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)
# the methods whose body is the planner loop (marag.workflows.planner): they read
# method.root_plan / sub_plan
PLANNER_METHODS: tuple[str, ...] = tuple(m.name for m in REGISTRY
                                         if m.body.startswith("planner:"))


def check_trainable(name: str) -> MethodSpec:
    """The record of method ``name`` when marag can train it; a ValueError saying why not
    for an inference-only method."""
    spec = get_method(name)
    if spec.inference_only:
        raise ValueError(f"method {name!r} is inference-only: {spec.inference_only}")
    return spec


def get_method(name: str) -> MethodSpec:
    """The record of method ``name``; a ValueError naming the known ones otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
