// The live γ scrubber's browser part, one file for the app and the static site: ``sbdScrubber(element, options)``
// draws a γ map's payload (sbd_viz.app.scrubber.payload) in ``element``'s ``.sbd-scrub`` markup (scrubber.TEMPLATE)
// and redraws the block fill, the numbers and the strip on every move of its range input. The app calls it from its
// gr.HTML's js_on_load (scrubber.component), the static site from its page (sbd_viz/site/site.js).
//
// options.slider: the elem_id of a page's γ slider whose moves it follows too (null: none);
// options.release(gamma): called once the frame showing a released γ is painted (null: nothing);
// options.onPiece(i, piece): called when the piece shown changes (null: nothing).
// It returns {load(value), show(gamma), data()}: load a payload's JSON text ("" shows how to start), show a γ.
function sbdScrubber(element, options) {
  const SLIDER = options.slider || null;
  let data = null, marks = [], cached = [], drawn = 0, loads = 0;
  const root = () => element.querySelector('.sbd-scrub');
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;',
                                                            "'": '&#39;'}[c]));
  const visibleText = (s) => s.replace(/\n/g, '⏎\n').replace(/\t/g, '⇥\t');
  function holds(p, g) {
    return (g > p.lo && g < p.hi) || (g === p.lo && p.lo_closed) || (g === p.hi && p.hi_closed);
  }
  function pieceAt(g) {
    if (!data) return -1;
    return data.pieces.findIndex((p) => holds(p, g));
  }
  function x(v) {
    const span = data.hi - data.lo;
    return span <= 0 ? 0 : 100 * (Math.min(Math.max(v, data.lo), data.hi) - data.lo) / span;
  }
  function fillHtml(p) {
    const shades = data.shades, rows = [];
    for (const b of p.blocks) {
      const cells = b.cells.map((c, slot) => {
        if (c === null) return `<div class='cell' data-call='' data-flags='' title='block ${b.block} · slot ${slot}: ` +
          `masked' style='background:${data.colors.future}'>${data.colors.mask}</div>`;
        const [label, call, flags] = c;
        const [bg, ink] = shades[Math.min(call - b.first, shades.length - 1)];
        const cls = 'cell' + (flags & 1 ? ' gap' : '') + (flags & 2 ? ' dropped' : '');
        const title = `block ${b.block} · slot ${slot}: ${label} · call ${call} (step ${call - b.first} of the block)` +
          (flags & 1 ? ' · gap fill' : '') + (flags & 2 ? ' · not in the output' : '') +
          (flags & 4 ? " · NTP's token" : '');
        return `<div class='${cls}' data-call='${call}' data-flags='${flags}' title='${esc(title)}' ` +
               `style='background:${bg};color:${ink}'>${esc(label)}</div>`;
      });
      rows.push(`<div class='row'><span class='who'>block ${b.block}</span>${cells.join('')}</div>`);
    }
    return rows.join('');
  }
  function numbers(p) {
    if (!p.decoded) return 'not decoded: release to decode this γ';
    const ntp = p.ntp === null || p.ntp === undefined ? '' : p.ntp ? " · NTP's text" : ' · not NTP’s text';
    return `${p.calls} call${p.calls === 1 ? '' : 's'} · ${p.tokens} token${p.tokens === 1 ? '' : 's'} · ` +
           `${p.tpc.toFixed(2)} ${data.count_label} · ${p.gap_fills} gap fill${p.gap_fills === 1 ? '' : 's'}${ntp} · ` +
           `the same decode for γ in ${p.range}`;
  }
  function track() {
    const t = element.querySelector('.track');
    t.innerHTML = data.pieces.map((p, i) => {
      const left = x(p.lo), width = Math.max(x(p.hi) - left, 0);
      let style = `left:${left}%;width:${width}%;`;
      if (!p.decoded) style += 'background:repeating-linear-gradient(45deg,#EEEEEE 0 4px,#D0D0D0 4px 6px);';
      else style += `background:${p.shade};` + (p.ntp ? `box-shadow:inset 0 -4px 0 ${data.colors.safe};` : '');
      return `<div data-i='${i}' data-lo='${p.lo}' data-hi='${p.hi}' data-decoded='${p.decoded ? 1 : 0}' ` +
             `title='γ in ${esc(p.exact)}${p.decoded ? `: ${p.calls} calls` : ': not decoded'}' style='${style}'></div>`;
    }).join('');
    marks = [...t.children];
  }
  function show(g) {
    const r = root();
    if (!data || !Number.isFinite(g)) return;
    const i = pieceAt(g);
    r.querySelector('.g').textContent = String(g);
    const input = r.querySelector('input[type=range]');
    if (Number(input.value) !== g) input.value = String(g);
    if (String(i) !== r.dataset.piece) {
      const p = data.pieces[i];
      const fill = r.querySelector('.fill'), text = r.querySelector('.text');
      if (!p) { fill.innerHTML = ''; text.textContent = ''; r.querySelector('.nums').textContent = 'outside the map'; }
      else {
        if (p.decoded && cached[i] === undefined) cached[i] = fillHtml(p);
        fill.innerHTML = p.decoded ? cached[i] : '';
        text.textContent = p.decoded ? visibleText(p.text) : '';
        r.querySelector('.nums').textContent = numbers(p);
      }
      marks.forEach((m, j) => m.classList.toggle('here', j === i));
      r.dataset.piece = String(i);
      if (options.onPiece) options.onPiece(i, p);
    }
    r.dataset.gamma = String(g);
    r.dataset.drawn = String(++drawn);
  }
  function load(value) {
    const r = root();
    r.dataset.loads = String(++loads);
    try { data = value ? JSON.parse(value) : null; } catch (e) { data = null; }
    cached = [];
    r.dataset.piece = '';
    r.querySelector('.empty').hidden = !!data;
    r.querySelector('.live').hidden = !data;
    r.dataset.pieces = data ? String(data.pieces.length) : '0';
    r.dataset.decoded = data ? String(data.pieces.filter((p) => p.decoded).length) : '0';
    r.dataset.complete = String(!!data && data.complete && !data.building);
    r.dataset.bytes = String((value || '').length);
    if (!data) return;
    const input = r.querySelector('input[type=range]');
    input.min = String(data.lo); input.max = String(data.hi); input.step = String(data.step || 'any');
    r.querySelector('.lo').textContent = String(data.lo);
    r.querySelector('.hi').textContent = String(data.hi);
    const decoded = Number(r.dataset.decoded);
    r.querySelector('.hint').textContent = `${decoded} decode${decoded === 1 ? '' : 's'} of this prompt` +
      (data.building ? ' so far (the map is building)' : '') +
      (options.release ? ' · drag to scrub, release to show below' : ' · drag to scrub');
    r.querySelector('.legend').textContent = "cell shade: the block's step that committed it (lighter = earlier) · " +
      `black outline: gap fill · faded: not in the output · ${data.colors.mask}: never committed (the decode ` +
      'stopped first) · strip: darker = more tokens per call, ' +
      "green: NTP's text, hatched: not decoded";
    track();
    const slider = SLIDER ? document.querySelector(`#${SLIDER} input[type=range]`) : null;
    const g = slider ? Number(slider.value) : data.gamma;
    show(Number.isFinite(g) && pieceAt(g) >= 0 ? g : data.gamma);
  }
  // its own range input: redraw on every move; on release, pass γ on (the app's full views follow)
  element.addEventListener('input', (e) => {
    if (e.target.matches('.sbd-scrub input[type=range]')) show(Number(e.target.value));
  });
  // (after the next frame: the picture the user let go at is painted before the request's work starts)
  element.addEventListener('change', (e) => {
    if (!options.release || !e.target.matches('.sbd-scrub input[type=range]')) return;
    const gamma = Number(e.target.value);
    requestAnimationFrame(() => setTimeout(() => options.release(gamma), 0));
  });
  if (SLIDER) {
    // the page's γ slider scrubs too; its own release (Gradio's, on pointerup) still decodes, one frame later: its
    // request's work would otherwise hold the frame that shows the picture the user let go at
    const onSlider = (e) => e.target.type === 'range' && e.target.closest && e.target.closest(`#${SLIDER}`);
    document.addEventListener('input', (e) => { if (onSlider(e)) show(Number(e.target.value)); }, true);
    // the server moved the slider (a strip click, a ladder row, a rule's default): ``follow_js`` passes it on
    document.addEventListener(`sbd-scrub-${SLIDER}`, (e) => show(Number(e.detail)));
    document.addEventListener('pointerup', (e) => {
      if (!onSlider(e) || e.sbdLater || !data) return;
      e.stopImmediatePropagation();
      const target = e.target;
      requestAnimationFrame(() => setTimeout(() => {
        const again = new PointerEvent('pointerup', {bubbles: true, pointerId: e.pointerId, pointerType: e.pointerType});
        again.sbdLater = true;
        target.dispatchEvent(again);
      }, 0));
    }, true);
  }
  return {load, show, data: () => data};
}
