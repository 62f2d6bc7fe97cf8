/* KernBench viewer: the page. Loads the graph (and a run's links), draws one view as SVG with zoom
 * and pan, shows node/link details, colours links by utilisation and runs the route finder.
 * Text from data files is only ever set with textContent, never parsed as HTML.
 */
"use strict";
(function () {
  const KG = window.KernbenchGraph;
  const SVGNS = "http://www.w3.org/2000/svg";
  const LEVELS = ["system", "sip", "cube", "pe"];
  const $ = (id) => document.getElementById(id);
  const S = { model: null, data: null, links: null, run: null, level: "system", sip: 0, cube: 0, pe: 0,
    view: null, zoom: null, route: null, served: false, vmax: 1 };
  const KB = (window.KB = { state: S, errors: [] });

  /* ------------------------------------------------------------------ small DOM helpers */
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function fmt(v, digits) {
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return v.toFixed(digits === undefined ? 3 : digits).replace(/\.?0+$/, "");
  }
  function table(rows, head, id) {
    const t = el("table", id ? { id } : {});
    if (head) {
      const tr = el("tr");
      for (const h of head) tr.appendChild(el("th", {}, h));
      t.appendChild(tr);
    }
    for (const r of rows) {
      const tr = el("tr");
      for (const c of r) tr.appendChild(el("td", {}, c));
      t.appendChild(tr);
    }
    return t;
  }
  function showError(msg) {
    KB.errors.push(msg);
    const box = $("errors");
    box.appendChild(el("div", { class: "error" }, msg));
    box.hidden = false;
  }

  /* ------------------------------------------------------------------ loading */
  async function getJSON(url, init) {
    const r = await fetch(url, Object.assign({ cache: "no-store" }, init || {}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new Error(body && body.error ? body.error : url + ": HTTP " + r.status);
    return body;
  }

  async function load() {
    if (window.KERNBENCH_DATA) return Object.assign({ served: false }, window.KERNBENCH_DATA);
    const [graph, run, links] = await Promise.allSettled(
      ["data/graph.json", "data/run.json", "data/links.json"].map((u) => getJSON(u)));
    if (graph.status !== "fulfilled") throw graph.reason;
    for (const r of [run, links]) if (r.status !== "fulfilled") showError(r.reason.message);
    return { graph: graph.value, run: run.value || null, links: links.value || null, served: true,
      initial: graph.value.initial || {} };
  }

  /* ------------------------------------------------------------------ links and run */
  function setLinks(links) {
    S.links = null;
    S.vmax = 1;
    if (links) {
      const m = S.model, byEdge = new Map();
      let vmax = 0;
      for (const r of links.links) {
        const e = m.edge(r.src, r.dst);
        if (!e) { showError("links data names " + r.src + " \u2192 " + r.dst + ", which this topology lacks"); continue; }
        byEdge.set(e.i, r);
        if (r.utilisation > vmax) vmax = r.utilisation;
      }
      S.links = { data: links, byEdge };
      S.vmax = vmax > 0 ? vmax : 1;
    }
    renderRun();
  }

  function renderRun() {
    const box = $("run-info");
    clear(box);
    const links = S.links && S.links.data;
    const runs = S.run ? (Array.isArray(S.run) ? S.run : [S.run]) : [];
    if (!runs.length && !links) { box.appendChild(el("p", { class: "muted" }, "No run loaded: links are grey.")); }
    for (const r of runs) {
      const rows = [["bench", r.bench], ["device", r.device], ["ok", String(r.ok)], ["latency", fmt(r.latency_ns, 1) + " ns"]];
      for (const [k, v] of Object.entries(r.metrics || {})) rows.push([k, fmt(v, 1)]);
      box.appendChild(table(rows));
    }
    if (links) {
      const run = links.run || {};
      // links.links holds exactly the links that carried traffic (bytes > 0), as the links file does
      const total = links.edges || S.data.graph.topology.edges;
      box.appendChild(el("p", { id: "links-count" }, "Links of " + (run.bench || "a run") + " on " +
        (run.topology || "?") + ": window " + fmt(links.window_ns, 1) + " ns, " +
        links.links.length.toLocaleString("en-US") + " of " + total.toLocaleString("en-US") +
        " links carried traffic."));
      const busiest = links.links.slice().sort((a, b) => b.utilisation - a.utilisation || b.bytes - a.bytes)[0];
      if (busiest) box.appendChild(el("p", { id: "busiest" }, "Busiest: " + busiest.src + " \u2192 " + busiest.dst +
        " (" + (100 * busiest.utilisation).toFixed(1) + " %)"));
      const bar = $("legend-bar");
      clear(bar);
      for (const c of S.data.graph.colours.links) bar.appendChild(el("span", { class: "stop", "data-colour": c }));
      for (const s of bar.children) s.style.background = s.getAttribute("data-colour");
      $("legend-max").textContent = (100 * S.vmax).toFixed(1) + " %";
      $("legend").hidden = false;
    } else {
      $("legend").hidden = true;
    }
  }

  function utilOf(members) {
    let u = 0, bytes = 0, msgs = 0;
    if (!S.links) return { u, bytes, msgs };
    for (const i of members) {
      const r = S.links.byEdge.get(i);
      if (!r) continue;
      if (r.utilisation > u) u = r.utilisation;
      bytes += r.bytes;
      msgs += r.messages;
    }
    return { u, bytes, msgs };
  }

  /* ------------------------------------------------------------------ drawing */
  function viewTitle(v) {
    const t = S.data.graph.views[v.level];
    const rest = t.indexOf(": ") >= 0 ? t.slice(t.indexOf(": ") + 2) : t;
    if (v.level === "system") return t;
    if (v.level === "sip") return "SIP " + v.sip + ": " + rest;
    if (v.level === "cube") return "SIP " + v.sip + ", cube " + v.cube + ": " + rest;
    return "SIP " + v.sip + ", cube " + v.cube + ", PE " + v.pe + ": " + rest;
  }

  function draw() {
    const m = S.model, g = S.data.graph;
    const v = (S.view = m.view(S.level, S.sip, S.cube, S.pe));
    $("view-title").textContent = viewTitle(v);
    for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.level === S.level);
    const svg = $("canvas");
    const world = $("world");
    clear(world);
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const b of v.boxes) {
      x0 = Math.min(x0, b.x - b.w / 2); x1 = Math.max(x1, b.x + b.w / 2);
      y0 = Math.min(y0, b.y - b.h / 2); y1 = Math.max(y1, b.y + b.h / 2);
    }
    const ext = Math.max(x1 - x0, y1 - y0, 1);
    S.extent = { x0, y0, x1, y1, ext };
    const gEdges = sv("g", { id: "edges" }), gBoxes = sv("g", { id: "boxes" }), gRoute = sv("g", { id: "route" });
    const byId = new Map(v.boxes.map((b) => [b.id, b]));
    const off = ext * 0.004;
    const sorted = v.edges.map((e) => Object.assign({ t: utilOf(e.members) }, e)).sort((a, b) => a.t.u - b.t.u);
    for (const e of sorted) {
      const a = byId.get(e.src), b = byId.get(e.dst);
      const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
      const ox = (-dy / len) * off, oy = (dx / len) * off;
      const colour = KG.linkColour(e.t.u, S.vmax, g.colours.links, g.colours.idle);
      const width = e.t.u > 0 ? 2 + 4 * Math.min(e.t.u / S.vmax, 1) : 1.5;
      const attrs = { x1: a.x + ox, y1: a.y + oy, x2: b.x + ox, y2: b.y + oy, stroke: colour, "stroke-width": width,
        class: "link", "data-src": e.src, "data-dst": e.dst, "data-util": e.t.u, "vector-effect": "non-scaling-stroke" };
      const line = sv("line", attrs);
      const hit = sv("line", Object.assign({}, attrs, { stroke: "transparent", "stroke-width": 9, class: "hit" }));
      hit.addEventListener("click", (ev) => { ev.stopPropagation(); showLink(e); });
      line.addEventListener("click", (ev) => { ev.stopPropagation(); showLink(e); });
      gEdges.appendChild(line);
      gEdges.appendChild(hit);
    }
    const font = ext / 55;
    for (const b of v.boxes.slice().sort((p, q) => q.w * q.h - p.w * p.h)) {
      const fill = g.colours.boxes[b.kind] || "#dddddd";
      const r = sv("rect", { x: b.x - b.w / 2, y: b.y - b.h / 2, width: b.w, height: b.h, fill, class: "box",
        "data-id": b.id, "data-kind": b.kind, "vector-effect": "non-scaling-stroke" });
      const title = sv("title", {});
      title.textContent = b.id;
      r.appendChild(title);
      r.addEventListener("click", (ev) => { ev.stopPropagation(); showBox(b); });
      r.addEventListener("dblclick", (ev) => { ev.stopPropagation(); drill(b); });
      gBoxes.appendChild(r);
      if (b.label) {
        const big = b.w * b.h > (ext * ext) / 200;
        const t = sv("text", { x: b.x, y: big ? b.y - b.h / 2 + font * 1.2 : b.y, "font-size": big ? font : Math.min(font, b.h * 0.6),
          "text-anchor": "middle", "dominant-baseline": "middle", class: "label" });
        t.textContent = b.label;
        gBoxes.appendChild(t);
      }
    }
    world.appendChild(gEdges);
    world.appendChild(gBoxes);
    world.appendChild(gRoute);
    svg.setAttribute("viewBox", [x0 - ext * 0.03, y0 - ext * 0.03, x1 - x0 + ext * 0.06, y1 - y0 + ext * 0.06].join(" "));
    resetZoom();
    drawRoute();
    syncLocation();
  }

  function drill(b) {
    const n = b.node !== null ? S.model.nodes[b.node] : null;
    const any = n || S.model.nodes.find((m) => m.own.includes(b.id));
    if (!any) return;
    if (S.level === "system" && b.kind === "sip") setView("sip", any.sip, S.cube, S.pe);
    else if (S.level === "sip" && b.kind === "cube") setView("cube", any.sip, any.cube, S.pe);
    else if (S.level === "cube" && b.kind === "pe") setView("pe", any.sip, any.cube, any.pe);
  }

  /* ------------------------------------------------------------------ zoom and pan */
  function applyZoom() {
    const z = S.zoom;
    $("world").setAttribute("transform", "translate(" + z.tx + " " + z.ty + ") scale(" + z.k + ")");
  }
  function resetZoom() { S.zoom = { k: 1, tx: 0, ty: 0 }; applyZoom(); }
  function svgPoint(ev) {
    const svg = $("canvas"), pt = svg.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    return pt.matrixTransform(svg.getScreenCTM().inverse());
  }
  function zoomAt(p, factor) {
    const z = S.zoom, k = Math.min(Math.max(z.k * factor, 0.2), 400);
    z.tx = p.x - ((p.x - z.tx) * k) / z.k;
    z.ty = p.y - ((p.y - z.ty) * k) / z.k;
    z.k = k;
    applyZoom();
  }
  function setupZoom() {
    const svg = $("canvas");
    svg.addEventListener("wheel", (ev) => { ev.preventDefault(); zoomAt(svgPoint(ev), ev.deltaY < 0 ? 1.2 : 1 / 1.2); }, { passive: false });
    let drag = null;
    svg.addEventListener("mousedown", (ev) => { drag = { p: svgPoint(ev), tx: S.zoom.tx, ty: S.zoom.ty }; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const p = svgPoint(ev);
      S.zoom.tx = drag.tx + (p.x - drag.p.x);
      S.zoom.ty = drag.ty + (p.y - drag.p.y);
      applyZoom();
    });
    window.addEventListener("mouseup", () => { drag = null; });
    const centre = () => { const b = svg.viewBox.baseVal; return { x: b.x + b.width / 2, y: b.y + b.height / 2 }; };
    $("zoom-in").addEventListener("click", () => zoomAt(centre(), 1.5));
    $("zoom-out").addEventListener("click", () => zoomAt(centre(), 1 / 1.5));
    $("zoom-fit").addEventListener("click", resetZoom);
  }

  /* ------------------------------------------------------------------ details */
  function paramRows(attrs) {
    return Object.keys(attrs).sort().map((k) => [k, fmt(attrs[k], 4)]);
  }

  function traffic(r) {
    if (!r) return ["", "", "", ""];
    return [fmt(r.bytes), fmt(r.packets), fmt(r.busy_ns, 1), (100 * r.utilisation).toFixed(2) + " %"];
  }

  function linkRows(indices, limit) {
    const m = S.model, rows = [];
    for (const i of indices.slice(0, limit)) {
      const e = m.edges[i];
      const r = S.links ? S.links.byEdge.get(i) : null;
      rows.push([m.nodes[e.s].id + " \u2192 " + m.nodes[e.d].id, e.kind, fmt(e.bw, 3), fmt(e.lat, 3), ...traffic(r)]);
    }
    return rows;
  }
  const LINK_HEAD = ["link", "kind", "GB/s", "latency ns", "bytes", "packets", "busy ns", "util"];

  function showBox(b) {
    const d = $("details");
    clear(d);
    const m = S.model;
    d.appendChild(el("h3", {}, b.id));
    if (b.node !== null) {
      const n = m.nodes[b.node];
      d.appendChild(table([["id", n.id], ["kind", n.type], ["position", fmt(n.x, 3) + ", " + fmt(n.y, 3) + " mm"]]));
      d.appendChild(el("h4", {}, "parameters"));
      d.appendChild(table(paramRows(n.attrs), ["parameter", "value"], "params"));
      const src = el("button", { id: "route-from-here" }, "route from here");
      const dst = el("button", { id: "route-to-here" }, "route to here");
      src.addEventListener("click", () => { $("route-src").value = n.id; });
      dst.addEventListener("click", () => { $("route-dst").value = n.id; });
      d.appendChild(el("p")).append(src, " ", dst);
      d.appendChild(el("h4", {}, "links out"));
      d.appendChild(table(linkRows(n.out, 40), LINK_HEAD));
      d.appendChild(el("h4", {}, "links in"));
      d.appendChild(table(linkRows(n.inc, 40), LINK_HEAD));
    } else {
      const members = m.nodes.filter((n) => n.own.includes(b.id));
      const counts = {};
      for (const n of members) counts[n.type] = (counts[n.type] || 0) + 1;
      d.appendChild(table([["id", b.id], ["kind", b.kind], ["size", fmt(b.w, 2) + " \u00d7 " + fmt(b.h, 2) + " mm"],
        ["nodes", members.length]]));
      d.appendChild(table(Object.entries(counts).map(([k, v]) => [k, v]), ["node type", "count"]));
      if (b.kind === "pe") {
        d.appendChild(el("h4", {}, "blocks and parameters"));
        const rows = [];
        for (const n of members) for (const [k, v] of paramRows(n.attrs)) rows.push([n.type, k, v]);
        d.appendChild(table(rows, ["block", "parameter", "value"], "params"));
      }
      if (["sip", "cube", "pe"].includes(b.kind)) d.appendChild(el("p", { class: "muted" }, "double-click to open it"));
    }
  }

  function showLink(e) {
    const d = $("details");
    clear(d);
    const t = utilOf(e.members);
    d.appendChild(el("h3", {}, e.src + " \u2192 " + e.dst));
    const rows = [["kind", e.kind], ["bandwidth", fmt(e.bw, 3) + " GB/s"], ["length", fmt(e.dist, 3) + " mm"],
      ["directed links", e.count]];
    if (S.links) rows.push(["bytes", fmt(t.bytes)], ["utilisation (busiest lane)", (100 * t.u).toFixed(2) + " %"]);
    d.appendChild(table(rows, null, "link-summary"));
    d.appendChild(table(linkRows(e.members, 60), LINK_HEAD));
  }

  /* ------------------------------------------------------------------ route finder */
  function findRoute() {
    const out = $("route-out");
    clear(out);
    S.route = null;
    const src = $("route-src").value.trim(), dst = $("route-dst").value.trim();
    let intent = $("route-intent").value;
    try {
      const a = S.model.byId.get(src);
      if (!a) throw new Error("node " + src + " not found in topology '" + S.model.topo.name + "'");
      if (intent === "auto") intent = S.model.defaultIntent(a);
      const r = S.model.route(intent, src, dst);
      const hops = S.model.hops(r.nodes);
      S.route = r;
      const last = hops[hops.length - 1];
      out.appendChild(el("p", { id: "route-summary" }, hops.length + " hops (" + intent + " intent, " + r.adjacency +
        " adjacency); head flit arrives after " + fmt(last ? last.head : 0, 2) + " ns, a control message after " +
        fmt(last ? last.control : 0, 2) + " ns (unloaded, destination overhead not included)"));
      const rows = [[0, r.nodes[0], "", "", "", "", "", "0"]].concat(hops.map((h, k) => [k + 1, h.to, h.kind,
        fmt(h.bw, 3), fmt(h.overhead, 3), fmt(h.flit, 3), fmt(h.lat, 3), fmt(h.head, 3)]));
      const t = table(rows, ["#", "node reached", "link kind", "GB/s", "overhead ns", "flit ns", "prop. ns",
        "head at ns"]);
      t.setAttribute("id", "route-table");
      out.appendChild(t);
      out.setAttribute("data-path", JSON.stringify(r.nodes));
      out.setAttribute("data-head", JSON.stringify(hops.map((h) => h.head)));
      out.setAttribute("data-control", JSON.stringify(hops.map((h) => h.control)));
    } catch (err) {
      out.appendChild(el("p", { class: "error", id: "route-error" }, err.message));
      out.setAttribute("data-path", "null");
    }
    drawRoute();
  }

  function drawRoute() {
    const gr = $("route");
    if (!gr || !S.view) return;
    clear(gr);
    if (!S.route) return;
    const byId = new Map(S.view.boxes.map((b) => [b.id, b]));
    const pts = [];
    for (const id of S.route.nodes) {
      const o = S.view.owner(S.model.byId.get(id));
      const b = o ? byId.get(o) : null;
      if (b && (!pts.length || pts[pts.length - 1].id !== b.id)) pts.push(b);
    }
    if (pts.length < 2 && pts.length) {
      gr.appendChild(sv("circle", { cx: pts[0].x, cy: pts[0].y, r: S.extent.ext / 80, class: "route-mark" }));
      return;
    }
    if (pts.length) gr.appendChild(sv("polyline", { points: pts.map((b) => b.x + "," + b.y).join(" "), class: "route-line",
      "vector-effect": "non-scaling-stroke" }));
  }

  /* ------------------------------------------------------------------ runs started from the page */
  async function startRun() {
    const status = $("run-status");
    status.textContent = "running " + $("run-bench").value + " \u2026";
    $("run-start").disabled = true;
    try {
      const body = JSON.stringify({ bench: $("run-bench").value, device: Number($("run-device").value) });
      const res = await getJSON("api/run", { method: "POST", body,
        headers: { "Content-Type": "application/json", "X-Kernbench": "run" } });
      S.run = res.run;
      setLinks(res.links);
      draw();
      status.textContent = "done: " + res.run.bench + " latency " + fmt(res.run.latency_ns, 1) + " ns";
    } catch (err) {
      status.textContent = "";
      showError(err.message);
    } finally {
      $("run-start").disabled = false;
    }
  }

  async function setupRuns() {
    if (!S.served) return;
    try {
      const benches = await getJSON("api/benches");
      const sel = $("run-bench");
      for (const b of benches) sel.appendChild(el("option", { value: b.name }, b.name + " \u2014 " + b.description));
      const dev = $("run-device");
      for (let k = 0; k < S.model.topo.sips; k++) dev.appendChild(el("option", { value: k }, "SIP " + k));
      $("run-start").addEventListener("click", startRun);
      $("run-form").hidden = false;
    } catch (err) {
      showError(err.message);
    }
  }

  /* ------------------------------------------------------------------ view selection */
  function setView(level, s, c, p) {
    if (!LEVELS.includes(level)) throw new Error("unknown view '" + level + "'; use system, sip, cube or pe");
    const t = S.model.topo;
    const check = (v, n, what) => {
      if (!(Number.isInteger(v) && v >= 0 && v < n)) throw new Error(what + " " + v + " does not exist; use 0.." + (n - 1));
      return v;
    };
    S.sip = check(s, t.sips, "SIP");
    S.cube = check(c, t.cubes_per_sip, "cube");
    S.pe = check(p, t.pes_per_cube, "PE");
    S.level = level;
    $("sel-sip").value = S.sip; $("sel-cube").value = S.cube; $("sel-pe").value = S.pe;
    draw();
  }
  KB.setView = setView;

  function syncLocation() {
    const h = "#view=" + S.level + "&sip=" + S.sip + "&cube=" + S.cube + "&pe=" + S.pe;
    if (location.hash !== h) history.replaceState(null, "", h);
  }

  function fromLocation(initial) {
    const q = new URLSearchParams(location.hash.slice(1));
    const num = (k, d) => (q.has(k) ? Number(q.get(k)) : d);
    const level = q.get("view") || initial.view || "system";
    try {
      setView(level, num("sip", 0), num("cube", 0), num("pe", 0));
    } catch (err) {
      showError(err.message);
      setView("system", 0, 0, 0);
    }
    // Optional: a route (from, to, intent) and a box whose details to show, e.g. for a shared link.
    if (q.has("from") && q.has("to")) {
      $("route-src").value = q.get("from");
      $("route-dst").value = q.get("to");
      $("route-intent").value = q.get("intent") || "auto";
      findRoute();
    }
    if (q.has("node")) {
      const b = S.view.boxes.find((x) => x.id === q.get("node"));
      if (b) showBox(b);
      else showError("box " + q.get("node") + " is not in this view");
    }
  }

  function setupControls() {
    const t = S.model.topo;
    for (const [id, n] of [["sel-sip", t.sips], ["sel-cube", t.cubes_per_sip], ["sel-pe", t.pes_per_cube]]) {
      const sel = $(id);
      for (let k = 0; k < n; k++) sel.appendChild(el("option", { value: k }, k));
      sel.addEventListener("change", () => setView(S.level, Number($("sel-sip").value), Number($("sel-cube").value),
        Number($("sel-pe").value)));
    }
    for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => setView(b.dataset.level, S.sip, S.cube, S.pe));
    $("route-go").addEventListener("click", findRoute);
    const list = $("node-ids");
    const suggest = (ev) => {
      const q = ev.target.value.trim();
      clear(list);
      if (q.length < 2) return;
      let k = 0;
      for (const n of S.model.nodes) {
        if (n.id.includes(q)) { list.appendChild(el("option", { value: n.id })); if (++k >= 30) break; }
      }
    };
    $("route-src").addEventListener("input", suggest);
    $("route-dst").addEventListener("input", suggest);
    $("canvas").addEventListener("click", () => { clear($("details")); $("details").appendChild(el("p", { class: "muted" }, "Click a box or a link.")); });
    window.addEventListener("hashchange", () => fromLocation({}));
  }

  /* ------------------------------------------------------------------ start */
  async function main() {
    const t0 = performance.now();
    try {
      const data = await load();
      S.data = data;
      S.served = !!data.served;
      S.model = new KG.Model(data.graph);
      S.run = data.run || null;
      const topo = S.model.topo;
      $("topology").textContent = topo.name + " \u2014 " + topo.nodes.toLocaleString("en-US") + " nodes, " +
        topo.edges.toLocaleString("en-US") + " links";
      setupControls();
      setupZoom();
      setLinks(data.links || null);
      fromLocation(data.initial || {});
      KB.loadMs = performance.now() - t0;
      KB.readyAt = performance.now();  // ms since navigation started
      document.body.setAttribute("data-ready", "1");
      await setupRuns();
    } catch (err) {
      showError(err.message);
      document.body.setAttribute("data-ready", "error");
    }
  }
  KB.route = (intent, a, b) => S.model.route(intent, a, b).nodes;
  KB.view = (level, s, c, p) => {
    const v = S.model.view(level, s, c, p);
    return { boxes: v.boxes.map((b) => [b.id, b.label, b.kind, b.x, b.y, b.w, b.h]),
      edges: v.edges.map((e) => [e.src, e.dst, e.kind, e.bw, e.dist, e.count]) };
  };
  document.addEventListener("DOMContentLoaded", main);
})();
