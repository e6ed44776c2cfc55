package report

// page is the report's HTML: the data goes where /*DATA*/ is, the output
// directory's name where TITLE is. Everything it needs is inline; its
// Content-Security-Policy lets it load nothing.
const page = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nodepack report: TITLE</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 20px 0 6px; }
.muted { color: #777; }
#numbers { display: flex; flex-wrap: wrap; gap: 8px 28px; }
#numbers div b { display: block; font-size: 17px; }
svg text { font-size: 10px; fill: #444; }
.legend span { display: inline-block; margin-right: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
.retry-link { stroke: #333; stroke-width: 1; stroke-dasharray: 2 2; fill: none; }
table { border-collapse: collapse; margin-top: 6px; }
th, td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: left; white-space: nowrap; max-width: 320px; overflow: hidden; text-overflow: ellipsis; }
th { cursor: pointer; background: #f4f4f4; position: sticky; top: 0; }
#filter { width: 320px; padding: 3px; }
#scroll { max-height: 600px; overflow: auto; }
</style>
</head>
<body>
<h1>nodepack report: TITLE</h1>
<div class="muted" id="made"></div>
<h2>Summary</h2>
<div id="numbers"></div>
<h2>Timeline</h2>
<div class="legend" id="legend"></div>
<div id="timeline"></div>
<h2>In use</h2>
<div id="util"></div>
<div id="gaps"></div>
<h2>Runs</h2>
<input id="filter" placeholder="filter: any text in a row"> <span class="muted" id="shown"></span>
<div id="scroll"><table id="runs"><thead></thead><tbody></tbody></table></div>
<script type="application/json" id="data">/*DATA*/</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
const colors = {succeeded: "#4caf50", running: "#2196f3", interrupted: "#9e9e9e", failed: "#e53935", exit: "#e53935",
  signal: "#ec407a", timeout: "#a1887f", "cuda-oom": "#ff9800", "host-oom": "#8e24aa", "gpu-error": "#b71c1c",
  "disk-full": "#6d4c41", "not-found": "#607d8b"};
const color = s => colors[s] || "#e53935";
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function secs(s) {
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
const text = v => v === null ? "" : (typeof v === "string" ? v : JSON.stringify(v));
const N = D.numbers;
document.getElementById("made").textContent = "made " + D.made + (D.host ? " from the ledgers of " + D.host : "");
const num = document.getElementById("numbers");
function stat(label, value) {
  const d = document.createElement("div");
  const b = document.createElement("b");
  b.textContent = value;
  d.appendChild(b);
  d.appendChild(document.createTextNode(label));
  num.appendChild(d);
}
stat("runs", N.runs);
stat("attempts", N.attempts);
stat("makespan", secs(N.makespan_s));
if (N.gpus) stat("GPUs busy (" + N.gpus + " GPUs)", N.gpus_busy_percent.toFixed(0) + "%");
if (N.cpus) stat("CPUs busy (" + N.cpus + " CPUs)", N.cpus_busy_percent.toFixed(0) + "%");
stat("lost to failed attempts", secs(N.lost_to_failures_s));
for (const s in N.runs_by_state) stat("runs " + s, N.runs_by_state[s]);
const lists = document.createElement("div");
lists.className = "muted";
num.after(lists);
function list(label, items) {
  if (!items || !items.length) return;
  const d = document.createElement("div");
  d.textContent = label + ": " + items.map(i => i[0] + " " + secs(i[1])).join(", ");
  lists.appendChild(d);
}
list("slowest runs", N.slowest);
list("fastest runs", N.fastest);

const legend = document.getElementById("legend");
for (const s of D.states) {
  const sp = document.createElement("span");
  const i = document.createElement("i");
  i.style.background = color(s);
  sp.appendChild(i);
  sp.appendChild(document.createTextNode(s));
  legend.appendChild(sp);
}

// The timeline: one lane per GPU and per CPU lane, one bar per attempt
// (a multi-GPU attempt also on its other GPUs' lanes). Past 20000
// attempts, bars are pooled per lane and pixel, coloured by the worst
// outcome in the pixel.
const W = 1100, left = 150, rowH = 9, width = W - left;
const x = t => left + t / D.span * width;
const laneY = [];
let y0 = 0;
D.laneRows.forEach(n => { laneY.push(y0); y0 += n * rowH + 4; });
const tl = el("svg", {width: W, height: y0 + 24, id: "tl"}, document.getElementById("timeline"));
D.lanes.forEach((name, i) => {
  const h = D.laneRows[i] * rowH;
  if (i % 2) el("rect", {x: left, y: laneY[i] - 2, width: width, height: h + 4, fill: "#f4f4f4"}, tl);
  const t = el("text", {x: 2, y: laneY[i] + Math.min(h, 12) - 2}, tl);
  t.textContent = name.length > 26 ? name.slice(0, 25) + "…" : name;
});
for (let k = 0; k <= 4; k++) {
  const t = el("text", {x: left + k * width / 4 - (k ? 20 : 0), y: y0 + 14}, tl);
  t.textContent = secs(D.span / 1000 * k / 4);
}
const rowName = r => r >= 0 ? (D.rows[r][1] || D.rows[r][0]) : "";
function tip(a) {
  const r = a[5];
  let s = rowName(r) + (r >= 0 ? " (" + D.rows[r][0] + ")" : "") + "\nattempt " + a[6] + ": " + D.states[a[4]] +
    ", " + secs((a[3] - a[2]) / 1000);
  if (r >= 0) {
    const row = D.rows[r];
    D.cols.forEach((c, j) => {
      if (row[j] !== null && !["id", "origin", "logs", "start", "end"].includes(c)) s += "\n" + c + ": " + text(row[j]);
    });
  }
  return s;
}
const yOf = (lane, row) => laneY[lane] + row * rowH;
const rank = s => ["succeeded", "running", "interrupted"].indexOf(s) < 0 ? 3 : ["succeeded", "running", "interrupted"].indexOf(s);
if (D.att.length <= 20000) {
  const lastEnd = {};
  for (const a of D.att) {
    const w = Math.max(x(a[3]) - x(a[2]), 1);
    const places = [[a[0], a[1]]];
    for (let k = 7; k + 1 < a.length; k += 2) places.push([a[k], a[k + 1]]);
    places.forEach((p, k) => {
      const bar = el("rect", {x: x(a[2]), y: yOf(p[0], p[1]), width: w, height: rowH - 1, fill: color(D.states[a[4]]),
        "class": k === 0 ? "bar" : "bar-extra"}, tl);
      el("title", {}, bar).textContent = tip(a);
    });
    const prev = lastEnd[a[5] + "/" + (a[6] - 1)];
    if (a[5] >= 0 && prev) el("path", {d: "M" + x(prev[0]) + " " + (prev[1] + rowH / 2) + " L" + x(a[2]) + " " + (yOf(a[0], a[1]) + rowH / 2), "class": "retry-link"}, tl);
    lastEnd[a[5] + "/" + a[6]] = [a[3], yOf(a[0], a[1])];
  }
} else {
  // Pooled: each pixel of a lane row takes the colour of most of its
  // attempts; a red tick at its foot says some failed.
  const px = {};
  for (const a of D.att) {
    const from = Math.floor(x(a[2])), to = Math.max(Math.floor(x(a[3])), from);
    const places = [[a[0], a[1]]];
    for (let k = 7; k + 1 < a.length; k += 2) places.push([a[k], a[k + 1]]);
    for (const p of places) {
      for (let q = from; q <= to; q++) {
        const k = p[0] + ":" + p[1] + ":" + q;
        const c = px[k] || (px[k] = {});
        c[a[4]] = (c[a[4]] || 0) + 1;
      }
    }
  }
  for (const k in px) {
    const [lane, row, q] = k.split(":").map(Number);
    let best = -1, n = -1, failed = false;
    for (const code in px[k]) {
      if (px[k][code] > n) { best = code; n = px[k][code]; }
      if (rank(D.states[code]) === 3) failed = true;
    }
    el("rect", {x: q, y: yOf(lane, row), width: 1, height: rowH - 1, fill: color(D.states[best]), "class": "agg"}, tl);
    if (failed && rank(D.states[best]) !== 3) el("rect", {x: q, y: yOf(lane, row) + rowH - 4, width: 1, height: 3, fill: colors.failed}, tl);
  }
}

// GPUs and CPUs in use over time.
const uh = 90;
const us = el("svg", {width: W, height: uh + 20}, document.getElementById("util"));
el("rect", {x: left, y: 0, width: width, height: uh, fill: "#fafafa"}, us);
function curve(k, stroke, label, yText) {
  let d = "";
  D.util.forEach((p, i) => {
    const y = uh - p[k] * uh;
    d += (i ? " L" + x(p[0]) + " " + (uh - D.util[i - 1][k] * uh) + " L" : "M") + x(p[0]) + " " + y;
  });
  if (D.util.length) d += " L" + x(D.span) + " " + (uh - D.util[D.util.length - 1][k] * uh);
  el("path", {d: d, stroke: stroke, fill: "none", "stroke-width": 1.5}, us);
  el("text", {x: 2, y: yText, fill: stroke}, us).textContent = label;
}
if (N.gpus) curve(1, "#ff9800", "GPUs in use", 20);
if (N.cpus) curve(2, "#2196f3", "CPUs in use", 36);
for (const g of N.gaps || []) {
  const r = el("rect", {x: x(g.from), y: 0, width: Math.max(x(g.to) - x(g.from), 1), height: uh, fill: "#ffeb3b", opacity: 0.35, "class": "gap"}, us);
  el("title", {}, r).textContent = g.cause;
  const d = document.createElement("div");
  d.className = "muted";
  d.textContent = "under half in use for " + secs((g.to - g.from) / 1000) + " from " + secs(g.from / 1000) + ": " + g.cause;
  document.getElementById("gaps").appendChild(d);
}
el("text", {x: left - 30, y: 10}, us).textContent = "100%";
el("text", {x: left - 20, y: uh}, us).textContent = "0%";

// The runs, sortable and filterable; the first 1000 that match are shown.
const thead = document.querySelector("#runs thead"), tbody = document.querySelector("#runs tbody");
const hr = document.createElement("tr");
let order = D.rows.map((_, i) => i), sortCol = -1, sortDir = 1;
const display = (v, j) => D.times.includes(j) && v !== null ? new Date(D.t0 + v).toISOString() : text(v);
const cells = D.rows;
D.cols.forEach((c, j) => {
  const th = document.createElement("th");
  th.textContent = c;
  th.onclick = () => {
    sortDir = sortCol === j ? -sortDir : 1;
    sortCol = j;
    order.sort((a, b) => {
      const u = cells[a][j], v = cells[b][j];
      if (u === v) return 0;
      if (u === null) return 1;
      if (v === null) return -1;
      return (typeof u === "number" && typeof v === "number" ? u - v : text(u).localeCompare(text(v))) * sortDir;
    });
    draw();
  };
  hr.appendChild(th);
});
thead.appendChild(hr);
const filter = document.getElementById("filter");
filter.oninput = () => draw();
function draw() {
  const f = filter.value.toLowerCase();
  tbody.textContent = "";
  let shown = 0, matched = 0;
  for (const i of order) {
    const row = cells[i];
    if (f && !row.some((v, j) => display(v, j).toLowerCase().includes(f))) continue;
    matched++;
    if (shown >= 1000) continue;
    shown++;
    const tr = document.createElement("tr");
    tr.className = "run";
    row.forEach((v, j) => {
      const td = document.createElement("td");
      if (D.links.includes(j) && v) {
        for (const log of ["stdout", "stderr"]) {
          const a = document.createElement("a");
          a.href = (D.logBase ? D.logBase + "/" : "") + v + "/" + log + ".log";
          a.textContent = log;
          td.appendChild(a);
          td.appendChild(document.createTextNode(" "));
        }
      } else {
        td.textContent = display(v, j);
      }
      td.title = display(v, j);
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
  }
  document.getElementById("shown").textContent = matched > shown ? shown + " of " + matched + " runs shown: filter to see others" : matched + " runs";
}
draw();
</script>
</body>
</html>
`
