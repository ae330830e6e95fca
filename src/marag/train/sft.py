"""Supervised warm start: examples from traces (rejection sampling) or MMOA-RAG's recipe,
then cross-entropy on the response tokens of a LoRA-adapted (or fully tuned) backbone.

* ``examples_from_traces``: the valid steps of chosen roles in traces that scored
  ``F1 >= min_f1`` -- the policy's own best rollouts, or a stronger model's traces (any
  backend: the target is the completion text, re-tokenised for this model).
* ``examples_mmoa``: MMOA-RAG S4.3 -- for each question the retriever's top K documents
  (``method.candidates``, K = 10 as in S5.1.3, the selector's fixed input size); the
  selector's label is the ids of the documents that share a content word with the golden
  answer (or at least ``sft.min_question_overlap`` of the question's content words: marag's
  reading of Figure 2, whose any-shared-word rule is ``min_question_overlap`` at or below
  1/(question words)), the generator's label is the golden answer. Prompts and labels are
  the ones the run's own prompts use (``method.prompts``, ``method.role_prompts``): the
  selector label in the vocabulary the role decodes under (``<id>0, 4</id>``, or
  ``Document0,Document4`` under ``prompts: paper``, Table 1), the answer in ``<answer>``
  tags, and a role whose reply marag opens (``reply_prefix``) is trained on the rest.

  The recipe makes no query-rewriter (``mmoa.QR``) examples: S4.3.1 warm-starts the rewriter
  on the query-rewriting data published with Rewrite-Retrieve-Read, which this workspace
  does not have, and marag does not make rewrite labels up. The rewriter's warm start that
  exists is rejection sampling (``examples_from_traces`` with ``sft.roles: [mmoa.QR]``) over
  ``mmoa-rag`` traces: the policy's own rollouts, or a stronger model's ``marag eval`` run.
* ``examples_answers``: reading labels for the answer generator of a method that runs
  ``R, AG`` (jade, mao-arag, vanilla) -- for each question the retriever's top
  ``method.top_k`` documents for the question itself (what ``AG`` reads after ``R, AG``) and
  a golden answer as the label, in the AG prompt and answer format the run uses. Under
  ``sft.answer_evidence: docs`` (the default) only questions whose answer the reader can
  find are kept: a golden answer that occurs in the documents as the prompt shows them
  (clipped passages), else yes/no, else one of the options a choice question (``X or Y``)
  names. Labels the documents do not support would teach the generator to answer from
  memory. The label closes its tag (``<answer>X</answer>``, as the mmoa recipe's).
* ``examples_best_plan``: plan labels for a planner method -- the traces of runs that each
  executed one fixed plan on the same questions; a question's best-scoring plan is the
  planner's label and the winning trace's steps are the executors' examples.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from marag.config import DECOMPOSE_CODES, Config, SFTConfig, plan_problem
from marag.llm.chat import prompt_ids, text_ids
from marag.llm.trainable import TrainableBackend
from marag.methods import REGISTRY
from marag.roles.base import Role
from marag.roles.prompt import content_words
from marag.types import Question, Step, Trace

if TYPE_CHECKING:
    from marag.train.step import LossFn

log = logging.getLogger(__name__)


@dataclass
class Example:
    role: str
    messages: list[dict[str, str]]
    target: str


def _learnable(s: Step, keep: set[str]) -> bool:
    """An LLM step whose reply is an example: valid, not empty, of a kept role, and written
    whole (a reply the hf backend ended once its caller had read enough, ``stop_when``,
    stops mid-text, e.g. an IRCoT step's first sentence and the next word's first letter)."""
    return (s.is_llm and s.valid and (not keep or s.role in keep) and bool(s.raw.strip())
            and not (s.sampling or {}).get("stop_when"))


def examples_from_traces(traces: Sequence[Trace], roles: Sequence[str], min_f1: float
                         ) -> list[Example]:
    keep = set(roles)
    out = []
    for t in traces:
        if t.status == "failed" or t.metrics.get("f1", 0.0) < min_f1:
            continue
        for s in t.steps:
            if _learnable(s, keep):
                out.append(Example(s.role, s.messages, s.raw))
    return out


def examples_best_plan(runs: Sequence[tuple[str, Sequence[Trace]]], planner: Role,
                       roles: Sequence[str], min_f1: float, *, allow_decompose: bool = True,
                       same_prompt: Callable[[str, str], bool] | None = None) -> list[Example]:
    """Plan labels (a planner's warm start, MAO-ARAG S5.4's SFT-then-PPO for a 0.5B planner
    without the trained 7B teacher): ``runs`` pairs a plan (``"R, AG"``) with the traces of a
    run that executed exactly that plan on the same questions (``vanilla`` runs ``R, AG``,
    ``llm-only`` runs ``AG``, ``jade`` with ``method.root_plan: [QDS]`` and ``method.sub_plan``
    runs a decomposition; a trace whose root ran another plan is an error, except one whose
    decomposition gave no sub-questions, so that the root ran the fallback: it is skipped
    and counted, as are failed traces and traces a budget ended, whose plan did not run to
    its end). For each question the plan whose trace scored the highest F1 is the planner's
    label (a tie goes to the plan listed first), and the valid steps of that trace are the
    executors' examples. A question that no plan answers with F1 >= ``min_f1`` gives no
    example: nothing says which plan would have been right. ``roles`` limits the examples
    to those roles (empty: every role). ``allow_decompose`` is what the planner is told at
    the root (the engine's ``0 < method.max_depth``). ``same_prompt(role, trace_method)``,
    when given, says whether the trace's method prompts ``role`` as the planner's method
    does; an executor example whose prompt would differ is an error (the example would teach
    a prompt the team never sends)."""
    from marag.roles.planner import read_codes

    keep = set(roles)
    best: dict[str, tuple[float, int, str, Trace]] = {}
    empty: dict[str, int] = {}  # plan -> questions whose decomposition gave no sub-questions
    cut: dict[str, int] = {}  # plan -> traces a budget ended (status "budget")
    seen: list[set[str]] = []
    for order, (plan, traces) in enumerate(runs):
        codes = read_codes(plan)
        problem = plan_problem(codes, allow_decompose, False)
        if problem:
            raise ValueError(f"plan {plan!r} is not a plan the planner can write: {problem}")
        seen.append({t.id for t in traces})
        for t in traces:
            if t.status == "failed":
                continue
            if t.status == "budget":
                cut[plan] = cut.get(plan, 0) + 1
                continue
            ran = t.nodes[0].workflow if t.nodes else None
            if ran != codes and _decomposition_came_back_empty(t, codes):
                empty[plan] = empty.get(plan, 0) + 1  # it ran the fallback: not this plan
                continue
            if ran != codes:
                raise ValueError(
                    f"plan {plan!r}: question {t.id} ({t.method}) ran "
                    f"{', '.join(ran) if ran else 'no recorded plan'}; give each plan the "
                    "traces of a run that executed exactly it")
            f1 = float(t.metrics.get("f1", 0.0))
            now = best.get(t.id)
            if now is None or f1 > now[0]:
                best[t.id] = (f1, order, plan, t)
    for plan, n in empty.items():
        log.warning("plan %r: on %d question(s) the decomposition gave no sub-questions and the "
                    "run fell back to another plan; those traces label nothing for %r",
                    plan, n, plan)
    for plan, n in cut.items():
        log.warning("plan %r: %d trace(s) ended at a budget (method.max_rounds) label nothing",
                    plan, n)
    if seen and set.union(*seen) != set.intersection(*seen):
        log.warning("the plan runs hold different questions: %d of %d are in every run; the "
                    "others are labelled from the runs that have them",
                    len(set.intersection(*seen)), len(set.union(*seen)))
    out = []
    for f1, _, plan, t in best.values():
        if f1 < min_f1:
            continue
        if not keep or planner.name in keep:
            label = "<workflow>" + ", ".join(read_codes(plan)) + "</workflow>"
            out.append(role_example(planner, label, question=t.question,
                                    allow_decompose=allow_decompose))
        for s in t.steps:
            if not _learnable(s, keep):
                continue
            if same_prompt is not None and not same_prompt(s.role, t.method):
                raise ValueError(
                    f"{t.method} prompts {s.role} differently from the planner's method under "
                    f"this config (method.prompts), so its steps are not examples of the "
                    f"team's {s.role}; keep them out with sft.roles (e.g. [planner])")
            out.append(Example(s.role, s.messages, s.raw))
    return out


def _decomposition_came_back_empty(trace: Trace, codes: Sequence[str]) -> bool:
    """Whether ``codes`` is a decomposition the root tried (its decomposer was called at node
    0) that gave no sub-questions, so the root ran the fallback plan instead."""
    return (len(codes) == 1 and codes[0] in DECOMPOSE_CODES and bool(trace.nodes)
            and not trace.nodes[0].children
            and any(s.role == codes[0] and s.node_id == 0 for s in trace.steps))


def useful_documents(question: str, answers: Sequence[str], docs: Sequence[Any],
                     min_question_overlap: float) -> list[int]:
    qw = content_words(question)
    aw = set().union(*(content_words(a) for a in answers)) if answers else set()
    picked = []
    for i, d in enumerate(docs):
        dw = content_words(f"{d.title} {d.text}")
        if (aw and aw & dw) or (qw and len(qw & dw) / len(qw) >= min_question_overlap):
            picked.append(i)
    return picked


async def examples_mmoa(questions: Sequence[Question], retriever: Any, config: Config
                        ) -> list[Example]:
    """Selector (DS) and generator (AG) examples for each question from its top
    ``config.method.candidates`` (K) retrieved documents, the question itself being the
    query, built with the prompts a ``mmoa-rag`` run of ``config`` uses."""
    from marag.roles import role_for

    cfg = config.sft
    m = config.method
    ds = role_for("DS", m.prompts, "mmoa-rag", role_variants(config, "DS"))
    ag = role_for("AG", m.prompts, "mmoa-rag", role_variants(config, "AG"))
    hits = await retriever.search([q.question for q in questions], m.candidates)
    out = []
    for q, h in zip(questions, hits):
        if not q.golden_answers or not h.passages:
            continue
        docs = h.passages
        ids = useful_documents(q.question, q.golden_answers, docs, cfg.min_question_overlap)
        if ids:
            out.append(role_example(ds, selector_label(ds, docs, ids),
                                    question=q.question, docs=docs))
        kept = [docs[i] for i in ids] if ids and cfg.ag_docs == "selected" else list(docs)
        out.append(role_example(ag, f"<answer>{q.golden_answers[0]}</answer>",
                                question=q.question, docs=kept))
    return out


YES_NO = frozenset({"yes", "no"})
# methods whose AG reads the top ``method.top_k`` documents retrieved with the question (and
# search-r1, whose label searches for the question and answers from the top search_top_k)
ANSWER_RECIPE_METHODS = tuple(m.name for m in REGISTRY if "answers" in m.sft_recipes)


def check_answer_method(method: str) -> None:
    """Refuse a method whose AG never reads the top ``method.top_k`` documents of ``R, AG``."""
    if method not in ANSWER_RECIPE_METHODS:
        raise ValueError(f"--recipe answers labels the AG of an `R, AG` plan (or search-r1's "
                         f"search-then-answer calls), which {method} does not run; use "
                         f"--method {' | '.join(ANSWER_RECIPE_METHODS)}")


def shown_text(role: Role, question: str, docs: Sequence[Any]) -> str:
    """What ``role``'s prompt shows of ``docs``: the messages that change with the documents
    (passages clipped or windowed as the prompt renders them; a worked example, fixed
    instructions and the question itself left out)."""
    from marag.types import Passage

    built = role.build(question=question, docs=list(docs))
    blank = role.build(question=question, docs=[Passage("", "", "")])
    text = " ".join(m["content"] for m, b in zip(built, blank, strict=True) if m != b)
    return text.replace(question.strip(), " ") if question.strip() else text


def clean_golds(q: Question) -> list[str]:
    """The question's golden answers with their whitespace collapsed, blank ones left out."""
    return [" ".join(a.split()) for a in q.golden_answers if a and a.strip()]


def labelled_answer(question: str, golds: Sequence[str], shown: str, evidence: str,
                    counts: dict[str, int]) -> str | None:
    """The answer label for a reader of ``shown``: the golden answer it supports; else, under
    ``sft.answer_evidence: any``, the first golden answer, and under ``docs`` None. Either way
    an unsupported one is counted in ``counts["unsupported"]``."""
    answer = supported_answer(question, golds, shown)
    if answer is None:
        counts["unsupported"] += 1
        return None if evidence == "docs" else golds[0]
    return answer


def supported_answer(question: str, answers: Sequence[str], shown: str) -> str | None:
    """The golden answer a reader of ``shown`` (the documents as the prompt renders them) can
    give: the first whose normalised words occur there as whole words; else yes/no; else, for
    a question offering a choice (``X or Y``), the first named in the question; else None."""
    from marag.metrics import normalize_answer

    def occurs(n: str, text: str) -> bool:
        return f" {n} " in f" {normalize_answer(text)} "

    named = [(a, normalize_answer(a)) for a in answers]
    named = [(a, n) for a, n in named if n]
    for check in (lambda n: occurs(n, shown), lambda n: n in YES_NO,
                  lambda n: " or " in f" {question.lower()} " and occurs(n, question)):
        for a, n in named:
            if check(n):
                return a
    return None


async def examples_answers(questions: Sequence[Question], retriever: Any, config: Config,
                           tally: dict[str, int] | None = None) -> list[Example]:
    """Answer-generator (AG) examples: each question's top ``method.top_k`` documents
    (the question as the query, as ``R`` runs it in an ``R, AG`` plan) and its golden answer,
    in the prompt and answer format ``config.method``'s AG uses; under
    ``sft.answer_evidence: docs`` only answers the shown documents (or a choice the question
    offers, or yes/no) support. ``tally`` (when given) counts the questions kept and why the
    others were not."""
    from marag.roles import role_for

    m = config.method
    check_answer_method(m.name)
    if m.name == "search-r1":  # no AG to label: its two calls are labelled elsewhere
        raise ValueError("search-r1's answer labels are marag.train.search_r1_labels."
                         "examples_search_r1 (its search call and answer call)")
    ag = role_for("AG", m.prompts, m.name, role_variants(config, "AG"))
    share = config.sft.irrelevant_share
    depth = m.top_k * 3 if share else m.top_k
    hits = await retriever.search([q.question for q in questions], depth)
    rng = random.Random(config.sft.seed)
    counts = {"kept": 0, "no answer": 0, "no documents": 0, "unsupported": 0, "irrelevant": 0}
    out = []
    for q, h in zip(questions, hits, strict=True):
        golds = clean_golds(q)
        if not golds:
            counts["no answer"] += 1
            continue
        docs = list(h.passages[:m.top_k])
        if share and rng.random() < share and len(h.passages) > 2 * m.top_k:
            # RetRobust: low-ranked documents, the golden answer still the target
            inputs = {"question": q.question, "docs": list(h.passages[2 * m.top_k:])}
            counts["irrelevant"] += 1
            counts["kept"] += 1
            out.append(role_example(ag, f"<answer>{golds[0]}</answer>", **inputs))
            continue
        if not docs:
            counts["no documents"] += 1
            continue
        inputs = {"question": q.question, "docs": docs}
        answer = labelled_answer(q.question, golds, shown_text(ag, q.question, docs),
                                 config.sft.answer_evidence, counts)
        if answer is None:
            continue
        target = f"<answer>{answer}</answer>"
        parsed = ag.read(target, inputs)
        if not parsed.valid or parsed.value != answer:
            raise ValueError(f"{m.name}'s AG prompt ({m.prompts}, "
                             f"{role_variants(config, 'AG').get('AG', 'plain')}) does not read "
                             f"{target!r} (question {q.id}) as {answer!r}")
        counts["kept"] += 1
        out.append(role_example(ag, target, **inputs))
    if tally is not None:
        tally.update(counts)
    return out


def selector_label(ds: Role, docs: Sequence[Any], ids: Sequence[int]) -> str:
    """The selector's label in the vocabulary ``ds`` decodes under: ``<id>0, 4</id>`` for
    marag's tagged selector, ``Document0,Document4`` for MMOA-RAG's (Table 1, Eq. 5)."""
    if ds.allowed_text is not None and "<id>" not in ds.constraint({"docs": docs}):
        return ",".join(f"Document{i}" for i in ids)
    return "<id>" + ", ".join(str(i) for i in ids) + "</id>"


def role_example(role: Role, target: str, **inputs: Any) -> Example:
    """``role``'s prompt for ``inputs`` and ``target``; when marag opens the role's reply
    (``reply_prefix``, as the hf backend does at rollout) the prompt ends in that open turn
    and the target is the rest, as the trained steps of a rollout are."""
    messages = role.build(**inputs)
    prefix = role.reply_prefix
    if prefix and target.startswith(prefix):
        return Example(role.name, [*messages, {"role": "assistant", "content": prefix}],
                       target[len(prefix):])
    return Example(role.name, messages, target)


def tokenize(examples: Sequence[Example], tokenizer: Any, eos: int) -> list[Any]:
    """Examples as transitions (prompt ids, response ids ending in EOS), for the policy's
    batching and logprob code."""
    from marag.train.experience import Transition

    out = []
    for i, e in enumerate(examples):
        resp = text_ids(tokenizer, e.target) + [eos]
        out.append(Transition(trace=i, group=i, order=0, role=e.role,
                              prompt_ids=prompt_ids(tokenizer, e.messages), response_ids=resp,
                              rollout_logprobs=[], temperature=1.0))
    return out


def train_sft(backend: TrainableBackend, examples: Sequence[Example], cfg: SFTConfig,
              out: str | Path, progress: bool = False) -> list[dict[str, float]]:
    """Fine-tune ``backend.module`` on ``examples``; the adapter (or model) goes to
    ``out/policy``. Returns the per-step losses (those of earlier calls included, when it
    resumed).

    The policy is built, and each micro-batch's forward and backward pass runs, as ``marag
    train``'s learner does (``policy.build_policy``, ``step.micro_batch_step``); the loss is
    the cross-entropy of the response tokens.

    Every ``cfg.save_every`` steps, and after the last, a checkpoint (trainable tensors,
    optimizer, RNG) goes to ``out/checkpoints``; a later call with the same ``out``, model,
    examples and settings goes on from it, and ends with the weights an unbroken run would
    have (the same micro-batch split and hardware: bit for bit). ``cfg.epochs`` may grow
    between calls (another epoch over the same examples); anything else ``check_out``
    refuses, since the checkpoint could not continue it."""
    from tqdm import tqdm

    from marag.llm.chat import turn_end_id
    from marag.train import checkpoint as ckpt
    from marag.train.experience import batch
    from marag.train.logbook import Logbook
    from marag.train.policy import build_policy, save_policy
    from marag.train.step import Precision, micro_batch_step

    found, identity = check_out(out, backend, examples, cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    used = used_examples(examples, cfg)
    torch.manual_seed(cfg.seed)
    model = backend.module
    policy, _ = build_policy(model, cfg.lora)
    params = [p for p in policy.backbone.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    # a reply ends the way the template ends an assistant turn (Qwen: <|im_end|>, which is
    # what the decoder stops on at inference), not with the smallest of the EOS ids
    eos = turn_end_id(backend.tokenizer, set(backend.eos_ids))
    items = tokenize(used, backend.tokenizer, eos)
    pad = backend.pad_id
    book = Logbook(out, tensorboard=False)
    start = 0
    steps = sft_steps(len(items), cfg)
    if found is not None:
        start = int(ckpt.load(found, policy, opt, None)["iteration"])
        book.truncate(start)
        log.info("sft: resumed from %s (step %d of %d done)", found, start, steps)
    else:
        if book.rows():
            log.warning("sft: %s has metrics but no checkpoint (a run from before SFT "
                        "checkpoints, or one killed before its first): training from step 0",
                        out)
        book.truncate(0)
    rows: list[dict[str, float]] = book.rows()
    rng = random.Random(cfg.seed)
    bar = tqdm(total=steps, initial=min(start, steps), disable=not progress, desc="sft",
               unit="step")
    precision = Precision.of(cfg.dtype, model.device)
    policy.train()
    step = 0
    for epoch in range(cfg.epochs):
        order = list(items)
        rng.shuffle(order)  # every epoch's order is drawn, done or not: a resume replays them
        for b0 in range(0, len(order), cfg.batch_size):
            step += 1
            if step <= start:
                continue
            # micro-batches of similar lengths (less padding); the loss is divided by the
            # batch's token count, so the gradient does not depend on the split
            chunk = sorted(order[b0:b0 + cfg.batch_size],
                           key=lambda t: len(t.prompt_ids) + len(t.response_ids))
            n_tok = sum(len(t.response_ids) for t in chunk)
            total = 0.0
            for m0 in range(0, len(chunk), cfg.micro_batch_size):
                micro = chunk[m0:m0 + cfg.micro_batch_size]
                b = batch(micro, pad, model.device, precision.pad_multiple)
                loss, _ = micro_batch_step(policy, b, [None] * len(micro),
                                           _cross_entropy(b.mask, n_tok), precision)
                total += float(loss)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            row = {"iteration": step, "epoch": epoch + 1, "loss": total,
                   "examples": len(chunk), "tokens": n_tok}
            rows.append(row)
            book.write(row)
            bar.update(1)
            bar.set_postfix(loss=f"{total:.3f}")
            if step == steps or (cfg.save_every and step % cfg.save_every == 0):
                ckpt.save(out / "checkpoints", step, policy, opt, None, identity, keep=1,
                          with_policy=False)
    bar.close()
    policy.eval()
    save_policy(policy, out / "policy")
    backend.weights_updated()
    return rows


def _cross_entropy(mask: torch.Tensor, n_tok: int) -> LossFn[None]:
    """The loss of one SFT micro-batch: the negative logprob of its response tokens
    (``mask``), summed and divided by the whole batch's ``n_tok`` response tokens."""

    def loss_of(logp: torch.Tensor, _ent: torch.Tensor | None, _values: torch.Tensor | None
                ) -> tuple[torch.Tensor, None]:
        return -(logp.float() * mask).sum() / n_tok, None

    return loss_of


def examples_digest(examples: Sequence[Example]) -> str:
    """A fingerprint of the examples in order (role, messages, target)."""
    import hashlib
    import json

    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.role, e.messages, e.target], sort_keys=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def used_examples(examples: Sequence[Example], cfg: SFTConfig) -> list[Example]:
    """The examples a run trains on: the first ``sft.max_examples`` when set."""
    return list(examples[:cfg.max_examples] if cfg.max_examples else examples)


def sft_steps(n_examples: int, cfg: SFTConfig) -> int:
    """Optimizer steps a run over ``n_examples`` takes."""
    return cfg.epochs * ((n_examples + cfg.batch_size - 1) // cfg.batch_size)


def resume_settings(cfg: SFTConfig) -> dict[str, Any]:
    """The settings a checkpoint can only be continued under (``epochs`` may grow;
    ``micro_batch_size`` does not change the update, ``save_every`` only when it saves)."""
    return cfg.model_dump(mode="json", include={"batch_size", "lr", "seed", "dtype", "lora",
                                                "max_examples"})


def check_out(out: str | Path, backend: TrainableBackend, examples: Sequence[Example],
              cfg: SFTConfig) -> tuple[Path | None, dict[str, Any]]:
    """The checkpoint in ``out`` an SFT run would resume from (None: it starts afresh) and
    the identity its checkpoints record. A checkpoint of another model, other examples or
    other settings, one past the run's last step, or one of another kind of run is a
    ``ValueError`` that names the difference. Cheap: call it before writing into ``out``."""
    import json

    from marag.train import checkpoint as ckpt
    from marag.train.step import compute_dtype

    if not examples:
        raise ValueError("no SFT examples: nothing passed the filters")
    used = used_examples(examples, cfg)
    dtype = compute_dtype(cfg.dtype, backend.module.device)
    identity = {"examples": examples_digest(used), "settings": resume_settings(cfg),
                "model": {"model": str(backend.model),
                          "adapters": [str(a) for a in backend.adapters],
                          "dtype": str(dtype).removeprefix("torch.")}}
    found = ckpt.latest(Path(out) / "checkpoints")
    if found is None:
        return None, identity
    state = json.loads((found / "state.json").read_text())
    where = f"{out}: its checkpoint {found.name}"
    if "examples" not in state:
        raise ValueError(f"{where} is not an SFT checkpoint (a marag train run?); pass a new "
                         "--out")
    fix = f"; resume with the same command, or pass a new --out (or delete {found.parent})"
    changed = [f"{group}.{k}: {state[group].get(k)!r} in the checkpoint, {v!r} now"
               for group in ("settings", "model") for k, v in identity[group].items()
               if state.get(group, {}).get(k) != v]
    if changed:
        raise ValueError(f"{where} was made under other settings ({'; '.join(changed)}){fix}")
    if state["examples"] != identity["examples"]:
        raise ValueError(f"{where} was made from other examples{fix}")
    steps = sft_steps(len(used), cfg)
    if state["iteration"] > steps:
        raise ValueError(f"{where} is at step {state['iteration']}, past the {steps} steps of "
                         f"sft.epochs={cfg.epochs}: raise sft.epochs, or pass a new --out")
    return found, identity


def role_variants(config: Config, role: str) -> dict[str, str]:
    """The prompt variants ``role`` runs with in ``config`` (its model's profile under
    ``method.role_prompts``), as the workflow engine resolves them."""
    from marag.roles.model_profiles import role_prompts

    m = config.method
    return role_prompts(config.llms[config.backend_for(role)].model, m.role_prompts,
                        prompts=m.prompts, enabled=m.model_prompts)
