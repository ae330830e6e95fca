"""Typed, strict configuration: YAML files plus ``dotted.key=value`` overrides.

Every section forbids unknown keys, so a misspelled option is an error that names the key
(with a suggestion) instead of being silently ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from marag.methods import METHOD_NAMES, PLANNER_METHODS

# The names a config (and the command line) may use, each defined once; CLI choices, validation
# and the code that dispatches on them import these.
IndexKind = Literal["bm25", "dense", "hybrid"]
PromptProfile = Literal["default", "paper"]
# Planner codes: a solving plan is an ordered subsequence of SOLVING_CODES; a decomposing plan is
# one DECOMPOSE_CODES code alone; AS (summarise solved sub-questions) answers a decomposed node
# (MAO-ARAG's planner writes it at that node's AS turn). The papers' RA is read as R.
SolvingCode = Literal["QR", "R", "DS", "AG"]
DecomposeCode = Literal["QDS", "QDP"]
RoleCode = Literal[SolvingCode, DecomposeCode, "AS"]

INDEX_KINDS: tuple[str, ...] = get_args(IndexKind)
PROMPT_PROFILES: tuple[str, ...] = get_args(PromptProfile)
SOLVING_CODES: tuple[str, ...] = get_args(SolvingCode)
DECOMPOSE_CODES: tuple[str, ...] = get_args(DecomposeCode)
ROLE_CODES: tuple[str, ...] = get_args(RoleCode)


def plan_problem(codes: Sequence[str], allow_decompose: bool = True,
                 summarise: bool = False) -> str:
    """Why ``codes`` is not a valid plan, or ``""`` when it is. The one statement of the rule
    (here, on the ground floor, so the config can check the plans it fixes; the planner roles'
    parsers and the workflows use it too).

    ``summarise``: the node's sub-questions are all solved (MAO-ARAG's AS turn), where ``AS``
    alone is the only valid plan."""
    codes = list(codes)
    if not codes:
        return "empty workflow"
    unknown = [c for c in codes if c not in ROLE_CODES]
    if unknown:
        return "unknown code(s): " + ", ".join(dict.fromkeys(unknown))
    if summarise:
        return "" if codes == ["AS"] else "the sub-questions are solved: the only plan is AS"
    if "AS" in codes:
        return "AS answers a node from its solved sub-questions; this node has none"
    if any(c in DECOMPOSE_CODES for c in codes):
        if len(codes) > 1:
            return "QDS/QDP must be the only code in a plan"
        if not allow_decompose:
            return f"{codes[0]}: decomposition is not allowed at this depth"
        return ""
    repeated = [c for c in dict.fromkeys(codes) if codes.count(c) > 1]
    if repeated:
        return "repeated code(s): " + ", ".join(repeated)
    positions = [SOLVING_CODES.index(c) for c in codes]
    if positions != sorted(positions):
        return "codes out of order (expected order QR, R, DS, AG)"
    if codes[-1] != "AG":
        return "workflow does not end with AG"
    if "DS" in codes and "R" not in codes:
        return "DS without R before it"
    return ""


def is_solving(codes: Sequence[str]) -> bool:
    """A plan that answers its node itself: an ordered subsequence of QR, R, DS, AG that ends
    with AG, with DS only after R (no decomposition)."""
    return not plan_problem(codes, allow_decompose=False)


class ConfigError(ValueError):
    """A configuration file or override that cannot be used; the message names the key."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Price(Section):
    """US dollars per million tokens."""

    prompt_per_million: float = 0.0
    completion_per_million: float = 0.0


class LLMConfig(Section):
    backend: Literal["hf", "openai", "llamacpp", "scripted"] = "hf"
    # HF id, local folder, GGUF file, a server-side model name, or an embedded name
    # ("smollm2", "gemma3-270m"), or an installed opt-in name ("qwen2.5-coder-0.5b").
    model: str = "smollm2"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = Field(16, ge=1)
    timeout: float = Field(120.0, gt=0)
    retries: int = Field(3, ge=0)
    # openai backend: ask for token ids with logprobs (vLLM's return_tokens_as_token_ids)
    token_ids: bool = False
    # openai backend: ask for this many alternatives per generated token (OpenAI's and vLLM's
    # default cap: 20); they come back on each Step (Self-RAG scores its reflection tokens
    # from them). 0: none asked for
    top_logprobs: int = Field(0, ge=0, le=20)
    # openai backend: fields added to every request body, over marag's own (vLLM's
    # ``skip_special_tokens: false`` keeps Self-RAG's reflection tokens in the text)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    max_batch_size: int = Field(16, ge=1)
    batch_wait_ms: float = Field(5.0, ge=0)
    # hf backend: decode every row whose prompt plus max_tokens fits in this many tokens in a
    # KV cache of fixed shape (max_batch_size rows x static_cache columns), allocated once;
    # on CUDA each decoding step is then one CUDA-graph replay (cuda_graphs). 0: the growing
    # cache. For GPU rollouts; every step attends over all the columns, so size it to the run
    static_cache: int = Field(0, ge=0)
    cuda_graphs: bool = True
    # hf backend: the shared-prefix KV cache keeps at most this many prompt prefixes and this
    # many tokens of them, least recently used dropped first (a token's KV costs 2 x layers x
    # KV heads x head size values: 24 KiB in float32 for Qwen2.5-0.5B, so 65,536 ~ 1.5 GiB).
    # Roles that cache whole prompts (IRCoT, Search-R1, Search-o1) fill it; raise it for long
    # prompts with many questions in flight, lower it where memory is short
    prefix_entries: int = Field(64, ge=1)
    prefix_tokens: int = Field(65536, ge=1)
    device: str = "cpu"
    # hf backend: auto = bfloat16 on a CPU with native bf16 matmul (AMX/AVX-512 BF16) or a
    # bf16-capable GPU, else float32; a trainer's model stays float32 on CPU (marag.llm.dtype)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    bf16_autocast: bool = False
    cache_dir: str | None = None
    # hf entries naming the same model share one loaded model and batcher; false gives this
    # entry a model of its own (frozen executors beside a policy that training changes)
    share: bool = True
    # hf backend: LoRA adapters (``marag train``/``sft`` output folders), merged into the
    # weights in order at load time
    adapter: list[str] = Field(default_factory=list)
    n_threads: int | None = None
    n_ctx: int = Field(4096, ge=128)

    @field_validator("adapter", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v


class SamplingConfig(Section):
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)


class RetrievalConfig(Section):
    # An index directory, a named built-in corpus ("wiki-demo"), or None with ``url`` set.
    index: str | None = "wiki-demo"
    kind: IndexKind = "bm25"
    url: str | None = None
    timeout: float = Field(30.0, gt=0)
    # dense indexes: which memory tier serves (flat-mmap, ivf-sq8, opq-ivfpq, opq-ivfpq-fs; None: the
    # manifest's default_tier), IVF lists probed per query and exact re-rank depth (None:
    # what the tier recorded; 0: no re-rank). See docs/retrieval-at-scale.md.
    tier: Literal["flat-mmap", "ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs"] | None = None
    nprobe: int | None = Field(None, ge=1)
    rerank: int | None = Field(None, ge=0)
    # "milvus": search a Milvus collection (``marag index to-milvus``) at milvus_uri: a Milvus
    # Lite file (*.db) or a server/cluster URI (http://host:19530); the token, if any, is read
    # from the environment variable named by milvus_token_env
    backend: Literal["local", "milvus"] = "local"
    milvus_uri: str | None = None
    collection: str = "marag"
    milvus_token_env: str | None = None

    @model_validator(mode="after")
    def _milvus_needs_uri(self) -> RetrievalConfig:
        if self.backend == "milvus" and not self.milvus_uri:
            raise ValueError("retrieval.backend milvus needs retrieval.milvus_uri")
        return self


class MethodConfig(Section):
    name: str = "jade"  # a method of marag.methods.REGISTRY
    # Prompt profile: "default" (marag's few-shot prompts, tuned for small models) or "paper"
    # (each method's paper's instructions and output formats; see docs/fidelity.md).
    prompts: PromptProfile = "default"
    # Per-role prompt variants (role name -> variant name in marag.roles.variants), chosen over
    # the profile for those roles: how a model family gets the prompts measured best for it
    # (benchmarks/prompts.py). Empty: every role uses the profile's prompt.
    role_prompts: dict[str, str] = Field(default_factory=dict)
    # the model's own prompt profile (marag.roles.model_profiles: e.g. Qwen2.5-Coder's AG
    # variant) under role_prompts; false: marag's default prompts for every model
    model_prompts: bool = True
    # Per-role reply limits in tokens (role name or "default" -> limit), over the role's own
    # (e.g. AG's 32): MMOA-RAG's generator length penalty needs room past 30 words
    max_tokens: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    # planner methods (jade / mao-arag)
    max_rounds: int = Field(8, ge=1)
    max_subquestions: int = Field(4, ge=1)
    max_depth: int = Field(1, ge=0)
    fallback: list[RoleCode] = Field(default_factory=lambda: ["R", "AG"])
    # solving codes never executed even when a plan names them (an ablation: JADE Table 3's
    # "w/o DS" team is skip_codes: [DS]); the planner's instructions are unchanged
    skip_codes: list[Literal["QR", "DS"]] = Field(default_factory=list)
    # Plans fixed in advance instead of asked of the planner: root_plan at the question (a
    # solving plan, or QDS / QDP alone), sub_plan at every sub-question (a solving plan).
    # None: the planner decides there. For fixed-plan runs whose traces label a planner's warm
    # start (`marag sft --plans "QDS=..."`) and for ablations; no planner call is made where a
    # plan is fixed (so cost.turns, which counts planner calls, is 0 when both are). Checked
    # here against the plan rule; only the planner methods (jade, mao-arag) take them.
    root_plan: list[RoleCode] | None = None
    sub_plan: list[SolvingCode] | None = None
    # What a serial sub-question's QR rewrite (JADE Eq. 3) does. "replace" (JADE): the rewrite
    # becomes the sub-question. "guarded" (marag's option for small models, which often reply
    # with a guess such as an earlier answer instead of a query): the sub-question is kept,
    # and the rewrite is its search query only when it shares a content word with it; else the
    # query is the sub-question followed by the earlier answers. It serves the part's solving
    # workflow (R, DS, AG, its own QR); the planner and a decomposer still see the question
    serial_rewrite: Literal["replace", "guarded"] = "replace"
    top_k: int = Field(5, ge=1)
    # "decomposed": AS answers decomposed nodes only (the papers' case studies); "always":
    # the final answer always comes from AS (JADE Algorithm 1 line 32)
    final_synthesis: Literal["decomposed", "always"] = "decomposed"
    # mmoa-rag
    candidates: int = Field(10, ge=1)
    # Restrict DS's decoding to document ids (MMOA-RAG Eq. 5). None: on where DS runs on the
    # hf backend (the only one that can restrict decoding), off elsewhere with a trace note.
    constrained_selector: bool | None = None
    # Restrict the planner's decoding to the tokens of plan codes and its tags (hf backend).
    # None: on where the planner runs on the hf backend. The parser still checks each plan.
    constrained_planner: bool | None = None
    # m-ask
    max_turns: int = Field(3, ge=1)
    answer_every_turn: bool = False
    # search-r1: passages per <search> (the paper's top-3; top_k is the other methods') and
    # the searching turns before the last call, which must answer (the paper's 4)
    search_top_k: int = Field(3, ge=1)
    search_turns: int = Field(4, ge=0)
    # search-o1: passages per search (the authors' top-10), searches allowed before a query
    # is refused (their 10 for multi-hop QA, 5 for NQ/TriviaQA) and reasoning calls at most
    # (their MAX_TURN 15)
    search_o1_top_k: int = Field(10, ge=1)
    search_o1_max_searches: int = Field(10, ge=0)
    search_o1_max_turns: int = Field(15, ge=1)
    # adaptive-rag: the strategy run when the classifier's label is unreadable (B: one
    # retrieval, the plain RAG); its decoding is restricted to A/B/C like the planner's
    # (constrained_planner)
    adaptive_fallback: Literal["A", "B", "C"] = "B"
    # ircot: paragraphs per retrieval (K; the authors' and Adaptive-RAG's runs use 6), the cap
    # on paragraphs collected (their 15), reasoning sentences at most (FlashRAG's max_iter 5;
    # the authors' code allows 10), and where the answer comes from: "reader" (the paper's
    # IRCoT QA with its CoT reader: one more call reads every paragraph and writes a chain),
    # "direct" (its direct reader: one more call asked for the answer alone, whose prompt
    # repeats a step's, so a prefix cache serves its paragraphs) or "cot" (FlashRAG: the
    # chain's own "So the answer is:", the reader only when the chain has none)
    ircot_top_k: int = Field(6, ge=1)
    ircot_max_paragraphs: int = Field(15, ge=1)
    ircot_steps: int = Field(5, ge=1)
    ircot_answer: Literal["reader", "direct", "cot"] = "reader"
    # deepnote: passages per retrieval (the authors' retrieve_top_k 5), note-update steps at
    # most (their README's max_step 3), updates judged no better before the loop stops (their
    # README's max_fail_step 1: the first one), and the passages the loop may collect before it
    # stops (their max_top_k 15)
    deepnote_top_k: int = Field(5, ge=1)
    deepnote_max_steps: int = Field(3, ge=0)
    deepnote_max_failures: int = Field(1, ge=1)
    deepnote_max_passages: int = Field(15, ge=1)
    # self-rag: "adaptive" (the checkpoint decides to retrieve: P([Retrieval]) over
    # P([Retrieval]) + P([No Retrieval]) above self_rag_threshold, or, with the threshold
    # None or no token probabilities, the token in its first output), "always" or "never"
    # (the authors' adaptive_retrieval / always_retrieve / no_retrieval); passages, each
    # continued on its own (their README's ndocs 10); the critique weights (their defaults,
    # 1.0 each) and whether the mean token probability is added (use_seqscore, on in their
    # README); an instruction put before the question (their short-form QA has none)
    self_rag_mode: Literal["adaptive", "always", "never"] = "adaptive"
    self_rag_threshold: float | None = Field(0.2, ge=0, le=1)
    self_rag_top_k: int = Field(10, ge=1)
    self_rag_w_rel: float = 1.0
    self_rag_w_sup: float = 1.0
    self_rag_w_use: float = 1.0
    self_rag_seqscore: bool = True
    self_rag_instruction: str = ""

    @model_validator(mode="after")
    def _planner_options(self) -> MethodConfig:
        planner_only = {"root_plan": self.root_plan is not None,
                        "sub_plan": self.sub_plan is not None,
                        "serial_rewrite": self.serial_rewrite != "replace"}
        given = [k for k, v in planner_only.items() if v]
        if given and self.name not in PLANNER_METHODS:
            raise ValueError(f"method.{given[0]} is read by the planner methods "
                             f"({', '.join(PLANNER_METHODS)}), not by {self.name}")
        if self.root_plan is not None:
            problem = plan_problem(self.root_plan, allow_decompose=self.max_depth > 0)
            if problem:
                raise ValueError(f"method.root_plan {self.root_plan}: {problem}")
        if self.sub_plan is not None:
            problem = plan_problem(self.sub_plan, allow_decompose=False)
            if problem:
                raise ValueError(f"method.sub_plan {self.sub_plan}: {problem}")
        return self

    @field_validator("name")
    @classmethod
    def _known_method(cls, v: str) -> str:
        if v not in METHOD_NAMES:
            close = difflib.get_close_matches(v, METHOD_NAMES, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"unknown method {v!r}{hint}; known: {', '.join(METHOD_NAMES)}")
        return v


class EvalConfig(Section):
    concurrency: int = Field(16, ge=1)  # = llms.*.max_batch_size: full decode batches
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    # Seconds one question may take before it is recorded as failed (None: no limit). Backends
    # time out each call; this bounds a whole workflow that keeps making slow calls.
    question_timeout: float | None = Field(None, gt=0)


class RewardConfig(Section):
    """Per-step rewards (``marag.train.rewards``). ``kind: auto`` follows the method's paper."""

    kind: Literal["auto", "jade", "mao-arag", "mmoa-rag", "m-ask", "search-r1", "final"] = "auto"
    # jade (Eq. 6-8): -format_penalty per malformed step; the last step also gets
    # F1 - alpha*min(T/rounds_max, 1) - beta*min(N_ret/retrievals_max, 1)
    # None: the method's paper's value: 1 for jade (Eq. 7) and mao-arag (Eq. 5), 0 for m-ask
    # (its reward has none), 1 for final (marag's)
    format_penalty: float | None = Field(None, ge=0)
    alpha: float = Field(0.0, ge=0)
    beta: float = Field(0.0, ge=0)
    rounds_max: int = Field(3, ge=1)
    retrievals_max: int = Field(3, ge=1)
    # mao-arag (Eq. 3-6, App. A): token cost of a planner's workflow from per-agent costs,
    # scaled so that the most expensive solving workflow costs 1; 0.25 per added round
    agent_costs: dict[str, float] = Field(default_factory=lambda: {
        "QDS": 0.91e-4, "QDP": 1.00e-4, "QR": 0.88e-4, "DS": 2.08e-4, "AG": 1.58e-4,
        "AS": 1.48e-4})
    turn_cost: float = Field(0.25, ge=0)
    # mmoa-rag (S3.3): role penalties added to the shared F1
    qr_penalty: float = Field(0.5, ge=0)
    qr_max_subquestions: int = Field(4, ge=1)
    ds_penalty: float = Field(1.0, ge=0)
    ag_penalty: float = Field(0.5, ge=0)
    ag_max_words: int = Field(30, ge=1)
    # m-ask (S3.3): turn-level rewards; True gives every step only the final F1 (the ablation)
    final_only: bool = False


class LoraConfig(Section):
    enabled: bool = True
    r: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])


class TrainConfig(Section):
    """``marag train``: rollout -> score -> rewards -> advantages -> update, per iteration."""

    # role names (as in Step.role) whose steps are trained; empty = every LLM role the
    # method runs
    roles: list[str] = Field(default_factory=list)
    # question files (FlashRAG JSONL) or named benchmarks trained on, shuffled together
    datasets: list[str] = Field(default_factory=list)
    # held out of training, per dataset: a seeded sample (train.seed) that becomes the
    # evaluation split unless eval_dataset is given
    holdout_per_dataset: int = Field(0, ge=0)
    # the held-out sample's own seed, so runs with different train.seed share one held-out set
    holdout_seed: int = 0
    eval_dataset: str | None = None
    eval_limit: int | None = Field(None, ge=1)
    exclude_ids: str | None = None  # a file of question ids never trained on, one per line
    iterations: int = Field(30, ge=1)
    questions_per_iteration: int = Field(8, ge=1)
    samples_per_question: int = Field(1, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    concurrency: int = Field(8, ge=1)  # questions in flight during a rollout (per process)
    # local rollouts keep every call's whole prompt in the hf decoder's prefix cache (not only
    # its role's leading turns): a question's samples repeat their first prompt and later ones
    # wherever their earlier replies (and so their retrievals) agree, so the first sample
    # computes it and the others start from its KV. Only with samples_per_question > 1 and
    # rollout: local. None: on where the policy runs on a CPU (measured there; on an H200 it
    # saved no time, prompt passes being a small part of a rollout: docs/results/gpu-check)
    rollout_cache_prompts: bool | None = None
    # where the trained roles decode their rollouts: "local" (the policy module itself,
    # through the hf backend) or "server" (an OpenAI-compatible server, e.g. vLLM: the
    # trained roles' llms entry is backend openai with token_ids true and names the LoRA as
    # its model; after every update the trainer saves the adapter and has the server reload
    # it under that name). The policy module for logprobs and updates is then llms.<policy_llm>
    rollout: Literal["local", "server"] = "local"
    policy_llm: str | None = None  # rollout: server: the hf llms entry the trainer updates
    sync_dir: str | None = None  # rollout: server: adapter folders for the server (OUT/sync)
    # fail when the rollout logprobs differ from the trainer's own on the same tokens by more
    # than this per token on average (a server that did not load the adapter); None: record
    max_logprob_gap: float | None = Field(None, gt=0)
    save_rollouts: bool = True  # each iteration's traces to rollouts/iter-N.jsonl
    # how rewards become advantages (marag.train.advantages): turn-gae (one value per step,
    # GAE over a trace's steps: a final reward reaches the planner), gae (token-level GAE
    # over a trace's steps laid end to end), per-step (each step its own episode: per-turn /
    # per-agent credit), grpo (trace return
    # against its question's group, no critic), rloo (against the mean of the group's other
    # samples, no critic)
    estimator: Literal["turn-gae", "gae", "per-step", "grpo", "rloo"] = "turn-gae"
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(1.0, ge=0, le=1)
    # grpo: divide by the group's std (none: Dr. GRPO's unscaled advantages)
    scale_rewards: Literal["group", "none"] = "group"
    # drop the questions whose samples all earned the same return before the update (DAPO's
    # dynamic sampling, without refilling the batch): a group baseline gives them advantage 0
    drop_flat_groups: bool = False
    ppo_epochs: int = Field(1, ge=1)
    minibatch_size: int = Field(8, ge=1)  # transitions per optimiser step (all processes)
    micro_batch_size: int = Field(4, ge=1)  # transitions per forward+backward pass
    score_micro_batch_size: int = Field(8, ge=1)  # transitions per no-grad scoring pass
    # run each distinct prompt of a micro-batch once (its keys and values shared by the rows
    # that have it: a question's samples share the planner's prompt, and the executors' when
    # their inputs agree); mini-batches then hold whole groups of rows with one prompt. Same
    # losses and gradients; fewer tokens through the model (train.micro_batch_size of about
    # samples_per_question lets a group share one pass)
    share_prompts: bool = False
    # old logprobs: recompute them with the policy (exact PPO ratios), or take the rollout's
    # own (skips the pass when nothing else needs it; exact only when the rollout decoded
    # with these weights in this dtype: see the logged logprob_gap)
    old_logprobs: Literal["recompute", "rollout"] = "recompute"
    lr: float = Field(1e-5, gt=0)
    critic_lr: float = Field(1e-4, gt=0)
    lr_schedule: Literal["constant", "cosine"] = "constant"  # cosine: to 10% at `iterations`
    weight_decay: float = Field(0.0, ge=0)
    warmup_iterations: int = Field(0, ge=0)
    # the first N iterations update only the value head (the policy's loss terms get no
    # gradient and its optimizer state is untouched): a critic that starts from nothing
    # first learns the returns before its advantages move the policy (verl: critic_warmup)
    critic_warmup: int = Field(0, ge=0)
    clip: float = Field(0.2, gt=0)
    # DAPO's clip-higher: the upper bound of the ratio clip, 1 + clip_high (None: clip)
    clip_high: float | None = Field(None, gt=0)
    clip_ratio_c: float | None = Field(3.0, gt=1)  # dual clip for negative advantages
    value_clip: float | None = Field(0.2, gt=0)  # None: unclipped value loss
    vf_coef: float = Field(0.5, ge=0)
    # shared: the value head reads the adapter's hidden states and its loss trains the
    # adapter too; detached: the value head reads them with the gradient stopped
    critic: Literal["shared", "detached"] = "shared"
    entropy_coef: float = Field(0.0, ge=0)
    # token-mean: every token weighs the same; seq-mean-token-mean: every step weighs the same;
    # seq-mean-token-sum-norm: each sequence's token sum over the constant loss_norm_tokens
    # (Dr. GRPO: no division by each reply's own length)
    loss_agg: Literal["token-mean", "seq-mean-token-mean",
                      "seq-mean-token-sum-norm"] = "token-mean"
    loss_norm_tokens: int = Field(512, ge=1)
    kl_coef: float = Field(0.02, ge=0)
    # k1 in the reward, or k3 as a loss term (grpo needs loss: its returns are normalised)
    kl_mode: Literal["reward", "loss"] = "reward"
    kl_target: float | None = Field(None, gt=0)  # adaptive coefficient towards this KL
    kl_horizon: int = Field(1000, ge=1)  # in trained steps (sequences), as verl counts
    kl_coef_min: float = Field(0.0, ge=0)  # bounds of the adaptive coefficient
    kl_coef_max: float | None = Field(None, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)  # the policy's (adapter's) gradient clip
    critic_max_grad_norm: float = Field(1.0, gt=0)  # the value head's, clipped apart
    # optimizer steps in a row with a non-finite gradient norm (each skipped) before stopping
    max_skipped_steps: int = Field(3, ge=1)
    whiten_advantages: bool = True
    lora: LoraConfig = Field(default_factory=LoraConfig)
    # what scoring, updates and local rollouts compute in (weights and optimizer state stay
    # as loaded, logits float32): auto = bfloat16 autocast where the CPU/GPU has bf16 units
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    # updates keep one decoder layer's activations, not all, and run each layer's forward
    # again in the backward pass (about a third more update time; same losses and
    # gradients); for large models or long sequences (docs/training.md, "Memory")
    gradient_checkpointing: bool = False
    seed: int = 0
    save_every: int = Field(1, ge=1)
    eval_every: int = Field(0, ge=0)  # 0: no periodic held-out evaluation
    keep_checkpoints: int = Field(2, ge=1)
    rewards: RewardConfig = Field(default_factory=RewardConfig)


class SFTConfig(Section):
    """``marag sft``: supervised warm start on chosen roles (LoRA by default)."""

    # roles whose examples are kept; empty = every role found in the sources
    roles: list[str] = Field(default_factory=list)
    # traces files: keep valid steps of traces scoring at least min_f1 (rejection sampling)
    min_f1: float = Field(1.0, ge=0, le=1)
    # MMOA-RAG's recipe: a document is a selector label when it contains a content word of
    # the golden answer, or at least this share of the question's content words
    min_question_overlap: float = Field(0.5, ge=0, le=1)
    # the documents the generator example shows: those the selector label keeps (MMOA-RAG),
    # or every retrieved one (what AG sees after an R, AG plan)
    ag_docs: Literal["selected", "retrieved"] = "selected"
    # --recipe answers: keep the questions whose golden answer the shown documents support
    # (or yes/no, or an option a choice question names) (docs), or every question with a
    # golden answer and documents (any)
    answer_evidence: Literal["docs", "any"] = "docs"
    # --recipe answers, RetRobust's mix (Yoran et al., 2024): this share of the questions show
    # irrelevant documents instead (the retriever's ranks 2k+1..3k for the question, k =
    # method.top_k) with the golden answer still the target, so the reader learns to answer
    # past them; 0: every example shows the top k
    irrelevant_share: float = Field(0.0, ge=0, le=1)
    epochs: int = Field(1, ge=1)
    batch_size: int = Field(8, ge=1)
    micro_batch_size: int = Field(2, ge=1)
    lr: float = Field(1e-4, gt=0)
    max_examples: int | None = Field(None, ge=1)
    seed: int = 0
    # steps between checkpoints in OUT/checkpoints (and one after the last step; 0: only
    # that one); the same command resumes a killed run from the latest
    save_every: int = Field(10, ge=0)
    # the dtype the forward and backward compute in, as train.dtype: auto = bfloat16 autocast
    # where the hardware has bf16 matrix units (weights and optimizer state stay float32)
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    lora: LoraConfig = Field(default_factory=LoraConfig)


class Config(Section):
    llms: dict[str, LLMConfig] = Field(default_factory=lambda: {"default": LLMConfig()})
    # role (planner, QR, AG, plan, search, ... or "default") -> name in ``llms``
    roles: dict[str, str] = Field(default_factory=lambda: {"default": "default"})
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    method: MethodConfig = Field(default_factory=MethodConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    # model name -> price; used to put money on traces
    prices: dict[str, Price] = Field(default_factory=dict)

    def backend_for(self, role: str) -> str:
        name = self.roles.get(role, self.roles.get("default", "default"))
        if name not in self.llms:
            raise ConfigError(f"roles.{role} names LLM '{name}', not in llms: {sorted(self.llms)}")
        return name


# ----------------------------------------------------------------------------- loading


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults) and apply ``a.b.c=value`` overrides.

    A file may start from others with ``extends: BASE`` (or a list of bases, merged in
    order), each path relative to the file naming it: the bases are loaded first, then the
    file's own keys are merged over them (mappings key by key, any other value replaced; a
    mapping tagged ``!replace`` replaces the base's whole). An error in a key names the file
    that set it.
    """
    layers: list[tuple[str, dict[str, Any]]] = []
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_extending(Path(path), (), layers)
    for item in overrides or []:
        apply_override(data, item)
        single: dict[str, Any] = {}
        apply_override(single, item)
        layers.append((f"--set {item}", single))
    return validate(data, layers if len(layers) > 1 else None)


EXTENDS = "extends"


class Replace(dict):  # type: ignore[type-arg]
    """A mapping tagged ``!replace`` in a config file: it replaces the base's mapping whole
    instead of being merged into it (``roles: !replace {default: default}``)."""


class _Loader(yaml.SafeLoader):
    pass


def _construct_replace(loader: yaml.SafeLoader, node: yaml.Node) -> Replace:
    if not isinstance(node, yaml.MappingNode):
        raise yaml.constructor.ConstructorError(
            None, None, "!replace tags a mapping", node.start_mark)
    return Replace(loader.construct_mapping(node, deep=True))


_Loader.add_constructor("!replace", _construct_replace)


def _read_extending(p: Path, chain: tuple[Path, ...],
                    layers: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """``p`` with its bases merged under it; ``layers`` gets each file's own keys in merge
    order (to name the file an error comes from)."""
    if p.is_dir():
        raise ConfigError(f"{p} is a directory, not a config file")
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    key = p.resolve()
    if key in chain:
        cycle = " -> ".join(str(c) for c in (*chain, key))
        raise ConfigError(f"{p}: '{EXTENDS}' goes round in a circle: {cycle}")
    try:
        loaded = yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML: {e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not UTF-8 text") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{p}: top level must be a mapping, got {type(loaded).__name__}")
    present = EXTENDS in loaded
    bases = loaded.pop(EXTENDS, None)
    if isinstance(bases, str):
        bases = [bases]
    if present and (not isinstance(bases, list) or not bases or not all(
            isinstance(b, str) and b.strip() for b in bases)):
        raise ConfigError(f"{p}: '{EXTENDS}' must name a config file or a list of them, "
                          f"got {bases!r}")
    merged: dict[str, Any] = {}
    for base in bases or []:
        target = p.parent / base
        if not target.exists():
            raise ConfigError(f"{p}: '{EXTENDS}: {base}' names no file ({target} not found)")
        merged = merge_config(merged, _read_extending(target, (*chain, key), layers))
    layers.append((str(p), loaded))
    return merge_config(merged, loaded)


def merge_config(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings key by key, other values (and
    mappings tagged ``!replace``) replaced."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and not isinstance(v, Replace) and isinstance(out.get(k), dict):
            out[k] = merge_config(out[k], v)
        else:
            out[k] = _plain(v)
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def apply_override(data: dict[str, Any], item: str) -> None:
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {item!r} is not of the form key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    parts = key.split(".")
    if parts[0] == "roles" and len(parts) > 2:
        # role names hold dots themselves (mask.search, mmoa.QR): the rest of the key is one name
        parts = ["roles", ".".join(parts[1:])]
    elif parts[:2] in (["method", "role_prompts"], ["method", "max_tokens"]) and len(parts) > 3:
        parts = [*parts[:2], ".".join(parts[2:])]
    node = data
    for part in parts[:-1]:
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"override {key!r}: '{part}' is not a section")
        node = nxt
    node[parts[-1]] = value


def validate(data: dict[str, Any], layers: list[tuple[str, dict[str, Any]]] | None = None
             ) -> Config:
    """``data`` as a ``Config``; an error names the layer (file or ``--set``) that set the
    key, when ``layers`` are given."""
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_explain(e, layers)) from None


def _explain(err: ValidationError, layers: list[tuple[str, dict[str, Any]]] | None = None
             ) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        if e["type"] == "extra_forbidden":
            line = f"unknown config key '{loc}'{_suggest(e['loc'])}"
        else:
            line = f"config key '{loc}': {e['msg']}"
        source = _source(e["loc"], layers or [])
        lines.append(f"{line} (set in {source})" if source else line)
    return "; ".join(lines)


def _source(loc: tuple[Any, ...], layers: list[tuple[str, dict[str, Any]]]) -> str | None:
    """The last layer (file or override) that sets the deepest part of ``loc``."""
    best, depth = None, 0
    for name, tree in layers:
        node: Any = tree
        d = 0
        for part in loc:
            if not isinstance(node, dict) or str(part) not in node:
                break
            node = node[str(part)]
            d += 1
        if d and d >= depth:
            best, depth = name, d
    return best


def _suggest(loc: tuple[Any, ...]) -> str:
    model: type[BaseModel] | None = Config
    for part in loc[:-1]:
        if model is None:
            return ""
        field = model.model_fields.get(str(part))
        if field is None:
            # inside a dict[str, Section]: the part is a user-chosen name
            continue
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        elif args and isinstance(args[-1], type) and issubclass(args[-1], BaseModel):
            model = args[-1]
        else:
            model = None
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
