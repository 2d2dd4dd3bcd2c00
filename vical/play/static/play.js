// vical play: draws the session state the server sends and sends one decision per key press.
"use strict";

let state = null;
let busy = false;
// Moves pressed while the next screen is still coming: applied in order, one per
// screen, as soon as each screen arrives (a person types ahead; no press is lost).
let queue = [];
let dropped = "";

const $ = (id) => document.getElementById(id);

function show(id) {
  for (const s of ["brief", "play", "over", "done"]) $(s).hidden = s !== id;
}

function keyLabel(key) {
  return { ArrowUp: "↑", ArrowDown: "↓", ArrowLeft: "←", ArrowRight: "→" }[key] || key;
}

async function call(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

async function send(path, body) {
  if (busy) return;
  busy = true;
  setDisabled(true);
  try {
    draw(await call("POST", path, body || {}));
    $("error").hidden = true;
  } catch (e) {
    $("error").textContent = e.message;
    $("error").hidden = false;
    if (queue.length) drop(`not applied after the error: ${names(queue)}`);
    draw(await call("GET", "/api/state"));
  } finally {
    busy = false;
    setDisabled(false);
  }
  next();
}

// a move: sent now if the screen is current, else queued behind the pending ones
function move(action, input) {
  if (busy || queue.length) {
    queue.push({ action, input: input + " (queued)" });
    drawQueue();
    return;
  }
  send("/api/act", { step: state.play.step, action, input });
}

// the next queued move, for the screen that just arrived
function next() {
  if (!queue.length || busy) return;
  if (state && state.phase === "play" && state.play) {
    const m = queue.shift();
    drawQueue();
    send("/api/act", { step: state.play.step, action: m.action, input: m.input });
  } else if (state && state.phase !== "play") {
    drop(`not applied, the episode had ended: ${names(queue)}`);
  }
}

function names(moves) { return moves.map((m) => m.action).join(", "); }

function drop(why) {
  dropped = `${queue.length} queued move(s) ${why}`;
  queue = [];
  drawQueue();
}

function drawQueue() {
  $("queue").textContent = queue.length ? `Queued, applied in order: ${names(queue)}` : "";
  $("queue").hidden = !queue.length;
  for (const id of ["dropped", "over-dropped"]) {
    $(id).textContent = dropped;
    $(id).hidden = !dropped;
  }
}

function drawApplied(list, id) {
  const box = $(id);
  box.replaceChildren();
  for (const a of list || []) box.append(Object.assign(document.createElement("li"), { textContent: a }));
  box.parentElement.hidden = !(list && list.length);
}

function setDisabled(v) {
  // moves stay pressable (they queue); starting and leaving an episode wait
  for (const id of ["start", "next"]) $(id).disabled = v;
}

function drawBrief(task) {
  $("brief-title").textContent = `${task.game} — task ${task.id}` + (task.run_index ? ` (run ${task.run_index + 1})` : "");
  $("brief-env").textContent = `environment ${task.environment}`;
  $("rules").textContent = task.rules;
  $("rules-again").textContent = task.rules;
  $("budget").textContent = task.max_steps;
  const list = $("action-list");
  list.replaceChildren();
  for (const a of task.actions) {
    const li = document.createElement("li");
    const k = document.createElement("kbd");
    k.textContent = keyLabel(a.key);
    li.append(k, " " + a.name);
    list.append(li);
  }
  for (const note of document.querySelectorAll(".record-note")) {
    const r = task.record;
    note.hidden = !r;
    if (r) note.textContent = recordText(r);
  }
  $("demos-block").hidden = task.demos.length === 0;
  $("demos-intro").textContent = task.demos_intro;
  const box = $("demos");
  if (box.dataset.task !== task.id) {
    box.dataset.task = task.id;
    box.replaceChildren();
    for (const d of task.demos) {
      const fig = document.createElement("figure");
      const cap = document.createElement("figcaption");
      cap.textContent = d.heading;
      const v = document.createElement("video");
      v.src = d.url;
      v.controls = true;
      v.preload = "auto";
      v.muted = true;
      fig.append(cap, v);
      box.append(fig);
    }
  }
}

// what a recording session says on every screen: what is recorded, by whom, and the consent
function recordText(r) {
  const who = `Recording as ${r.player} on ${r.date}, with the consent: “${r.consent}”. `;
  if (r.kind === "start") {
    return who + "You are recording this task's start sequence: you play from the task's seed "
      + `(its current start has ${r.start_actions} moves); press “Set the start here” `
      + "(Enter) when the game stands where the task should begin. Your moves become the "
      + "task's start.";
  }
  return who + `You are recording a demonstration: you play from the start of clip ${r.clip} `
    + `(now ${r.actions} actions, ending ${r.label}), not from the task's own opening. `
    + "Your moves become the clip's actions; its label is what the game gives at the end.";
}

function drawButtons(task) {
  const box = $("buttons");
  box.replaceChildren();
  for (const a of task.actions) {
    const b = document.createElement("button");
    b.dataset.action = a.name;
    const k = document.createElement("kbd");
    k.textContent = keyLabel(a.key);
    b.append(a.name + " ", k);
    b.addEventListener("click", () => move(a.name, "button"));
    box.append(b);
  }
}

function draw(s) {
  state = s;
  // position counts the session's items (a task played --runs times is several):
  // "episode 2 of 4", not "task 2 of 4"
  const one = s.unit.replace(/s$/, "");
  $("progress").textContent = s.total
    ? `${s.unit === "recordings" ? "player" : "participant"} ${s.participant} · `
      + `${s.finished} of ${s.total} ${s.unit} done`
      + (s.position ? ` · ${one} ${s.position} of ${s.total}` : "")
    : "";
  if (s.task) drawBrief(s.task);
  if (s.phase === "play" && s.play) {
    show("play");
    $("turn-text").textContent = s.play.text;
    $("frame").src = s.play.frame;
    $("frame").dataset.step = s.play.step;
    $("step").textContent = `Move ${s.play.step + 1} of ${s.task.max_steps}`;
    $("left").textContent = `(${s.play.moves_left} left)`;
    if ($("buttons").dataset.task !== s.task.id) {
      $("buttons").dataset.task = s.task.id;
      drawButtons(s.task);
    }
    drawApplied(s.play.applied, "applied");
    $("set-start").hidden = !(s.task.record && s.task.record.kind === "start");
  } else if (s.phase === "play") {
    // the episode is still building its first frame: ask again shortly
    setTimeout(() => call("GET", "/api/state").then(draw).catch(fail), 500);
  } else if (s.phase === "over") {
    show("over");
    const o = s.over || {};
    drawApplied(o.applied, "over-applied");
    const rec = s.task && s.task.record;
    $("over-title").textContent = rec ? "Recording over" : "Episode over";
    $("over-text").textContent = o.error
      ? `The ${rec ? "recording" : "episode"} was not kept: ${o.error}`
      : rec && rec.kind === "start"
        ? `The start sequence (${o.steps} move(s)) replayed to the screen you saw last and is saved.`
        : rec
          ? `The recording ended after ${o.steps} move(s), replayed to its label and is saved.`
          : `The episode ended after ${o.steps} move(s) and is saved.`;
    $("over-written").hidden = !o.written;
    $("written-path").textContent = o.written || "";
    $("next-commands").textContent = (o.next || []).join("\n");
  } else if (s.phase === "brief") {
    show("brief");
    $("buttons").dataset.task = "";
    dropped = "";
    drawQueue();
  } else if (s.phase === "done") {
    show("done");
  }
}

document.addEventListener("keydown", (e) => {
  if (!state || e.repeat || e.altKey || e.ctrlKey || e.metaKey) return;
  if (e.key === "Enter") {
    if (state.phase === "brief") { e.preventDefault(); send("/api/start"); }
    else if (state.phase === "over") { e.preventDefault(); send("/api/next"); }
    else if (state.phase === "play" && state.play && settingStart()) {
      e.preventDefault();
      move(state.task.record.set_start, "key:Enter");
    }
    return;
  }
  if (state.phase !== "play" || !state.play) return;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  const a = state.task.actions.find((x) => x.key === key);
  if (!a) return;
  e.preventDefault();
  move(a.name, "key:" + e.key);
});

function settingStart() {
  return !!(state && state.task && state.task.record && state.task.record.kind === "start");
}

$("start").addEventListener("click", () => send("/api/start"));
$("set-start").addEventListener("click", () => {
  if (settingStart()) move(state.task.record.set_start, "button");
});
$("next").addEventListener("click", () => send("/api/next"));
function fail(e) {
  $("error").textContent = e.message;
  $("error").hidden = false;
}

call("GET", "/api/state").then(draw).catch(fail);
