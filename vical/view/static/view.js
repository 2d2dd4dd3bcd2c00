// vical view: the task × runs table and the episode player. Data arrive as scripts
// (data/*.js call vicalData), so the same page works from the server and from file://.
"use strict";

const $ = (id) => document.getElementById(id);
const waiting = {};
const loaded = {};
const KEEP = 6; // episode details kept in memory
let order = [];

window.vicalData = (name, value) => {
  loaded[name] = value;
  order.push(name);
  while (order.length > KEEP + 1) {
    const old = order.shift();
    if (old !== "index") delete loaded[old];
  }
  if (waiting[name]) { waiting[name].forEach((f) => f(value)); delete waiting[name]; }
};

function load(name) {
  if (loaded[name]) return Promise.resolve(loaded[name]);
  return new Promise((resolve, reject) => {
    const first = !waiting[name];
    (waiting[name] = waiting[name] || []).push(resolve);
    if (!first) return;
    const s = document.createElement("script");
    s.src = "data/" + name + ".js";
    s.onload = () => s.remove();
    s.onerror = () => { s.remove(); delete waiting[name]; reject(new Error("cannot load " + s.src)); };
    document.head.append(s);
  });
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function fail(e) {
  $("error").textContent = e.message || String(e);
  $("error").hidden = false;
}

const fmt = (x, d = 1) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));

// ---------------------------------------------------------------- the table
let index = null;
let sortKey = "task";
let sortDir = 1;
const ticked = new Set();

function episodesOf(row, key) { return (row.runs[key] || []).filter((e) => !e.infrastructure_failure); }

function runStats(row, key) {
  const eps = episodesOf(row, key);
  if (!eps.length) return { score: null, passed: null, n: 0 };
  const score = eps.reduce((a, e) => a + e.score, 0) / eps.length;
  return { score, passed: eps.filter((e) => e.passed).length, n: eps.length };
}

// one outcome vocabulary (index.outcomes, from vical/outcomes.py): "passed" or the
// episode's failure mode; the game's own word (Victory, Time Out) shows in the player
function label(e) { return e.passed ? "passed" : e.failure_mode || "not passed"; }

function buildFilters() {
  const envs = [...new Set(index.tasks.map((t) => t.env))].sort();
  const types = [...new Set(index.tasks.flatMap((t) => t.types))].sort();
  const seen = new Set();
  for (const t of index.tasks) for (const eps of Object.values(t.runs)) for (const e of eps) seen.add(label(e));
  const add = (sel, values) => { for (const v of values) sel.append(el("option", { value: v, textContent: v })); };
  add($("f-env"), envs);
  add($("f-type"), types);
  add($("f-outcome"), index.outcomes.filter((o) => seen.has(o)));
  for (const id of ["f-env", "f-type", "f-outcome", "f-text"]) {
    $(id).addEventListener("input", () => { drawTable(); remember(); });
  }
}

// filters live in the address (#env=taxi&type=Maze&outcome=passed&q=state), so a link
// from a report or the leaderboard can open the table already filtered
const FILTERS = { env: "f-env", type: "f-type", outcome: "f-outcome", q: "f-text" };

function remember() {
  const h = new URLSearchParams();
  for (const [k, id] of Object.entries(FILTERS)) if ($(id).value) h.set(k, $(id).value);
  history.replaceState(null, "", "#" + h.toString());
}

function restore(hash) {
  for (const [k, id] of Object.entries(FILTERS)) if (hash.has(k)) $(id).value = hash.get(k);
}

function matches(row) {
  const env = $("f-env").value, type = $("f-type").value, outcome = $("f-outcome").value;
  const text = $("f-text").value.trim().toLowerCase();
  if (env && row.env !== env) return false;
  if (type && !row.types.includes(type)) return false;
  if (text && !row.task.toLowerCase().includes(text)) return false;
  if (outcome) {
    const eps = Object.values(row.runs).flat();
    const hit = eps.some((e) => label(e) === outcome);
    if (!hit) return false;
  }
  return true;
}

function sortValue(row) {
  if (sortKey === "task" || sortKey === "game") return row[sortKey];
  if (sortKey === "types") return row.types.join("/");
  const [key, what] = sortKey.split(":");
  const s = runStats(row, key);
  return what === "S" ? s.score : s.passed === null ? null : s.passed / s.n;
}

function drawHead() {
  const cols = [["task", "Task"], ["game", "Game"], ["types", "Type"]];
  for (const r of index.runs) cols.push([r.key + ":S", r.name + " S"], [r.key + ":P", "P"], [null, "episodes"]);
  const tr = el("tr");
  for (const [key, text] of cols) {
    const th = el("th", { textContent: text, title: key ? "sort" : "" });
    if (key) {
      th.dataset.key = key;
      if (key === sortKey) th.className = sortDir > 0 ? "sorted-asc" : "sorted-desc";
      th.addEventListener("click", () => {
        sortDir = key === sortKey ? -sortDir : key.includes(":") ? -1 : 1;
        sortKey = key;
        drawHead();
        drawTable();
      });
    }
    tr.append(th);
  }
  $("tasks-head").replaceChildren(tr);
}

function drawTable() {
  const rows = index.tasks.filter(matches);
  rows.sort((a, b) => {
    const x = sortValue(a), y = sortValue(b);
    if (x === y) return a.task < b.task ? -1 : 1;
    if (x === null) return 1;
    if (y === null) return -1;
    return (x < y ? -1 : 1) * sortDir;
  });
  const body = $("tasks-body");
  body.replaceChildren();
  for (const row of rows) {
    const tr = el("tr", { "data-task": row.task, "data-env": row.env },
      el("td", {}, row.task), el("td", {}, row.game), el("td", {}, row.types.join("/")));
    for (const r of index.runs) {
      const s = runStats(row, r.key);
      tr.append(el("td", { class: "num", "data-run": r.key }, fmt(s.score)),
        el("td", { class: "num" }, s.n ? `${s.passed}/${s.n}` : "–"));
      const cell = el("td");
      for (const e of row.runs[r.key] || []) {
        const id = `${r.key}/${e.episode}`;
        const box = el("input", { type: "checkbox", title: "compare", checked: ticked.has(id) });
        box.addEventListener("change", () => {
          if (box.checked) ticked.add(id); else ticked.delete(id);
          $("compare").disabled = ticked.size !== 2;
        });
        const a = el("a", { href: "#ep=" + id, textContent: `#${e.run_index} ${label(e)}`,
          title: `score ${fmt(e.score)}, ${e.steps}/${e.max_steps} steps` });
        a.dataset.episode = id;
        cell.append(el("span", { class: "ep " + (e.passed ? "pass" : "fail") }, box, a));
      }
      tr.append(cell);
    }
    body.append(tr);
  }
  $("count").textContent = `${rows.length} of ${index.tasks.length} tasks`;
}

// ---------------------------------------------------------------- the player
let panes = [];
let position = 0;
let timer = null;

function frameCount() { return Math.max(...panes.map((p) => p.detail.frame_hashes.length)); }

function curve(svg, detail) {
  const n = detail.frame_hashes.length - 1;
  const pts = [];
  detail.turns.forEach((t, k) => { if (t.after && t.after.score !== null) pts.push([k + 1, t.after.score]); });
  const x = (k) => (n ? (k / n) * 296 + 2 : 2);
  const y = (s) => 78 - (s / 100) * 74;
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", pts.map(([k, s]) => `${x(k)},${y(s)}`).join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#2457c5");
  line.setAttribute("stroke-width", "2");
  line.setAttribute("vector-effect", "non-scaling-stroke");
  const mark = document.createElementNS(ns, "line");
  mark.setAttribute("y1", "0");
  mark.setAttribute("y2", "80");
  mark.setAttribute("stroke", "#b42318");
  mark.setAttribute("vector-effect", "non-scaling-stroke");
  svg.append(line, mark);
  return (i) => { mark.setAttribute("x1", x(i)); mark.setAttribute("x2", x(i)); };
}

function makePane(detail) {
  const node = $("pane-tpl").content.firstElementChild.cloneNode(true);
  node.dataset.episode = `${detail.run}/${detail.episode}`;
  node.querySelector(".ep-title").textContent = `${detail.task} · run ${detail.run_index} · ${detail.run_label}`;
  const game = detail.outcome ? ` (the game: ${detail.outcome})` : "";
  node.querySelector(".ep-summary").textContent =
    `score ${fmt(detail.score)} · ${label(detail)}${game} · ` +
    `${detail.steps}/${detail.max_steps} steps · frames ${detail.frames_saved ? "saved" : "replayed"}`;
  const [env, variant] = detail.task.split("/");
  const demos = node.querySelector(".demos");
  for (const d of detail.demos) {
    demos.append(el("figure", {},
      el("figcaption", {}, `Demonstration ${d.index + 1}: ${d.id} (${d.actions} actions, ${d.label})`),
      el("video", { src: `demos/${env}__${variant}/${d.index}.mp4`, controls: true, preload: "metadata", muted: true })));
  }
  if (!detail.demos.length) demos.append(el("p", { class: "muted" }, "This task has no demonstrations."));
  const pane = { detail, node, mark: curve(node.querySelector(".curve"), detail) };
  return pane;
}

function attemptNode(a, i, n) {
  if (a.kind === "api_error") {
    return el("div", { class: "attempt error" },
      el("strong", {}, `API error${a.status ? " " + a.status : ""}${a.reason ? " (" + a.reason + ")" : ""}`),
      el("pre", {}, a.message || ""));
  }
  const retry = i > 0;
  const head = n > 1 ? (retry ? `Reply ${i + 1} (retry)` : "Reply 1") : "Reply";
  const note = a.parse_error ? ` — not usable: ${a.parse_error}` : "";
  const box = el("div", { class: "attempt" + (a.parse_error ? " retry" : "") },
    el("strong", {}, head + note), el("pre", { class: "model-text" }, a.text || ""));
  if (a.reasoning) box.append(el("details", {}, el("summary", {}, "reasoning"), el("pre", {}, a.reasoning)));
  return box;
}

function drawPane(p, i) {
  const d = p.detail;
  const k = Math.min(i, d.frame_hashes.length - 1);
  const img = p.node.querySelector(".frame");
  const src = `frames/${d.run}/${d.episode}/${k}.png`;
  if (img.getAttribute("src") !== src) showFrame(p, img, src, k);
  img.dataset.step = k;
  img.alt = `frame ${k} of ${d.episode}`;
  p.mark(k);
  const turn = d.turns[k] || { attempts: [] };
  const dec = turn.decision;
  p.node.querySelector(".turn-step").textContent = k === 0 ? "Start frame" : `Frame ${k}`;
  const action = dec ? (dec.action || `none (${dec.failure})`) : "—";
  p.node.querySelector(".turn-action").textContent = action;
  const meta = [];
  if (dec && dec.format_retries) meta.push(`${dec.format_retries} format retr${dec.format_retries > 1 ? "ies" : "y"}`);
  if (dec && dec.transport_retries) meta.push(`${dec.transport_retries} transport retr${dec.transport_retries > 1 ? "ies" : "y"}`);
  if (dec && dec.wall_seconds !== undefined) meta.push(`decided in ${fmt(dec.wall_seconds, 2)} s` + (dec.input ? ` (${dec.input})` : ""));
  if (turn.after) meta.push(`score after: ${fmt(turn.after.score)}` + (turn.after.outcome ? `, ${turn.after.outcome}` : ""));
  if (!dec && k === d.frame_hashes.length - 1) meta.push(`episode over: ${d.outcome || d.failure_mode || "stopped"}, score ${fmt(d.score)}`);
  p.node.querySelector(".turn-meta").textContent = meta.join(" · ");
  const box = p.node.querySelector(".attempts");
  box.replaceChildren(...turn.attempts.map((a, j) => attemptNode(a, j, turn.attempts.length)));
  if (!turn.attempts.length && dec) box.append(el("p", { class: "muted" }, `${d.agent} agent: no model text.`));
}

// A frame that is not there yet (a replay still running) shows a loading line over
// the previous frame, or over the empty pane, until it arrives or fails.
function showFrame(p, img, src, k) {
  const status = p.node.querySelector(".frame-status");
  const d = p.detail;
  status.className = "frame-status loading";
  status.textContent = d.frames_saved ? `loading frame ${k}…`
    : `replaying the episode's actions: frame ${k} of ${d.frame_hashes.length - 1}…`;
  status.hidden = false;
  img.classList.add("pending");
  img.onload = () => {
    if (img.getAttribute("src") !== src) return;
    status.hidden = true;
    img.classList.remove("pending");
  };
  img.onerror = () => {
    if (img.getAttribute("src") !== src) return;
    status.className = "frame-status failed";
    status.textContent = `frame ${k} cannot be shown`;
    // the server says why in a JSON body (an exported folder has no server to ask)
    fetch(src).then((r) => r.json()).then((j) => {
      if (img.getAttribute("src") === src && j.error) status.textContent = `frame ${k} cannot be shown: ${j.error}`;
    }).catch(() => {});
  };
  img.src = src;
}

function seek(i) {
  position = Math.max(0, Math.min(i, frameCount() - 1));
  $("slider").value = position;
  $("position").textContent = `frame ${position} of ${frameCount() - 1}`;
  panes.forEach((p) => drawPane(p, position));
}

function stop() { if (timer) { clearInterval(timer); timer = null; $("playpause").textContent = "play"; } }

async function openEpisodes(ids, at) {
  stop();
  const details = await Promise.all(ids.map((id) => load("ep/" + id)));
  panes = details.map(makePane);
  // the same task twice (two runs side by side): its demonstrations are shown once
  panes.forEach((p, k) => {
    if (panes.slice(0, k).some((q) => q.detail.task === p.detail.task)) p.node.querySelector(".demos-box").open = false;
  });
  $("panes").replaceChildren(...panes.map((p) => p.node));
  $("slider").max = frameCount() - 1;
  $("table-view").hidden = true;
  $("episode-view").hidden = false;
  seek(at || 0);
}

// ---------------------------------------------------------------- routing
async function route() {
  $("error").hidden = true;
  const hash = new URLSearchParams(location.hash.slice(1));
  const ep = hash.get("ep");
  try {
    if (!index) {
      index = await load("index");
      $("runs-line").textContent = index.runs.map((r) => `${r.key}: ${r.label}, ${r.episodes} episodes`).join(" · ");
      buildFilters();
      drawHead();
      drawTable();
    }
    if (ep) await openEpisodes(ep.split(","), Number(hash.get("i") || 0));
    else {
      stop();
      restore(hash);
      drawTable();
      $("episode-view").hidden = true;
      $("table-view").hidden = false;
    }
  } catch (e) { fail(e); }
}

$("first").addEventListener("click", () => seek(0));
$("prev").addEventListener("click", () => seek(position - 1));
$("next").addEventListener("click", () => seek(position + 1));
$("last").addEventListener("click", () => seek(frameCount() - 1));
$("slider").addEventListener("input", () => seek(Number($("slider").value)));
$("playpause").addEventListener("click", () => {
  if (timer) return stop();
  $("playpause").textContent = "pause";
  timer = setInterval(() => { if (position >= frameCount() - 1) stop(); else seek(position + 1); }, 700);
});
$("compare").addEventListener("click", () => { location.hash = "ep=" + [...ticked].join(","); });
document.addEventListener("keydown", (e) => {
  if ($("episode-view").hidden || e.target.tagName === "INPUT" || e.altKey || e.ctrlKey || e.metaKey) return;
  const moves = { ArrowLeft: position - 1, ArrowRight: position + 1, Home: 0, End: frameCount() - 1 };
  if (e.key in moves) { e.preventDefault(); seek(moves[e.key]); }
  else if (e.key === " ") { e.preventDefault(); $("playpause").click(); }
});
window.addEventListener("hashchange", route);
route();
