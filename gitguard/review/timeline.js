"use strict";
// The timeline page's behaviour. The data is the JSON script element above (#timeline-data):
// gitguard.timeline/1, the same document `gitguard timeline --json` prints. Nothing is
// fetched: rows are built from it a page at a time, and a diff enters the DOM only when
// its button opens it.
(function () {
  const PAGE = 200;
  const data = JSON.parse(document.getElementById("timeline-data").textContent);
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s == null ? "" : s).replace(/[&<>"']/g,
    (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const time = (s) => (s ? s.replace("T", " ").replace("Z", "") : "");
  const ms = (v) => (v == null ? "" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(1)} s`);
  const byCall = new Map(data.calls.map((c) => [c.callId, c]));

  // every event on one time axis ----------------------------------------------------------
  const events = [];
  data.calls.forEach((c, i) => events.push({kind: "call", at: c.startedAt || c.plannedAt, order: i, call: c,
    text: [c.callId, c.tool, c.summary, c.agent, ...c.files.map((f) => f.path), ...c.declaredWrites].join("\n").toLowerCase(),
    paths: c.files.map((f) => f.path).concat(c.declaredWrites)}));
  data.checkpoints.forEach((k, i) => events.push({kind: "checkpoint", at: k.createdAt, order: i, ckpt: k,
    text: [k.checkpointId, k.kind, k.stepId || "", k.sessionId].join("\n").toLowerCase(), paths: []}));
  data.gitEvents.forEach((g, i) => {
    const paths = g.record === "commit" ? g.agentPatches.map((p) => p.path).concat(g.userPaths) : g.paths;
    events.push({kind: "git", at: g.at, order: i, git: g, paths,
      text: [g.text, ...paths].join("\n").toLowerCase()});
  });
  data.userEdits.forEach((u, i) => events.push({kind: "user", at: u.at, order: i, edit: u,
    paths: u.paths.map((p) => p.path), text: u.paths.map((p) => p.path).join("\n").toLowerCase()}));
  const rank = {checkpoint: 0, user: 1, git: 2, call: 3};
  events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : rank[a.kind] - rank[b.kind] || a.order - b.order));

  // header, sessions, working tree, conflicts ---------------------------------------------
  $("where").innerHTML = `<span>workspace <code>${esc(data.workspace)}</code></span>` +
    (data.git ? `<span>branch <code>${esc(data.branch || "(detached)")}</code></span><span>HEAD <code>${esc((data.head || "(unborn)").slice(0, 12))}</code></span>` : "<span>not a git repository</span>") +
    `<span>written ${esc(time(data.generatedAt))} UTC</span>` +
    (data.narrowing.since ? `<span>since checkpoint <code>${esc(data.narrowing.since)}</code></span>` : "") +
    (data.narrowing.session ? `<span>session <code>${esc(data.narrowing.session)}</code></span>` : "");
  const counts = {};
  data.calls.forEach((c) => { counts[c.status] = (counts[c.status] || 0) + 1; });
  $("totals").textContent = `${data.calls.length} calls (` +
    (Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(", ") || "none") + `), ${data.checkpoints.length} checkpoints, ` +
    `${data.gitEvents.length} git events, ${data.userEdits.length} user edits, ` +
    `${data.workingTree.length} paths changed now, ${data.conflicts.length} pending conflicts.`;

  $("sessions-list").innerHTML = data.sessions.map((s) => `
    <article class="card" aria-labelledby="s-${esc(s.sessionId)}">
      <h3 id="s-${esc(s.sessionId)}" class="mono">${esc(s.sessionId)}</h3>
      <div class="facts"><span>agent: ${esc(s.agent || "unknown")}</span>
        <span>${esc(time(s.startedAt))} – ${s.endedAt ? esc(time(s.endedAt)) : "open"}</span>
        ${s.parentId ? `<span>forked from <code>${esc(s.parentId)}</code></span>` : ""}
        <span>${s.calls} calls${Object.keys(s.statuses).length ? ": " + Object.entries(s.statuses).map(([k, v]) => `${v} ${esc(k)}`).join(", ") : ""}</span></div>
      <div>worktree <code>${esc(data.workspace)}</code></div>
      <div>agents: ${s.agents.map((a) => `<button type="button" data-agent="${esc(a.name)}" title="show only this agent's calls">${esc(a.name)}${a.agentId ? ` <span class="muted mono">${esc(a.agentId.slice(0, 14))}</span>` : ""} · ${a.calls}</button>`).join(" ")}</div>
      ${s.turns.length ? `<div>turns: ${s.turns.map((t) => `<span title="from checkpoint ${esc(t.checkpointId)}">#${t.turn} ${esc(time(t.startedAt).slice(11, 19))} (${t.calls} calls)</span>`).join(", ")}</div>` : ""}
    </article>`).join("") || "<p>No session is recorded.</p>";
  const others = data.worktrees.filter((w) => !w.current);
  $("worktrees").innerHTML = others.length ? `Other worktrees of this repository keep their own timeline: ` +
    others.map((w) => w.store ? `<code>${esc(w.command)}</code>` : `<code>${esc(w.path)}</code> (nothing recorded)`).join(", ") : "";

  $("now-body").innerHTML = data.workingTree.map((d, i) => `<tr><td class="mono">${esc(d.path)}</td><td>${esc(d.change)}</td>
    <td>${d.byUser ? esc(d.ownerWords) : (byCall.has(d.owner) ? `<a href="#call-${esc(d.owner)}" data-goto="${esc(d.owner)}">${esc(d.ownerWords)}</a>` : esc(d.ownerWords))}</td>
    <td>${d.blame ? `<button type="button" data-blame="${i}" aria-expanded="false" aria-controls="blame-${i}">Who wrote each line (${d.blame.length})</button>` : `<span class="muted">${esc(d.blameNote || "")}</span>`}</td></tr>
    <tr hidden id="blame-row-${i}"><td colspan="4"><div id="blame-${i}"></div></td></tr>`).join("");
  $("now-empty").hidden = data.workingTree.length > 0;
  $("now-table").hidden = data.workingTree.length === 0;

  $("conflicts-list").innerHTML = data.conflicts.map((c, i) => `
    <details class="card"><summary><code>${esc(c.path)}</code> — ${esc(c.conflict.reason || "changed by someone other than the agent")}</summary>
      <h3>Three-way view</h3><pre class="diff" tabindex="0" aria-label="three-way view of ${esc(c.path)}">${colour(c.view || "")}</pre>
      <div class="actions">${c.resolve.map((cmd, j) => `<span><code class="mono" id="conflict-${i}-${j}">${esc(cmd)}</code> <button type="button" data-copy="conflict-${i}-${j}" aria-label="copy: ${esc(cmd)}">Copy</button></span>`).join(" ")}</div>
    </details>`).join("") || "<p>No conflict is pending.</p>";

  // filters ---------------------------------------------------------------------------------
  const uniq = (xs) => [...new Set(xs.filter((x) => x != null && x !== ""))].sort();
  const fill = (id, values) => { $(id).innerHTML = `<option value="">all</option>` + values.map((v) => `<option>${esc(v)}</option>`).join(""); };
  fill("f-agent", uniq(data.calls.map((c) => c.agent)));
  fill("f-tool", uniq(data.calls.map((c) => c.tool)));
  fill("f-status", uniq(data.calls.flatMap((c) => [c.status, ...c.marks])));
  fill("f-session", uniq(data.calls.map((c) => c.sessionId).concat(data.sessions.map((s) => s.sessionId))));
  const state = {page: 0, shown: events, range: null};

  function matches(ev, f) {
    if (f.range && (ev.at < f.range[0] || ev.at > f.range[1])) return false;
    if (f.text && !ev.text.includes(f.text)) return false;
    if (ev.kind === "call") {
      const c = ev.call;
      return f.kinds.call && (!f.agent || c.agent === f.agent) && (!f.tool || c.tool === f.tool) &&
        (!f.status || c.status === f.status || c.marks.includes(f.status)) && (!f.session || c.sessionId === f.session);
    }
    if (f.agent || f.tool || f.status) return false;  // those filters pick calls
    if (ev.kind === "checkpoint") return f.kinds.checkpoint && (!f.session || ev.ckpt.sessionId === f.session);
    if (ev.kind === "user") return f.kinds.user && (!f.session || !ev.edit.sessionId || ev.edit.sessionId === f.session);
    return f.kinds.git && !f.session;
  }
  function filters() {
    return {text: $("f-text").value.trim().toLowerCase(), agent: $("f-agent").value, tool: $("f-tool").value,
      status: $("f-status").value, session: $("f-session").value, range: state.range,
      kinds: {call: $("k-call").checked, checkpoint: $("k-checkpoint").checked, git: $("k-git").checked, user: $("k-user").checked}};
  }
  function apply(keepPage) {
    const f = filters();
    state.shown = events.filter((ev) => matches(ev, f));
    if (!keepPage) state.page = 0;
    $("range-note").hidden = !state.range;
    if (state.range) $("range-text").textContent = `${time(state.range[0])} – ${time(state.range[1])}`;
    render();
  }

  // rows --------------------------------------------------------------------------------------
  function row(ev) {
    if (ev.kind === "call") return callRow(ev.call);
    if (ev.kind === "checkpoint") {
      const k = ev.ckpt;
      return `<li class="ev ev-checkpoint" id="ckpt-${esc(k.checkpointId)}"><div class="row1">
        <span class="time">${esc(time(k.createdAt))}</span><span>checkpoint <code>${esc(k.checkpointId)}</code></span>
        <span class="muted">${esc(k.kind)}${k.stepId ? " · " + esc(k.stepId) : ""}</span>
        <span class="undo">${k.undo ? undoBlock(`undo-ckpt-${k.checkpointId}`, k.undo, "undo it") : `<span class="muted">the first of its session</span>`}</span></div></li>`;
    }
    if (ev.kind === "git") {
      const g = ev.git;
      return `<li class="ev ev-git"><div class="row1"><span class="time">${esc(time(g.at))}</span>
        <span>git ${esc(g.record === "commit" ? "commit" : g.kind)}</span><span class="summary mono">${esc(g.text)}</span></div></li>`;
    }
    const u = ev.edit;
    const link = (id) => `<a href="#call-${esc(id)}" data-goto="${esc(id)}">${esc(id)}</a>`;
    const what = u.afterCallId ? `changed between ${link(u.afterCallId)} and ${link(u.beforeCallId)}, outside every call: the user's (or a git move's)`
      : "changed by the user (the watcher saw it)";
    return `<li class="ev ev-user"><div class="row1"><span class="time">${esc(time(u.at))}</span><span>${what}</span></div>
      <ul class="files">${u.paths.map((p) => `<li><code>${esc(p.path)}</code> ${esc(p.change)}${p.confidence ? ` (${esc(p.confidence)})` : ""}</li>`).join("")}</ul></li>`;
  }
  function undoBlock(id, command, label) {
    return `<span class="muted">${esc(label)}:</span> <code id="${esc(id)}">${esc(command)}</code>
      <button type="button" data-copy="${esc(id)}" aria-label="copy: ${esc(label)}">Copy</button>`;
  }
  function callRow(c) {
    const marks = c.marks.map((m) => `<span class="badge mk-${esc(m)}">${esc(m)}</span>`).join(" ");
    const files = c.files.length ? `<ul class="files">${c.files.map((f) => `<li><code>${esc(f.path)}</code> ${esc(f.change)}</li>`).join("")}</ul>` : "";
    const extra = [c.errorSummary && `error: ${c.errorSummary}`, c.note && `note: ${c.note}`,
      c.probedAt && `probed ${time(c.probedAt)}: ${c.probeResult}`, c.rewoundAt && `rewound ${time(c.rewoundAt)}${c.rewoundBy ? " by " + c.rewoundBy : ""}`,
      c.replayOf && `replay of ${c.replayOf}`].filter(Boolean);
    return `<li class="ev ev-call" id="call-${esc(c.callId)}" data-call-id="${esc(c.callId)}"><div class="row1">
      <span class="time">${esc(time(c.startedAt || c.plannedAt))}</span>
      <span class="tool">${esc(c.tool)}</span><span class="summary mono">${esc(c.summary)}</span>
      <span class="badge st-${esc(c.status)}">${esc(c.status)}</span>${marks}</div>
      <div class="facts muted"><span class="mono">${esc(c.callId)}</span><span>${esc(c.agent)}${c.turn ? ` · turn ${c.turn}` : ""} · ${esc(c.sessionId)}</span>
        <span title="${esc(c.classificationReason)}">${esc(c.idempotency)} · replay ${esc(c.replayPolicy)} · risk ${esc(c.riskLevel)}</span>
        <span>${esc(ms(c.durationMs))}</span></div>
      ${extra.length ? `<div>${extra.map(esc).join("; ")}</div>` : ""}${files}
      <div class="actions">${c.diff != null ? `<button type="button" data-diff="${esc(c.callId)}" aria-expanded="false" aria-controls="diff-${esc(c.callId)}">Show diff (${c.diffBytes} bytes)</button>` : ""}
      ${c.undo ? `<span class="undo">${undoBlock(`undo-${c.callId}`, c.undo, "undo this call and every agent change after it")}</span>` : ""}</div>
      <div id="diff-${esc(c.callId)}"></div></li>`;
  }
  // `gitguard blame PATH`'s owner column: a call (~: its words did not name the file), you,
  // a commit, or no one surely
  function lineOwner(l) {
    if (l.owner === "call") {
      const c = byCall.get(l.callId), mark = l.confidence === "window" ? "~" : "";
      return `<a href="#call-${esc(l.callId)}" data-goto="${esc(l.callId)}">${esc(l.callId)}${mark}</a>${c ? " " + esc(c.tool) : ""}`;
    }
    if (l.owner === "ambiguous") return `${esc(l.callId || "")} or you?`;
    if (l.owner === "commit") return `<span class="mono">${esc((l.commit || "").slice(0, 8))}</span>`;
    return "you";
  }
  function blameTable(d, i) {
    return `<table class="blame" aria-label="who wrote each line of ${esc(d.path)}"><thead><tr><th scope="col">line</th><th scope="col">written by</th><th scope="col">text</th></tr></thead><tbody>` +
      d.blame.map((l) => `<tr data-owner="${esc(l.owner)}" data-call="${esc(l.callId || "")}"><td class="num">${l.line}</td><td>${lineOwner(l)}</td><td class="mono pre">${esc(l.text)}</td></tr>`).join("") +
      `</tbody></table><p class="muted">The same as <code>gitguard blame ${esc(d.path)}</code>.</p>`;
  }
  function colour(text) {
    return text.split("\n").map((l) => {
      const cls = l.startsWith("+++") || l.startsWith("---") ? "" : l.startsWith("+") ? "a" : l.startsWith("-") ? "d" : l.startsWith("@@") ? "h" : "";
      return cls ? `<span class="${cls}">${esc(l)}</span>` : esc(l);
    }).join("\n");   // textContent is the diff's text exactly
  }
  function diffText(c) {
    if (c.diffEncoding !== "base64") return c.diff;
    const raw = atob(c.diff), bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return new TextDecoder("utf-8").decode(bytes);
  }
  function render() {
    const pages = Math.max(1, Math.ceil(state.shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const from = state.page * PAGE, slice = state.shown.slice(from, from + PAGE);
    $("rows").innerHTML = slice.map(row).join("");
    const calls = state.shown.filter((e) => e.kind === "call").length;
    $("count").textContent = state.shown.length ? `Showing ${from + 1}–${from + slice.length} of ${state.shown.length} events (${calls} calls); page ${state.page + 1} of ${pages}.` : "No event matches the filters.";
    for (const id of ["prev", "prev2"]) $(id).disabled = state.page === 0;
    for (const id of ["next", "next2"]) $(id).disabled = state.page >= pages - 1;
  }
  function showCall(id) {
    let at = state.shown.findIndex((e) => e.kind === "call" && e.call.callId === id);
    if (at < 0) { $("filters").reset(); state.range = null; apply(); at = state.shown.findIndex((e) => e.kind === "call" && e.call.callId === id); }
    if (at < 0) return;
    state.page = Math.floor(at / PAGE); render();
    const el = document.getElementById(`call-${id}`);
    if (el) { el.scrollIntoView({block: "center"}); el.classList.add("flash"); el.setAttribute("tabindex", "-1"); el.focus(); }
  }

  // the time axis, drawn and as text ---------------------------------------------------------
  function axis() {
    const stamps = events.map((e) => e.at).filter(Boolean).sort();
    if (!stamps.length) { $("axis-section").hidden = true; return; }
    const t0 = Date.parse(stamps[0]), t1 = Math.max(Date.parse(stamps[stamps.length - 1]), t0 + 1000);
    const n = 48, width = 960, height = 90, span = (t1 - t0) / n;
    const buckets = Array.from({length: n}, (_, i) => ({from: t0 + i * span, to: t0 + (i + 1) * span, calls: 0, bad: 0, ckpts: 0, git: 0, user: 0}));
    for (const e of events) {
      const b = buckets[Math.min(n - 1, Math.floor((Date.parse(e.at) - t0) / span))];
      if (!b) continue;
      if (e.kind === "call") { b.calls++; if (e.call.status !== "succeeded") b.bad++; }
      else if (e.kind === "checkpoint") b.ckpts++; else if (e.kind === "git") b.git++; else b.user++;
    }
    const top = Math.max(1, ...buckets.map((b) => b.calls)), w = width / n;
    let svg = "";
    buckets.forEach((b, i) => {
      const h = (b.calls / top) * (height - 24), hb = (b.bad / top) * (height - 24);
      if (b.calls) svg += `<rect class="bar" x="${i * w + 1}" y="${height - 14 - h}" width="${w - 2}" height="${h}"></rect>`;
      if (b.bad) svg += `<rect class="bar-bad" x="${i * w + 1}" y="${height - 14 - hb}" width="${w - 2}" height="${hb}"></rect>`;
      if (b.ckpts) svg += `<line class="ckpt" x1="${i * w + w / 2}" x2="${i * w + w / 2}" y1="2" y2="8"></line>`;
      if (b.git || b.user) svg += `<line class="gitmark" x1="${i * w + 2}" x2="${i * w + w - 2}" y1="11" y2="11"></line>`;
    });
    const iso = (v) => new Date(v).toISOString();
    svg += `<text x="2" y="${height - 3}">${esc(time(iso(t0)).slice(0, 19))}</text><text x="${width - 2}" y="${height - 3}" text-anchor="end">${esc(time(iso(t1)).slice(0, 19))}</text>`;
    $("axis-svg").innerHTML = svg;
    $("axis-svg").setAttribute("viewBox", `0 0 ${width} ${height}`);
    $("axis-body").innerHTML = buckets.map((b, i) => (b.calls || b.ckpts || b.git || b.user) ? `<tr>
      <td>${esc(time(iso(b.from)).slice(0, 19))} – ${esc(time(iso(b.to)).slice(11, 19))}</td><td>${b.calls}</td><td>${b.bad}</td><td>${b.ckpts}</td><td>${b.git + b.user}</td>
      <td><button type="button" data-range="${i}">Show these</button></td></tr>` : "").join("");
    $("axis-body").dataset.t0 = String(t0); $("axis-body").dataset.span = String(span);
    $("axis-summary").textContent = `${data.calls.length} calls from ${time(iso(t0)).slice(0, 19)} to ${time(iso(t1)).slice(0, 19)} UTC; the table below lists each stretch.`;
  }

  // wiring ------------------------------------------------------------------------------------
  let pending = 0;
  $("filters").addEventListener("input", () => { clearTimeout(pending); pending = setTimeout(() => apply(), 120); });
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); apply(); });
  $("filters").addEventListener("reset", () => setTimeout(() => { state.range = null; apply(); }, 0));
  for (const [id, step] of [["prev", -1], ["next", 1], ["prev2", -1], ["next2", 1]]) {
    $(id).addEventListener("click", () => { state.page += step; render(); $("count").focus(); });
  }
  $("range-clear").addEventListener("click", () => { state.range = null; apply(); });
  document.addEventListener("click", async (e) => {
    const t = e.target.closest("button, a");
    if (!t) return;
    if (t.dataset.diff) {
      const c = byCall.get(t.dataset.diff), box = $(`diff-${c.callId}`), open = t.getAttribute("aria-expanded") === "true";
      if (open) { box.innerHTML = ""; t.setAttribute("aria-expanded", "false"); t.textContent = `Show diff (${c.diffBytes} bytes)`; return; }
      box.innerHTML = `<pre class="diff" tabindex="0" aria-label="diff of ${esc(c.callId)}">${colour(diffText(c))}</pre>` +
        (c.diffTruncated ? `<p>Cut at ${c.diff.length} bytes of ${c.diffBytes}: <code>gitguard diff ${esc(c.callId)}</code> prints it whole.</p>` : "");
      t.setAttribute("aria-expanded", "true"); t.textContent = "Hide diff";
    } else if (t.dataset.blame) {
      const i = Number(t.dataset.blame), d = data.workingTree[i], open = t.getAttribute("aria-expanded") === "true";
      $(`blame-row-${i}`).hidden = open;
      $(`blame-${i}`).innerHTML = open ? "" : blameTable(d, i);
      t.setAttribute("aria-expanded", open ? "false" : "true");
      t.textContent = open ? `Who wrote each line (${d.blame.length})` : "Hide lines";
    } else if (t.dataset.copy) {
      const text = document.getElementById(t.dataset.copy).textContent;
      let done = false;
      try { await navigator.clipboard.writeText(text); done = true; } catch (_) {
        const area = document.createElement("textarea"); area.value = text; document.body.appendChild(area); area.select();
        try { done = document.execCommand("copy"); } catch (_) { done = false; } area.remove();
      }
      $("status-line").textContent = done ? `Copied: ${text}` : `Select and copy: ${text}`;
    } else if (t.dataset.goto) {
      e.preventDefault(); showCall(t.dataset.goto);
    } else if (t.dataset.agent) {
      $("f-agent").value = t.dataset.agent; apply(); $("events").scrollIntoView();
    } else if (t.dataset.range) {
      const body = $("axis-body"), t0 = Number(body.dataset.t0), span = Number(body.dataset.span), i = Number(t.dataset.range);
      state.range = [new Date(t0 + i * span).toISOString(), new Date(t0 + (i + 1) * span).toISOString()];
      apply(); $("events").scrollIntoView();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && !/^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) { e.preventDefault(); $("f-text").focus(); }
  });
  axis();
  apply();
  if (location.hash.startsWith("#call-")) showCall(decodeURIComponent(location.hash.slice(6)));
  document.body.dataset.readyMs = String(Math.round(performance.now()));  // for the bench
  document.body.dataset.ready = "true";
})();
