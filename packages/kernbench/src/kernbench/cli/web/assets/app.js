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
    view: null, zoom: null, route: null, served: false, vmax: 1, nohost: false, selected: null, sipStats: null,
    labelK: null };
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
  /* Error banners belong to the action that raised them: the next user action clears them (KB.errors keeps all). */
  function clearErrors() {
    const box = $("errors");
    clear(box);
    box.hidden = true;
  }
  function action(fn) {
    return function (ev) { clearErrors(); return fn.call(this, ev); };
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
  /* Whether edge e touches the host (the host link can be left out of the colour scale). */
  function hostEdge(e) {
    const n = S.model.nodes;
    return n[e.s].type === "host_cpu" || n[e.d].type === "host_cpu";
  }

  /* The top of the colour scale: the busiest loaded link, the host link left out when S.nohost. */
  function rescale() {
    let vmax = 0;
    if (S.links) {
      for (const [i, r] of S.links.byEdge) {
        if (S.nohost && hostEdge(S.model.edges[i])) continue;
        if (r.utilisation > vmax) vmax = r.utilisation;
      }
    }
    S.vmax = vmax > 0 ? vmax : 1;
  }

  /* Per SIP: the busiest link inside it, the mean utilisation of its links that carried traffic, bytes moved. */
  function sipStats() {
    const m = S.model, out = [];
    for (let k = 0; k < m.topo.sips; k++) out.push({ peak: 0, sum: 0, busy: 0, bytes: 0, links: 0 });
    if (!S.links) return out;
    for (const [i, r] of S.links.byEdge) {
      const e = m.edges[i], a = m.nodes[e.s].sip;
      if (a < 0 || a !== m.nodes[e.d].sip || !(r.bytes > 0)) continue;
      const t = out[a];
      t.peak = Math.max(t.peak, r.utilisation);
      t.sum += r.utilisation;
      t.busy += 1;
      t.bytes += r.bytes;
    }
    for (const t of out) t.mean = t.busy ? t.sum / t.busy : 0;
    return out;
  }

  function setLinks(links) {
    S.links = null;
    if (links) {
      const m = S.model, byEdge = new Map();
      for (const r of links.links) {
        const e = m.edge(r.src, r.dst);
        if (!e) { showError("links data names " + r.src + " \u2192 " + r.dst + ", which this topology lacks"); continue; }
        byEdge.set(e.i, r);
      }
      S.links = { data: links, byEdge };
    }
    rescale();
    S.sipStats = sipStats();
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
      $("scale-nohost").checked = S.nohost;
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

  /* Where the segment from box a's centre to box b's centre leaves a and enters b ([x1, y1, x2, y2]); the
   * centres when the boxes overlap (a link should start and end at the borders, not hide under a box). */
  function clipped(a, b) {
    const dx = b.x - a.x, dy = b.y - a.y;
    const exit = (w, h) => Math.min(dx ? w / 2 / Math.abs(dx) : Infinity, dy ? h / 2 / Math.abs(dy) : Infinity);
    const ta = exit(a.w, a.h), tb = 1 - exit(b.w, b.h);
    if (!(ta < tb)) return [a.x, a.y, b.x, b.y];
    return [a.x + dx * ta, a.y + dy * ta, a.x + dx * tb, a.y + dy * tb];
  }

  /* The traffic between two neighbouring SIPs: their direct links if the graph has any, else the links the
   * traffic crosses on its way through the fabric (a's way out and b's way in, and back). */
  function pairTraffic(a, b) {
    const m = S.model;
    if (!m.sipWays) {
      const ways = { up: [], down: [], direct: new Map() };
      for (let k = 0; k < m.topo.sips; k++) { ways.up.push([]); ways.down.push([]); }
      for (const e of m.edges) {
        const x = m.nodes[e.s].sip, y = m.nodes[e.d].sip;
        if (x === y) continue;
        if (x >= 0 && y >= 0) {
          const key = Math.min(x, y) + "," + Math.max(x, y);
          if (!ways.direct.has(key)) ways.direct.set(key, []);
          ways.direct.get(key).push(e.i);
        } else if (x >= 0) ways.up[x].push(e.i);
        else ways.down[y].push(e.i);
      }
      m.sipWays = ways;
    }
    const w = m.sipWays, direct = w.direct.get(a + "," + b);
    const members = direct || [...w.up[a], ...w.down[b], ...w.up[b], ...w.down[a]];
    return Object.assign({ members, direct: !!direct }, utilOf(members));
  }

  const KIND_NAMES = { sip: "SIP", io: "IO chiplet", cube: "cube", pe: "PE" };

  function renderBoxLegend(v) {
    const g = S.data.graph, box = $("box-legend");
    clear(box);
    const kinds = [];
    for (const b of v.boxes) if (!kinds.includes(b.kind)) kinds.push(b.kind);
    for (const k of kinds) {
      const item = el("span", { class: "item", "data-kind": k });
      const sw = el("span", { class: "swatch" });
      sw.style.background = g.colours.boxes[k] || "#dddddd";
      item.append(sw, KIND_NAMES[k] || k.replace(/_/g, " "));
      box.appendChild(item);
    }
    const line = el("span", { class: "item", "data-kind": "link" });
    line.append(el("span", { class: "swatch line" }), S.links ? "link (colour: utilisation)" : "link");
    box.appendChild(line);
    if (v.level === "system" && S.model.topo.sip_pairs.length) {
      const pair = el("span", { class: "item", "data-kind": "sip-pair" });
      pair.append(el("span", { class: "swatch pair" }), "SIP neighbours (" + S.model.topo.sip_topology +
        ", through the fabric)");
      box.appendChild(pair);
    }
  }

  /* The drawn name of a small box whose view label is empty (the projection follows kernbench.topology.views, which
   * leaves routers and PHYs unnamed): r1c2 for the NoC router at row 1, column 2, n0 for the first UCIe PHY on the
   * north side. The full id is the box's hover name. */
  function shortName(n) {
    const last = n.unit.slice(n.unit.lastIndexOf(".") + 1);
    if (n.type === "router") return last;
    if (n.type === "ucie_phy") {
      const m = /ucie_([nsew])\.c(\d+)$/.exec(n.unit);
      return m ? m[1] + m[2] : last;
    }
    return "";
  }

  /* Whether a fill colour (#rrggbb) is dark enough to need light text on it (relative luminance below one half). */
  function dark(hex) {
    const c = [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16) / 255);
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] < 0.5;
  }

  /* Short names are fitted to their small boxes, so at a small drawing they would be specks: each is shown only
   * while its text is at least MIN_LABEL_PX tall on screen, and zooming in brings it back. */
  const MIN_LABEL_PX = 6;
  function showShortLabels() {
    const world = $("world"), ctm = world && world.getScreenCTM();
    if (!ctm) return;
    const scale = Math.hypot(ctm.a, ctm.b);
    for (const t of world.querySelectorAll("text.short")) {
      const px = Number(t.getAttribute("font-size")) * scale;
      t.setAttribute("data-px", px.toFixed(2));
      t.setAttribute("visibility", px >= MIN_LABEL_PX ? "visible" : "hidden");
    }
  }

  /* Shrink every label until it fits inside its box (measured once, after all labels are drawn). */
  function fitLabels(labels) {
    const sizes = labels.map(([t]) => t.getBBox());
    labels.forEach(([t, b], k) => {
      const bb = sizes[k];
      if (!(bb.width > 0 && bb.height > 0)) return;
      const f = Math.min(1, (b.w * 0.92) / bb.width, (b.h * 0.9) / bb.height);
      if (f < 1) t.setAttribute("font-size", Number(t.getAttribute("font-size")) * f * 0.98);
    });
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
    // Layers, bottom to top: wide click targets of links, boxes, links, SIP neighbour pairs, labels, the route.
    const gHits = sv("g", { id: "hits" }), gBoxes = sv("g", { id: "boxes" }), gEdges = sv("g", { id: "edges" });
    const gPairs = sv("g", { id: "pairs" }), gLabels = sv("g", { id: "labels" }), gRoute = sv("g", { id: "route" });
    const byId = new Map(v.boxes.map((b) => [b.id, b]));
    const off = ext * 0.004;
    const sorted = v.edges.map((e) => Object.assign({ t: utilOf(e.members) }, e)).sort((a, b) => a.t.u - b.t.u);
    for (const e of sorted) {
      const a = byId.get(e.src), b = byId.get(e.dst);
      const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
      const ox = (-dy / len) * off, oy = (dx / len) * off;
      const [cx1, cy1, cx2, cy2] = clipped(a, b);
      const colour = KG.linkColour(e.t.u, S.vmax, g.colours.links, g.colours.idle);
      const width = e.t.u > 0 ? 2 + 4 * Math.min(e.t.u / S.vmax, 1) : 1.5;
      const attrs = { x1: cx1 + ox, y1: cy1 + oy, x2: cx2 + ox, y2: cy2 + oy, stroke: colour, "stroke-width": width,
        class: "link", "data-src": e.src, "data-dst": e.dst, "data-util": e.t.u, "vector-effect": "non-scaling-stroke" };
      const line = sv("line", attrs);
      const hit = sv("line", Object.assign({}, attrs, { stroke: "transparent", "stroke-width": 9, class: "hit" }));
      const tip = sv("title", {});
      tip.textContent = e.kind + " link " + e.src + " \u2192 " + e.dst + (S.links ? ", " + (100 * e.t.u).toFixed(1) + " %" : "");
      line.appendChild(tip);
      hit.addEventListener("click", action((ev) => { ev.stopPropagation(); showLink(e); }));
      line.addEventListener("click", action((ev) => { ev.stopPropagation(); showLink(e); }));
      gEdges.appendChild(line);
      gHits.appendChild(hit);
    }
    const font = ext / 55;
    const labels = [];
    const stats = S.sipStats || [];
    for (const b of v.boxes.slice().sort((p, q) => q.w * q.h - p.w * p.h)) {
      const fill = g.colours.boxes[b.kind] || "#dddddd";
      const r = sv("rect", { x: b.x - b.w / 2, y: b.y - b.h / 2, width: b.w, height: b.h, fill, class: "box",
        "data-id": b.id, "data-kind": b.kind, "vector-effect": "non-scaling-stroke" });
      const title = sv("title", {});
      title.textContent = (KIND_NAMES[b.kind] || b.kind.replace(/_/g, " ")) + " " + b.id;
      r.appendChild(title);
      r.addEventListener("click", action((ev) => { ev.stopPropagation(); showBox(b); }));
      r.addEventListener("dblclick", action((ev) => { ev.stopPropagation(); drill(b); }));
      gBoxes.appendChild(r);
      const big = b.w * b.h > (ext * ext) / 200;
      if (b.kind === "sip" && S.links) {
        const k = Number(b.label.split(" ")[1]), st = stats[k];
        const bar = sv("rect", { x: b.x - b.w / 2, y: b.y + b.h / 2 - b.h * 0.12, width: b.w, height: b.h * 0.12,
          fill: KG.linkColour(st.peak, S.vmax, g.colours.links, g.colours.idle), class: "sip-util",
          "data-sip": k, "data-peak": st.peak, "data-mean": st.mean, "data-bytes": st.bytes });
        const tip = sv("title", {});
        tip.textContent = "SIP " + k + ": busiest link " + (100 * st.peak).toFixed(1) + " %, mean of its busy links " +
          (100 * st.mean).toFixed(1) + " %, " + fmt(st.bytes) + " bytes";
        bar.appendChild(tip);
        bar.addEventListener("click", action((ev) => { ev.stopPropagation(); showBox(b); }));
        gBoxes.appendChild(bar);
        const t = sv("text", { x: b.x, y: b.y, "font-size": font, "text-anchor": "middle",
          "dominant-baseline": "middle", class: "label sip-peak", "data-for": b.id });
        t.textContent = "peak " + (100 * st.peak).toFixed(1) + " %";
        gLabels.appendChild(t);
        labels.push([t, b]);
      }
      const short = !b.label && b.node !== null ? shortName(m.nodes[b.node]) : "";
      if (short) {
        // no larger than the view's other labels; fitLabels shrinks it into the box, showShortLabels hides specks;
        // a halo of the box's colour keeps the name readable where links cross the box
        const t = sv("text", { x: b.x, y: b.y, "font-size": Math.min(font, b.w * 0.42, b.h * 0.42),
          "text-anchor": "middle", "dominant-baseline": "middle", class: "label short" + (dark(fill) ? " on-dark" : ""),
          "data-for": b.id, stroke: fill });
        t.textContent = short;
        gLabels.appendChild(t);
        labels.push([t, b]);
      }
      if (b.label) {
        // a box holding others (a SIP, a cube, a PE) names itself at the top, clear of its contents; a single
        // node's box in the middle, clear of the smaller boxes (routers) that may overlap its edge
        const top = big && b.node === null;
        const size = big ? font : Math.min(font, b.h * 0.6);
        const t = sv("text", { x: b.x, y: top ? b.y - b.h / 2 + Math.min(font * 1.2, b.h * 0.3) : b.y, "font-size": size,
          "text-anchor": "middle", "dominant-baseline": "middle", class: "label", "data-for": b.id });
        t.textContent = b.label;
        gLabels.appendChild(t);
        labels.push([t, b]);
      }
    }
    if (v.level === "system") drawPairs(gPairs, byId, ext);
    world.appendChild(gHits);
    world.appendChild(gBoxes);
    world.appendChild(gEdges);
    world.appendChild(gPairs);
    world.appendChild(gLabels);
    world.appendChild(gRoute);
    const pad = ext * (v.level === "system" && S.model.topo.sip_pairs.some((p) => p[3]) ? 0.06 : 0.03);
    svg.setAttribute("viewBox", [x0 - pad, y0 - pad, x1 - x0 + 2 * pad, y1 - y0 + 2 * pad].join(" "));
    fitLabels(labels);
    renderBoxLegend(v);
    resetZoom();
    drawRoute();
    syncLocation();
  }

  /* The SIP topology's neighbour pairs (what the collectives exchange along), between the SIP boxes; a
   * wrap-around pair bows out so that it does not run across the SIPs between its ends. */
  function drawPairs(gPairs, byId, ext) {
    const m = S.model, g = S.data.graph;
    const sipBox = new Map();
    for (const b of byId.values()) if (b.kind === "sip") sipBox.set(Number(b.label.split(" ")[1]), b);
    for (const [a, b, axis, wraps] of m.topo.sip_pairs) {
      const A = sipBox.get(a), B = sipBox.get(b);
      if (!A || !B) continue;
      const t = pairTraffic(a, b);
      const [xa, ya, xb, yb] = clipped(A, B);
      let d;
      if (wraps) {
        // a wrap-around pair leaves the grid on both sides: a stub out of each end box, away from the other end
        // (an arc across the grid would run over the SIPs between them)
        const row = axis === "row", g0 = ext * 0.035;
        const [P, Q] = (row ? A.x <= B.x : A.y <= B.y) ? [A, B] : [B, A];
        if (row) {
          d = "M" + (P.x - P.w / 2) + "," + P.y + " l" + -g0 + ",0 M" + (Q.x + Q.w / 2) + "," + Q.y + " l" + g0 + ",0";
        } else {
          d = "M" + P.x + "," + (P.y - P.h / 2) + " l0," + -g0 + " M" + Q.x + "," + (Q.y + Q.h / 2) + " l0," + g0;
        }
      } else {
        d = "M" + xa + "," + ya + " L" + xb + "," + yb;
      }
      const colour = S.links ? KG.linkColour(t.u, S.vmax, g.colours.links, g.colours.idle) : "#6e7781";
      const path = sv("path", { d, class: "sip-pair" + (wraps ? " wrap" : ""), stroke: colour,
        "stroke-width": t.u > 0 ? 2.5 + 3 * Math.min(t.u / S.vmax, 1) : 2, "data-a": a, "data-b": b, "data-axis": axis,
        "data-wraps": wraps ? "1" : "0", "data-util": t.u, "vector-effect": "non-scaling-stroke" });
      const tip = sv("title", {});
      tip.textContent = "SIP " + a + " \u2194 SIP " + b + " (" + axis + " neighbours" + (wraps ? ", wrap-around" : "") +
        ")" + (S.links ? ": busiest link on the way " + (100 * t.u).toFixed(1) + " %" : "");
      path.appendChild(tip);
      const open = action((ev) => { ev.stopPropagation(); showPair(a, b, axis, wraps); });
      const hit = sv("path", { d, class: "pair-hit", stroke: "transparent", "stroke-width": 9, fill: "none",
        "vector-effect": "non-scaling-stroke" });
      hit.addEventListener("click", open);
      path.addEventListener("click", open);
      gPairs.appendChild(hit);
      gPairs.appendChild(path);
    }
  }

  function showPair(a, b, axis, wraps) {
    const d = $("details");
    clear(d);
    const t = pairTraffic(a, b);
    d.appendChild(el("h3", {}, "SIP " + a + " \u2194 SIP " + b));
    const rows = [["SIP topology", S.model.topo.sip_topology], ["neighbours along", axis + (wraps ? " (wrap-around)" : "")],
      ["carried by", t.direct ? "direct SIP-to-SIP links" : "each SIP's links into and out of the fabric (shared with " +
        "its other neighbours)"]];
    if (S.links) rows.push(["bytes on those links", fmt(t.bytes)], ["busiest of them", (100 * t.u).toFixed(2) + " %"]);
    d.appendChild(table(rows, null, "pair-summary"));
    d.appendChild(table(linkRows(t.members, 40), LINK_HEAD));
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
    if (z.k !== S.labelK) { S.labelK = z.k; showShortLabels(); }  // a pan does not change any label's size
  }
  function resetZoom() { S.zoom = { k: 1, tx: 0, ty: 0 }; S.labelK = null; applyZoom(); }
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
    window.addEventListener("resize", showShortLabels);  // the drawing's size on screen follows the window's
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
    S.selected = b.id;
    d.appendChild(el("h3", {}, b.id));
    if (b.node !== null) {
      const n = m.nodes[b.node];
      d.appendChild(table([["id", n.id], ["kind", n.type], ["position", fmt(n.x, 3) + ", " + fmt(n.y, 3) + " mm"]]));
      d.appendChild(el("h4", {}, "parameters"));
      d.appendChild(table(paramRows(n.attrs), ["parameter", "value"], "params"));
      const src = el("button", { id: "route-from-here" }, "route from here");
      const dst = el("button", { id: "route-to-here" }, "route to here");
      src.addEventListener("click", action(() => { $("route-src").value = n.id; }));
      dst.addEventListener("click", action(() => { $("route-dst").value = n.id; }));
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
      if (b.kind === "sip" && S.links) {
        const st = S.sipStats[Number(b.label.split(" ")[1])];
        d.appendChild(el("h4", {}, "traffic inside this SIP"));
        d.appendChild(table([["busiest link", (100 * st.peak).toFixed(2) + " %"],
          ["mean over its " + st.busy + " busy links", (100 * st.mean).toFixed(2) + " %"], ["bytes", fmt(st.bytes)]],
        null, "sip-traffic"));
      }
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
    S.selected = null;
    const t = utilOf(e.members);
    d.appendChild(el("h3", {}, e.src + " \u2192 " + e.dst));
    const rows = [["kind", e.kind], ["bandwidth", fmt(e.bw, 3) + " GB/s"], ["length", fmt(e.dist, 3) + " mm"],
      ["directed links", e.count]];
    if (S.links) rows.push(["bytes", fmt(t.bytes)], ["utilisation (busiest lane)", (100 * t.u).toFixed(2) + " %"]);
    d.appendChild(table(rows, null, "link-summary"));
    d.appendChild(table(linkRows(e.members, 60), LINK_HEAD));
  }

  /* ------------------------------------------------------------------ route finder */
  /* Find the route the form asks for; scroll: bring the answer into view (not when a page opens with a route in
   * its address, which should show the top of the page). */
  function findRoute(scroll) {
    const out = $("route-out");
    clear(out);
    S.route = null;
    S.routeQuery = null;
    const src = $("route-src").value.trim(), dst = $("route-dst").value.trim();
    let intent = $("route-intent").value;
    try {
      const a = S.model.byId.get(src);
      if (!a) throw new Error("node " + src + " not found in topology '" + S.model.topo.name + "'");
      if (intent === "auto") intent = S.model.defaultIntent(a);
      const r = S.model.route(intent, src, dst);
      const hops = S.model.hops(r.nodes);
      S.route = r;
      S.routeQuery = { from: src, to: dst, intent: $("route-intent").value };
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
    syncLocation();
    // the answer is below the form: bring it into view (the side panel, or the page at phone width, scrolls)
    const first = out.firstElementChild;
    if (scroll !== false && first && first.scrollIntoView) first.scrollIntoView({ block: "nearest" });
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
      $("run-start").addEventListener("click", action(startRun));
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
    check(s, t.sips, "SIP"); check(c, t.cubes_per_sip, "cube"); check(p, t.pes_per_cube, "PE");
    if (S.level !== level || S.sip !== s || S.cube !== c || S.pe !== p) S.selected = null;
    S.sip = s; S.cube = c; S.pe = p;
    S.level = level;
    $("sel-sip").value = S.sip; $("sel-cube").value = S.cube; $("sel-pe").value = S.pe;
    draw();
  }
  KB.setView = setView;

  /* The address bar carries the view, the route found last, the selected box and the colour-scale choice, so a
   * reload or a shared link shows the same thing. */
  function syncLocation() {
    const q = new URLSearchParams();
    q.set("view", S.level); q.set("sip", S.sip); q.set("cube", S.cube); q.set("pe", S.pe);
    if (S.routeQuery) { q.set("from", S.routeQuery.from); q.set("to", S.routeQuery.to); q.set("intent", S.routeQuery.intent); }
    if (S.selected && S.view && S.view.boxes.some((b) => b.id === S.selected)) q.set("node", S.selected);
    if (S.nohost) q.set("scale", "nohost");
    const h = "#" + q.toString();
    if (location.hash !== h) history.replaceState(null, "", h);
  }

  function fromLocation(initial) {
    const q = new URLSearchParams(location.hash.slice(1));
    const num = (k, d) => (q.has(k) ? Number(q.get(k)) : d);
    const level = q.get("view") || initial.view || "system";
    const nohost = q.get("scale") === "nohost";
    if (nohost !== S.nohost) { S.nohost = nohost; rescale(); renderRun(); }
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
      findRoute(false);
    }
    if (q.has("node")) {
      const b = S.view.boxes.find((x) => x.id === q.get("node"));
      if (b) showBox(b);
      else showError("box " + q.get("node") + " is not in this view");
    }
    syncLocation();
  }

  function setupControls() {
    const t = S.model.topo;
    for (const [id, n] of [["sel-sip", t.sips], ["sel-cube", t.cubes_per_sip], ["sel-pe", t.pes_per_cube]]) {
      const sel = $(id);
      for (let k = 0; k < n; k++) sel.appendChild(el("option", { value: k }, k));
      sel.addEventListener("change", action(() => setView(S.level, Number($("sel-sip").value),
        Number($("sel-cube").value), Number($("sel-pe").value))));
    }
    for (const b of document.querySelectorAll("#tabs button")) {
      b.addEventListener("click", action(() => setView(b.dataset.level, S.sip, S.cube, S.pe)));
    }
    $("route-go").addEventListener("click", action(findRoute));
    for (const id of ["route-src", "route-dst"]) {
      $(id).addEventListener("keydown", (ev) => { if (ev.key === "Enter") action(findRoute)(ev); });
    }
    $("scale-nohost").addEventListener("change", action(() => {
      S.nohost = $("scale-nohost").checked;
      rescale();
      renderRun();
      draw();
    }));
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
    $("canvas").addEventListener("click", action(() => {
      S.selected = null;
      clear($("details"));
      $("details").appendChild(el("p", { class: "muted" }, "Click a box or a link."));
      syncLocation();
    }));
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
