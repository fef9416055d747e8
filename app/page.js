// app/page.py's page: plain browser JavaScript, no library, nothing fetched.
// Every stored string (model text above all) goes into the page as text (textContent or an
// SVG text node), never as HTML.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("debate-data").textContent);
  const SETTINGS = JSON.parse(document.getElementById("page-settings").textContent);
  const FULL = SETTINGS.fullGraphAgents;
  const SVGNS = "http://www.w3.org/2000/svg";
  // Okabe-Ito: colour-blind-safe; bluish green is kept for the gold (right) answers
  const GOLD = "#009E73";
  const PALETTE = ["#E69F00", "#56B4E9", "#0072B2", "#D55E00", "#CC79A7", "#F0E442"];
  const DARK = new Set([GOLD, "#0072B2", "#D55E00", "#CC79A7"]); // white labels on these
  const OTHER = "#9a9a9a";
  const NO_ANSWER = "#ffffff";

  // ------------------------------------------------------------------ small DOM helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return node;
  }
  function sv(tag, attrs, text) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function tip(node, text) {
    node.appendChild(sv("title", {}, text));
    return node;
  }
  const has = (v) => v !== null && v !== undefined && v !== "";
  const mark = (ok) => (ok === true ? "\u2713" : ok === false ? "\u2717" : "");
  const markEl = (ok) => (ok === true || ok === false ? el("span", { class: ok ? "ok" : "bad" }, mark(ok)) : null);
  const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + "\u2026" : s);
  function fmt(v) {
    if (!has(v)) return "\u2013";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Math.round(v * 1000) / 1000);
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  // ------------------------------------------------------------------ per-debate facts
  const keyOf = (d) => (d.run_id || "") + "/" + (d.question_id || "");
  const rounds = (d) => d.rounds || [];
  const agentTurns = (r) => (r.turns || []).filter((t) => !t.side && (!has(t.node) || t.node >= 0));
  function answersOf(r) {
    // agent id -> its (last) answering turn of the round
    const out = new Map();
    for (const t of agentTurns(r)) out.set(t.agent_id, t);
    return out;
  }
  // some agent's answer differs from its previous one (RoundView.changed): debate show --changed
  const changedMind = (d) => rounds(d).some((r) => Array.isArray(r.changed) && r.changed.length > 0);
  // each agent's latest answer (a silent agent keeps its own; none is an answer of its own) not
  // all equal: debate show --disagree's rule (app.transcript.disagrees)
  function disagreement(d) {
    const latest = new Map((d.agents || []).map((a) => [a.agent_id, null]));
    for (const r of rounds(d)) for (const [a, t] of answersOf(r)) latest.set(a, has(t.answer) ? t.answer : null);
    return new Set(latest.values()).size > 1;
  }
  const FILTERS = [
    ["all", "all", () => true],
    ["wrong", "wrong", (d) => d.correct === false],
    ["right", "right", (d) => d.correct === true],
    ["changed", "changed its mind", changedMind],
    ["disagree", "disagreement", disagreement],
  ];
  function searchText(d) {
    return [d.question_id, d.run_id, d.protocol, d.task, d.final_answer, d.gold, d.question]
      .filter(has)
      .join("\n")
      .toLowerCase();
  }

  // answer -> colour, per debate (the same in every round): answers graded right take the gold
  // colour, the others the palette by how often they were given
  function colours(d) {
    const count = new Map();
    const right = new Set();
    for (const r of rounds(d)) {
      for (const t of agentTurns(r)) {
        if (!has(t.answer)) continue;
        count.set(t.answer, (count.get(t.answer) || 0) + 1);
        if (t.correct === true) right.add(t.answer);
      }
    }
    if (has(d.gold) && count.has(d.gold)) right.add(d.gold);
    const order = [...count.keys()].filter((a) => !right.has(a));
    order.sort((a, b) => count.get(b) - count.get(a) || (a < b ? -1 : 1));
    const map = new Map();
    for (const a of right) map.set(a, GOLD);
    order.forEach((a, i) => map.set(a, i < PALETTE.length ? PALETTE[i] : OTHER));
    return { map, right, others: order.length > PALETTE.length };
  }
  const colourOf = (cmap, answer) => (has(answer) ? cmap.map.get(answer) || OTHER : NO_ANSWER);

  // ------------------------------------------------------------------ the list
  const state = { filter: "all", query: "", selected: null, shown: [] };
  const side = document.getElementById("side");
  const detail = document.getElementById("detail");
  const filters = el("div", { id: "filters" });
  const search = el("input", { id: "search", type: "search", placeholder: "search id, question, answer, run\u2026" });
  const listInfo = el("div", { id: "listinfo" });
  const list = el("ul", { id: "qlist" });
  side.append(filters, search, listInfo, list);
  const filterCounts = Object.fromEntries(FILTERS.map(([k, , f]) => [k, DATA.filter(f).length]));
  for (const [k, label] of FILTERS) {
    const b = el("button", { "data-filter": k, type: "button" }, `${label} (${filterCounts[k]})`);
    b.addEventListener("click", () => {
      state.filter = k;
      renderList();
    });
    filters.appendChild(b);
  }
  search.addEventListener("input", () => {
    state.query = search.value.trim().toLowerCase();
    renderList();
  });
  const texts = DATA.map(searchText);
  const right = DATA.filter((d) => d.correct === true).length;
  document.getElementById("counts").textContent =
    `${DATA.length} debate${DATA.length === 1 ? "" : "s"}, ${right} right` +
    ` \u00b7 ${new Set(DATA.map((d) => d.run_id)).size} run(s)`;

  function renderList() {
    for (const b of filters.children) b.classList.toggle("on", b.dataset.filter === state.filter);
    const f = FILTERS.find(([k]) => k === state.filter)[2];
    state.shown = [];
    list.replaceChildren();
    DATA.forEach((d, i) => {
      if (!f(d) || (state.query && !texts[i].includes(state.query))) return;
      state.shown.push(i);
      const li = el(
        "li",
        { class: "qitem" + (state.selected === i ? " sel" : ""), "data-index": i },
        el("div", {}, markEl(d.correct), " ", el("span", { class: "qid" }, fmt(d.question_id)),
          has(d.final_answer) ? el("span", { class: "muted" }, " \u2192 " + short(String(d.final_answer), 24)) : null),
        el("div", { class: "sub" }, `${fmt(d.protocol)} \u00b7 ${fmt(d.run_id)}` + (d.simulated ? " \u00b7 SIMULATED" : ""))
      );
      li.addEventListener("click", () => select(i, true));
      list.appendChild(li);
    });
    listInfo.textContent = `showing ${state.shown.length} of ${DATA.length}`;
  }

  function select(i, setHash) {
    state.selected = i;
    for (const li of list.children) li.classList.toggle("sel", Number(li.dataset.index) === i);
    renderDetail(DATA[i]);
    if (setHash) history.replaceState(null, "", "#" + encodeURIComponent(keyOf(DATA[i])));
  }
  document.addEventListener("keydown", (e) => {
    if (e.target === search || !state.shown.length) return;
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    const at = state.shown.indexOf(state.selected);
    const next = Math.min(state.shown.length - 1, Math.max(0, at + (e.key === "ArrowDown" ? 1 : -1)));
    select(state.shown[next], true);
    const li = list.querySelector(`li[data-index="${state.shown[next]}"]`);
    if (li) li.scrollIntoView({ block: "nearest" });
    e.preventDefault();
  });

  // ------------------------------------------------------------------ the selected debate
  function renderDetail(d) {
    detail.replaceChildren();
    detail.scrollTop = 0;
    detail.appendChild(
      el("h2", {}, markEl(d.correct), " ", fmt(d.question_id), el("span", { class: "muted" }, ` \u00b7 ${fmt(d.protocol)} \u00b7 run ${fmt(d.run_id)}`))
    );
    if (d.simulated) detail.appendChild(el("div", { class: "simulated", id: "simulated" }, "SIMULATED model: test data, not a model's answers"));
    for (const line of d.lacks || []) detail.appendChild(el("div", { class: "lacks" }, "\u26a0 " + fmt(line)));
    detail.appendChild(el("div", { class: "qtext", id: "question-text" }, has(d.question) ? String(d.question) : "(question text not stored)"));
    const facts = el("div", { class: "facts" });
    const fact = (label, ...v) => facts.appendChild(el("span", {}, el("b", {}, label + ": "), ...v));
    fact("gold", fmt(d.gold));
    fact("final answer", fmt(d.final_answer), " ", markEl(d.correct));
    if (d.tie) fact("tie", "yes (the vote was tied)");
    if (d.errored) fact("errored", el("span", { class: "bad" }, "a call failed"));
    fact("agents", fmt(d.n_agents));
    fact("rounds", roundsText(d));
    if (has(d.task)) fact("task", fmt(d.task));
    if (has(d.image)) fact("image", fmt(d.image) + " (not loaded)");
    if (d.tokens && typeof d.tokens === "object") {
      fact("tokens", Object.entries(d.tokens).map(([k, v]) => `${k} ${fmt(v)}`).join(", "));
    } else if (has(d.tokens)) fact("tokens", fmt(d.tokens));
    detail.appendChild(facts);
    const opts = d.options && typeof d.options === "object" ? Object.entries(d.options) : [];
    if (opts.length) {
      const table = el("table", { class: "opts" });
      for (const [k, v] of opts) table.appendChild(el("tr", {}, el("td", {}, k), el("td", {}, fmt(v))));
      detail.appendChild(el("details", { class: "options" }, el("summary", {}, `run options (${opts.length})`), table));
    }
    const cmap = colours(d);
    const layout = layoutOf(d);
    rounds(d).forEach((r, i) => renderRound(d, r, i, cmap, layout));
    if (!rounds(d).length) detail.appendChild(el("div", { class: "empty" }, "no calls stored for this debate"));
  }

  // "2 of 3 · stopped early ..." for a debate its protocol ended before --rounds, else the count
  function roundsText(d) {
    const ran = rounds(d).length;
    if (!d.stopped_early) return String(ran);
    const asked = d.options && Number.isInteger(d.options.rounds) && d.options.rounds > ran ? ` of ${d.options.rounds}` : "";
    return `${ran}${asked} \u00b7 stopped early: the protocol's agreement test passed (--early-stop)`;
  }

  function renderRound(d, r, i, cmap, layout) {
    const n = has(r.round) ? r.round : i;
    detail.appendChild(el("h3", {}, n === 0 ? "round 0 \u2014 first answers" : `round ${n}`));
    const box = el("div", { class: "graphbox" });
    box.append(drawGraph(d, r, n, cmap, layout), legend(d, r, cmap, layout));
    detail.appendChild(box);
    const vote = el("div", { class: "vote" }, el("b", {}, "vote: "), fmt(r.vote), " ", markEl(r.vote_correct));
    if (has(r.consensus)) vote.append(` \u00b7 consensus ${fmt(r.consensus)}`);
    if (d.tie && i === rounds(d).length - 1) vote.append(" \u00b7 the final vote was a tie (broken by the run's --tie-break)");
    if (d.stopped_early && i === rounds(d).length - 1) vote.append(el("span", { class: "stopped" }, " \u00b7 the debate stopped here (early stop)"));
    const ch = Array.isArray(r.changed) ? r.changed : [];
    if (ch.length) vote.append(` \u00b7 changed their answer: agent${ch.length > 1 ? "s" : ""} ${ch.join(", ")}`);
    detail.appendChild(vote);
    const turns = [...(r.turns || [])].sort((a, b) => (a.agent_id ?? 0) - (b.agent_id ?? 0));
    for (const t of turns) detail.appendChild(turnBlock(t, false));
    for (const s of r.summaries || []) detail.appendChild(turnBlock(s, true));
  }

  function turnBlock(t, summary) {
    const head = el("summary", {});
    if (summary) head.append(el("b", {}, `summary of group ${fmt(t.group ?? (has(t.node) ? -1 - t.node : null))}`));
    else head.append(el("b", {}, `agent ${fmt(t.agent_id)}`));
    if (has(t.model)) head.append(` \u00b7 ${t.model}`);
    if (t.side || (has(t.kind) && t.kind !== "answer" && !summary)) head.append(el("span", { class: "muted" }, ` \u00b7 ${fmt(t.kind)}${t.side ? " (side call)" : ""}`));
    if (!summary && !t.side) {
      if (has(t.answer)) head.append(" \u00b7 answer ", el("b", {}, short(String(t.answer), 40)), " ", markEl(t.correct) || "");
      else head.append(" \u00b7 ", el("b", {}, "no answer"));
    }
    const tok = [];
    if (has(t.prompt_tokens) || has(t.completion_tokens)) {
      // the prompt tokens the engine's prefix cache served, when the call reports them
      const cached = has(t.cached_prompt_tokens) ? ` (${fmt(t.cached_prompt_tokens)} prompt tokens cached)` : "";
      tok.push(`${fmt(t.prompt_tokens)} + ${fmt(t.completion_tokens)} tokens${cached}`);
    }
    if (has(t.latency_s)) tok.push(t.latency_s < 0.001 ? "<0.001 s" : `${fmt(t.latency_s)} s`);
    const sh = shares(t);
    if (Array.isArray(t.read) && t.read.length) tok.push(`read ${withShares(t.read, sh && sh.read)}`);
    if (Array.isArray(t.pruned) && t.pruned.length) tok.push(`pruned ${withShares(t.pruned, sh && sh.pruned)}`);
    const peers = sh ? sh.read.length + sh.pruned.length : 0;
    const why = sh ? `(%): each peer's share of the weight this agent gave its ${peers} peers; CortexDebate keeps the edges at or above the mean share (${pct(1 / peers)}) and prunes the rest` : null;
    if (tok.length) head.append(el("span", { class: "muted", title: why }, " \u00b7 " + tok.join(" \u00b7 ")));
    if (has(t.error)) head.append(" ", el("span", { class: "bad" }, "error"));
    const block = el("details", { class: "turn" + (has(t.error) ? " errored" : ""), "data-agent": t.agent_id }, head);
    if (has(t.error)) block.appendChild(el("div", { class: "err" }, "error: " + String(t.error)));
    if (has(t.finish_reason) && t.finish_reason !== "stop") block.appendChild(el("div", { class: "note", style: "padding: 0 8px" }, "finish reason: " + String(t.finish_reason)));
    block.appendChild(el("pre", { class: "reply" }, has(t.text) ? String(t.text) : "(no reply text)"));
    if (has(t.prompt)) {
      // the chat messages sent: [{role, content}], one block each
      const p = Array.isArray(t.prompt)
        ? t.prompt.map((m) => (m && typeof m === "object" ? `[${fmt(m.role)}]\n${fmt(m.content)}` : fmt(m))).join("\n\n")
        : fmt(t.prompt);
      block.appendChild(el("details", { class: "prompt" }, el("summary", {}, "prompt"), el("pre", {}, p)));
    }
    return block;
  }
  const nodeName = (v) => (v >= 0 ? String(v) : `summary ${-1 - v}`);

  // ------------------------------------------------------------------ graph layout (deterministic)
  // Agents on a circle; with groups, each group on its own small circle (its summary node in
  // the middle), the groups around a larger circle. One layout per debate, the same every round.
  function layoutOf(d) {
    let agents = (d.agents || []).map((a) => ({ id: a.agent_id, model: a.model, group: a.group, strong: !!a.strong }));
    const seen = new Set(agents.map((a) => a.id));
    const summaries = new Set();
    for (const r of rounds(d)) {
      for (const t of [...(r.turns || []), ...(r.summaries || [])]) {
        if (has(t.node) && t.node < 0) summaries.add(t.node);
        else if (has(t.agent_id) && t.agent_id >= 0 && !seen.has(t.agent_id)) {
          seen.add(t.agent_id);
          agents.push({ id: t.agent_id, model: t.model, group: t.group, strong: false });
        }
        for (const s of [...(t.read || []), ...(t.pruned || [])]) if (s < 0) summaries.add(s);
      }
    }
    agents.sort((a, b) => a.id - b.id);
    const n = agents.length;
    const pos = new Map();
    const boxes = [];
    if (n > FULL) {
      const cols = Math.ceil(Math.sqrt(n * 1.6));
      agents.forEach((a, i) => pos.set(a.id, { x: 12 + (i % cols) * 14, y: 12 + Math.floor(i / cols) * 14, r: 5 }));
      [...summaries].sort((a, b) => b - a).forEach((s, i) => pos.set(s, { x: 12 + (i % cols) * 14, y: 12 + (Math.ceil(n / cols) + 0.5 + Math.floor(i / cols)) * 14, r: 5 }));
      return finish({ agents, pos, boxes, summaries, compact: true });
    }
    const nr = n <= 16 ? 17 : n <= 32 ? 13 : 10;
    const groups = [...new Set(agents.map((a) => a.group).filter(has))].sort((a, b) => a - b);
    for (const s of summaries) if (!groups.includes(-1 - s) && groups.length) groups.push(-1 - s);
    const ring = (k, rad) => Math.max(k > 1 ? (k * (2 * nr + 14)) / (2 * Math.PI) : 0, rad);
    if (groups.length >= 2) {
      const members = groups.map((g) => agents.filter((a) => a.group === g));
      // members on the upper 240 degrees of a ring (no two opposite: no line between two passes
      // the centre) and the summary below it, off every line between two members
      const radii = members.map((m) => (m.length <= 1 ? 0 : ring(Math.ceil(1.5 * m.length), 3.8 * nr)));
      const big = Math.max(...radii) + 2 * nr + 70; // room for the answer labels beside the nodes
      const R = groups.length === 2 ? big : big / Math.sin(Math.PI / groups.length);
      groups.forEach((g, j) => {
        // two groups side by side, more around a circle from the top
        const ang = (groups.length === 2 ? Math.PI : -Math.PI / 2) + (2 * Math.PI * j) / groups.length;
        const cx = R * Math.cos(ang), cy = R * Math.sin(ang);
        const m = members[j];
        m.forEach((a, k) => {
          const t = -Math.PI / 2 + (m.length <= 1 ? 0 : (k / (m.length - 1) - 0.5) * ((4 * Math.PI) / 3));
          pos.set(a.id, outward({ x: cx + radii[j] * Math.cos(t), y: cy + radii[j] * Math.sin(t), r: nr }, t));
        });
        const sy = cy + 0.5 * radii[j] + 3.2 * nr;
        pos.set(-1 - g, { x: cx, y: sy, r: nr * 0.9 });
        const top = Math.min(...m.map((a) => pos.get(a.id).y), sy) - nr - 26;
        const wide = radii[j] + nr + 46; // the labels left and right of the nodes stay inside the box
        boxes.push({ group: g, x: cx - wide, y: top, w: 2 * wide, h: sy + nr + 12 - top });
      });
    } else {
      const R = n <= 1 ? 0 : ring(n, n <= 4 ? 5 * nr : 7 * nr);
      agents.forEach((a, k) => {
        const t = -Math.PI / 2 + (2 * Math.PI * k) / Math.max(1, n);
        pos.set(a.id, outward({ x: R * Math.cos(t), y: R * Math.sin(t), r: nr }, t));
      });
      [...summaries].sort((a, b) => b - a).forEach((s, i) => pos.set(s, { x: (i - (summaries.size - 1) / 2) * 3 * nr, y: 0, r: nr * 0.9 }));
      if (groups.length === 1) {
        const half = R + nr + 10;
        boxes.push({ group: groups[0], x: -half, y: -half - 12, w: 2 * half, h: 2 * half + 12 });
      }
    }
    return finish({ agents, pos, boxes, summaries, compact: false });
  }
  // a node's answer label: outside its circle, away from the centre (where the arrows run)
  function outward(p, angle) {
    const c = Math.cos(angle), s = Math.sin(angle);
    p.lx = p.x + c * (p.r + 6);
    p.ly = p.y + s * (p.r + 6) + 4 + (s > 0.3 ? 6 : s < -0.3 ? -2 : 0);
    p.anchor = c > 0.3 ? "start" : c < -0.3 ? "end" : "middle";
    return p;
  }
  function finish(lay) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    const grow = (x, y) => { x0 = Math.min(x0, x); y0 = Math.min(y0, y); x1 = Math.max(x1, x); y1 = Math.max(y1, y); };
    for (const p of lay.pos.values()) {
      const side = p.anchor && p.anchor !== "middle" ? 52 : 14; // room for a label beside the node
      grow(p.x - p.r - (p.anchor === "end" ? side : 4), p.y - p.r - 14);
      grow(p.x + p.r + (p.anchor === "start" ? side : 14), p.y + p.r + 16);
    }
    for (const b of lay.boxes) { grow(b.x, b.y); grow(b.x + b.w, b.y + b.h); }
    if (x0 === Infinity) { x0 = 0; y0 = 0; x1 = 100; y1 = 40; }
    const pad = 8;
    lay.view = { x: x0 - pad, y: y0 - pad, w: x1 - x0 + 2 * pad, h: y1 - y0 + 2 * pad };
    return lay;
  }

  // a weighted reader's edge weights (kept and pruned) as shares of their sum, which is 1; null
  // when the turn has no weights or they cannot be shares (a missing, negative or zero total)
  function shares(t) {
    const kept = Array.isArray(t.weights) ? t.weights : [];
    const cut = Array.isArray(t.pruned_weights) ? t.pruned_weights : [];
    const all = [...kept, ...cut];
    if (!all.length || kept.length !== (t.read || []).length || all.some((w) => typeof w !== "number" || !(w >= 0))) return null;
    const total = all.reduce((a, b) => a + b, 0);
    return total > 0 ? { read: kept.map((w) => w / total), pruned: cut.map((w) => w / total) } : null;
  }
  const pct = (x) => (x > 0 && x < 0.005 ? "<1%" : `${Math.round(100 * x)}%`);
  // "2 (55%), 1 (23%)": the nodes by share, largest first; without shares the nodes in order
  function withShares(nodes, sh) {
    if (!sh || sh.length !== nodes.length) return nodes.map(nodeName).join(", ");
    return nodes.map((n, k) => [n, sh[k]]).sort((a, b) => b[1] - a[1]).map(([n, x]) => `${nodeName(n)} (${pct(x)})`).join(", ");
  }

  // ------------------------------------------------------------------ graph drawing
  let uid = 0;
  function edgesOf(r) {
    const edges = new Map(); // "src>dst" -> {src, dst, weight, pruned}
    for (const t of [...(r.turns || []), ...(r.summaries || [])]) {
      const dst = has(t.node) ? t.node : t.agent_id;
      if (!has(dst)) continue;
      const sh = shares(t);
      (t.read || []).forEach((src, k) => {
        if (src === dst) return; // an agent reading its own earlier answer: no arrow
        const w = sh ? sh.read[k] : 1;
        const key = src + ">" + dst;
        const old = edges.get(key);
        edges.set(key, { src, dst, weight: old ? Math.max(old.weight, w) : w, pruned: false });
      });
      (t.pruned || []).forEach((src, k) => {
        const key = src + ">" + dst;
        const w = sh ? sh.pruned[k] : null;
        if (src !== dst && !edges.has(key)) edges.set(key, { src, dst, weight: 0, before: w, pruned: true });
      });
    }
    return [...edges.values()];
  }

  // one arrow src -> dst, bent to its right so that dst -> src, bent the other way, stays apart
  function edgePath(e, a, b, id, width) {
    const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
    const ux = dx / len, uy = dy / len, bend = Math.min(18, 0.12 * len);
    const cx = (a.x + b.x) / 2 - uy * bend, cy = (a.y + b.y) / 2 + ux * bend;
    const end = (p, q, r) => { const l = Math.hypot(q.x - p.x, q.y - p.y) || 1; return [p.x + ((q.x - p.x) * r) / l, p.y + ((q.y - p.y) * r) / l]; };
    const [x1, y1] = end(a, { x: cx, y: cy }, a.r), [x2, y2] = end(b, { x: cx, y: cy }, b.r + 1);
    const path = sv("path", {
      class: e.pruned ? "edge pruned" : "edge", d: `M${x1},${y1} Q${cx},${cy} ${x2},${y2}`, fill: "none",
      stroke: e.pruned ? "#aaa" : "#444", "stroke-opacity": e.pruned ? 0.9 : 0.6, "stroke-width": e.pruned ? 1 : width,
      "stroke-dasharray": e.pruned ? "4 3" : null, "marker-end": `url(#${id}${e.pruned ? "p" : "a"})`,
      "data-src": e.src, "data-dst": e.dst,
    });
    const share = (x) => (has(x) && x !== 1 ? ` (${pct(x)} of what ${nodeName(e.dst)} weighed)` : "");
    tip(path, `${nodeName(e.dst)} read ${nodeName(e.src)}` + (e.pruned ? ": pruned" + share(e.before) : share(e.weight)));
    return path;
  }

  // pointing at an agent shows only the edges into and out of it (who it read, who read it)
  function focusOn(svg, agent) {
    svg.classList.toggle("focus", agent !== null);
    for (const e of svg.querySelectorAll(".edge")) {
      const on = agent !== null && (e.dataset.src === String(agent) || e.dataset.dst === String(agent));
      e.classList.toggle("hi", on);
    }
  }

  // the summary nodes a round has: its summary calls and the summaries its turns read
  function summariesIn(r) {
    const present = new Set();
    for (const t of [...(r.turns || []), ...(r.summaries || [])]) {
      if (has(t.node) && t.node < 0) present.add(t.node);
      for (const x of [...(t.read || []), ...(t.pruned || [])]) if (x < 0) present.add(x);
    }
    return present;
  }

  function drawGraph(d, r, n, cmap, lay) {
    const v = lay.view;
    const scale = lay.compact ? 1.6 : Math.min(1.4, 640 / Math.max(v.w, v.h)); // small graphs drawn larger
    const svg = sv("svg", {
      class: "round-graph", "data-round": n, viewBox: `${v.x} ${v.y} ${v.w} ${v.h}`,
      width: Math.round(v.w * scale), height: Math.round(v.h * scale), role: "img",
      "aria-label": `round ${n}: who read whom`,
    });
    const id = "g" + uid++;
    const defs = sv("defs");
    for (const [name, colour] of [["a", "#444"], ["p", "#aaa"]]) {
      const m = sv("marker", { id: `${id}${name}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse", markerUnits: "userSpaceOnUse" });
      m.appendChild(sv("path", { d: "M0,0 L10,5 L0,10 z", fill: colour }));
      defs.appendChild(m);
    }
    svg.appendChild(defs);
    for (const b of lay.boxes) {
      const g = sv("g", { class: "group-box" });
      g.appendChild(sv("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 14, fill: "#f3f6f9", stroke: "#8aa0b4", "stroke-width": 1.2 }));
      g.appendChild(sv("text", { x: b.x + 8, y: b.y + 13, "font-size": 11, fill: "#506070" }, `group ${b.group}`));
      svg.appendChild(g);
    }
    const turns = answersOf(r);
    const edges = lay.compact ? [] : edgesOf(r);
    const weights = edges.filter((e) => !e.pruned).map((e) => e.weight);
    const maxW = Math.max(1e-9, ...weights);
    const weighted = weights.some((w) => w !== 1);
    const eg = sv("g", { class: "edges" });
    for (const e of edges) {
      const a = lay.pos.get(e.src), b = lay.pos.get(e.dst);
      if (a && b) eg.appendChild(edgePath(e, a, b, id, weighted ? 0.8 + 3.2 * (e.weight / maxW) : 1.2));
    }
    svg.appendChild(eg);
    const present = summariesIn(r);
    for (const s of lay.summaries) {
      const p = lay.pos.get(s);
      if (!p || !present.has(s)) continue; // a summary exists from the round it is made
      const g = sv("g", { class: "summary-node", "data-node": s });
      g.appendChild(sv("rect", { x: p.x - p.r, y: p.y - p.r, width: 2 * p.r, height: 2 * p.r, rx: 3, fill: "#e8e8e8", stroke: "#20303f", "stroke-width": 1.5 }));
      if (!lay.compact) g.appendChild(sv("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", "font-size": 11, fill: "#20303f" }, `S${-1 - s}`));
      tip(g, `summary of group ${-1 - s}`);
      svg.appendChild(g);
    }
    const labels = !lay.compact && lay.agents.length <= 24;
    for (const a of lay.agents) {
      const p = lay.pos.get(a.id);
      const t = turns.get(a.id);
      const fill = t ? colourOf(cmap, t.answer) : NO_ANSWER;
      const g = sv("g", { class: "agent-node" + (a.strong ? " strong" : ""), "data-agent": a.id, opacity: t ? 1 : 0.4 });
      g.appendChild(sv("circle", {
        cx: p.x, cy: p.y, r: p.r, fill,
        stroke: t && has(t.error) ? "#c0392b" : "#222", "stroke-width": a.strong ? (lay.compact ? 2 : 4) : lay.compact ? 0.6 : 1.3,
        "stroke-dasharray": t && has(t.error) ? "3 2" : null,
      }));
      if (!lay.compact) {
        g.appendChild(sv("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", "font-size": p.r > 12 ? 12 : 9, fill: DARK.has(fill) ? "#fff" : "#111", "font-weight": 600 }, a.id));
        if (a.strong) g.appendChild(sv("text", { x: p.x + p.r * 0.75, y: p.y - p.r * 0.75, "font-size": 13, fill: "#111" }, "\u2605"));
        if (labels && t && has(t.answer)) {
          g.appendChild(sv("text", { x: p.lx ?? p.x, y: p.ly ?? p.y + p.r + 12, "text-anchor": p.anchor || "middle", "font-size": 10, fill: "#333" }, short(String(t.answer), 10) + (t.correct === true ? " \u2713" : t.correct === false ? " \u2717" : "")));
        }
      }
      const model = has(a.model) ? ` (${a.model}${a.strong ? ", strongest" : ""})` : "";
      tip(g, t ? `agent ${a.id}${model}: ${has(t.answer) ? t.answer : "no answer"} ${mark(t.correct)}${has(t.error) ? " \u2014 error" : ""}` : `agent ${a.id}${model}: no turn this round`);
      g.addEventListener("mouseenter", () => focusOn(svg, a.id));
      g.addEventListener("mouseleave", () => focusOn(svg, null));
      svg.appendChild(g);
    }
    return svg;
  }

  function legend(d, r, cmap, lay) {
    const box = el("div", { class: "legend" }, el("b", {}, "answer \u2192 colour"));
    const used = new Set([...answersOf(r).values()].map((t) => (has(t.answer) ? t.answer : null)));
    const rows = [...cmap.map.entries()].filter(([a, c]) => c !== OTHER && used.has(a));
    for (const [a, c] of rows) {
      box.appendChild(el("div", {}, el("span", { class: "swatch", style: `background:${c}` }), short(String(a), 28), cmap.right.has(a) ? el("span", { class: "ok" }, " \u2713 gold") : null));
    }
    if ([...used].some((a) => a !== null && cmap.map.get(a) === OTHER)) box.appendChild(el("div", {}, el("span", { class: "swatch", style: `background:${OTHER}` }), "other answers"));
    if (used.has(null)) box.appendChild(el("div", {}, el("span", { class: "swatch", style: `background:${NO_ANSWER}` }), "no answer"));
    if (has(d.gold) && !rows.some(([a]) => cmap.right.has(a))) box.appendChild(el("div", { class: "muted" }, `gold ${short(String(d.gold), 28)}: nobody`));
    if ([...answersOf(r).values()].some((t) => has(t.error))) box.appendChild(el("div", {}, el("span", { class: "swatch", style: "border:2px dashed #c0392b" }), "the call failed"));
    if (lay.agents.some((a) => a.strong)) box.appendChild(el("div", {}, "\u2605 thick ring: strongest model"));
    if (summariesIn(r).size) box.appendChild(el("div", {}, el("span", { class: "swatch", style: "background:#e8e8e8;border-radius:2px" }), "S0, S1, \u2026: a group's summary"));
    if (lay.boxes.length) box.appendChild(el("div", { class: "muted" }, "boxes: groups"));
    if (!lay.compact) {
      box.appendChild(el("div", { class: "muted" }, "arrow src \u2192 dst: dst read src"));
      const edges = edgesOf(r);
      box.appendChild(el("div", { class: "muted" }, "point at an agent: only its edges"));
      if (edges.some((e) => !e.pruned && e.weight !== 1)) box.appendChild(el("div", { class: "muted" }, "line width: share of the reader's weight"));
      const cut = edges.filter((e) => e.pruned).length;
      if (cut) box.appendChild(prunedToggle(cut));
    } else {
      box.appendChild(el("div", { class: "note" }, `${lay.agents.length} agents (more than ${FULL}): compact view, no edges; every reply is listed below`));
    }
    return box;
  }

  // a checkbox that shows the round's pruned edges (hidden at first: they hide who read whom)
  function prunedToggle(n) {
    const box = el("input", { type: "checkbox", class: "show-pruned" });
    box.addEventListener("change", () => {
      const svg = box.closest(".graphbox").querySelector("svg.round-graph");
      svg.classList.toggle("show-pruned", box.checked);
    });
    return el("label", { class: "muted" }, box, `show the ${n} pruned edge${n > 1 ? "s" : ""} (dashed grey)`);
  }

  // ------------------------------------------------------------------ start
  // the debate the address names (#run/question, as select() sets it); null when the hash is
  // not valid percent-encoding (a hand-edited or cut link): the page then opens on the first
  function hashKey() {
    try {
      return decodeURIComponent(location.hash.slice(1));
    } catch (e) {
      if (e instanceof URIError) return null;
      throw e;
    }
  }
  renderList();
  if (!DATA.length) {
    detail.appendChild(el("div", { class: "empty" }, "no debates stored in this folder"));
  } else {
    const want = hashKey();
    const at = want === null ? -1 : DATA.findIndex((d) => keyOf(d) === want);
    select(at >= 0 ? at : 0, false);
  }
})();
