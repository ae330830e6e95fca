// marag serve: the page. Plain JS, no build step. The tree layout (which steps go before and
// after a node's children) and the one-line step summaries come from the server (marag.view),
// the same code the CLI renderer uses; this file only draws them.
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("marag-token") || "";

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

function showError(msg) { $("error").textContent = msg || ""; }

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(path, Object.assign({}, options, { headers }));
  if (res.status === 401) {
    $("token-form").hidden = false;
    throw new Error("this server needs a bearer token");
  }
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = (await res.json()).detail || detail; } catch (e) { /* not JSON */ }
    throw new Error(`${res.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  }
  return res;
}

// ------------------------------------------------------------------ trace drawing

const fmt = (x, d = 2) => (typeof x === "number" ? x.toFixed(d) : "–");
const roleClass = (role) => "role role-" + role.replace(/[^A-Za-z0-9]/g, "-");

function costLine(c, status, method) {
  const parts = [method, status, `${c.llm_calls} LLM calls`, `${c.retrieval_calls} retrievals`,
    `${c.rounds} rounds`, `${c.prompt_tokens}+${c.completion_tokens} tokens`, `${fmt(c.seconds)} s`];
  if (c.money) parts.push("$" + c.money.toFixed(6));
  return parts.join(" · ");
}

function stepBody(step) {
  const body = el("div", { class: "step-body" });
  if (step.messages && step.messages.length) {
    body.append(el("h4", {}, "prompt"),
      el("pre", {}, step.messages.map((m) => [el("span", { class: "msg-role" }, `[${m.role}] `), m.content + "\n"])));
  }
  body.append(el("h4", {}, step.role === "R" ? "query" : "raw output"), el("pre", { class: "raw" }, step.raw));
  if (step.role !== "R") body.append(el("h4", {}, "parsed"), el("pre", {}, JSON.stringify(step.parsed, null, 1)));
  body.append(el("h4", {}, "validity"),
    el("div", { class: step.valid ? "" : "invalid" }, step.valid ? "valid" : `invalid: ${step.reason}`));
  if (step.doc_ids && step.doc_ids.length) {
    const titles = (step.parsed && step.parsed.titles) || [];
    const scores = (step.parsed && step.parsed.scores) || [];
    body.append(el("h4", {}, "documents"), el("ol", { class: "docs", start: 0 },
      step.doc_ids.map((id, i) => el("li", {}, el("b", {}, titles[i] || "(untitled)"), ` — ${id}`,
        scores[i] !== undefined ? ` (score ${fmt(scores[i], 3)})` : ""))));
  }
  const who = [step.backend, step.model].filter(Boolean).join(" / ");
  const tokens = step.role === "R" ? "" : `${step.prompt_tokens} prompt + ${step.completion_tokens} completion tokens · `;
  body.append(el("h4", {}, "cost"), el("div", {}, `${tokens}${fmt(step.latency, 3)} s` +
    ` · started at ${fmt(step.started, 3)} s · round ${step.round}` +
    (step.turn ? ` · turn ${step.turn}` : "") + (who ? ` · ${who}` : "")));
  return body;
}

function stepView(state, i, opened) {
  const step = state.steps[i];
  const meta = step.role === "R" ? `${fmt(step.latency)}s`
    : `${fmt(step.latency)}s · ${step.prompt_tokens}+${step.completion_tokens} tok`;
  const d = el("details", { class: "step", "data-index": i, "data-role": step.role, open: opened.has(i) },
    el("summary", {}, el("span", { class: roleClass(step.role) }, step.role),
      el("span", { class: "summary-text", title: state.summaries[i] }, state.summaries[i]),
      step.valid ? null : el("span", { class: "invalid" }, "✗ " + step.reason),
      el("span", { class: "meta" }, meta)));
  d.addEventListener("toggle", () => {
    if (d.open) { opened.add(i); if (!d.querySelector(".step-body")) d.append(stepBody(step)); }
    else opened.delete(i);
  });
  if (d.open) d.append(stepBody(step));
  return d;
}

function nodeView(state, view, opened) {
  const n = state.nodes[view.id];
  const head = el("div", { class: "node-head" }, `#${n.id} `,
    n.kind === "root" ? null : el("span", { class: "kind" }, `(${n.kind}) `), n.question, " → ",
    n.answer !== null && n.answer !== undefined ? el("span", { class: "node-answer" }, n.answer)
      : el("span", { class: "unsolved" }, state.done ? "unsolved" : "…"),
    n.workflow ? el("span", { class: "workflow" }, n.workflow.join(", ")) : null);
  const status = n.solved ? "solved" : state.done ? "" : "running";
  return el("div", { class: `node ${status}`, "data-node": n.id, "data-kind": n.kind }, head,
    view.before.map((i) => stepView(state, i, opened)),
    el("div", { class: "children" }, view.children.map((c) => nodeView(state, c, opened))),
    view.after.map((i) => stepView(state, i, opened)));
}

// state: {question, method, done, trace (final or null), nodes {id: node}, steps [], summaries [], layout}
function drawTrace(box, state, title) {
  const opened = box._opened || (box._opened = new Set());
  const t = state.trace;
  box.replaceChildren();
  if (title) box.append(el("div", { class: "trace-title" }, title));
  box.append(el("div", { class: "question" }, el("b", {}, "Q: "), state.question));
  if (t) {
    box.append(el("div", { class: "answer final-answer" }, el("b", {}, "A: "),
      t.answer === null ? "(none)" : t.answer));
    if (t.golden_answers && t.golden_answers.length) {
      const m = t.metrics || {};
      box.append(el("div", { class: "scores" }, el("span", { class: "em" }, `EM ${fmt(m.em)}`),
        el("span", { class: "f1" }, `F1 ${fmt(m.f1)}`), el("span", {}, `Acc ${fmt(m.acc)}`),
        el("span", { class: "golden" }, "golden: " + t.golden_answers.join(" | "))));
    }
    box.append(el("div", { class: "cost" }, costLine(t.cost, t.status, t.method)));
  } else {
    box.append(el("div", { class: "cost" }, `${state.method} · running · ${state.steps.length} steps so far`));
  }
  const lay = state.layout || { roots: [], loose: [] };
  box.append(el("div", { class: "tree" }, lay.roots.map((r) => nodeView(state, r, opened)),
    lay.loose.map((i) => stepView(state, i, opened))));
  if (t) {
    for (const note of t.notes || []) box.append(el("div", { class: "notes" }, "note: " + note));
    if (t.error) box.append(el("div", { class: "failed" }, "error: " + t.error));
  }
}

function finalState(payload) {
  const t = payload.trace;
  const nodes = {};
  for (const n of t.nodes) nodes[n.id] = n;
  return { question: t.question, method: t.method, done: true, trace: t, nodes, steps: t.steps,
    summaries: payload.layout.summaries, layout: payload.layout };
}

// ------------------------------------------------------------------ asking (server-sent events)

async function* sseEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const chunk = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let event = "message", data = "";
      for (const line of chunk.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      yield { event, data: JSON.parse(data) };
    }
  }
}

async function ask(ev) {
  ev.preventDefault();
  showError("");
  const question = $("question").value.trim();
  if (!question) return;
  const golden = $("golden").value.split("|").map((s) => s.trim()).filter(Boolean);
  const box = $("ask-trace");
  box._opened = new Set();
  const state = { question, method: $("method").value, done: false, trace: null, nodes: {},
    steps: [], summaries: [], layout: null };
  $("ask-button").disabled = true;
  $("ask-status").textContent = "asking…";
  const started = performance.now();
  try {
    const res = await api("/api/ask/stream", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question, method: state.method, golden_answers: golden }) });
    for await (const { event, data } of sseEvents(res)) {
      if (event === "node") { state.nodes[data.node.id] = data.node; state.layout = data.layout; }
      else if (event === "step") {
        state.steps[data.index] = data.step; state.summaries[data.index] = data.summary; state.layout = data.layout;
      } else if (event === "trace") { box._opened = new Set(); Object.assign(state, finalState(data)); }
      else if (event === "error") throw new Error(data.detail);
      if (event !== "start") drawTrace(box, state);
      $("ask-status").textContent = state.done ? `done in ${((performance.now() - started) / 1000).toFixed(2)} s`
        : `running… ${state.steps.length} steps`;
    }
  } catch (e) {
    showError(e.message);
    $("ask-status").textContent = "failed";
  } finally {
    $("ask-button").disabled = false;
  }
}

async function loadMethods() {
  const data = await (await api("/api/methods")).json();
  const sel = $("method");
  sel.replaceChildren(...data.methods.map((m) => el("option", { value: m.name, disabled: !m.available,
    selected: m.name === data.default }, m.name)));
}

// ------------------------------------------------------------------ run browser

const runView = { name: null, offset: 0, limit: 25, total: 0, runs: [] };

const pct1 = (x) => (x === null || x === undefined ? "" : (100 * x).toFixed(1));

async function loadRuns() {
  const data = await (await api("/api/runs")).json();
  runView.runs = data.runs;
  const rows = data.runs.map((r) => {
    if (r.error) return el("tr", { class: "run-row", "data-run": r.name }, el("td", {}, r.name),
      el("td", { colspan: 7, class: "failed" }, `cannot be read: ${r.error}`));
    const train = r.kind === "train";
    const size = train ? `${r.iterations}${r.planned ? " of " + r.planned : ""} iterations` : r.n ?? "";
    const state = r.finished ? "finished" : "in progress";
    return el("tr", { class: "clickable run-row" + (train ? " train-row" : ""), "data-run": r.name, onclick: () => openRun(r.name) },
      el("td", {}, r.name), el("td", {}, train ? "training" : "evaluation"), el("td", {}, r.method || ""),
      el("td", {}, r.dataset || r.eval_dataset || ""), el("td", { class: "num" }, size),
      el("td", { class: "num" }, pct1(r.em)), el("td", { class: "num" }, pct1(r.f1)),
      el("td", {}, train && r.best_iteration ? `${state}; best at ${r.best_iteration}` : state));
  });
  $("run-list").replaceChildren(el("table", { class: "table" },
    el("tr", {}, ["run", "kind", "method", "dataset", "size", "EM", "F1", "state"].map((h) => el("th", {}, h))),
    rows.length ? rows : el("tr", {}, el("td", { colspan: 8 }, "no runs in this server's --runs directory"))));
}

// ------------------------------------------------------------------ training runs

const SVGNS = "http://www.w3.org/2000/svg";
const COLORS = ["#2563eb", "#ea580c", "#16a34a", "#dc2626", "#7c3aed", "#92400e", "#db2777", "#4b5563"];

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const kid of kids) e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return e;
}

// One line per [key, label] against iteration. A row without the key is, by `missing`:
// "gap" (a break in the line: a role that did not run), "join" (skipped: an evaluation every
// few iterations, its points joined), or "zero" (a workflow not sampled that iteration).
function lineChart(title, rows, keys, missing = "gap") {
  rows = rows.filter((r) => typeof r.iteration === "number");
  const series = keys.map(([key, label]) => {
    const pts = rows.map((r) => [r.iteration, typeof r[key] === "number" ? r[key] : missing === "zero" ? 0 : null]);
    return { key, label, pts: missing === "join" ? pts.filter((q) => q[1] !== null) : pts };
  }).filter((s) => s.pts.some((q) => q[1] !== null));
  if (!series.length) return null;
  const W = 440, H = 230, L = 48, R = 10, T = 22, B = 26;
  const xs = rows.map((r) => r.iteration), ys = series.flatMap((s) => s.pts.filter((q) => q[1] !== null).map((q) => q[1]));
  let x0 = xs.reduce((a, b) => Math.min(a, b)), x1 = xs.reduce((a, b) => Math.max(a, b));
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  let y0 = Math.min(0, ys.reduce((a, b) => Math.min(a, b))), y1 = Math.max(0, ys.reduce((a, b) => Math.max(a, b)));
  if (y0 === y1) y1 = y0 + 1;
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  const tick = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(1) : v.toPrecision(2));
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": title },
    svg("text", { x: L, y: 14, class: "chart-title" }, title),
    svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }),
    svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
    svg("text", { x: L - 4, y: sy(y1) + 4, class: "tick", "text-anchor": "end" }, tick(y1)),
    svg("text", { x: L - 4, y: sy(y0) + 4, class: "tick", "text-anchor": "end" }, tick(y0)),
    svg("text", { x: sx(x0), y: H - 8, class: "tick", "text-anchor": "middle" }, x0),
    svg("text", { x: sx(x1), y: H - 8, class: "tick", "text-anchor": "middle" }, x1));
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const segments = [[]];
    for (const q of s.pts) {
      if (q[1] === null) { if (segments[segments.length - 1].length) segments.push([]); }
      else segments[segments.length - 1].push(q);
    }
    for (const seg of segments.filter((g) => g.length)) {
      chart.append(svg("polyline", { points: seg.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" "), fill: "none",
        stroke: color, "stroke-width": 2, "stroke-dasharray": i % 2 ? "6 3" : "none", "data-key": s.key }));
    }
    const drawn = s.pts.filter((q) => q[1] !== null);
    if (drawn.length <= 40) drawn.forEach(([x, y]) => chart.append(svg("circle", { cx: sx(x), cy: sy(y), r: 2.5, fill: color })));
  });
  const legend = series.map((s, i) => el("span", { class: "legend" },
    el("span", { class: "swatch", style: `background:${COLORS[i % COLORS.length]}` }), s.label));
  return el("figure", { class: "chart-box" }, chart, el("figcaption", {}, legend));
}

function prefixed(rows, prefix) {
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r).filter((k) => k.startsWith(prefix))))].sort();
  return keys.map((k) => [k, k.slice(prefix.length)]);
}

function showTraining(info) {
  const rows = info.rows;
  const best = info.best ? ` · best development F1 ${pct1(info.best.score)} at iteration ${info.best.iteration} (best/)` : "";
  $("train-summary").textContent =
    `iteration ${info.iterations}${info.planned ? " of " + info.planned : ""}${info.finished ? " (finished)" : " (in progress)"}${best}`;
  const charts = [
    lineChart("reward and F1", rows, [["reward", "mean trace reward"], ["f1", "rollout F1"]]),
    lineChart("development F1 (greedy, each checkpoint evaluation)", rows, [["eval.f1", "F1"], ["eval.em", "EM"]], "join"),
    lineChart("workflow mix (share of sampled plans)", rows, prefixed(rows, "workflow."), "zero"),
    lineChart("format-valid rate per role", rows, prefixed(rows, "valid.")),
    lineChart("KL and entropy (per token)", rows, [["kl", "KL to reference"], ["approx_kl", "KL of each update"], ["entropy", "entropy"]]),
    lineChart("tokens per trace", rows, [["prompt_tokens", "prompt"], ["completion_tokens", "completion"]]),
    lineChart("seconds per iteration", rows, [["seconds", "whole"], ["seconds.rollout", "rollout"], ["seconds.update", "update"]]),
  ].filter(Boolean);
  $("train-charts").replaceChildren(...(charts.length ? charts : [el("div", {}, "no iterations yet")]));
  const byIter = Object.fromEntries(rows.filter((r) => typeof r["eval.f1"] === "number").map((r) => [r.iteration, r]));
  const evalRows = info.evaluations.map((name) => {
    const it = Number(name.split("@iter-")[1]);
    const r = byIter[it] || {};
    return el("tr", { class: "clickable eval-row", "data-run": name, onclick: () => openRun(name) },
      el("td", {}, name), el("td", { class: "num" }, Number.isFinite(it) ? it : ""),
      el("td", { class: "num" }, pct1(r["eval.em"])), el("td", { class: "num" }, pct1(r["eval.f1"])));
  });
  $("train-evals").replaceChildren(el("tr", {}, ["evaluation", "iteration", "EM", "F1"].map((h) => el("th", {}, h))),
    ...(evalRows.length ? evalRows : [el("tr", {}, el("td", { colspan: 4 }, "no checkpoint evaluations (train.eval_every)"))]));
}

function metricsTable(s) {
  const pct = (x) => (100 * x).toFixed(2);
  const groups = [["all", s], ...Object.entries(s.datasets || {})];
  const head = ["", "n", "failed", "budget", "EM", "F1", "Acc", "LLM calls", "tokens", "retrievals", "rounds", "seconds"];
  const rows = groups.map(([name, g]) => el("tr", {}, el("td", {}, name), el("td", { class: "num" }, g.n),
    el("td", { class: "num" }, g.failed), el("td", { class: "num" }, g.budget), el("td", { class: "num" }, pct(g.em)),
    el("td", { class: "num" }, pct(g.f1)), el("td", { class: "num" }, pct(g.acc)),
    ...["llm_calls", "total_tokens", "retrieval_calls", "rounds", "seconds"].map((k) =>
      el("td", { class: "num" }, fmt(g.cost[k])))));
  const roles = Object.entries(s.roles || {}).map(([r, v]) => `${r} ${(100 * v.rate).toFixed(0)}% (${v.valid}/${v.total})`);
  const flows = Object.entries(s.workflows || {}).map(([w, c]) => `${w}: ${c}`);
  return el("div", {}, el("table", { class: "table metrics" }, el("tr", {}, head.map((h) => el("th", {}, h))), rows),
    el("div", { class: "cost" }, "format-valid: " + roles.join(" · ")),
    el("div", { class: "cost" }, "workflows: " + flows.join(" · ")));
}

async function plotImage(name, file) {
  const blob = await (await api(`/api/runs/${encodeURIComponent(name)}/plots/${encodeURIComponent(file)}`)).blob();
  return el("img", { src: URL.createObjectURL(blob), alt: file, title: file });
}

async function openRun(name) {
  showError("");
  try {
    const info = await (await api(`/api/runs/${encodeURIComponent(name)}`)).json();
    const train = info.kind === "train";
    runView.name = name; runView.offset = 0;
    $("run-detail").hidden = false;
    $("run-title").textContent = `${name} — ${train ? "training, " : ""}${info.method || "method unknown"}${info.finished ? "" : " (in progress)"}`;
    $("run-training").hidden = !train;
    $("run-questions-part").hidden = train;
    $("run-metrics").replaceChildren(...(train ? [] : [metricsTable(info.summary)]));
    if (train) showTraining(info);
    $("run-plots").replaceChildren(...await Promise.all(info.plots.map((f) => plotImage(name, f))));
    $("run-config").hidden = !info.config;
    $("run-config").querySelector("pre").textContent = info.config || "";
    $("run-traces").replaceChildren();
    if (train) return;
    $("run-compare").replaceChildren(el("option", { value: "" }, "(none)"),
      ...runView.runs.filter((r) => r.name !== name && r.kind !== "train").map((r) => el("option", { value: r.name }, r.name)));
    await loadQuestions();
  } catch (e) { showError(e.message); }
}

async function loadQuestions() {
  const p = new URLSearchParams({ offset: runView.offset, limit: runView.limit, filter: $("run-filter").value,
    q: $("run-search").value });
  const data = await (await api(`/api/runs/${encodeURIComponent(runView.name)}/traces?${p}`)).json();
  runView.total = data.total;
  const rows = data.items.map((r) => el("tr", { class: "clickable question-row", "data-id": r.id, onclick: () => openTrace(r.id) },
    el("td", {}, r.id), el("td", {}, r.question), el("td", {}, r.answer ?? ""), el("td", {}, r.golden_answers.join(" | ")),
    el("td", { class: "outcome-" + r.outcome }, r.outcome), el("td", { class: "num" }, fmt(r.metrics.f1))));
  $("run-questions").replaceChildren(el("tr", {}, ["id", "question", "answer", "golden", "outcome", "F1"].map((h) => el("th", {}, h))),
    ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 6 }, "no questions match"))]));
  const last = Math.min(runView.offset + runView.limit, data.total);
  $("run-page").textContent = data.total ? ` ${runView.offset + 1}–${last} of ${data.total} ` : " 0 ";
  $("run-prev").disabled = runView.offset === 0;
  $("run-next").disabled = last >= data.total;
}

async function openTrace(id) {
  showError("");
  const names = [runView.name, $("run-compare").value].filter(Boolean);
  const boxes = names.map(() => el("div", { class: "trace" }));
  $("run-traces").replaceChildren(...boxes);
  await Promise.all(names.map(async (name, k) => {
    try {
      const payload = await (await api(`/api/runs/${encodeURIComponent(name)}/traces/${encodeURIComponent(id)}`)).json();
      drawTrace(boxes[k], finalState(payload), `${name} · ${id}`);
    } catch (e) {
      boxes[k].replaceChildren(el("div", { class: "trace-title" }, `${name} · ${id}`), el("div", { class: "failed" }, e.message));
    }
  }));
  $("run-traces").scrollIntoView({ behavior: "smooth", block: "start" });
}

// ------------------------------------------------------------------ wiring

function show(view) {
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.view === view);
  $("view-ask").hidden = view !== "ask";
  $("view-runs").hidden = view !== "runs";
  if (view === "runs") loadRuns().catch((e) => showError(e.message));
}

function start() {
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => show(b.dataset.view));
  $("ask-form").addEventListener("submit", ask);
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem("marag-token", token);
    $("token-form").hidden = true;
    showError("");
    loadMethods().catch((e) => showError(e.message));
  });
  $("run-filter").addEventListener("change", () => { runView.offset = 0; loadQuestions().catch((e) => showError(e.message)); });
  let typing;
  $("run-search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { runView.offset = 0; loadQuestions().catch((e) => showError(e.message)); }, 250);
  });
  $("run-prev").addEventListener("click", () => { runView.offset = Math.max(0, runView.offset - runView.limit); loadQuestions(); });
  $("run-next").addEventListener("click", () => { runView.offset += runView.limit; loadQuestions(); });
  loadMethods().catch((e) => showError(e.message));
  if (location.hash === "#runs") show("runs");
}

start();
