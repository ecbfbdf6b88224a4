// slidestream viewer: a dependency-free Deep Zoom tile viewer for `slidestream serve`
// (docs/serve.md). The slide list comes from /slides.json, the pyramid from
// /deepzoom/{id}.dzi and its tiles, the side panels from /slides/{id}/info.json.
//
// The view is one canvas. Its state is the slide point at the centre of the view (cx, cy, in
// pixels of the full-resolution Deep Zoom level) and the scale (CSS pixels per such pixel). Each
// frame draws, coarse to fine, every loaded tile in view of the levels from the base level (the
// largest one that is a single tile, always loaded) up to the target level (the coarsest whose
// pixels are no larger than the screen's), so a coarser level stays on screen while finer tiles
// load. Only tiles of the target level in view (and the base tile) are requested, nearest to
// the centre first, at most MAX_INFLIGHT at once; tiles no longer in view are never requested.
//
// For tests: window.viewerState = {slide, level (the Deep Zoom level drawn), maxLevel, scale,
// cx, cy, tilesRequested, tilesLoaded, tileErrors, idle, ready}; document.body.dataset.ready =
// "1" once the first screen of tiles has loaded (idle: every wanted tile of the current view has
// loaded or failed).
(function () {
  "use strict";

  var MAX_INFLIGHT = 6; // a browser opens at most 6 HTTP/1.1 connections to one host
  var CACHE_TILES = 800; // tiles kept in memory (least recently drawn dropped first)
  var MAX_SCALE = 4; // 400 %: CSS pixels per full-resolution pixel
  var SCALEBAR_PX = 110; // target length of the scale bar in CSS pixels

  function $(id) { return document.getElementById(id); }
  var view = $("view");
  var canvas = $("canvas");
  var ctx = canvas.getContext("2d");

  var state = {
    slide: null, level: null, maxLevel: null, scale: null, cx: null, cy: null,
    tilesRequested: 0, tilesLoaded: 0, tileErrors: 0, idle: false, ready: false
  };
  window.viewerState = state;

  var slides = []; // /slides.json "slides"
  var cur = null; // the open slide (see openSlide)
  var generation = 0; // bumped when a slide opens: answers for an older one are dropped
  var tiles = new Map(); // "level/col_row" -> {img, status: "loading"|"loaded"|"error", used}
  var queue = []; // tiles wanted but not yet requested, in request order
  var inflight = 0;
  var frame = 0;
  var drawPending = false;
  var dpr = window.devicePixelRatio || 1;

  // ---------- helpers ----------

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function fetchOk(url, kind) {
    return fetch(url).then(function (r) {
      if (!r.ok) {
        return r.text().then(function (t) { throw new Error(url + ": " + r.status + " " + t.trim()); });
      }
      return kind === "json" ? r.json() : r.text();
    });
  }

  function showMessage(text) {
    var m = $("message");
    m.textContent = text;
    m.hidden = !text;
  }

  function fmtNum(x, digits) {
    return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 0 : digits });
  }

  function safeDecode(s) {
    try { return decodeURIComponent(s); } catch (e) { return s; }
  }

  // ---------- slide list ----------

  function loadSlideList() {
    fetchOk("/slides.json", "json").then(function (data) {
      slides = data.slides || [];
      renderSlideList(slides, data.errors || []);
      var want = slideFromHash();
      if (want) {
        openSlide(want.id);
      } else if (slides.length) {
        history.replaceState(null, "", "#" + slides[0].id);
        openSlide(slides[0].id);
      } else {
        showMessage("No slides to show.");
        markIdle();
      }
    }).catch(function (e) {
      showMessage("Could not list the slides: " + e.message);
      markIdle();
    });
  }

  function renderSlideList(list, errors) {
    var ul = $("slides");
    clear(ul);
    $("slide-count").textContent = "(" + list.length + ")";
    list.forEach(function (s) {
      var a = el("a", { href: "#" + s.id, "data-id": s.id }, s.name);
      var meta = [s.vendor || "unknown vendor", fmtNum(s.width) + " \u00d7 " + fmtNum(s.height),
        s.level_count + (s.level_count === 1 ? " level" : " levels")];
      if (s.mpp_x) meta.push(fmtNum(s.mpp_x, 3) + " \u00b5m/px");
      a.appendChild(el("span", { class: "meta" }, meta.join(" \u00b7 ")));
      var li = el("li");
      li.appendChild(a);
      ul.appendChild(li);
    });
    var eu = $("errors");
    clear(eu);
    errors.forEach(function (e) {
      var li = el("li", { title: e.error }, e.name);
      li.appendChild(el("span", { class: "meta" }, e.error));
      eu.appendChild(li);
    });
  }

  function slideFromHash() {
    var h = location.hash.replace(/^#/, "");
    if (!h) return null;
    for (var i = 0; i < slides.length; i++) {
      if (slides[i].id === h || safeDecode(slides[i].id) === safeDecode(h)) return slides[i];
    }
    return null;
  }

  function markCurrent() {
    var links = $("slides").querySelectorAll("a");
    for (var i = 0; i < links.length; i++) {
      links[i].classList.toggle("current", cur !== null && links[i].getAttribute("data-id") === cur.id);
    }
  }

  // ---------- opening a slide ----------

  function parseDzi(text) {
    var doc = new DOMParser().parseFromString(text, "application/xml");
    var image = doc.getElementsByTagName("Image")[0];
    var size = doc.getElementsByTagName("Size")[0];
    if (!image || !size) throw new Error("not a Deep Zoom descriptor");
    var d = {
      tileSize: parseInt(image.getAttribute("TileSize"), 10),
      overlap: parseInt(image.getAttribute("Overlap"), 10),
      format: image.getAttribute("Format"),
      width: parseInt(size.getAttribute("Width"), 10),
      height: parseInt(size.getAttribute("Height"), 10)
    };
    if (!(d.tileSize > 0 && d.overlap >= 0 && d.width > 0 && d.height > 0)) throw new Error("bad Deep Zoom descriptor");
    // Levels as Deep Zoom defines them: halve (rounding up) down to 1 x 1, smallest first.
    var dims = [[d.width, d.height]];
    while (dims[dims.length - 1][0] > 1 || dims[dims.length - 1][1] > 1) {
      var last = dims[dims.length - 1];
      dims.push([Math.max(1, Math.ceil(last[0] / 2)), Math.max(1, Math.ceil(last[1] / 2))]);
    }
    dims.reverse();
    d.levels = dims.map(function (wh) {
      return { w: wh[0], h: wh[1], cols: Math.ceil(wh[0] / d.tileSize), rows: Math.ceil(wh[1] / d.tileSize) };
    });
    d.maxLevel = d.levels.length - 1;
    d.baseLevel = 0;
    for (var l = 0; l <= d.maxLevel; l++) {
      if (d.levels[l].cols === 1 && d.levels[l].rows === 1) d.baseLevel = l;
    }
    return d;
  }

  function openSlide(id) {
    if (cur && cur.id === id) return;
    var gen = ++generation;
    tiles.clear();
    queue = [];
    cur = null;
    state.slide = id;
    state.level = state.maxLevel = state.scale = state.cx = state.cy = null;
    state.idle = false;
    markCurrent();
    showMessage("");
    var meta = null;
    for (var i = 0; i < slides.length; i++) if (slides[i].id === id) meta = slides[i];
    $("title").textContent = meta ? meta.name : safeDecode(id);
    document.title = (meta ? meta.name : safeDecode(id)) + " \u2013 slidestream";
    Promise.all([
      fetchOk("/deepzoom/" + id + ".dzi", "text"),
      fetchOk("/slides/" + id + "/info.json", "json")
    ]).then(function (res) {
      if (gen !== generation) return;
      var dz = parseDzi(res[0]);
      var info = res[1];
      cur = { id: id, dz: dz, info: info, cx: dz.width / 2, cy: dz.height / 2, scale: 1, tissue: null };
      cur.offset = boundsOffset(dz, info);
      markCurrent();
      renderInfo(info);
      fitView();
      if ($("tissue").checked) loadTissue();
      scheduleDraw();
    }).catch(function (e) {
      if (gen !== generation) return;
      showMessage("Could not open " + safeDecode(id) + ": " + e.message);
      renderInfo(null);
      markIdle();
      scheduleDraw();
    });
  }

  // Where level 0 of the slide lies in Deep Zoom pixels: the server limits the pyramid to the
  // openslide.bounds-* rectangle unless run with --no-limit-bounds; a pyramid as large as level
  // 0 starts at its origin.
  function boundsOffset(dz, info) {
    var dims = info.dimensions || [dz.width, dz.height];
    if (dz.width === dims[0] && dz.height === dims[1]) return [0, 0];
    var p = info.properties || {};
    return [parseInt(p["openslide.bounds-x"] || "0", 10) || 0, parseInt(p["openslide.bounds-y"] || "0", 10) || 0];
  }

  // ---------- side panels ----------

  function renderInfo(info) {
    var sum = $("summary");
    var props = $("props");
    var assoc = $("associated");
    clear(sum); clear(props); clear(assoc);
    $("props-section").hidden = !info;
    $("assoc-section").hidden = true;
    if (!info) return;
    function row(table, k, v) {
      var tr = el("tr");
      tr.appendChild(el("th", null, k));
      tr.appendChild(el("td", null, v));
      table.appendChild(tr);
      return tr;
    }
    row(sum, "name", info.name);
    row(sum, "vendor", info.vendor || "unknown");
    if (info.dimensions) row(sum, "dimensions", fmtNum(info.dimensions[0]) + " \u00d7 " + fmtNum(info.dimensions[1]) + " px");
    if (info.level_dimensions) {
      row(sum, "levels", info.level_dimensions.map(function (d, i) {
        var ds = info.level_downsamples ? " (\u00f7" + fmtNum(info.level_downsamples[i], 2) + ")" : "";
        return d[0] + "\u00d7" + d[1] + ds;
      }).join(", "));
    }
    if (info.mpp) row(sum, "mpp", fmtNum(info.mpp[0], 4) + " \u00d7 " + fmtNum(info.mpp[1], 4) + " \u00b5m");
    if (info.objective_power !== null && info.objective_power !== undefined) row(sum, "objective", info.objective_power + "\u00d7");
    if (info.quickhash) row(sum, "quickhash", info.quickhash);
    var keys = Object.keys(info.properties || {}).sort();
    $("prop-count").textContent = String(keys.length);
    keys.forEach(function (k) { row(props, k, info.properties[k]).setAttribute("data-key", k.toLowerCase()); });
    applyPropFilter();
    var names = Object.keys(info.associated || {});
    $("assoc-section").hidden = names.length === 0;
    names.forEach(function (name) {
      var wh = info.associated[name];
      var url = "/slides/" + cur.id + "/associated/" + encodeURIComponent(name) + ".jpg";
      var fig = el("figure");
      var a = el("a", { href: url, target: "_blank", rel: "noopener" });
      a.appendChild(el("img", { src: url, alt: name }));
      fig.appendChild(a);
      fig.appendChild(el("figcaption", null, name + (wh ? " \u00b7 " + wh[0] + "\u00d7" + wh[1] : "")));
      assoc.appendChild(fig);
    });
  }

  function applyPropFilter() {
    var f = $("prop-filter").value.trim().toLowerCase();
    var rows = $("props").querySelectorAll("tr");
    for (var i = 0; i < rows.length; i++) {
      var text = rows[i].getAttribute("data-key") + " " + rows[i].lastChild.textContent.toLowerCase();
      rows[i].hidden = f !== "" && text.indexOf(f) < 0;
    }
  }

  // ---------- tissue overlay ----------

  function loadTissue() {
    if (!cur || cur.tissue) return;
    var c = cur;
    var img = new Image();
    c.tissue = { img: img, loaded: false };
    img.onload = function () { c.tissue.loaded = true; if (c === cur) scheduleDraw(); };
    img.onerror = function () { if (c === cur) showMessage("Could not load the tissue mask."); };
    img.src = "/slides/" + c.id + "/tissue.png?size=1024";
  }

  // ---------- geometry ----------

  function viewSize() { return [view.clientWidth, view.clientHeight]; }

  function clampScale(s) {
    var fit = fitScale(); // a slide smaller than the view is fitted above MAX_SCALE
    return Math.min(Math.max(MAX_SCALE, fit), Math.max(fit / 4, s));
  }

  function fitScale() {
    var vs = viewSize();
    if (!cur) return 1;
    return Math.min(vs[0] / cur.dz.width, vs[1] / cur.dz.height) * 0.95;
  }

  function fitView() {
    if (!cur) return;
    cur.scale = fitScale();
    cur.cx = cur.dz.width / 2;
    cur.cy = cur.dz.height / 2;
    scheduleDraw();
  }

  function clampCenter() {
    cur.cx = Math.min(cur.dz.width, Math.max(0, cur.cx));
    cur.cy = Math.min(cur.dz.height, Math.max(0, cur.cy));
  }

  // Zooms by factor f keeping the slide point under (px, py) (CSS pixels in the view) fixed.
  function zoomAt(f, px, py) {
    if (!cur) return;
    var vs = viewSize();
    if (px === undefined) { px = vs[0] / 2; py = vs[1] / 2; }
    var ix = cur.cx + (px - vs[0] / 2) / cur.scale;
    var iy = cur.cy + (py - vs[1] / 2) / cur.scale;
    cur.scale = clampScale(cur.scale * f);
    cur.cx = ix - (px - vs[0] / 2) / cur.scale;
    cur.cy = iy - (py - vs[1] / 2) / cur.scale;
    clampCenter();
    scheduleDraw();
  }

  function panBy(dx, dy) {
    if (!cur) return;
    cur.cx -= dx / cur.scale;
    cur.cy -= dy / cur.scale;
    clampCenter();
    scheduleDraw();
  }

  function targetLevel() {
    // The coarsest level whose pixels are at most one device pixel.
    var s = cur.scale * dpr;
    var l = Math.ceil(cur.dz.maxLevel + Math.log2(s) - 1e-9);
    return Math.max(cur.dz.baseLevel, Math.min(cur.dz.maxLevel, l));
  }

  // Column and row ranges of the level-l tiles in view.
  function tilesInView(l) {
    var dz = cur.dz, lv = dz.levels[l];
    var f = Math.pow(2, l - dz.maxLevel); // level-l pixels per full-resolution pixel
    var vs = viewSize();
    var x0 = (cur.cx - vs[0] / 2 / cur.scale) * f, x1 = (cur.cx + vs[0] / 2 / cur.scale) * f;
    var y0 = (cur.cy - vs[1] / 2 / cur.scale) * f, y1 = (cur.cy + vs[1] / 2 / cur.scale) * f;
    return {
      c0: Math.max(0, Math.floor(x0 / dz.tileSize)), c1: Math.min(lv.cols - 1, Math.floor(x1 / dz.tileSize)),
      r0: Math.max(0, Math.floor(y0 / dz.tileSize)), r1: Math.min(lv.rows - 1, Math.floor(y1 / dz.tileSize))
    };
  }

  // ---------- tiles ----------

  function tileUrl(l, c, r) {
    return "/deepzoom/" + cur.id + "_files/" + l + "/" + c + "_" + r + "." + (cur.dz.format || "jpeg");
  }

  function requestTile(t) {
    var gen = generation;
    inflight++;
    t.status = "loading";
    state.tilesRequested++;
    t.img.onload = function () {
      inflight--;
      if (gen === generation) { t.status = "loaded"; state.tilesLoaded++; scheduleDraw(); }
      pump();
    };
    t.img.onerror = function () {
      inflight--;
      if (gen === generation) { t.status = "error"; state.tileErrors++; scheduleDraw(); }
      pump();
    };
    t.img.src = t.url;
  }

  function pump() {
    while (inflight < MAX_INFLIGHT && queue.length) {
      var t = queue.shift();
      if (t.status === "queued") requestTile(t);
    }
  }

  function evict(keep) {
    if (tiles.size <= CACHE_TILES) return;
    var old = [];
    tiles.forEach(function (t, k) { if (t.status !== "loading" && !keep.has(k)) old.push([t.used, k]); });
    old.sort(function (a, b) { return a[0] - b[0]; });
    for (var i = 0; i < old.length && tiles.size > CACHE_TILES; i++) tiles.delete(old[i][1]);
  }

  // ---------- drawing ----------

  function scheduleDraw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(draw);
  }

  function resizeCanvas() {
    dpr = window.devicePixelRatio || 1;
    var vs = viewSize();
    var w = Math.max(1, Math.round(vs[0] * dpr)), h = Math.max(1, Math.round(vs[1] * dpr));
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  }

  function draw() {
    drawPending = false;
    frame++;
    resizeCanvas();
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = "#e9e9e9";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (!cur) { updateStatus(); return; }
    var dz = cur.dz;
    var S = cur.scale * dpr; // device pixels per full-resolution pixel
    var ox = canvas.width / 2 - cur.cx * S, oy = canvas.height / 2 - cur.cy * S;
    ctx.fillStyle = "#fff";
    ctx.fillRect(Math.round(ox), Math.round(oy), Math.round(dz.width * S), Math.round(dz.height * S));
    ctx.imageSmoothingEnabled = true;
    ctx.imageSmoothingQuality = "high";

    var target = targetLevel();
    var wanted = [], keep = new Set();
    // The base tile first: it backs every view while finer tiles load.
    wanted.push([dz.baseLevel, 0, 0, -1]);
    for (var l = dz.baseLevel; l <= target; l++) {
      var k = S / Math.pow(2, l - dz.maxLevel); // device pixels per level-l pixel
      var rg = tilesInView(l);
      for (var r = rg.r0; r <= rg.r1; r++) {
        for (var c = rg.c0; c <= rg.c1; c++) {
          var key = l + "/" + c + "_" + r;
          var t = tiles.get(key);
          if (l === target) {
            keep.add(key);
            // Nearest to the view centre first (distance in device pixels).
            var tcx = ox + (c + 0.5) * dz.tileSize * k - canvas.width / 2;
            var tcy = oy + (r + 0.5) * dz.tileSize * k - canvas.height / 2;
            wanted.push([l, c, r, tcx * tcx + tcy * tcy]);
          }
          if (t && t.status === "loaded") {
            t.used = frame;
            keep.add(key);
            var x0 = c * dz.tileSize - (c > 0 ? dz.overlap : 0);
            var y0 = r * dz.tileSize - (r > 0 ? dz.overlap : 0);
            var dx0 = Math.round(ox + x0 * k), dy0 = Math.round(oy + y0 * k);
            var dx1 = Math.round(ox + (x0 + t.img.naturalWidth) * k), dy1 = Math.round(oy + (y0 + t.img.naturalHeight) * k);
            ctx.drawImage(t.img, dx0, dy0, dx1 - dx0, dy1 - dy0);
          }
        }
      }
    }
    if ($("tissue").checked && cur.tissue && cur.tissue.loaded) {
      var d0 = cur.info.dimensions || [dz.width, dz.height];
      ctx.drawImage(cur.tissue.img, Math.round(ox - cur.offset[0] * S), Math.round(oy - cur.offset[1] * S),
        Math.round(d0[0] * S), Math.round(d0[1] * S));
    }

    // Queue the wanted tiles not yet asked for, nearest first; drop queued ones out of view.
    keep.add(dz.baseLevel + "/0_0");
    wanted.sort(function (a, b) { return a[3] - b[3]; });
    var pending = 0;
    queue = [];
    wanted.forEach(function (w) {
      var key = w[0] + "/" + w[1] + "_" + w[2];
      var t = tiles.get(key);
      if (!t) {
        t = { img: new Image(), status: "queued", used: frame, url: tileUrl(w[0], w[1], w[2]) };
        tiles.set(key, t);
      }
      if (t.status === "queued") queue.push(t);
      if (t.status === "queued" || t.status === "loading") pending++;
    });
    tiles.forEach(function (t, key) { if (t.status === "queued" && !keep.has(key)) tiles.delete(key); });
    evict(keep);
    pump();

    state.level = target;
    state.maxLevel = dz.maxLevel;
    state.scale = cur.scale;
    state.cx = cur.cx;
    state.cy = cur.cy;
    state.idle = pending === 0;
    if (state.idle) markIdle();
    updateScalebar();
    updateStatus();
  }

  function markIdle() {
    state.idle = true;
    if (!state.ready) {
      state.ready = true;
      document.body.dataset.ready = "1";
    }
  }

  function updateStatus() {
    if (!cur) { $("status").textContent = ""; return; }
    $("status").textContent = "level " + state.level + "/" + cur.dz.maxLevel + " \u00b7 " +
      fmtNum(cur.scale * 100, cur.scale < 0.1 ? 1 : 0) + " % \u00b7 " + state.tilesLoaded + " tiles" +
      (state.tileErrors ? " \u00b7 " + state.tileErrors + " failed" : "");
  }

  function updateScalebar() {
    var bar = $("scalebar");
    var mpp = cur && cur.info && cur.info.mpp ? cur.info.mpp[0] : null;
    if (!mpp) { bar.hidden = true; return; }
    var umPerPx = mpp / cur.scale; // micrometres per CSS pixel
    var target = umPerPx * SCALEBAR_PX;
    var p = Math.pow(10, Math.floor(Math.log10(target)));
    var len = [5, 2, 1].map(function (m) { return m * p; }).filter(function (v) { return v <= target; })[0] || p;
    $("scalebar-bar").style.width = Math.round(len / umPerPx) + "px";
    $("scalebar-label").textContent = len >= 1000 ? fmtNum(len / 1000, 3) + " mm" : fmtNum(len, 3) + " \u00b5m";
    bar.hidden = false;
  }

  // ---------- input ----------

  var drag = null;
  view.addEventListener("pointerdown", function (e) {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, id: e.pointerId };
    view.setPointerCapture(e.pointerId);
    view.classList.add("dragging");
    view.focus();
  });
  view.addEventListener("pointermove", function (e) {
    if (!drag || e.pointerId !== drag.id) return;
    panBy(e.clientX - drag.x, e.clientY - drag.y);
    drag.x = e.clientX;
    drag.y = e.clientY;
  });
  function endDrag(e) {
    if (!drag || e.pointerId !== drag.id) return;
    drag = null;
    view.classList.remove("dragging");
  }
  view.addEventListener("pointerup", endDrag);
  view.addEventListener("pointercancel", endDrag);
  view.addEventListener("wheel", function (e) {
    e.preventDefault();
    var dy = e.deltaY * (e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? 800 : 1);
    var rect = view.getBoundingClientRect();
    zoomAt(Math.pow(2, -dy / 300), e.clientX - rect.left, e.clientY - rect.top);
  }, { passive: false });
  view.addEventListener("dblclick", function (e) {
    var rect = view.getBoundingClientRect();
    zoomAt(e.shiftKey ? 0.5 : 2, e.clientX - rect.left, e.clientY - rect.top);
  });
  $("zoom-in").addEventListener("click", function () { zoomAt(2); });
  $("zoom-out").addEventListener("click", function () { zoomAt(0.5); });
  $("zoom-home").addEventListener("click", fitView);
  $("tissue").addEventListener("change", function () {
    if ($("tissue").checked) loadTissue();
    scheduleDraw();
  });
  $("prop-filter").addEventListener("input", applyPropFilter);
  document.addEventListener("keydown", function (e) {
    if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "TEXTAREA")) return;
    var step = 80;
    switch (e.key) {
      case "+": case "=": zoomAt(2); break;
      case "-": case "_": zoomAt(0.5); break;
      case "0": fitView(); break;
      case "ArrowLeft": panBy(step, 0); break;
      case "ArrowRight": panBy(-step, 0); break;
      case "ArrowUp": panBy(0, step); break;
      case "ArrowDown": panBy(0, -step); break;
      case "t": $("tissue").checked = !$("tissue").checked; $("tissue").dispatchEvent(new Event("change")); break;
      default: return;
    }
    e.preventDefault();
  });
  window.addEventListener("hashchange", function () {
    var s = slideFromHash();
    if (s) openSlide(s.id);
  });
  if (window.ResizeObserver) new ResizeObserver(scheduleDraw).observe(view);
  else window.addEventListener("resize", scheduleDraw);

  loadSlideList();
})();
