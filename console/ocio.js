// Studio colour through the daemon's OpenColorIO config (issue 34; docs/CONSOLE.md). When GET /v1/ocio names a
// config, "Try a frame" gets a block of selects: the display, its view, a look of the config, and the input
// colour space (hdrpostd's own choices and the config's spaces). A display other than "none" sends
// ocio.display, ocio.view and ocio.looks, and the form disables what the view replaces. Without a config the
// block stays hidden and the form is as it was.
import { api, ApiError } from './api.js';
import { el } from './util.js';

// What a view takes the place of (pipeline/params_ocio.c): set away from its default with a view, each is a
// 400 ocio_conflict, so the form neither shows them as choices nor sends them while a display is chosen.
export const REPLACED = ['tonemap.operator', 'gamma.mode', 'gamma.radius', 'output.colorspace'];
const BUILT_IN = ''; // the display select's "none": hdrpostd's own tone curve and display encoding

let loaded = null;

// GET /v1/ocio, asked once for the page (the config is read only when the daemon starts): its answer, or null
// when it has no config. A failure other than a 404 is thrown and asked again next time.
export function ocioInfo() {
  if (!loaded) {
    loaded = api('/v1/ocio').then((res) => res.json()).then((doc) => (doc && doc.config ? doc : null), (e) => {
      if (e instanceof ApiError && e.status === 404) return null;
      loaded = null;
      throw e;
    });
  }
  return loaded;
}

// A <select> of name options (value = text), with a first option of its own when lead is given.
function select(id, names, lead) {
  const s = el('select', { id });
  if (lead) s.append(el('option', { value: lead[0], text: lead[1] }));
  for (const n of names) s.append(el('option', { value: n, text: n }));
  return s;
}

function row(label, id, control, hint) {
  return el('div', { class: 'param', 'data-ocio': id }, el('div', { class: 'param-head' }, el('label', { for: id, text: label })),
    control, hint ? el('div', { class: 'hint', text: hint }) : null);
}

export class OcioPanel {
  // doc: GET /v1/ocio's answer with a config; form: the ParamForm, whose input.colorspace control moves here.
  constructor(doc, form) {
    this.doc = doc;
    this.form = form;
    this.displays = new Map(doc.displays.map((d) => [d.name, d]));
    this.display = this.displays.has(doc.default_display) ? doc.default_display : (doc.displays[0] || {}).name || BUILT_IN;
    this.view = this.defaultView();
    this.looks = '';
    this.spaces = new Set(doc.colorspaces);
    this.build();
    form.attach(this);
  }

  on() {
    return this.display !== BUILT_IN;
  }

  replaces(name) {
    return this.on() && REPLACED.includes(name);
  }

  // Whether input.colorspace's value is one of the config's spaces rather than hdrpostd's.
  configSpace(value) {
    return this.spaces.has(value) && !this.builtInSpaces.has(value);
  }

  defaultView() {
    const d = this.displays.get(this.display);
    return d ? d.default_view || d.views[0] || '' : '';
  }

  // The request's OCIO names, put into the form's query.
  apply(q) {
    if (!this.on()) return;
    q.set('ocio.display', this.display);
    q.set('ocio.view', this.view);
    if (this.looks) q.set('ocio.looks', this.looks);
  }

  // The name for the download: the view's, as the operator's is without one.
  label() {
    return this.on() ? this.view : null;
  }

  build() {
    const block = document.getElementById('ocio-block');
    const c = this.doc.config;
    this.displaySelect = select('ocio-display', [...this.displays.keys()], [BUILT_IN, 'none (built-in tone curve)']);
    this.viewSelect = el('select', { id: 'ocio-view' });
    this.lookSelect = select('ocio-looks', [], ['', 'none (the view’s own)']);
    for (const l of this.doc.looks) this.lookSelect.append(el('option', { value: `+${l}`, text: l }));
    this.why = el('div', { class: 'hint', id: 'ocio-why' });
    block.replaceChildren(
      el('h3', {}, 'OpenColorIO ', el('span', { class: 'muted', id: 'ocio-name', text: c.name || c.path, title: c.path })),
      row('display', 'ocio-display', this.displaySelect),
      row('view', 'ocio-view', this.viewSelect),
      row('look', 'ocio-looks', this.lookSelect, 'a look of the config, applied in place of the view’s own'));
    this.moveInput(block);
    block.append(this.why);
    this.displaySelect.value = this.display;
    this.fillViews();
    this.displaySelect.addEventListener('change', () => this.chooseDisplay(this.displaySelect.value));
    this.viewSelect.addEventListener('change', () => this.changed('ocio.view', () => { this.view = this.viewSelect.value; }));
    this.lookSelect.addEventListener('change', () => this.changed('ocio.looks', () => { this.looks = this.lookSelect.value; }));
    block.hidden = false;
  }

  // input.colorspace's own control, the form's, moved here with the config's spaces added to its choices: the
  // frame's colour space belongs with the view it goes through.
  moveInput(block) {
    const c = this.form.controls.get('input.colorspace');
    const sel = c && c.row.querySelector('select');
    this.builtInSpaces = new Set(sel ? [...sel.options].map((o) => o.value) : []);
    if (!sel) return;
    const group = el('optgroup', { label: `${this.doc.config.name || 'OCIO'} colour spaces` });
    for (const s of this.doc.colorspaces) if (!this.builtInSpaces.has(s)) group.append(el('option', { value: s, text: s }));
    sel.append(group);
    this.configGroup = group;
    c.row.querySelector('label').textContent = 'input.colorspace';
    block.append(c.row);
  }

  fillViews() {
    const d = this.displays.get(this.display);
    this.viewSelect.replaceChildren(...(d ? d.views : []).map((v) => el('option', { value: v, text: v })));
    this.viewSelect.value = this.view;
    this.viewSelect.disabled = !d;
    this.lookSelect.disabled = !d;
    this.why.textContent = d
      ? `The view replaces ${REPLACED.join(', ')}: they are off while a display is chosen. Input auto is the ` +
        `config's scene_linear (${this.doc.scene_linear}).`
      : 'hdrpostd’s own tone curve and display encoding; the config’s colour spaces need a display.';
    this.syncInput();
  }

  // Through a view the daemon reads the frame in a space of the config (auto: scene_linear) and ignores
  // hdrpostd's named spaces; without one a config space would still take the config's default display. So each
  // side's names are off while the other's are in use, and a value left on the wrong side goes back to auto.
  syncInput() {
    const c = this.form.controls.get('input.colorspace');
    const sel = c && c.row.querySelector('select');
    if (!sel) return;
    for (const o of sel.options) if (this.builtInSpaces.has(o.value) && o.value !== 'auto') o.disabled = this.on();
    this.configGroup.disabled = !this.on();
    const v = this.form.effective('input.colorspace');
    if (this.on() ? v !== 'auto' && this.builtInSpaces.has(v) : this.configSpace(v)) this.form.clear('input.colorspace');
  }

  chooseDisplay(name) {
    this.changed('ocio.display', () => {
      this.display = name;
      this.view = this.defaultView();
      if (!this.on()) this.looks = '';
      this.lookSelect.value = this.looks;
    });
  }

  changed(name, update) {
    update();
    this.fillViews();
    this.form.ocioChanged(name);
  }
}
