// The static site's page (sbd_viz.site): a card of the gallery opens its prompt, whose data file (data/NN.js, written
// by sbd_viz.site.export) is loaded as a <script> (Chromium refuses to fetch a file from file://, not a script);
// the app's scrubber (scrubber.js, the same file) draws its γ map, plain or verified; the failure table, the block
// at a row's call and the decode order follow the piece the scrubber shows. The URL's #key opens a prompt directly.
//
// Read without eyes (the tests do): #view carries data-key, data-mode, data-piece (the piece whose views are
// drawn) and data-call (the call opened, '' for none); the table's rows carry data-call and data-kind; the call
// view's cells data-state; the order picture's svg data-piece and data-points.
(function () {
  const entries = {}, waiting = {};
  const view = document.getElementById('view');
  const box = document.getElementById('sbd-scrubber');
  const $ = (sel) => view.querySelector(sel);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;',
                                                          "'": '&#39;'}[c]));
  let current = null;

  // a data file calls this with its prompt's entry
  window.sbdSiteData = (entry) => {
    entries[entry.key] = entry;
    (waiting[entry.key] || []).forEach((done) => done(entry));
    delete waiting[entry.key];
  };

  function fetchEntry(card) {
    const key = card.dataset.key;
    if (entries[key]) return Promise.resolve(entries[key]);
    return new Promise((resolve, reject) => {
      const first = !waiting[key];
      (waiting[key] = waiting[key] || []).push(resolve);
      if (!first) return;
      const script = document.createElement('script');
      script.src = card.dataset.file;
      script.onerror = () => reject(new Error(`could not read ${card.dataset.file}`));
      document.body.appendChild(script);
    });
  }

  const scrub = sbdScrubber(box, {slider: null, release: null, onPiece: (i) => showPiece(i)});

  function holds(p, g) {
    return (g > p.lo && g < p.hi) || (g === p.lo && p.lo_closed) || (g === p.hi && p.hi_closed);
  }
  // a γ inside piece p, as short as it can be written: its middle rounded to the fewest digits that stay inside,
  // else an end it holds (a piece a float or two wide)
  function aim(p) {
    const mid = (p.lo + p.hi) / 2;
    for (let digits = 1; digits <= 17; digits++) {
      const g = Number(mid.toPrecision(digits));
      if (holds(p, g)) return g;
    }
    return holds(p, mid) ? mid : p.lo_closed ? p.lo : p.hi;
  }

  function settingsLine(e) {
    const s = e.settings;
    const stop = s.stop.length ? `stop at ${s.stop.map((t) => JSON.stringify(t)).join(', ')}` : 'stop at the end token';
    return `model ${e.model} · rule ${s.rule} · block size ${s.block_size} · at most ${s.max_new_tokens} new tokens · ` +
      `${stop}${e.chat ? ' · the chat template applied' : ''} · greedy · built in ${e.seconds} s, ${e.calls} model calls`;
  }

  function open(key) {
    const card = document.querySelector(`#gallery .card[data-key='${key}']`);
    if (!card) return;
    fetchEntry(card).then((e) => {
      current = e;
      view.hidden = false;
      view.dataset.key = e.key;
      document.querySelectorAll('#gallery .card').forEach((c) => c.classList.toggle('open', c === card));
      $('.title').textContent = e.label || 'a prompt';
      $('.prompt').textContent = e.text;
      $('.settings').textContent = settingsLine(e);
      $('.ntp').textContent = `NTP (one token per call, greedy): ${e.ntp.calls} calls · ${JSON.stringify(e.ntp.text)}`;
      // the drafting the verified map swept (the mode measured fastest on the model, as the app starts on it)
      $('.drafted').textContent = `(${e.maps.verified.mode || 'single drafting'})`;
      setMode(view.dataset.mode || 'plain');
      if (location.hash !== `#${e.key}`) history.replaceState(null, '', `#${e.key}`);
      view.scrollIntoView({block: 'start'});
    }).catch((err) => { view.hidden = false; $('.title').textContent = String(err); });
  }

  function setMode(mode) {
    view.dataset.mode = mode;
    view.querySelectorAll("input[name='mode']").forEach((r) => { r.checked = r.value === mode; });
    view.dataset.piece = '';
    scrub.load(JSON.stringify(current.maps[mode]));
  }

  function showPiece(i) {
    const p = current.maps[view.dataset.mode].pieces[i];  // the entry's own piece (the scrubber holds a copy)
    view.dataset.piece = String(i);
    view.dataset.call = '';
    const call = $('.call');
    call.hidden = true;
    call.innerHTML = '';
    const decoded = current.maps[view.dataset.mode].pieces.filter((q) => q.decoded);
    const at = decoded.indexOf(p);
    $('.where').textContent = p && p.decoded ? `decode ${at + 1} of ${decoded.length}` : 'not decoded';
    $('.prev').disabled = at <= 0;
    $('.next').disabled = at < 0 || at >= decoded.length - 1;
    failureTable(p && p.decoded ? p.failures : null);
    orderPicture(i, p && p.decoded ? p.order : null);
  }

  function failureTable(f) {
    const head = $('table.failures thead'), body = $('table.failures tbody');
    if (!f || !f.rows.length) {
      $('.failure-label').textContent = f ? f.label : '';
      head.innerHTML = '';
      body.innerHTML = "<tr><td class='none'>none in this decode</td></tr>";
      return;
    }
    $('.failure-label').textContent = f.label.replace('click a row to show its call', 'click a row to open the block at its call');
    head.innerHTML = `<tr>${f.columns.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>`;
    body.innerHTML = f.rows.map((r) => `<tr tabindex='0' data-call='${r[1]}' data-kind='${esc(r[0])}'>` +
      r.map((v) => `<td>${esc(v === null ? '' : v)}</td>`).join('') + '</tr>').join('');
  }

  function openCall(call) {
    const p = current.maps[view.dataset.mode].pieces[Number(view.dataset.piece)];
    const seen = p && p.failures && p.failures.calls[String(call)];
    if (!seen) return;
    const rows = seen.blocks.map((b) => `<div class='row'><span class='who'>block ${b.block}, step ${b.step}</span>` +
      b.cells.map(([label, state], slot) => `<div class='cell ${state}' data-state='${state}' data-slot='${slot}' ` +
        `title='slot ${slot}: ${esc(state === 'masked' ? 'still masked' : label)} (${state})'>` +
        `${state === 'masked' ? '▒' : esc(label)}</div>`).join('') + '</div>').join('');
    const call_ = $('.call');
    call_.innerHTML = `<h4>call ${call}: its block after it</h4><div class='cells'>${rows}</div>` +
      "<p class='key'>blue: committed by an earlier call · orange: by this call · black outline: a gap fill " +
      '(masked slots to its left) · ▒: still masked</p>' + `<pre>${esc(seen.words)}</pre>`;
    call_.hidden = false;
    view.dataset.call = String(call);
    view.querySelectorAll('table.failures tbody tr').forEach((tr) => tr.classList.toggle('here', tr.dataset.call === String(call)));
  }

  function orderPicture(i, o) {
    const out = $('.order');
    if (!o || !o.points.length) { out.innerHTML = ''; return; }
    const W = 640, H = 260, L = 44, R = 12, T = 12, B = 34;
    const n = Math.max(...o.points.map((q) => q[0])) + 1, calls = Math.max(o.calls, 1);
    const X = (v) => L + (n <= 1 ? 0 : v / (n - 1)) * (W - L - R);
    const Y = (v) => H - B - (calls <= 1 ? 0 : v / (calls - 1)) * (H - T - B);
    const end = Math.min(n - 1, calls - 1);  // the diagonal, one token per call, up to the picture's top
    const dots = o.points.map(([pos, call, gap]) => `<circle cx='${X(pos).toFixed(1)}' cy='${Y(call).toFixed(1)}' ` +
      `r='4' class='${gap ? 'gap' : 'kept'}'><title>output token ${pos}: call ${call}` +
      `${gap ? ` (a gap fill, gap ${gap})` : ''}</title></circle>`).join('');
    const line = o.points.map(([pos, call]) => `${X(pos).toFixed(1)},${Y(call).toFixed(1)}`).join(' ');
    const tau = o.tau === null ? 'n/a' : o.tau.toFixed(2);
    const rate = o.out_of_order === null ? 'n/a' : `${Math.round(100 * o.out_of_order)}%`;
    out.innerHTML = `<p>Which call committed each output token: Kendall τ = ${tau} against left to right, ${rate} ` +
      'out of order (open marker: a gap fill; dashed: one token per call, left to right)</p>' +
      `<svg viewBox='0 0 ${W} ${H}' width='${W}' height='${H}' role='img' data-piece='${i}' ` +
      `data-points='${o.points.length}' aria-label='decode order'>` +
      `<line class='axis' x1='${L}' y1='${H - B}' x2='${W - R}' y2='${H - B}'/>` +
      `<line class='axis' x1='${L}' y1='${T}' x2='${L}' y2='${H - B}'/>` +
      `<line class='diagonal' x1='${X(0)}' y1='${Y(0)}' x2='${X(end)}' y2='${Y(end)}'/>` +
      `<polyline class='path' points='${line}'/>${dots}` +
      `<text x='${(L + W - R) / 2}' y='${H - 6}' text-anchor='middle'>position in the output (0 to ${n - 1})</text>` +
      `<text x='12' y='${(T + H - B) / 2}' text-anchor='middle' transform='rotate(-90 12 ${(T + H - B) / 2})'>` +
      `call (0 to ${calls - 1})</text></svg>`;
  }

  function step(by) {
    const pieces = current.maps[view.dataset.mode].pieces;
    const decoded = pieces.filter((q) => q.decoded);
    const at = decoded.indexOf(pieces[Number(view.dataset.piece)]);
    const next = decoded[Math.min(Math.max(at + by, 0), decoded.length - 1)];
    if (next) scrub.show(aim(next));
  }

  document.querySelectorAll('#gallery .card').forEach((card) => card.addEventListener('click', () => {
    if (location.hash === `#${card.dataset.key}`) open(card.dataset.key);
    else location.hash = card.dataset.key;
  }));
  window.addEventListener('hashchange', () => open(location.hash.slice(1)));
  view.querySelectorAll("input[name='mode']").forEach((r) => r.addEventListener('change', () => setMode(r.value)));
  $('.prev').addEventListener('click', () => step(-1));
  $('.next').addEventListener('click', () => step(1));
  const pick = (e) => { const tr = e.target.closest('tbody tr[data-call]'); if (tr) openCall(Number(tr.dataset.call)); };
  $('table.failures').addEventListener('click', pick);
  $('table.failures').addEventListener('keydown', (e) => { if (e.key === 'Enter') pick(e); });
  if (location.hash.length > 1) open(location.hash.slice(1));
  window.sbdSite = {open, aim};
})();
