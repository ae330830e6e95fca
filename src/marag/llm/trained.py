"""Adapters from marag's own learning runs, loadable by a short name.

``--adapter qwen-jade`` (or ``llms.<name>.adapter: [qwen-jade]`` in a config) stands for the
LoRA folders a learning run committed under ``docs/results/`` of marag's source repository,
merged in the order the run trained them (a warm start, then the RL adapter trained over it).
Each name is tied to the model it was trained on; another model is refused, because an
adapter's deltas only mean something on the weights they were trained against. A path is
always a path: a folder holding an adapter wins over a name.

An adapter trained for one role beside frozen ones (``TrainedAdapter.role``: Adaptive-RAG's
classifier, RRR's rewriter, MAO-ARAG's planner) serves that role alone: :func:`with_role_adapter`
gives the role a copy of its LLM (``llms.trained``) carrying the adapter, and the LLMs of the
other roles the adapters its run's frozen roles had (``TrainedAdapter.team``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from marag.llm.base import LLMError

if TYPE_CHECKING:
    from marag.config import Config


@dataclass(frozen=True, slots=True)
class TrainedAdapter:
    model: str  # the model name it was trained on
    folders: tuple[str, ...]  # relative to the repository root, merged in this order
    # a run that trained one role beside frozen ones (RRR's rewriter, BGM's bridge): the
    # registered names of the adapters its frozen roles ran with, so that a table row serves
    # them so (``folders`` then holds the trained role's warm start too, first)
    team: tuple[str, ...] = ()
    # the one role it was trained for, which it serves alone (None: it serves every role),
    # and the method its run trained that role in
    role: str | None = None
    method: str | None = None
    # the date the name came to stand for these folders, where it stood for others before,
    # and the registered name of what it stood for until then: a run folder made under the
    # old meaning resumes under ``before``, and is refused under this name
    # (``marag.eval.identity.adapter_identity``, ``comparable_identity``)
    since: str | None = None
    before: str | None = None


# the llms entry that serves a one-role adapter's role
ROLE_LLM = "trained"

TRAINED: dict[str, TrainedAdapter] = {
    "qwen-jade": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # the recommended `jade` team since 2026-11-30: fold A's plan-label SFT, chosen by the
        # rule stated in docs/results/qwen-runs/SPLITS.md (addendum 2026-11-30 04:20 UTC) over
        # PPO and GRPO on top of it, which did not beat it on fold B
        # (docs/results/qwen-jade/README.md)
        folders=("docs/results/qwen-runs/crossfit/team-s200/adapters/sft",),
        since="2026-11-30", before="qwen-jade-2c",
    ),
    "qwen-jade-2c": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # `qwen-jade` until 2026-11-30 (the figures named so before then are its): run 2c's
        # plan-label SFT, then PPO with JADE's reward, on the old training set
        # (docs/results/qwen-jade/README.md)
        folders=("docs/results/qwen-jade/sft", "docs/results/qwen-jade/rl"),
    ),
    "qwen-jade-reader": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 2d's warm start: the same plan-label SFT, then the answer generator's reading
        # labels (marag sft --recipe answers) over it (docs/results/qwen-jade/README.md)
        folders=("docs/results/qwen-jade/sft", "docs/results/qwen-jade/answers"),
    ),
    "qwen-mmoa": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 4: MMOA-RAG's SFT warm start (marag sft --recipe mmoa), then MAPPO-style PPO
        # of the rewriter, selector and generator over it (docs/results/qwen-mmoa/README.md)
        folders=("docs/results/qwen-mmoa/sft", "docs/results/qwen-mmoa/rl"),
    ),
    "qwen-search-r1": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # search-r1 on fold A: the tags' warm start (marag sft --recipe answers --method
        # search-r1); GRPO over it tied on development and was not kept
        # (docs/results/qwen-search-r1/README.md)
        folders=("docs/results/qwen-search-r1/sft",),
    ),
    "qwen-adaptive": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # Adaptive-RAG's classifier: LoRA SFT on silver labels from marag's own llm-only,
        # vanilla and ircot runs over a stratified 200 of fold A; it serves the classifier
        # role alone (docs/results/qwen-adaptive/README.md)
        folders=("docs/results/qwen-adaptive/classifier",),
        role="adaptive.classify", method="adaptive-rag",
    ),
    "qwen-retrobust": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # RetRobust's generator: LoRA SFT on fold A's gold answers, half of the examples
        # reading irrelevant passages (marag sft --recipe answers, sft.irrelevant_share 0.5)
        # (docs/results/qwen-retrobust/README.md)
        folders=("docs/results/qwen-retrobust/generator",),
    ),
    "qwen-rrr": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # Rewrite-Retrieve-Read's rewriter: PPO of mmoa.QR alone on fold A over MMOA-RAG's
        # SFT warm start, beside a generator frozen on that warm start (its team); the
        # iteration-3 checkpoint, chosen on development (docs/results/qwen-rrr/README.md)
        folders=("docs/results/qwen-mmoa/sft", "docs/results/qwen-rrr/rewriter"),
        team=("qwen-mmoa-sft",),
        role="mmoa.QR", method="rrr",
    ),
    "qwen-bgm": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # BGM's bridge: PPO of the selector (DS) alone on fold A over MMOA-RAG's SFT warm
        # start, beside a generator frozen on that warm start (its team); 3 iterations
        # (docs/results/qwen-bgm/README.md)
        folders=("docs/results/qwen-mmoa/sft", "docs/results/qwen-bgm/bridge"),
        team=("qwen-mmoa-sft",),
        role="DS", method="bgm",
    ),
    "qwen-mao-arag": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # MAO-ARAG's planner: plan-label SFT on fold A, then PPO of the planner alone with
        # MAO-ARAG's reward (alpha 0) beside executors on the untrained model; it serves the
        # planner role alone (docs/results/qwen-mao-arag/README.md)
        folders=("docs/results/qwen-mao-arag/sft", "docs/results/qwen-mao-arag/rl"),
        role="planner", method="mao-arag",
    ),
    "qwen-mmoa-sft": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 4's warm start alone (MMOA-RAG Table 5's "SFT" row)
        folders=("docs/results/qwen-mmoa/sft",),
    ),
}


def repointed_names() -> str:
    """One line on the names that came to stand for other folders, for an error message."""
    return "; ".join(f"{n} stands for other folders since {a.since} (its earlier meaning is "
                     f"{a.before})" for n, a in TRAINED.items() if a.since)


def repo_root() -> Path:
    """The source checkout this package runs from (``src/marag/llm`` is three levels down)."""
    return Path(__file__).resolve().parents[3]


def registered(entry: str) -> TrainedAdapter | None:
    """The registration ``entry`` names; None for an adapter folder (a path is always a path,
    even one named like a registered adapter) or a name marag does not have."""
    if (Path(entry) / "adapter_config.json").is_file():
        return None
    return TRAINED.get(entry)


def resolve_adapters(entries: list[str] | tuple[str, ...], model: str) -> list[str]:
    """``entries`` with each short name replaced by its folders; adapter folders are kept as
    given. An entry that is neither is an error that lists the names."""
    out: list[str] = []
    for entry in entries:
        if (Path(entry) / "adapter_config.json").is_file():
            out.append(entry)
            continue
        spec = registered(entry)
        if spec is None:
            raise LLMError(f"adapter {entry!r}: no adapter folder there (no "
                           "adapter_config.json), and not the name of one of marag's trained "
                           f"adapters ({', '.join(sorted(TRAINED))})")
        if model != spec.model:
            raise LLMError(f"adapter {entry!r} was trained on {spec.model}, not {model}; "
                           f"use it with --model {spec.model}")
        folders = [repo_root() / f for f in spec.folders]
        missing = [f for f in folders if not (f / "adapter_config.json").is_file()]
        if missing:
            raise LLMError(
                f"adapter {entry!r} ships in marag's source repository ({', '.join(spec.folders)}), "
                f"and this installation has no {missing[0]}: run marag from a clone of the "
                "repository, or pass the adapter folders themselves with --adapter")
        out += [str(f) for f in folders]
    return out


def one_role(entry: str) -> str | None:
    """The role a registered one-role adapter serves alone; None for an adapter folder (a
    path is always a path) or an adapter that serves every role."""
    spec = registered(entry)
    return spec.role if spec is not None else None


def serves_alone(config: Config, role: str, adapter: str) -> bool:
    """Whether ``config`` already serves ``role`` alone with ``adapter`` on ``llms.trained``
    (a config made for it, such as configs/qwen/adaptive-rag.yaml)."""
    return (ROLE_LLM in config.llms and config.backend_for(role) == ROLE_LLM
            and config.llms[ROLE_LLM].adapter == [adapter])


def misplaced_role_adapters(config: Config) -> list[str]:
    """Why ``config`` would serve a registered one-role adapter to roles it was not trained
    for (empty: it would not): an hf ``llms`` entry names it in ``adapter`` and serves the
    default or another role; each message says how to serve it as trained. A run that serves
    its method (ask, eval, serve, a table row) is refused so; training (sft, train) merges it
    into the policy on purpose, as a warm start. Other backends merge no adapter, so they are
    not checked here."""
    default = config.roles.get("default", "default")
    problems = []
    for name, llm in config.llms.items():
        if llm.backend != "hf":
            continue
        for entry in llm.adapter:
            role = one_role(entry)
            if role is None:
                continue
            others = sorted(r for r, served_by in config.roles.items()
                            if served_by == name and r not in (role, "default"))
            if name != default and not others:
                continue
            spec = TRAINED[entry]
            if name == default:
                problems.append(
                    f"llms.{name}.adapter names {entry}, trained for the role {role} of "
                    f"{spec.method} alone, but llms.{name} serves every role without an LLM "
                    f"of its own. To serve it as trained: drop it from llms.{name} and pass "
                    f"--adapter {entry} (marag ask, eval, serve; marag table's {spec.method} "
                    f"row serves it so by itself), or give {role} an LLM of its own "
                    f"(roles.{role}: {ROLE_LLM}, llms.{ROLE_LLM}: {{backend: hf, model: "
                    f"{llm.model}, adapter: [{entry}]}}); to merge it into every role on "
                    "purpose, pass its folders as paths")
            else:
                problems.append(
                    f"llms.{name}.adapter names {entry}, trained for the role {role} of "
                    f"{spec.method} alone, but llms.{name} also serves "
                    + ", ".join(others) + ": map "
                    + ", ".join(f"roles.{r}" for r in others)
                    + f" to another LLM (e.g. {default}), or drop those lines")
    return problems


def with_role_adapter(config: Config, role: str, adapter: str, *, label: str) -> Config:
    """``config`` with ``adapter`` serving ``role`` alone: on ``llms.trained``, a copy of the
    LLM that served the role; the LLMs serving the other roles take the registered adapter's
    ``team``, if it has one. ``label`` names who asks, for the error when ``llms.trained``
    already serves something else. A config already made so is returned as it is."""
    from marag.config import Config as ConfigModel
    from marag.config import ConfigError

    if serves_alone(config, role, adapter):  # its other LLMs are taken to be as wanted
        return config
    raw = config.model_dump()
    if ROLE_LLM in raw["llms"]:
        raise ConfigError(f"llms.{ROLE_LLM} is taken; {label} puts its trained adapter there")
    own = config.backend_for(role)
    raw["llms"][ROLE_LLM] = {**raw["llms"][own], "adapter": [adapter]}
    raw["roles"] = {**raw["roles"], role: ROLE_LLM}
    spec = TRAINED.get(adapter)
    if spec is not None and spec.team:
        serving = {config.backend_for(r) for r in raw["roles"] if r != role}
        serving.add(raw["roles"].get("default", "default"))
        for name in serving - {ROLE_LLM}:
            raw["llms"][name]["adapter"] = list(spec.team)
    return ConfigModel.model_validate(raw)
