// The parameter form, generated from GET /v1/params: one control per parameter, grouped by `group` (the stage)
// in the table's order; a group's parameters of one operator or mode (tonemap.hable.*) in a nested group.
// Sliders for bounded numbers, selects for choices, checkboxes for booleans, text for names.
//
// The form keeps what the user changed (overrides) apart from what the look and the table's defaults give, and
// the query it makes carries the look and the overrides only, so the daemon's own defaults stay its own. The
// console asks for PNG (output.format=png) unless the user picks webp.
//
// ocio.* have no control of their own here: with an OCIO config ocio.js's selects set them (attach()), and
// without one the daemon would refuse them.
import { REPLACED } from './ocio.js';
import { el, inline } from './util.js';

// Groups open at first; the others (input, analysis, dof, bokeh and any new one) start collapsed.
const OPEN_GROUPS = new Set(['exposure', 'tonemap', 'gamma', 'output']);
const GROUP_TITLES = {
  input: 'Input', analysis: 'Analysis', exposure: 'Exposure', dof: 'Depth of field', bokeh: 'Bokeh',
  tonemap: 'Tone curve', gamma: 'Display encoding', output: 'Output',
};
export const CONSOLE_DEFAULTS = { 'output.format': 'png' };
const SLIDER_MAX_SPAN = 1000; // a wider range ([0, 1e9]) gets a number box alone

// The value as a query writes it (docs/PARAMETERS.md): numbers as JSON writes them, booleans true/false.
function queryValue(v) {
  if (v === null || v === undefined) return '';
  return String(v);
}

function sameValue(param, a, b) {
  if (a === b) return true;
  if (param.type === 'number' || param.type === 'integer' || param.type === 'number_or_auto') {
    const x = Number(a);
    const y = Number(b);
    return a !== '' && b !== '' && Number.isFinite(x) && Number.isFinite(y) && x === y;
  }
  return false;
}

function bounds(p) {
  const lo = p.minimum ?? p.exclusiveMinimum;
  const hi = p.maximum ?? p.exclusiveMaximum;
  return { lo, hi, loEx: p.minimum === undefined && p.exclusiveMinimum !== undefined,
    hiEx: p.maximum === undefined && p.exclusiveMaximum !== undefined };
}

function rangeText(p) {
  if (p.choices) return ''; // the select shows them
  const b = bounds(p);
  if (b.lo === undefined || b.hi === undefined) return '';
  const f = (v) => (Math.abs(v) >= 1e5 ? v.toExponential().replace('e+', 'e') : String(v));
  return `${b.loEx ? '(' : '['}${f(b.lo)}, ${f(b.hi)}${b.hiEx ? ')' : ']'}${p.type === 'number_or_auto' ? ' or auto' : ''}`;
}

// A slider's step: about 1/400 of the span, rounded to 1, 2 or 5 times a power of ten; 1 at least for integers.
function sliderStep(p, span) {
  const raw = span / 400;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw);
  return p.type === 'integer' ? Math.max(1, Math.round(step)) : step;
}

// When a parameter is read, from its `applies` text (docs/PARAMETERS.md's "applies to" column): "operator
// `hable`", "modes `auto`, `histogram`; ...", "format `webp` when ...", "dof.enabled". Returns a test of the
// form's values, or null when the text says nothing the form can check (then the control is never dimmed).
function appliesTest(p, names) {
  const text = p.applies;
  if (!text || text === 'always') return null;
  const ticked = [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  const lead = /^(operators?|modes?|format)\b/.exec(text);
  if (lead && ticked.length) {
    const key = { operator: 'operator', operators: 'operator', mode: 'mode', modes: 'mode', format: 'format' }[lead[1]];
    const on = `${p.group}.${key}`;
    if (!names.has(on)) return null;
    return { on: [on], test: (get) => ticked.includes(get(on)) };
  }
  const flag = /^([a-z_]+\.[a-z_.]+)$/.exec(text);
  if (flag && names.has(flag[1])) return { on: [flag[1]], test: (get) => get(flag[1]) === 'true' };
  return null;
}

export class ParamForm {
  // schema: GET /v1/params's answer. onChange(name): a control changed (the caller debounces the render).
  constructor(schema, onChange) {
    this.schema = schema;
    this.onChange = onChange;
    this.params = schema.parameters.filter((p) => p.name !== 'look' && !p.name.startsWith('ocio.'));
    this.byName = new Map(schema.parameters.map((p) => [p.name, p]));
    this.looks = new Map((schema.looks || []).map((l) => [l.name, l]));
    this.look = 'default';
    this.overrides = new Map();
    this.controls = new Map(); // name -> {row, show(value), error}
    this.dependents = [];
    this.ocio = null; // ocio.js's OcioPanel, when the daemon has a config
    this.build();
  }

  // The value the daemon will use for a parameter, as a query writes it. One the OCIO view replaces is not sent,
  // so the user's value of it is not the daemon's.
  effective(name) {
    if (this.overrides.has(name) && !this.replaced(name)) return this.overrides.get(name);
    const look = this.looks.get(this.look);
    if (look && look.sets && name in look.sets) return queryValue(look.sets[name]);
    if (name in CONSOLE_DEFAULTS) return CONSOLE_DEFAULTS[name];
    const p = this.byName.get(name);
    return p ? queryValue(p.default) : '';
  }

  // The request's query: the look, the console's own defaults, and what the user changed; empty strings left
  // out (a query cannot carry them; "" is the default of every string parameter).
  query() {
    const q = new URLSearchParams();
    if (this.look !== 'default') q.set('look', this.look);
    const look = this.looks.get(this.look);
    // The console's own defaults give way to the look's (a studio look's output.format=avif for a PQ display).
    for (const [k, v] of Object.entries(CONSOLE_DEFAULTS)) {
      if (!this.overrides.has(k) && !(look && look.sets && k in look.sets)) q.set(k, v);
    }
    for (const [k, v] of this.overrides) if (v !== '' && !this.replaced(k)) q.set(k, v);
    if (this.ocio) this.ocio.apply(q);
    return q;
  }

  // A parameter an OCIO view replaces, through the panel's view or the view a look of the daemon's names
  // (studio_looks): the user's value of it is not sent, or the daemon would refuse the pair (ocio_conflict).
  replaced(name) {
    return Boolean(this.ocio && this.ocio.replaces(name)) || (this.lookUsesOcio() && REPLACED.includes(name));
  }

  // What the OCIO panel's view replaces, whatever the look: the looks that set it give way to the panel. (A look
  // that names a view of its own replaces them only while it is chosen: another look may still be chosen.)
  panelReplaces(name) {
    return Boolean(this.ocio && this.ocio.replaces(name));
  }

  lookUsesOcio() {
    const look = this.looks.get(this.look);
    return Boolean(look && look.sets && Object.keys(look.sets).some((k) => k.startsWith('ocio.')));
  }

  // The comparison's linear clip: the same frame through hdrpostd's own curve, so without the OCIO view and a
  // colour space of the config (which would bring the view back); the daemon's auto colour space instead.
  linearClip(query) {
    const clip = new URLSearchParams(query);
    if (this.lookUsesOcio()) {
      // The look's view would come back with it: its other parameters stay, spelled out.
      const look = this.looks.get(this.look);
      clip.delete('look');
      for (const [k, v] of Object.entries(look.sets)) if (!k.startsWith('ocio.') && !clip.has(k)) clip.set(k, queryValue(v));
    }
    for (const k of [...clip.keys()]) if (k.startsWith('ocio.')) clip.delete(k);
    if (this.ocio && this.ocio.configSpace(clip.get('input.colorspace'))) clip.delete('input.colorspace');
    clip.set('tonemap.operator', 'linear');
    clip.set('gamma.mode', 'srgb');
    return clip;
  }

  attach(ocio) {
    this.ocio = ocio;
    this.refreshAll();
  }

  // A choice of the OCIO block: the controls it replaces follow, then a render. A look of the daemon's that sets
  // one of them would be refused (ocio_conflict) with a view, so it gives way to the default.
  ocioChanged(name) {
    const look = this.looks.get(this.look);
    if (look && Object.keys(look.sets || {}).some((k) => this.panelReplaces(k))) {
      this.look = 'default';
      document.getElementById('look').value = 'default';
      document.getElementById('look-description').replaceChildren(inline((this.looks.get('default') || {}).description));
    }
    this.refreshAll();
    this.onChange(name);
  }

  // Back to the look's or the default value without a render of its own (the caller renders).
  clear(name) {
    this.overrides.delete(name);
    const c = this.controls.get(name);
    if (c) c.show(this.effective(name));
    this.markChanged(name);
    this.clearError(name);
  }

  set(name, value) {
    const p = this.byName.get(name);
    this.overrides.delete(name);
    if (!sameValue(p, value, this.effective(name))) this.overrides.set(name, value);
    this.markChanged(name);
    this.clearError(name);
    this.refreshApplies();
    this.onChange(name);
  }

  setLook(name) {
    this.look = name;
    const look = this.looks.get(name);
    // The look's parameters show its values: the user's own changes to them give way to the look's.
    for (const k of Object.keys((look && look.sets) || {})) this.overrides.delete(k);
    document.getElementById('look-description').replaceChildren(inline(look ? look.description : ''));
    this.refreshAll();
    this.onChange('look');
  }

  reset() {
    this.overrides.clear();
    this.look = 'default';
    document.getElementById('look').value = 'default';
    document.getElementById('look-description').replaceChildren(inline((this.looks.get('default') || {}).description));
    this.clearErrors();
    this.refreshAll();
    this.onChange('reset');
  }

  refreshAll() {
    for (const [name, c] of this.controls) {
      c.show(this.effective(name));
      this.markChanged(name);
    }
    this.refreshApplies();
  }

  markChanged(name) {
    const c = this.controls.get(name);
    if (c) c.row.classList.toggle('changed', this.overrides.has(name) && !this.replaced(name));
  }

  // Dims what the chosen operator or mode does not read; a nested group (tonemap.hable) opens when its operator
  // is chosen and closes when another is, and is otherwise left as the user put it. What an OCIO view replaces
  // is disabled, saying so, and so are the daemon's looks that set it.
  refreshApplies() {
    const get = (n) => this.effective(n);
    for (const [name, c] of this.controls) c.replace(this.replaced(name));
    for (const o of document.getElementById('look').options) {
      const look = this.looks.get(o.value);
      o.disabled = Boolean(look && Object.keys(look.sets || {}).some((k) => this.panelReplaces(k)));
    }
    for (const d of this.dependents) {
      const on = d.applies.test(get);
      d.row.classList.toggle('inapplicable', !on);
      if (d.details) {
        d.details.classList.toggle('inapplicable', !on);
        if (d.was !== undefined && d.was !== on) d.details.open = on;
        d.was = on;
      }
    }
  }

  // The daemon's error for a field beside its control (its group opened). False when no control has that name.
  showError(field, message) {
    const target = field && (this.controls.get(field) || (field === 'look' ? { look: true } : null));
    if (!target) return false;
    const box = target.look
      ? document.querySelector('[data-error-for="look"]')
      : target.error;
    box.textContent = message;
    box.hidden = false;
    if (!target.look) {
      target.row.classList.add('has-error');
      for (let d = target.row.closest('details'); d; d = d.parentElement.closest('details')) d.open = true;
    }
    box.scrollIntoView({ block: 'nearest' });
    return true;
  }

  clearError(name) {
    const c = this.controls.get(name);
    if (!c) return;
    c.error.hidden = true;
    c.error.textContent = '';
    c.row.classList.remove('has-error');
  }

  clearErrors() {
    for (const name of this.controls.keys()) this.clearError(name);
    const look = document.querySelector('[data-error-for="look"]');
    look.hidden = true;
    look.textContent = '';
  }

  build() {
    const lookSelect = document.getElementById('look');
    const lookParam = this.byName.get('look');
    const lookNames = (this.schema.looks || []).map((l) => l.name);
    for (const name of lookNames.length ? lookNames : (lookParam && lookParam.choices) || ['default']) {
      lookSelect.append(el('option', { value: name, text: name }));
    }
    lookSelect.value = 'default';
    document.getElementById('look-description').replaceChildren(inline((this.looks.get('default') || {}).description));
    lookSelect.addEventListener('change', () => this.setLook(lookSelect.value));

    const names = new Set(this.byName.keys());
    const groups = new Map();
    for (const p of this.params) {
      if (!groups.has(p.group)) groups.set(p.group, []);
      groups.get(p.group).push(p);
    }
    const container = document.getElementById('param-groups');
    for (const [group, params] of groups) {
      const details = el('details', { class: 'group', 'data-group': group, open: OPEN_GROUPS.has(group) },
        el('summary', {}, GROUP_TITLES[group] || group, el('span', { class: 'muted', text: ` ${group}.*` })));
      const subs = new Map();
      for (const p of params) {
        const row = this.control(p);
        const parts = p.name.split('.');
        if (parts.length > 2) {
          // tonemap.hable.white: in a nested group "hable", open when it applies.
          const key = parts.slice(0, -1).join('.');
          if (!subs.has(key)) {
            const sub = el('details', { class: 'subgroup', 'data-group': key },
              el('summary', {}, parts[parts.length - 2], p.applies ? el('span', { class: 'muted' }, ' · ', inline(p.applies)) : null));
            subs.set(key, sub);
            details.append(sub);
            const applies = appliesTest(p, names);
            if (applies) this.dependents.push({ row: el('div'), details: sub, applies });
          }
          subs.get(key).append(row);
        } else {
          details.append(row);
        }
        const applies = appliesTest(p, names);
        if (applies) this.dependents.push({ row, applies });
      }
      container.append(details);
    }
    this.dependents.filter((d) => d.details).forEach((d) => {
      d.details.open = d.applies.test((n) => this.effective(n));
    });
    this.refreshAll();
  }

  // One row: label, control, hint and the place for the daemon's message.
  control(p) {
    const id = `p-${p.name.replace(/[^a-z0-9_]/gi, '-')}`;
    const short = p.name.split('.').slice(1).join('.') || p.name;
    const error = el('div', { class: 'field-error', role: 'alert', hidden: true });
    const row = el('div', { class: 'param', 'data-param': p.name, title: p.description || '' });
    const label = el('label', { for: id, text: short });
    if (p.unit) label.append(el('span', { class: 'unit', text: ` ${p.unit}` }));
    const head = el('div', { class: 'param-head' }, label);
    const reset = el('button', { type: 'button', class: 'reset', title: 'back to the look’s or the default value',
      'aria-label': `reset ${p.name}`, text: '↺' });
    reset.addEventListener('click', () => {
      this.overrides.delete(p.name);
      const c = this.controls.get(p.name);
      c.show(this.effective(p.name));
      this.set(p.name, this.effective(p.name));
    });
    head.append(reset);
    row.append(head);

    let show;
    const emit = (v) => this.set(p.name, v);
    const b = bounds(p);
    if (p.type === 'boolean') {
      const box = el('input', { type: 'checkbox', id });
      box.addEventListener('change', () => emit(box.checked ? 'true' : 'false'));
      show = (v) => { box.checked = v === 'true'; };
      head.insertBefore(box, label);
      row.classList.add('param-bool');
    } else if (p.choices) {
      const sel = el('select', { id });
      for (const c of p.choices) sel.append(el('option', { value: String(c), text: String(c) }));
      sel.addEventListener('change', () => emit(sel.value));
      show = (v) => { sel.value = v; };
      row.append(sel);
    } else if (p.type === 'number' || p.type === 'integer' || p.type === 'number_or_auto') {
      const line = el('div', { class: 'number-line' });
      const box = el('input', { type: 'number', id, step: 'any', inputmode: 'decimal',
        min: b.lo, max: b.hi, 'aria-describedby': `${id}-range` });
      let slider = null;
      let auto = null;
      const span = b.hi - b.lo;
      if (Number.isFinite(span) && span > 0 && span <= SLIDER_MAX_SPAN) {
        const step = sliderStep(p, span);
        slider = el('input', { type: 'range', class: 'slider', 'aria-label': p.name,
          min: b.loEx ? b.lo + step : b.lo, max: b.hiEx ? b.hi - step : b.hi, step });
        slider.addEventListener('input', () => {
          box.value = slider.value;
          emit(slider.value);
        });
        line.append(slider);
      }
      line.append(box);
      if (p.type === 'number_or_auto') {
        auto = el('input', { type: 'checkbox', id: `${id}-auto` });
        line.append(el('label', { class: 'auto', for: `${id}-auto` }, auto, 'auto'));
        auto.addEventListener('change', () => {
          if (auto.checked) emit('auto');
          else emit(box.value !== '' ? box.value : String(b.lo > 0 ? b.lo : 0));
          show(this.effective(p.name));
        });
      }
      // Sent as typed, also out of range: the daemon's message says what it accepts, beside the box.
      box.addEventListener('input', () => {
        if (box.value === '') return; // empty, or not yet a number ("-", "1e")
        if (slider) slider.value = box.value;
        emit(box.value);
      });
      show = (v) => {
        const isAuto = v === 'auto';
        if (auto) auto.checked = isAuto;
        box.disabled = isAuto;
        if (slider) slider.disabled = isAuto;
        box.placeholder = isAuto ? 'auto' : '';
        if (isAuto) box.value = '';
        else if (document.activeElement !== box) box.value = v;
        if (slider && !isAuto) slider.value = v;
      };
      row.append(line);
    } else {
      const box = el('input', { type: 'text', id, maxlength: p.maxLength, spellcheck: 'false', autocomplete: 'off',
        placeholder: 'automatic' });
      box.addEventListener('input', () => emit(box.value));
      show = (v) => { if (document.activeElement !== box) box.value = v; };
      row.append(box);
    }
    const hint = [rangeText(p), p.applies && p.applies !== 'always' ? `for ${p.applies}` : ''].filter(Boolean).join(' · ');
    if (hint) row.append(el('div', { class: 'hint', id: `${id}-range` }, inline(hint)));
    row.append(error);
    const replace = (off) => {
      if (off === row.classList.contains('replaced')) return;
      row.classList.toggle('replaced', off);
      for (const c of row.querySelectorAll('input, select, button')) c.disabled = off;
      let note = row.querySelector('.replaced-note');
      if (off && !note) {
        note = el('div', { class: 'hint replaced-note', text: 'off: the OCIO view replaces it (ocio.display)' });
        row.insertBefore(note, error);
      }
      if (note) note.hidden = !off;
      if (!off) show(this.effective(p.name)); // an "auto" box disabled by its own state again
    };
    this.controls.set(p.name, { row, show, error, replace });
    return row;
  }
}
