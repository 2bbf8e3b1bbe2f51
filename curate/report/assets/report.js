// curate report: draws the charts and the record browser from the JSON in #curate-data.
// Every text from a record goes in through textContent, never as markup: model output is data.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("curate-data").textContent);
  var PAGE = 50;
  var COLORS = ["#2f5fb3", "#b3362d", "#1f7a4d", "#d9822b"];

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(x) {
    if (x === null || x === undefined) return "";
    return typeof x === "number" && !Number.isInteger(x) ? x.toFixed(3) : String(x);
  }

  // ---------------------------------------------------------------- charts
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }
  function fmt(v) {  // three significant digits, trailing zeros of a fraction dropped
    var t = Number(v).toPrecision(3);
    return t.indexOf("e") < 0 && t.indexOf(".") >= 0 ? t.replace(/0+$/, "").replace(/\.$/, "") : t;
  }
  function drawChart(chart) {
    var box = el("div", "chart");
    box.appendChild(el("h3", null, chart.title));
    box.appendChild(el("div", "note", chart.note));
    var W = 320, H = 140, pad = 18;
    var plot = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": chart.title });
    var series = chart.series.filter(function (s) { return s.bins.length; });
    var max = 1;
    series.forEach(function (s) { s.bins.forEach(function (b) { max = Math.max(max, b.count); }); });
    // every series of a chart has the same bins (one shared range), so bin i of each sits in slot i
    series.forEach(function (s, si) {
      var n = s.bins.length, slot = (W - 2 * pad) / n, bw = Math.max(1, slot / series.length - 1);
      s.bins.forEach(function (b, i) {
        var h = (H - 2 * pad) * b.count / max;
        var rect = svg("rect", { x: pad + i * slot + si * bw, y: H - pad - h, width: bw, height: h, fill: COLORS[si % COLORS.length],
                                 "data-series": s.name, "data-count": b.count });
        if (b.lo !== undefined) { rect.setAttribute("data-lo", b.lo); rect.setAttribute("data-hi", b.hi); }
        var tip = svg("title", {});
        tip.textContent = s.name + " " + (b.lo !== undefined ? fmt(b.lo) + " to " + fmt(b.hi) : b.label) + ": " + b.count;
        rect.appendChild(tip);
        plot.appendChild(rect);
      });
      if (si === 0) {
        plot.appendChild(svg("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: "#999" }));
        // the axis ends: a score chart's range (its low and high end), else the first and last bin's label
        var ends = chart.range ? [fmt(chart.range[0]), fmt(chart.range[1])] : [s.bins[0].label, s.bins[n - 1].label];
        [[pad, "start", ends[0]], [chart.range ? W - pad : pad + (n - 1) * slot, chart.range ? "end" : "start", ends[1]]]
          .forEach(function (end) {
            var t = svg("text", { x: end[0], y: H - 4, "font-size": 9, fill: "#555", "text-anchor": end[1] });
            t.textContent = end[2];
            plot.appendChild(t);
          });
        var top = svg("text", { x: 2, y: pad - 4, "font-size": 9, fill: "#555" });
        top.textContent = String(max);
        plot.appendChild(top);
      }
    });
    box.appendChild(plot);
    var legend = el("div", "legend");
    series.forEach(function (s, si) {
      var item = el("span");
      var swatch = el("i");
      swatch.style.background = COLORS[si % COLORS.length];
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(s.name));
      legend.appendChild(item);
    });
    box.appendChild(legend);
    return box;
  }
  var charts = document.getElementById("charts");
  if (charts) (data.charts || []).forEach(function (c) { charts.appendChild(drawChart(c)); });

  // ---------------------------------------------------------------- the record browser
  var list = document.getElementById("list");
  if (!list) return;
  var records = data.records || [];
  records.forEach(function (r) {
    var parts = [r.query, r.positive, r.task || "", r.id || "", r.reason || ""];
    (r.negatives || []).forEach(function (n) { parts.push(n.text); });
    if (r.dropped_negative) parts.push(r.dropped_negative.text);
    r._haystack = parts.join("\n").toLowerCase();
    r._where = r.stage + (r.step ? " / " + r.step : "");
    r._levels = (r.negatives || []).map(function (n) { return n.level; })
      .concat(r.dropped_negative ? [r.dropped_negative.level] : []).filter(function (x) { return x !== null && x !== undefined; });
  });

  function fill(id, values) {
    var select = document.getElementById(id);
    values.forEach(function (v) { var o = el("option", null, v); o.value = v; select.appendChild(o); });
  }
  function distinct(fn) {
    var seen = {};
    records.forEach(function (r) { [].concat(fn(r)).forEach(function (v) { if (v !== null && v !== undefined && v !== "") seen[v] = true; }); });
    return Object.keys(seen).sort();
  }
  fill("f-family", distinct(function (r) { return r.family; }));
  fill("f-step", distinct(function (r) { return r._where; }));
  fill("f-reason", distinct(function (r) { return r.reason; }));
  fill("f-level", distinct(function (r) { return r._levels.map(String); }));

  var shown = PAGE, matching = records;
  function value(id) { return document.getElementById(id).value; }
  function applyFilters() {
    var q = value("search").trim().toLowerCase(), status = value("f-status"), family = value("f-family"),
        where = value("f-step"), reason = value("f-reason"), level = value("f-level");
    matching = records.filter(function (r) {
      return (!q || r._haystack.indexOf(q) >= 0) && (!status || r.status === status) &&
        (!family || r.family === family) && (!where || r._where === where) && (!reason || r.reason === reason) &&
        (!level || r._levels.map(String).indexOf(level) >= 0);
    });
    shown = PAGE;
    render();
  }

  function negative(n, gone) {
    var box = el("div", "neg" + (n.level ? " l" + n.level : "") + (gone ? " gone" : ""));
    var facts = [];
    if (gone) facts.push("dropped");
    if (n.level !== null && n.level !== undefined) facts.push("level " + n.level);
    if (n.teacher_score !== null && n.teacher_score !== undefined) facts.push("teacher " + fmt(n.teacher_score));
    if (n.rank !== null && n.rank !== undefined) facts.push("rank " + n.rank);
    if (n.score !== null && n.score !== undefined) facts.push("LLM score " + fmt(n.score));
    if (n.source) facts.push(n.source);
    if (n.judges) Object.keys(n.judges).forEach(function (check) {
      var v = n.judges[check] || {};
      facts.push(check + ": " + Object.keys(v).map(function (j) { return v[j]; }).join("/"));
    });
    box.appendChild(el("div", "facts", facts.join(" · ")));
    box.appendChild(el("div", "text", n.text));
    return box;
  }

  function body(r) {
    var b = el("div", "body"), cols = el("div", "cols");
    var q = el("div"), p = el("div"), n = el("div");
    q.appendChild(el("h4", null, "query"));
    q.appendChild(el("div", "text", r.query));
    var qf = [];
    if (r.task) qf.push("task: " + r.task);
    if (r.language) qf.push("language: " + r.language);
    if (r.id) qf.push("id " + r.id);
    q.appendChild(el("div", "facts", qf.join(" · ")));
    p.appendChild(el("h4", null, "positive"));
    if (r.positive_title) p.appendChild(el("div", "facts", r.positive_title));
    p.appendChild(el("div", "text", r.positive));
    if (r.teacher) {
      var tf = [];
      if (r.teacher.positive !== null && r.teacher.positive !== undefined) tf.push("teacher " + fmt(r.teacher.positive));
      if (r.teacher.positive_rank !== null && r.teacher.positive_rank !== undefined) tf.push("rank " + r.teacher.positive_rank + (r.teacher.pool ? " of " + r.teacher.pool : ""));
      if (r.teacher.margin !== null && r.teacher.margin !== undefined) tf.push("margin " + fmt(r.teacher.margin));
      p.appendChild(el("div", "facts", tf.join(" · ")));
    }
    n.appendChild(el("h4", null, "negatives (" + (r.negatives || []).length + ")"));
    if (r.dropped_negative) n.appendChild(negative(r.dropped_negative, true));
    (r.negatives || []).forEach(function (x) { n.appendChild(negative(x, false)); });
    cols.appendChild(q); cols.appendChild(p); cols.appendChild(n);
    b.appendChild(cols);
    if (r.judges) { b.appendChild(el("h4", null, "judges' verdicts")); b.appendChild(el("pre", "detail", JSON.stringify(r.judges, null, 1))); }
    if (r.status === "dropped") {
      b.appendChild(el("h4", null, "why it was dropped: " + r.reason + " (" + r._where + ")"));
      b.appendChild(el("pre", "detail", JSON.stringify(r.detail || {}, null, 1)));
    }
    return b;
  }

  function item(r) {
    var box = el("div", "rec " + r.status), head = el("div", "head");
    head.appendChild(el("span", "badge " + r.status, r.status));
    if (r.family) head.appendChild(el("span", "tag", r.family));
    head.appendChild(el("span", "tag", r._where));
    head.appendChild(el("span", "q", r.query || "(no query: " + (r.id || "no id") + ")"));
    if (r.reason) head.appendChild(el("span", "why", r.reason));
    var filled = false;
    head.addEventListener("click", function () {
      if (!filled) { box.appendChild(body(r)); filled = true; }
      box.classList.toggle("open");
    });
    box.appendChild(head);
    return box;
  }

  function render() {
    list.textContent = "";
    var frag = document.createDocumentFragment();
    matching.slice(0, shown).forEach(function (r) { frag.appendChild(item(r)); });
    list.appendChild(frag);
    document.getElementById("shown").textContent = "showing " + Math.min(shown, matching.length) + " of " +
      matching.length + " matching (" + records.length + " in the sample)";
    document.getElementById("shown").setAttribute("data-matching", String(matching.length));
    document.getElementById("more").style.display = shown < matching.length ? "" : "none";
  }

  var timer = null;
  document.getElementById("search").addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(applyFilters, 120);
  });
  ["f-status", "f-family", "f-step", "f-reason", "f-level"].forEach(function (id) {
    document.getElementById(id).addEventListener("change", applyFilters);
  });
  document.getElementById("more").addEventListener("click", function () { shown += PAGE; render(); });
  render();
})();
