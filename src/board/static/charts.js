// Switchboard board: the charts (issue 39). An element with `data-chart` (a kind, below) and
// `data-chart-src` (a JSON route of the board) is drawn with uPlot (vendored, loaded from the same
// origin only when a page has a chart), and drawn again from a fresh fetch whenever board.js says
// something changed (`sb-changed` on <body>). Beside each chart is a table of the same numbers,
// rendered by the server: it is open without JavaScript and closed here once the chart is drawn.
// What each chart drew is published as its `data-points` attribute and in
// `window.switchboardCharts` (by element id): {x: [unix seconds], series: {label: [values]}}.
// No inline script or style: sizes and colours go through the CSSOM, which the CSP allows.
(function () {
  'use strict';
  var me = document.currentScript;
  var UPLOT_JS = me && me.getAttribute('data-uplot-js');
  var UPLOT_CSS = me && me.getAttribute('data-uplot-css');
  var registry = {};
  window.switchboardCharts = registry;
  document.documentElement.classList.add('sb-charts');

  // -------------------------------------------------------------------------------------------
  // What each kind draws from its JSON: {x, series: [{label, values, tone?}]}

  function steps(json) {
    var from = Date.parse(json.from) / 1000;
    var n = Math.round((Date.parse(json.to) / 1000 - from) / json.step_seconds);
    var x = [];
    for (var i = 0; i < n; i++) x.push(from + i * json.step_seconds);
    return x;
  }
  function valueOf(p, key) {
    if (Array.isArray(key)) return key.reduce(function (a, k) { return a + p[k]; }, 0);
    return p[key];
  }
  // [[field or [fields to add], label, tone?], ...] of an endpoint's points.
  function fields(list) {
    return function (json) {
      return {
        x: json.points.map(function (p) { return Date.parse(p.t) / 1000; }),
        series: list.map(function (f) {
          return { label: f[1], tone: f[2], values: json.points.map(function (p) { return valueOf(p, f[0]); }) };
        }),
      };
    };
  }
  function perQueue(field) {
    return function (json) {
      return {
        x: steps(json),
        series: Object.keys(json.queues).sort().map(function (q) {
          return { label: q, values: json.queues[q].map(function (p) { return p[field]; }) };
        }),
      };
    };
  }
  var OUTCOMES = { routed: 'ok', dropped: null, repeat: null, faulted: 'bad', recorded: null, refused: 'off' };
  var KINDS = {
    depth: fields([['pending', 'Pending'], ['claimed_depth', 'Claimed']]),
    throughput: fields([['created', 'Created'], ['claimed', 'Claimed'], ['completed', 'Done', 'ok'], ['failed', 'Failed', 'off'], ['dead', 'Dead letters', 'bad']]),
    wait: fields([['wait_p50_ms', 'p50'], ['wait_p95_ms', 'p95', 'off']]),
    rings: fields([['rings_sent', 'Sent'], [['heard_claim', 'heard_ack'], 'Heard', 'ok'], ['unheard', 'Unheard', 'bad'], ['digests', 'Digests']]),
    'queues-pending': perQueue('pending'),
    'queues-created': perQueue('created'),
    deliveries: function (json) {
      var x = steps(json);
      var names = Object.keys(OUTCOMES).filter(function (o) { return json.outcomes[o]; });
      Object.keys(json.outcomes).forEach(function (o) { if (names.indexOf(o) < 0) names.push(o); });
      return { x: x, series: names.map(function (o) { return { label: o, tone: OUTCOMES[o], values: json.outcomes[o] }; }) };
    },
    // The week's presence: spans of in/out (labelled by source), the shift's windows behind. Drawn by
    // drawBand below; published as the span starts and their presence and source.
    presence: function (json) {
      var t = function (iso) { return Date.parse(iso) / 1000; };
      var spans = json.spans.map(function (s) { return { from: t(s.from), to: t(s.to), presence: s.presence, source: s.source }; });
      var shift = json.shift.map(function (w) { return { from: t(w.from), to: t(w.to) }; });
      return {
        x: [t(json.since), t(json.until)],
        series: [{ label: 'presence', values: [0, 0] }],
        band: { spans: spans, shift: shift },
        published: {
          x: spans.map(function (s) { return s.from; }),
          series: {
            to: spans.map(function (s) { return s.to; }),
            presence: spans.map(function (s) { return s.presence; }),
            source: spans.map(function (s) { return s.source; }),
          },
          shift: shift,
        },
      };
    },
    sparkline: function (json, el) {
      var x = steps(json);
      var values = json.series[el.getAttribute('data-series')] || x.map(function () { return 0; });
      return { x: x, series: [{ label: 'pending', values: values }] };
    },
  };

  // -------------------------------------------------------------------------------------------
  // Drawing

  var uplotReady = null;
  function loadUplot() {
    if (window.uPlot) return Promise.resolve(window.uPlot);
    if (!uplotReady) {
      uplotReady = new Promise(function (resolve, reject) {
        var link = document.createElement('link');
        link.rel = 'stylesheet';
        link.href = UPLOT_CSS;
        document.head.appendChild(link);
        var s = document.createElement('script');
        s.src = UPLOT_JS;
        s.addEventListener('load', function () { resolve(window.uPlot); });
        s.addEventListener('error', function () { uplotReady = null; reject(new Error('uPlot did not load')); });
        document.head.appendChild(s);
      });
    }
    return uplotReady;
  }

  function cssVar(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }
  var PALETTE = ['--chart-1', '--chart-2', '--chart-3', '--chart-4', '--chart-5', '--chart-6'];
  function colour(s, i) {
    if (s.tone) return cssVar('--' + s.tone, '#888');
    return cssVar(PALETTE[i % PALETTE.length], '#2f5d8a');
  }
  function fmtMs(ms) {
    if (ms === null || ms === undefined) return '';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    if (ms < 3600000) return (ms / 60000).toFixed(1) + ' min';
    return (ms / 3600000).toFixed(1) + ' h';
  }

  function drawBand(u, band) {
    var ctx = u.ctx;
    var top = u.bbox.top;
    var h = u.bbox.height;
    var px = function (v) { return u.valToPos(v, 'x', true); };
    var ratio = window.devicePixelRatio || 1;
    ctx.save();
    ctx.fillStyle = cssVar('--line', '#ddd');
    band.shift.forEach(function (w) { ctx.fillRect(px(w.from), top, px(w.to) - px(w.from), h); });
    ctx.font = Math.round(11 * ratio) + 'px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    band.spans.forEach(function (s) {
      var x0 = px(s.from);
      var w = px(s.to) - x0;
      // An override (agent, operator) is solid; the shift or the default a little lighter.
      ctx.globalAlpha = s.source === 'agent' || s.source === 'operator' ? 1 : 0.72;
      ctx.fillStyle = cssVar(s.presence === 'in' ? '--ok' : '--off', '#888');
      ctx.fillRect(x0, top + h * 0.22, w, h * 0.56);
      ctx.globalAlpha = 1;
      var label = s.presence + (s.source ? ' · ' + s.source : '');
      if (w > ctx.measureText(label).width + 8 * ratio) {
        ctx.fillStyle = cssVar('--panel', '#fff');
        ctx.fillText(label, x0 + 4 * ratio, top + h / 2);
      }
    });
    ctx.restore();
  }

  // Time ticks in UTC as the tables write them: 14:00, and the date (03-02) at midnight or when ticks are days apart.
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function timeTicks(u, splits, axisIdx, space) {
    return splits.map(function (ts) {
      var d = new Date(ts * 1000);
      var day = pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate());
      var hm = pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes());
      return space >= 86400 || hm === '00:00' ? day : hm;
    });
  }

  function options(uPlot, c, built) {
    if (built.band) {
      var axisInk = cssVar('--muted', '#666');
      return {
        width: Math.max(200, c.el.clientWidth),
        height: 110,
        series: [{ label: 'UTC' }, { label: 'presence', stroke: 'transparent', points: { show: false } }],
        legend: { show: false },
        cursor: { show: false },
        tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'); },
        scales: { x: { time: true, range: [built.x[0], built.x[1]] }, y: { range: [0, 1] } },
        axes: [{ stroke: axisInk, grid: { show: false }, ticks: { stroke: cssVar('--line', '#ddd') }, values: timeTicks }, { show: false }],
        hooks: { draw: [function (u) { drawBand(u, built.band); }] },
      };
    }
    var spark = c.kind === 'sparkline';
    var ink = cssVar('--muted', '#666');
    var grid = cssVar('--line', '#ddd');
    var stepped = uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined;
    var series = [{ label: 'UTC' }].concat(
      built.series.map(function (s, i) {
        var stroke = colour(s, i);
        // Claim waits exist only where something was claimed: marks, not a line through gaps.
        if (c.kind === 'wait') return { label: s.label, stroke: stroke, width: 1, points: { show: true, size: 6, fill: stroke } };
        return { label: s.label, stroke: stroke, width: spark ? 1 : 1.5, fill: spark ? stroke + '33' : undefined, paths: spark ? undefined : stepped, points: { show: false } };
      }),
    );
    var yAxis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 56 };
    if (c.kind === 'wait') {
      yAxis.values = function (u, splits) { return splits.map(fmtMs); };
      yAxis.size = 72;
    }
    else yAxis.values = function (u, splits) { return splits.map(function (v) { return v % 1 === 0 ? String(v) : ''; }); };
    return {
      width: Math.max(spark ? 80 : 200, c.el.clientWidth),
      height: spark ? 36 : 170,
      series: series,
      legend: { show: !spark },
      cursor: spark ? { show: false } : { points: { show: false } },
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'); },
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: spark ? [{ show: false }, { show: false }] : [{ stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, values: timeTicks }, yAxis],
    };
  }

  var charts = [];
  function labelsOf(built) { return built.series.map(function (s) { return s.label; }).join('\n'); }

  function draw(uPlot, c, json) {
    var built = KINDS[c.kind](json, c.el);
    var data = [built.x].concat(built.series.map(function (s) { return s.values; }));
    var labels = labelsOf(built);
    // The band is drawn from its spans by a hook: a new plot for new spans.
    if (c.plot && c.labels === labels && !built.band) c.plot.setData(data);
    else {
      if (c.plot) c.plot.destroy();
      c.el.textContent = '';
      c.plot = new uPlot(options(uPlot, c, built), data, c.el);
      c.labels = labels;
    }
    var points = built.published;
    if (!points) {
      points = { x: built.x, series: {} };
      built.series.forEach(function (s) { points.series[s.label] = s.values; });
    }
    c.renders += 1;
    c.el.setAttribute('data-points', JSON.stringify(points));
    c.el.setAttribute('data-chart-state', 'drawn');
    c.el.setAttribute('data-chart-renders', String(c.renders));
    registry[c.el.id] = { kind: c.kind, src: c.src, points: points, renders: c.renders };
    if (c.renders === 1) {
      var table = c.el.parentNode && c.el.parentNode.querySelector('details.chart-table');
      if (table) table.open = false;
    }
  }

  // One fetch per source, however many charts read it; an older answer never overwrites a newer one.
  var seq = {};
  function render(list) {
    var bySrc = {};
    list.forEach(function (c) { (bySrc[c.src] = bySrc[c.src] || []).push(c); });
    Object.keys(bySrc).forEach(function (src) {
      var mine = (seq[src] = (seq[src] || 0) + 1);
      var json = fetch(src, { credentials: 'same-origin', headers: { accept: 'application/json' } }).then(function (r) {
        if (!r.ok) throw new Error(src + ' answered ' + r.status);
        return r.json();
      });
      Promise.all([loadUplot(), json])
        .then(function (got) {
          if (seq[src] !== mine) return;
          bySrc[src].forEach(function (c) { if (document.body.contains(c.el)) draw(got[0], c, got[1]); });
        })
        .catch(function (err) {
          bySrc[src].forEach(function (c) { c.el.setAttribute('data-chart-state', 'failed'); });
          if (window.console) console.warn('switchboard charts:', err.message);
        });
    });
  }

  function prune() {
    charts = charts.filter(function (c) {
      if (document.body.contains(c.el)) return true;
      if (c.plot) c.plot.destroy();
      if (registry[c.el.id] && registry[c.el.id].src === c.src) delete registry[c.el.id];
      return false;
    });
  }

  function scan(root) {
    if (!root || !root.querySelectorAll) return;
    var found = Array.prototype.slice.call(root.querySelectorAll('[data-chart]'));
    if (root.hasAttribute && root.hasAttribute('data-chart')) found.push(root);
    var fresh = [];
    found.forEach(function (el) {
      if (el.sbChart || !KINDS[el.getAttribute('data-chart')]) return;
      var c = { el: el, kind: el.getAttribute('data-chart'), src: el.getAttribute('data-chart-src'), plot: null, labels: '', renders: 0 };
      el.sbChart = c;
      charts.push(c);
      fresh.push(c);
    });
    prune();
    if (fresh.length) render(fresh);
  }

  if (window.htmx) window.htmx.onLoad(scan);
  scan(document);
  document.body.addEventListener('sb-changed', function () {
    prune();
    if (charts.length) render(charts.slice());
  });
  var resizing = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      charts.forEach(function (c) { if (c.plot) c.plot.setSize({ width: Math.max(80, c.el.clientWidth), height: c.plot.height }); });
    }, 150);
  });
})();
