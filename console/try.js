// "Try a frame": a frame (dropped, picked, or one of the daemon's samples) rendered with the form's parameters,
// shown beside a linear clip of itself, with the Server-Timing breakdown and the frame's analysis. The API keeps
// no frames, so every render sends the bytes the page holds again.
import { api, ApiError } from './api.js';
import { HistogramChart } from './charts.js';
import { ParamForm } from './form.js';
import { OcioPanel, ocioInfo } from './ocio.js';
import { bytes, el, ms, num, orderStages, stageColour } from './util.js';

const DEBOUNCE_MS = 300;
const $ = (id) => document.getElementById(id);

// Server-Timing: "recv;dur=0.3, decode;dur=11.1, ..." -> [[name, ms], ...] in the header's order.
export function parseServerTiming(header) {
  const out = [];
  for (const part of (header || '').split(',')) {
    const [name, ...attrs] = part.trim().split(';');
    if (!name) continue;
    const dur = attrs.map((a) => a.trim()).find((a) => a.startsWith('dur='));
    out.push([name.trim(), dur ? Number(dur.slice(4)) : NaN]);
  }
  return out;
}

// The daemon's message, with its Retry-After on a 429 or 503.
function retryText(e) {
  const after = e.retryAfter !== null && (e.status === 429 || e.status === 503);
  return after ? `${e.message} (retry after ${e.retryAfter} s)` : e.message;
}

// An error as one line: the daemon's status, code and message, or what fetch() said when nothing answered.
function errorText(e) {
  return e instanceof ApiError ? `${e.status} ${e.code}: ${retryText(e)}` : `The daemon did not answer: ${e.message}`;
}

// The frame's name without its extension, for the download's name.
function stem(name) {
  return (name || 'frame').replace(/\.[^.]*$/, '').replace(/[^\w.-]+/g, '_') || 'frame';
}

export class TryView {
  constructor() {
    this.form = null;
    this.ocio = null; // the OCIO block (ocio.js), with a config
    this.frame = null; // {name, blob}
    this.shown = null; // the frame whose picture, timing and analysis are on the page
    this.seq = 0;
    this.abort = null;
    this.timer = null;
    this.urls = { after: null, before: null, download: null };
    this.analysisKey = null;
    this.histogram = new HistogramChart($('chart-histogram'));
    this.visible = false;
    this.wire();
  }

  start() {
    this.loadSamples(); // public files: they need no token
    this.loadParams();
  }

  async loadParams() {
    try {
      const schema = await (await api('/v1/params')).json();
      const ocio = await ocioInfo(); // null without a config: no OCIO block
      this.form = new ParamForm(schema, (name) => this.changed(name));
      this.ocio = ocio ? new OcioPanel(ocio, this.form) : null;
      this.banner('');
      $('render').disabled = !this.frame;
      if (this.frame) this.render(); // a frame picked while the table was on its way
    } catch (e) {
      this.banner(`The parameter table could not be read (GET /v1/params, /v1/ocio): ${e.message}`);
      // Without the token (the dialog cancelled) or while the daemon is away: again until it answers.
      setTimeout(() => this.loadParams(), 2000);
    }
  }

  show(visible) {
    this.visible = visible;
    if (visible) {
      this.histogram.resize();
      this.fit();
    }
  }

  // Fit: the image as large as the viewer holds, up or down, its aspect kept; 1:1: its own pixels. The two
  // images fill the box, so the split falls on the same pixel of both.
  fit() {
    const img = $('img-after');
    const box = $('compare-box');
    const viewer = $('viewer');
    if (!img.naturalWidth || box.hidden) return;
    let w = img.naturalWidth;
    let h = img.naturalHeight;
    if (!viewer.classList.contains('actual-size')) {
      const s = Math.min((viewer.clientWidth - 16) / w, (viewer.clientHeight - 16) / h);
      w = Math.max(1, Math.floor(w * s));
      h = Math.max(1, Math.floor(h * s));
    }
    box.style.width = `${w}px`;
    box.style.height = `${h}px`;
  }

  wire() {
    const drop = $('view-try');
    drop.addEventListener('dragover', (e) => {
      e.preventDefault();
      drop.classList.add('dragging');
    });
    drop.addEventListener('dragleave', (e) => {
      if (e.target === drop || !drop.contains(e.relatedTarget)) drop.classList.remove('dragging');
    });
    drop.addEventListener('drop', (e) => {
      e.preventDefault();
      drop.classList.remove('dragging');
      const f = e.dataTransfer.files[0];
      if (f) this.useFrame(f.name, f);
    });
    $('file').addEventListener('change', () => {
      const f = $('file').files[0];
      if (f) this.useFrame(f.name, f);
      $('file').value = ''; // the same file picked again is a change too
    });
    $('render').addEventListener('click', () => this.render());
    $('reset').addEventListener('click', () => this.form && this.form.reset());
    $('compare').addEventListener('change', () => this.render());
    $('split').addEventListener('input', () => this.split(Number($('split').value)));
    $('zoom').addEventListener('click', () => {
      const one = $('viewer').classList.toggle('actual-size');
      $('zoom').textContent = one ? 'fit' : '1:1';
      this.fit();
    });
    $('img-after').addEventListener('load', () => this.fit());
    window.addEventListener('resize', () => this.fit());
    // Drag on the image moves the split too.
    const box = $('compare-box');
    const move = (e) => {
      const r = box.getBoundingClientRect();
      const v = Math.max(0, Math.min(100, ((e.clientX - r.left) / r.width) * 100));
      $('split').value = String(v);
      this.split(v);
    };
    box.addEventListener('pointerdown', (e) => {
      box.setPointerCapture(e.pointerId);
      move(e);
    });
    box.addEventListener('pointermove', (e) => {
      if (box.hasPointerCapture(e.pointerId)) move(e);
    });
    this.split(50);
  }

  split(percent) {
    // The "before" image is clipped to the left part: a clip-path set through the CSSOM, which the CSP allows.
    $('before-clip').style.clipPath = `inset(0 ${100 - percent}% 0 0)`;
    $('split-line').style.left = `${percent}%`;
  }

  async loadSamples() {
    try {
      const res = await fetch('/console/samples/samples.json', { cache: 'no-cache' });
      if (!res.ok) return;
      const list = await res.json();
      for (const s of list.samples) {
        const b = el('button', { type: 'button', class: 'small sample', title: `${s.title}: ${s.credit}`,
          'data-sample': s.file, text: s.label });
        b.addEventListener('click', async () => {
          const r = await fetch(`/console/samples/${s.file}`, { cache: 'no-cache' });
          if (!r.ok) {
            this.banner(`The sample ${s.file} could not be read: ${r.status}`);
            return;
          }
          this.useFrame(s.file, await r.blob());
        });
        $('samples').append(b);
      }
    } catch {
      // No samples: the page works without them.
    }
  }

  useFrame(name, blob) {
    this.frame = { name, blob };
    this.analysisKey = null;
    $('frame-name').textContent = `${name} · ${bytes(blob.size)}`;
    $('frame-error').hidden = true;
    $('render').disabled = !this.form;
    $('fine').textContent = `The API keeps no frames: every change sends these ${bytes(blob.size)} again ` +
      '(twice with the comparison on, once more for the analysis when the frame or its input settings change).';
    this.render();
  }

  changed() {
    if (!this.frame) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.render(), DEBOUNCE_MS);
  }

  banner(message) {
    const b = $('banner');
    b.textContent = message;
    b.hidden = !message;
  }

  // Where the daemon's message goes: beside the control of its field, else at the top, or (inPlace) in the place
  // of the picture that was cleared for it.
  showError(e, inPlace) {
    if (!(e instanceof ApiError)) {
      this.banner(inPlace ? '' : `The daemon did not answer: ${e.message}`);
      return;
    }
    if ((this.form && this.form.showError(e.field, retryText(e))) || inPlace) {
      this.banner('');
      return;
    }
    this.banner(errorText(e));
  }

  // A new frame that did not render: the picture, timing, facts, analysis and download of the one before go, and
  // the message takes the picture's place, so that what the page shows is of the frame it names.
  clearResult(e) {
    $('compare-box').hidden = true;
    $('viewer-bar').hidden = true;
    $('timing').hidden = true;
    $('analysis').hidden = true;
    $('download').hidden = true;
    $('facts').replaceChildren();
    for (const which of ['after', 'before', 'download']) {
      if (this.urls[which]) URL.revokeObjectURL(this.urls[which]);
      this.urls[which] = null;
    }
    $('img-after').removeAttribute('src');
    $('img-before').removeAttribute('src');
    $('download').removeAttribute('href');
    const p = $('placeholder');
    p.replaceChildren(el('b', { text: `No picture of ${this.frame.name}.` }), el('br'), errorText(e));
    p.classList.add('placeholder-error');
    p.hidden = false;
    this.shown = null;
  }

  // Renders the frame: the tone-mapped image first, then (with the comparison on) the linear clip, the same
  // request with tonemap.operator=linear and gamma.mode=srgb. A newer render aborts an older one in flight.
  async render() {
    if (!this.frame || !this.form) return;
    clearTimeout(this.timer);
    if (this.abort) this.abort.abort();
    const abort = new AbortController();
    this.abort = abort;
    const seq = ++this.seq;
    const query = this.form.query();
    $('busy').textContent = this.shown && this.shown !== this.frame ? `rendering ${this.frame.name}…` : 'rendering…';
    $('busy').hidden = false;
    $('viewer').classList.add('rendering');
    let failed = false;
    try {
      const t0 = performance.now();
      const res = await api(`/v1/render?${query}`, {
        method: 'POST', body: this.frame.blob, signal: abort.signal,
        headers: { 'Content-Type': 'application/octet-stream' },
      });
      const image = await res.blob();
      const wall = performance.now() - t0;
      if (seq !== this.seq) return;
      this.form.clearErrors();
      this.banner('');
      this.showImage('after', image);
      const img = $('img-after');
      img.dataset.query = query.toString();
      $('tag-after').textContent = (this.ocio && this.ocio.label()) || 'tone-mapped';
      img.dataset.seq = String(seq);
      this.showTiming(parseServerTiming(res.headers.get('Server-Timing')), wall);
      this.showFacts(res.headers, image);
      this.showDownload(image, query);
      this.shown = this.frame;
      $('placeholder').hidden = true;
      $('compare-box').hidden = false;
      $('viewer-bar').hidden = false;

      let clipShown = false;
      if ($('compare').checked) {
        const clip = this.form.linearClip(query);
        try {
          const r2 = await api(`/v1/render?${clip}`, {
            method: 'POST', body: this.frame.blob, signal: abort.signal,
            headers: { 'Content-Type': 'application/octet-stream' },
          });
          const before = await r2.blob();
          if (seq !== this.seq) return;
          this.showImage('before', before);
          $('img-before').dataset.query = clip.toString();
          clipShown = true;
        } catch (e) {
          if (e.name === 'AbortError' || seq !== this.seq) return;
          // The image stands alone rather than beside the clip of an earlier frame or setting.
        }
      }
      $('compare-box').classList.toggle('single', !clipShown);
      await this.analyze(query, abort.signal, seq);
    } catch (e) {
      if (e.name === 'AbortError' || seq !== this.seq) return;
      failed = true;
      const fresh = this.shown !== this.frame; // the first render of this frame
      if (fresh) this.clearResult(e);
      this.showError(e, fresh);
    } finally {
      if (seq === this.seq) {
        $('busy').hidden = true;
        $('viewer').classList.remove('rendering');
        // For a test or a script driving the page: the latest render is over, and how it ended.
        document.body.dataset.outcome = failed ? 'error' : 'ok';
        document.body.dataset.done = String(seq);
      }
    }
  }

  showImage(which, blob) {
    if (this.urls[which]) URL.revokeObjectURL(this.urls[which]);
    this.urls[which] = URL.createObjectURL(blob);
    $(which === 'after' ? 'img-after' : 'img-before').src = this.urls[which];
  }

  showDownload(blob, query) {
    const a = $('download');
    if (this.urls.download) URL.revokeObjectURL(this.urls.download);
    this.urls.download = URL.createObjectURL(blob);
    const ext = blob.type === 'image/webp' ? 'webp' : 'png';
    const curve = query.get('look') || (this.form.ocio && this.form.ocio.label()) || this.form.effective('tonemap.operator');
    a.href = this.urls.download;
    a.download = `${stem(this.frame.name)}_${curve.replace(/[^\w.-]+/g, '_')}.${ext}`;
    a.textContent = `Download ${ext.toUpperCase()} (${bytes(blob.size)})`;
    a.hidden = false;
  }

  // The phases as one bar, each as wide as its share of the total; encode_cpu (the encoder's CPU time over all
  // its threads, not a phase of the latency) and total stay out of the bar.
  showTiming(timings, wall) {
    const map = new Map(timings);
    const total = map.get('total');
    const phases = orderStages(timings.map(([n]) => n).filter((n) => n !== 'total' && n !== 'encode_cpu'));
    const sum = phases.reduce((a, n) => a + (map.get(n) || 0), 0);
    const whole = Math.max(total || 0, sum) || 1;
    const bar = $('timing-bar');
    const legend = $('timing-legend');
    bar.replaceChildren();
    legend.replaceChildren();
    for (const n of phases) {
      const d = map.get(n) || 0;
      const seg = el('div', { class: 'seg', title: `${n} ${ms(d)} ms`, 'data-stage': n });
      seg.style.width = `${(d / whole) * 100}%`;
      seg.style.background = stageColour(n);
      bar.append(seg);
      const key = el('span', { class: 'key' }, el('i'), `${n} `, el('b', { text: ms(d) }));
      key.firstChild.style.background = stageColour(n);
      legend.append(key);
    }
    if (map.has('encode_cpu')) legend.append(el('span', { class: 'key muted', text: `encode_cpu ${ms(map.get('encode_cpu'))}` }));
    $('timing-total').textContent = `${ms(total)} ms on the daemon · ${ms(wall)} ms round trip`;
    $('timing-total').title = 'total from Server-Timing; the round trip as this page saw it, upload and download included';
    $('timing').hidden = false;
  }

  showFacts(headers, image) {
    const facts = [];
    const img = $('img-after');
    const put = (k, v) => { if (v) facts.push(el('dt', { text: k }), el('dd', { text: v })); };
    img.decode().then(() => {
      const size = $('facts').querySelector('[data-fact="size"]');
      if (size) size.textContent = `${img.naturalWidth} × ${img.naturalHeight} · ${image.type} · ${bytes(image.size)}`;
    }).catch(() => {});
    facts.push(el('dt', { text: 'image' }), el('dd', { 'data-fact': 'size', text: `${image.type} · ${bytes(image.size)}` }));
    put('exposure', headers.get('X-Exposure'));
    put('luminance', headers.get('X-Luminance-Stats'));
    put('input colour', headers.get('X-Input-Colorspace'));
    put('output colour', headers.get('X-Output-Colorspace'));
    put('depth of field', headers.get('X-Depth-Of-Field'));
    put('bokeh', headers.get('X-Bokeh'));
    $('facts').replaceChildren(...facts);
  }

  // The analysis depends on the frame and on the input.* and analysis.* parameters only: it is asked again when
  // one of those changed, not for every exposure or operator.
  async analyze(query, signal, seq) {
    const q = new URLSearchParams();
    for (const [k, v] of query) if (k.startsWith('input.') || k.startsWith('analysis.')) q.set(k, v);
    const key = q.toString();
    if (key === this.analysisKey) return;
    const res = await api(`/v1/analyze?${q}`, {
      method: 'POST', body: this.frame.blob, signal,
      headers: { Accept: 'application/json', 'Content-Type': 'application/octet-stream' },
    });
    const a = await res.json();
    if (seq !== this.seq) return;
    this.analysisKey = key;
    const s = a.stats || {};
    $('analysis').hidden = false;
    if (s.histogram) this.histogram.update(s.histogram, s.log_average);
    const h = s.histogram;
    const p = a.percentiles || {};
    const put = (k, v) => [el('dt', { text: k }), el('dd', { text: v })];
    $('analysis-facts').replaceChildren(
      ...put('frame', `${a.width} × ${a.height} ${a.input_format}${a.gpu_input ? `, ${a.gpu_input} on the GPU` : ''}`),
      ...put('log-average', `${num(s.log_average)} (${num(Math.log2(s.log_average), 3)} stops)`),
      ...put('min / mean / max', `${num(s.min)} / ${num(s.mean)} / ${num(s.max)}`),
      ...put('p01 / p50 / p99', `${num(p.p01)} / ${num(p.p50)} / ${num(p.p99)}`),
      ...put('pixels', `${s.finite_pixels ?? '–'} finite, ${s.nonfinite_pixels ?? 0} NaN or infinite` +
        (h ? `, ${h.counts[0]} below 2^${h.min_log2}` : '')),
      ...(a.colorspace ? put('colour space', `${a.colorspace.input} (${a.colorspace.source})`) : []),
    );
  }
}
