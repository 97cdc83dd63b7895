// Small helpers shared by the views: building elements (text only, never HTML strings) and formatting.

// el('div', {class: 'x', title: 't'}, child, 'text', ...): an element with attributes and children.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// Text with `backticks` as <code>, as the parameter table writes names and values (docs/PARAMETERS.md).
export function inline(text) {
  const f = document.createDocumentFragment();
  String(text || '').split('`').forEach((part, i) => {
    if (part) f.append(i % 2 ? el('code', { text: part }) : document.createTextNode(part));
  });
  return f;
}

export function bytes(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

export function ms(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (v >= 100) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  if (v >= 1) return v.toFixed(2);
  return v.toFixed(3);
}

export function num(v, digits = 4) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
  return String(Number(v.toPrecision(digits)));
}

export function duration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s % 60} s`;
}

export function clock(unix) {
  return new Date(unix * 1000).toLocaleTimeString([], { hour12: false });
}

// A CSS custom property of :root (the colours live in console.css, one place for the page and the charts).
export function cssVar(name, fallback = '#888') {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

// The colour of a stage: --stage-<name> in console.css, grey for one it does not know.
export function stageColour(stage) {
  return cssVar(`--stage-${stage}`, cssVar('--stage-other', '#8a8a8a'));
}

// The pipeline's order of phases (docs/API.md, Server-Timing); others come after, in the order they come.
export const STAGE_ORDER = ['recv', 'decode', 'queue', 'upload', 'reduce', 'dof', 'bokeh', 'tonemap', 'download',
  'encode'];

export function orderStages(names) {
  const known = STAGE_ORDER.filter((s) => names.includes(s));
  return known.concat(names.filter((s) => !STAGE_ORDER.includes(s)));
}
