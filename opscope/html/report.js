// opscope's report page: sortable and filterable tables, and charts drawn as SVG from the page's
// own data (the JSON block #opscope-data). Nothing is fetched; every number drawn is the report's.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("opscope-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2f6db5", "#c4392f", "#3b8f4a", "#8a5cb8", "#d48a1f", "#41939b"];

  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "–";
    const a = Math.abs(v);
    return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(2) : String(+v.toPrecision(4));
  }
  function tip(e, text) { svgEl("title", {}, e).textContent = text; }

  // A scale from a value range onto pixels, linear or log10 (non-positive values clamp to the floor).
  function scale(lo, hi, p0, p1, log) {
    if (log) {
      const floor = lo > 0 ? lo : hi / 1e6;
      const a = Math.log10(floor), b = Math.log10(hi > floor ? hi : floor * 10);
      return (v) => p0 + ((Math.log10(Math.max(v, floor)) - a) / (b - a)) * (p1 - p0);
    }
    const span = hi - lo || 1;
    return (v) => p0 + ((v - lo) / span) * (p1 - p0);
  }
  function finite(values) { return values.filter((v) => v !== null && Number.isFinite(v)); }
  function frame(spec, w, h) {
    const svg = svgEl("svg", { class: "plot", width: w, height: h, viewBox: `0 0 ${w} ${h}` });
    return svg;
  }
  function axes(svg, m, w, h, spec, ylo, yhi) {
    svgEl("line", { class: "axis", x1: m.l, y1: h - m.b, x2: w - m.r, y2: h - m.b }, svg);
    svgEl("line", { class: "axis", x1: m.l, y1: m.t, x2: m.l, y2: h - m.b }, svg);
    svgEl("text", { x: m.l - 4, y: m.t + 8, "text-anchor": "end" }, svg).textContent = fmt(yhi);
    svgEl("text", { x: m.l - 4, y: h - m.b, "text-anchor": "end" }, svg).textContent = fmt(ylo);
    if (spec.xlabel) svgEl("text", { x: (m.l + w - m.r) / 2, y: h - 4, "text-anchor": "middle" }, svg).textContent = spec.xlabel;
    if (spec.ylabel) svgEl("text", { x: 4, y: m.t - 4 }, svg).textContent = spec.ylabel;
  }

  // bars: y per x (labels), `marked` indices drawn in the mark colour (outlier channels).
  function bars(spec) {
    const n = spec.y.length, h = spec.height || 170;
    const w = spec.width || Math.min(720, Math.max(spec.x ? 420 : 240, n * 8 + 60)); // room for the end labels
    const m = { l: 58, r: 8, t: 16, b: 30 }, svg = frame(spec, w, h);
    const ys = finite(spec.y), yhi = Math.max(...ys, 0), ylo = spec.logy ? Math.min(...ys.filter((v) => v > 0)) / 2 : 0;
    const sy = scale(ylo, yhi, h - m.b, m.t, spec.logy), bw = (w - m.l - m.r) / Math.max(n, 1);
    const marked = new Set(spec.marked || []);
    spec.y.forEach((v, i) => {
      if (v === null) return;
      const y = sy(v), r = svgEl("rect", { class: "pt" + (marked.has(i) ? " marked" : ""), x: m.l + i * bw,
        y: Math.min(y, h - m.b), width: Math.max(bw - (bw > 3 ? 1 : 0), 0.5), height: Math.max(Math.abs(h - m.b - y), 0.5) }, svg);
      tip(r, `${spec.x ? spec.x[i] : i}: ${fmt(v)}`);
    });
    if (spec.x && spec.x.length) {
      const cut = (t) => (String(t).length > 28 ? "…" + String(t).slice(-27) : String(t)); // the tail tells sites apart
      svgEl("text", { x: m.l, y: h - m.b + 12 }, svg).textContent = cut(spec.x[0]);
      if (n > 1) svgEl("text", { x: w - m.r, y: h - m.b + 12, "text-anchor": "end" }, svg).textContent = cut(spec.x[n - 1]);
    }
    axes(svg, m, w, h, spec, ylo, yhi);
    return svg;
  }

  // line: one or more series over x; points drawn as small circles so each value has a mark.
  function line(spec) {
    const w = spec.width || 420, h = spec.height || 170, m = { l: 48, r: 90, t: 16, b: 30 }, svg = frame(spec, w, h);
    const all = finite(spec.series.flatMap((s) => s.y)), xs = spec.x;
    const ylo = spec.logy ? Math.min(...all.filter((v) => v > 0)) : Math.min(...all, 0), yhi = Math.max(...all, 0);
    const sx = scale(Math.min(...xs), Math.max(...xs), m.l, w - m.r, false), sy = scale(ylo, yhi, h - m.b, m.t, spec.logy);
    spec.series.forEach((s, k) => {
      const colour = PALETTE[k % PALETTE.length], pts = [];
      s.y.forEach((v, i) => { if (v !== null) pts.push(`${sx(xs[i])},${sy(v)}`); });
      svgEl("polyline", { class: "ln", stroke: colour, points: pts.join(" ") }, svg);
      s.y.forEach((v, i) => {
        if (v === null) return;
        tip(svgEl("circle", { class: "pt", cx: sx(xs[i]), cy: sy(v), r: 2.5, style: `fill:${colour}` }, svg), `${s.name} @ ${xs[i]}: ${fmt(v)}`);
      });
      svgEl("text", { x: w - m.r + 6, y: m.t + 12 * k + 8, style: `fill:${colour}` }, svg).textContent = s.name;
    });
    svgEl("text", { x: m.l, y: h - m.b + 12 }, svg).textContent = fmt(Math.min(...xs));
    svgEl("text", { x: w - m.r, y: h - m.b + 12, "text-anchor": "end" }, svg).textContent = fmt(Math.max(...xs));
    axes(svg, m, w, h, spec, ylo, yhi);
    return svg;
  }

  // heatmap: rows × cols of values (null: no such tensor), colour on a linear or log scale;
  // links[r][c] makes a cell a link to that anchor (its site's section).
  function heatmap(spec) {
    const R = spec.rows.length, C = spec.cols.length, cell = Math.max(10, Math.min(26, Math.floor(760 / Math.max(C, 1))));
    const lw = Math.min(300, 7 * Math.max(...spec.rows.map((r) => r.length), 4)), m = { l: lw + 8, r: 70, t: 22, b: 8 };
    const w = m.l + C * cell + m.r, h = m.t + R * (cell > 14 ? 16 : cell) + m.b, rh = cell > 14 ? 16 : cell;
    const svg = frame(spec, w, h), vals = finite(spec.values.flat());
    if (!vals.length) return svg;
    const lo = spec.log ? Math.min(...vals.filter((v) => v > 0)) : Math.min(...vals), hi = Math.max(...vals);
    const t = scale(lo, hi, 0, 1, spec.log);
    const colour = (v) => { const u = Math.max(0, Math.min(1, t(v))); return `hsl(${220 - 215 * u}, 70%, ${92 - 42 * u}%)`; };
    spec.cols.forEach((c, j) => { if (C <= 40 || j % Math.ceil(C / 40) === 0)
      svgEl("text", { x: m.l + j * cell + cell / 2, y: m.t - 6, "text-anchor": "middle" }, svg).textContent = c; });
    spec.rows.forEach((r, i) => {
      svgEl("text", { x: m.l - 6, y: m.t + i * rh + rh * 0.75, "text-anchor": "end" }, svg).textContent = r;
      spec.cols.forEach((c, j) => {
        const v = spec.values[i][j];
        if (v === null || v === undefined) return;
        const link = spec.links && spec.links[i] && spec.links[i][j];
        const parent = link ? svgEl("a", { href: "#" + link }, svg) : svg;
        tip(svgEl("rect", { class: "pt", x: m.l + j * cell, y: m.t + i * rh, width: cell - 1, height: rh - 1,
          style: `fill:${colour(v)}` }, parent), `${r} · ${spec.colname || "layer"} ${c}: ${fmt(v)}`);
      });
    });
    for (let k = 0; k <= 4; k++) {
      const v = spec.log ? lo * Math.pow(hi / lo, k / 4) : lo + ((hi - lo) * k) / 4;
      svgEl("rect", { x: w - m.r + 8, y: m.t + (4 - k) * 14, width: 12, height: 13, style: `fill:${colour(v)}` }, svg);
      svgEl("text", { x: w - m.r + 24, y: m.t + (4 - k) * 14 + 10 }, svg).textContent = fmt(v);
    }
    return svg;
  }

  // scatter: points {x, y, label}, optional log axes and reference lines (roofline ceilings).
  function scatter(spec) {
    const w = spec.width || 560, h = spec.height || 340, m = { l: 56, r: 16, t: 16, b: 34 }, svg = frame(spec, w, h);
    const xs = finite(spec.points.map((p) => p.x).concat((spec.lines || []).flatMap((l) => l.points.map((p) => p[0]))));
    const ys = finite(spec.points.map((p) => p.y).concat((spec.lines || []).flatMap((l) => l.points.map((p) => p[1]))));
    const pos = (v) => v.filter((x) => x > 0);
    const xlo = spec.logx ? Math.min(...pos(xs)) / 1.5 : Math.min(...xs, 0), xhi = Math.max(...xs) * (spec.logx ? 1.5 : 1.05);
    const ylo = spec.logy ? Math.min(...pos(ys)) / 1.5 : Math.min(...ys, 0), yhi = Math.max(...ys) * (spec.logy ? 1.5 : 1.05);
    const sx = scale(xlo, xhi, m.l, w - m.r, spec.logx), sy = scale(ylo, yhi, h - m.b, m.t, spec.logy);
    (spec.lines || []).forEach((l) => {
      svgEl("polyline", { class: "ceiling", points: l.points.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" ") }, svg);
      const last = l.points[l.points.length - 1];
      svgEl("text", { x: sx(last[0]) - 4, y: sy(last[1]) - 4, "text-anchor": "end" }, svg).textContent = l.name;
    });
    spec.points.forEach((p) => {
      if (p.x === null || p.y === null) return;
      tip(svgEl("circle", { class: "pt" + (p.marked ? " marked" : ""), cx: sx(p.x), cy: sy(p.y), r: p.marked ? 4.5 : 3 }, svg),
        `${p.label}: x ${fmt(p.x)}, y ${fmt(p.y)}`);
    });
    svgEl("text", { x: m.l, y: h - m.b + 12 }, svg).textContent = fmt(xlo);
    svgEl("text", { x: w - m.r, y: h - m.b + 12, "text-anchor": "end" }, svg).textContent = fmt(xhi);
    axes(svg, m, w, h, spec, ylo, yhi);
    return svg;
  }

  const DRAW = { bars, line, heatmap, scatter };
  function draw(fig) {
    if (fig.dataset.drawn) return;
    const spec = DATA.charts[fig.dataset.chart];
    fig.dataset.drawn = "1";
    fig.insertBefore(DRAW[spec.kind](spec), fig.firstChild);
  }
  const figures = Array.from(document.querySelectorAll("figure.chart"));
  const seen = new IntersectionObserver((entries) => entries.forEach((e) => { if (e.isIntersecting) draw(e.target); }),
    { rootMargin: "400px" });
  figures.forEach((f) => seen.observe(f));
  window.opscopeDrawAll = () => figures.forEach(draw); // tests and printing draw everything at once
  window.addEventListener("beforeprint", window.opscopeDrawAll);

  // Tables: a header click sorts (numeric columns by value, '–' last); the filter box hides rows
  // whose text does not contain every word typed.
  document.querySelectorAll("div.table").forEach((box) => {
    const tbl = box.querySelector("table"), body = tbl.tBodies[0], rows = Array.from(body.rows);
    tbl.querySelectorAll("thead th").forEach((th, col) => th.addEventListener("click", () => {
      const num = th.hasAttribute("data-num"), asc = th.getAttribute("aria-sort") !== "ascending";
      tbl.querySelectorAll("thead th").forEach((o) => o.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      const key = (r) => { const t = r.cells[col].textContent.trim();
        if (!num) return t.toLowerCase();
        const v = parseFloat(t.replace(/[,%×x]/g, "")); return Number.isFinite(v) ? v : null; };
      const sorted = rows.slice().sort((a, b) => { const ka = key(a), kb = key(b);
        if (ka === null) return 1; if (kb === null) return -1;
        return (ka < kb ? -1 : ka > kb ? 1 : 0) * (asc ? 1 : -1); });
      sorted.forEach((r) => body.appendChild(r));
    }));
    const input = box.querySelector("p.filter input"), shown = box.querySelector("span.shown");
    if (!input) return;
    input.addEventListener("input", () => {
      const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      let n = 0;
      rows.forEach((r) => { const t = r.textContent.toLowerCase(), ok = words.every((w) => t.includes(w));
        r.hidden = !ok; n += ok; });
      shown.textContent = `${n} of ${rows.length}`;
    });
  });
})();
