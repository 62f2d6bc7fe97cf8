/* KernBench viewer: the graph model, the four view projections, the router and the colour scale.
 *
 * Everything here is computed from the compiled graph the server (or an export) hands over
 * (kernbench.cli.web.model.graph_payload). The view projections follow kernbench.topology.views
 * and the router follows kernbench.topology.routing.PathRouter; the browser tests compare both
 * with the Python code, so a change there that is not made here fails a test.
 * Units: mm for positions, GB/s (= bytes/ns) for bandwidth, ns for times.
 */
"use strict";
(function (root) {
  const NONE = -1;

  /* ------------------------------------------------------------------ colour scale */
  function rgb(hex) {
    return [parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16), parseInt(hex.slice(5, 7), 16)];
  }

  /* Same arithmetic as kernbench.topology.heatmap.link_colour (floor(v + 0.5) rounding). */
  function linkColour(value, vmax, stops, idle) {
    if (!(value > 0)) return idle;
    const t = vmax > 0 ? Math.min(value / vmax, 1.0) : 1.0;
    const pos = t * (stops.length - 1);
    const i = Math.min(Math.floor(pos), stops.length - 2);
    const f = pos - i;
    const a = rgb(stops[i]), b = rgb(stops[i + 1]);
    let out = "#";
    for (let k = 0; k < 3; k++) out += Math.floor(a[k] + (b[k] - a[k]) * f + 0.5).toString(16).padStart(2, "0");
    return out;
  }

  /* ------------------------------------------------------------------ binary heap of [d, seq, node] */
  function Heap() { this.a = []; }
  Heap.prototype.less = function (x, y) { return x[0] < y[0] || (x[0] === y[0] && x[1] < y[1]); };
  Heap.prototype.push = function (item) {
    const a = this.a;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(a[i], a[p])) break;
      [a[i], a[p]] = [a[p], a[i]];
      i = p;
    }
  };
  Heap.prototype.pop = function () {
    const a = this.a, top = a[0], last = a.pop();
    if (a.length) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l], a[m])) m = l;
        if (r < a.length && this.less(a[r], a[m])) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]];
        i = m;
      }
    }
    return top;
  };

  /* ------------------------------------------------------------------ the model */
  function Model(g) {
    this.g = g;
    this.topo = g.topology;
    const N = g.nodes.id;
    const n = N.length;
    this.nodes = new Array(n);
    this.byId = new Map();
    for (let i = 0; i < n; i++) {
      const o = g.nodes.own, L = g.nodes.loc;
      const node = {
        i, id: N[i], type: g.types[g.nodes.type[i]], x: g.nodes.x[i], y: g.nodes.y[i],
        sip: L[3 * i], cube: L[3 * i + 1], pe: L[3 * i + 2], unit: g.nodes.unit[i],
        own: [o[3 * i], o[3 * i + 1], o[3 * i + 2]].map((k) => (k === NONE ? null : g.strings[k])),
        attrs: g.attrs[g.nodes.attrs[i]], out: [], inc: [],
      };
      this.nodes[i] = node;
      this.byId.set(node.id, node);
    }
    const E = g.edges;
    this.edges = new Array(E.src.length);
    this.edgeAt = new Map();
    for (let i = 0; i < E.src.length; i++) {
      const p = g.edge_params[E.param[i]];
      const e = { i, s: E.src[i], d: E.dst[i], kind: p[0], bw: p[1], lat: p[2], dist: p[3], w: p[4] };
      this.edges[i] = e;
      this.edgeAt.set(e.s * n + e.d, i);
      this.nodes[e.s].out.push(i);
      this.nodes[e.d].inc.push(i);
    }
    this.adj = {};
    this.peBlocks = new Set(g.routing.pe_blocks);
  }

  Model.prototype.edge = function (srcId, dstId) {
    const a = this.byId.get(srcId), b = this.byId.get(dstId);
    if (!a || !b) return null;
    const i = this.edgeAt.get(a.i * this.nodes.length + b.i);
    return i === undefined ? null : this.edges[i];
  };

  /* ------------------------------------------------------------------ views (kernbench.topology.views) */
  function bbox(members, pad) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const m of members) {
      if (m.x < x0) x0 = m.x;
      if (m.x > x1) x1 = m.x;
      if (m.y < y0) y0 = m.y;
      if (m.y > y1) y1 = m.y;
    }
    return [x0 - pad, y0 - pad, x1 - x0 + 2 * pad, y1 - y0 + 2 * pad];
  }

  function box(id, label, kind, x, y, w, h, node) {
    return { id, label, kind, x, y, w, h, node: node === undefined ? null : node };
  }

  const CUBE_SIZES = { router: 0.8, ucie_phy: 0.6, hbm_ctrl: 1.0 };

  /* One view: boxes and merged directed edges of level (system|sip|cube|pe) at SIP s, cube c, PE p. */
  Model.prototype.view = function (level, s, c, p) {
    const nodes = this.nodes, topo = this.topo;
    const boxes = [];
    let owner;
    if (level === "system") {
      for (const n of nodes) if (n.sip === NONE && n.own[0] === n.id) boxes.push(box(n.id, n.type, n.type, n.x, n.y, 12.0, 5.0, n.i));
      for (let k = 0; k < topo.sips; k++) {
        const members = nodes.filter((n) => n.sip === k);
        const [x, y, w, h] = bbox(members, 2.0);
        boxes.push(box(members[0].own[0], "SIP " + k, "sip", x + w / 2, y + h / 2, w, h));
      }
      owner = (n) => n.own[0];
    } else if (level === "sip") {
      const io = nodes.filter((n) => n.sip === s && n.cube === NONE);
      const [x, y, w, h] = bbox(io, 1.0);
      boxes.push(box(io[0].own[1], "IO chiplet", "io", x + w / 2, y + h / 2, w, h));
      for (let k = 0; k < topo.cubes_per_sip; k++) {
        const routers = nodes.filter((n) => n.sip === s && n.cube === k && n.type === "router");
        let sx = 0, sy = 0;
        for (const r of routers) { sx += r.x; sy += r.y; }
        boxes.push(box(routers[0].own[1], "cube " + k, "cube", sx / routers.length, sy / routers.length,
          topo.cube_w_mm, topo.cube_h_mm));
      }
      owner = (n) => (n.sip === s ? n.own[1] : null);
    } else if (level === "cube") {
      const peW = topo.pe_w_mm;
      for (const n of nodes) {
        if (n.sip !== s || n.cube !== c) continue;
        if (this.peBlocks.has(n.unit)) {
          if (n.type === "pe_scheduler") {
            const dma = nodes.find((m) => m.own[2] === n.own[2] && m.unit === "pe_dma" && m.sip === s && m.cube === c);
            boxes.push(box(n.own[2], "PE" + n.pe, "pe", dma.x, dma.y, peW, peW));
          }
          continue;
        }
        const size = CUBE_SIZES[n.type] !== undefined ? CUBE_SIZES[n.type] : 1.4;
        const label = n.type === "router" || n.type === "ucie_phy" ? "" : n.unit.replace("hbm_ctrl.", "hbm.");
        boxes.push(box(n.id, label, n.type, n.x, n.y, size, size, n.i));
      }
      owner = (n) => (n.sip === s && n.cube === c ? n.own[2] : null);
    } else if (level === "pe") {
      const step = topo.pe_w_mm / 3;
      const mine = nodes.filter((n) => n.sip === s && n.cube === c && n.pe === p && this.peBlocks.has(n.unit));
      for (const block of this.g.routing.pe_blocks) {
        const n = mine.find((m) => m.unit === block);
        boxes.push(box(n.id, block, block, n.x, n.y, step * 0.8, step * 0.5, n.i));
      }
      const ids = new Set(mine.map((n) => n.id));
      owner = (n) => (ids.has(n.id) ? n.id : null);
    } else {
      throw new Error("unknown view '" + level + "'; use system, sip, cube or pe");
    }
    const merged = new Map();
    for (const e of this.edges) {
      const a = owner(nodes[e.s]), b = owner(nodes[e.d]);
      if (a === null || b === null || a === undefined || b === undefined || a === b) continue;
      const key = a + "\u0000" + b;
      let m = merged.get(key);
      if (!m) {
        m = { src: a, dst: b, kind: e.kind, bw: e.bw, dist: e.dist, count: 0, members: [] };
        merged.set(key, m);
      }
      m.count += 1;
      m.members.push(e.i);
    }
    return { level, sip: s, cube: c, pe: p, boxes, edges: Array.from(merged.values()), owner };
  };

  /* ------------------------------------------------------------------ routing (kernbench.topology.routing) */
  Model.prototype.adjacency = function (name) {
    let adj = this.adj[name];
    if (!adj) {
      const excluded = new Set(this.g.routing.exclude[name]);
      adj = this.adj[name] = this.nodes.map(() => []);
      for (const e of this.edges) if (!excluded.has(e.kind)) adj[e.s].push(e);
    }
    return adj;
  };

  Model.prototype.sameCube = function (a, b) {
    return a.cube !== NONE && a.sip === b.sip && a.cube === b.cube;
  };

  /* The adjacency an intent searches: pe_dma, mcpu_dma, memory or control. */
  Model.prototype.adjacencyName = function (intent, a, b) {
    if (intent === "pe_dma") return this.sameCube(a, b) ? "data_local" : "data";
    if (intent === "mcpu_dma") return this.sameCube(a, b) ? "memory_local" : "memory";
    if (intent === "memory") return "memory";
    if (intent === "control") return "all";
    throw new Error("unknown routing intent '" + intent + "'; use pe_dma, mcpu_dma, memory or control");
  };

  /* The intent a route from this node takes by default (as the engine's message kinds do). */
  Model.prototype.defaultIntent = function (src) {
    return { pe_dma: "pe_dma", m_cpu: "mcpu_dma", host_cpu: "memory" }[src.type] || "control";
  };

  Model.prototype.corridor = function (a, b) {
    if (a.cube === NONE && b.cube === NONE) return null;
    const out = new Set();
    if (a.sip === b.sip && a.cube === b.cube) { out.add(a.sip + "," + a.cube); return out; }
    const io = this.topo.io_attach_cube, w = this.topo.mesh_w;
    let legs;
    if (a.cube !== NONE && b.cube !== NONE && a.sip === b.sip) legs = [[a.sip, a.cube, b.cube]];
    else {
      legs = [];
      if (a.cube !== NONE) legs.push([a.sip, a.cube, io]);
      if (b.cube !== NONE) legs.push([b.sip, io, b.cube]);
    }
    for (const [sip, c0, c1] of legs) {
      const r0 = Math.floor(c0 / w), x0 = c0 % w, r1 = Math.floor(c1 / w), x1 = c1 % w;
      let step = x1 >= x0 ? 1 : -1;
      for (let x = x0; x !== x1 + step; x += step) out.add(sip + "," + (r0 * w + x));
      step = r1 >= r0 ? 1 : -1;
      for (let r = r0; r !== r1 + step; r += step) out.add(sip + "," + (r * w + x1));
    }
    return out;
  };

  /* The router's path between two node ids: {nodes: [ids], adjacency, distance}; throws "no path". */
  Model.prototype.route = function (intent, srcId, dstId) {
    const a = this.byId.get(srcId), b = this.byId.get(dstId);
    for (const [id, n] of [[srcId, a], [dstId, b]]) {
      if (!n) throw new Error("node " + id + " not found in topology '" + this.topo.name + "'");
    }
    const name = this.adjacencyName(intent, a, b);
    const adj = this.adjacency(name);
    const corr = this.corridor(a, b);
    let allowed = null;
    if (corr !== null) {
      const key = (n) => (n.cube === NONE ? null : n.sip + "," + n.cube + "," + n.pe);
      const ends = new Set([key(a), key(b)]);
      allowed = (n) => n.cube === NONE || (corr.has(n.sip + "," + n.cube) && (n.pe === NONE || ends.has(key(n))));
    }
    const n = this.nodes.length;
    const dist = new Float64Array(n).fill(Infinity), prev = new Int32Array(n).fill(-1);
    const done = new Uint8Array(n);
    dist[a.i] = 0.0;
    const heap = new Heap();
    heap.push([0.0, 0, a.i]);
    let seq = 0;
    while (heap.a.length) {
      const [d, , u] = heap.pop();
      if (done[u]) continue;
      done[u] = 1;
      if (u === b.i) break;
      for (const e of adj[u]) {
        const v = e.d;
        if (allowed !== null && !allowed(this.nodes[v])) continue;
        const nd = d + e.w;
        if (nd < dist[v]) {
          dist[v] = nd;
          prev[v] = u;
          seq += 1;
          heap.push([nd, seq, v]);
        }
      }
    }
    if (dist[b.i] === Infinity) throw new Error("no path from " + srcId + " to " + dstId);
    const path = [b.i];
    while (path[path.length - 1] !== a.i) path.push(prev[path[path.length - 1]]);
    path.reverse();
    return { nodes: path.map((i) => this.nodes[i].id), adjacency: name, distance: dist[b.i] };
  };

  /* Per-hop model latency of an unloaded path, in the engine's order of arithmetic:
   * a packet's head leaves node k after its overhead (the source's included), takes one flit time
   * (flit_bytes / bw) to enter the wire and arrives after the propagation latency. A control message
   * (sideband) pays overheads and propagation only. */
  Model.prototype.hops = function (ids) {
    const flit = this.topo.flit_bytes;
    const out = [];
    let head = 0.0, ctrl = 0.0;
    for (let k = 0; k + 1 < ids.length; k++) {
      const e = this.edge(ids[k], ids[k + 1]);
      if (!e) throw new Error("no link for " + ids[k] + " \u2192 " + ids[k + 1]);
      const ovh = Number(this.byId.get(ids[k]).attrs.overhead_ns || 0);
      const ser = flit / e.bw;
      head = head + ovh;
      head = head + ser;
      head = head + e.lat;
      ctrl = ctrl + ovh;
      ctrl = ctrl + e.lat;
      out.push({ from: ids[k], to: ids[k + 1], kind: e.kind, bw: e.bw, overhead: ovh, flit: ser, lat: e.lat,
        head, control: ctrl, edge: e.i });
    }
    return out;
  };

  root.KernbenchGraph = { Model, linkColour };
})(window);
