#!/usr/bin/env node
// The web console (issue 18, docs/CONSOLE.md) in a real browser against the real daemon: headless Chromium
// (Debian's chromium, driven by playwright-core from tests/node) opens the page that the daemon serves at /.
//
// What is checked, in order:
// - the files: GET / and /console/... answer every file console/meson.build lists, byte for byte as on disk,
//   with the strict CSP; every file under console/ is listed; each vendored file's sha256, on disk and as
//   served, is the one console/vendor/README.md records;
// - the page loads with no console error, no uncaught exception and no CSP violation (the securitypolicyviolation
//   events of the page, and Chromium's "Refused to ..." console errors); the status view says ready and names
//   the device of /v1/stats; its charts are drawn; the form has a control for every parameter of /v1/params in
//   the table's order and every look;
// - a small EXR given to the file input (setInputFiles) is rendered: the page sent the file's bytes, and the
//   image it shows is, pixel for pixel and byte for byte, what the same request made here with fetch answers;
//   the before/after comparison's left image is the same request with tonemap.operator=linear&gamma.mode=srgb;
//   the timing bar has a segment for each phase of Server-Timing; the analysis shows the log-average of the
//   daemon's /v1/analyze; the download link holds the image with the right extension;
// - changing the operator renders again, the query names it and the image changes (and equals a hand request);
// - an out-of-range number typed in a field shows the daemon's message beside that field (its reset button clears
//   it) and keeps the frame's picture; 100 random bytes as a new frame take the old frame's picture, timing,
//   analysis and download away and show the daemon's message in the picture's place, under the new name; a
//   512x512 PFM then renders, and its histogram's count axis (past 100000) has every label whole in the canvas;
// - the status view follows the daemon: after frames sent from here its stage table counts what /v1/stats does;
//   the stage chart's ms axis reads 0 at zero and one number of decimals, each label whole;
// - a daemon stopped under the open page (SIGSTOP: connections taken, never answered; then SIGTERM) turns the pill
//   to unreachable, says when it was last seen and greys the figures; SIGCONT, and a daemon started again on the
//   same port, bring the page back to ready by itself;
// - the CSP check can fail: an inline script added to the page is refused and reported;
// - with --auth_token set (a second daemon), the page asks for the token once, does not ask again by itself after
//   Cancel (the header offers it), says so when a token is refused, then works, sending Authorization: Bearer;
//   a look and a checkbox of a closed group (dof.enabled on the street sample) render as they should;
// - without an OCIO config, no OCIO select shows; with the ACES test config (a third daemon), the try view's selects
//   hold the config's displays, views, looks and colour spaces at its defaults, what a view replaces is disabled,
//   a frame through a chosen display, view, look and colour space shows the pixels of the same request by hand,
//   and display "none" gives the built-in form back; the config's name shows in the status area;
// - with --console=off, / is 404 and the API still answers; each daemon exits 0 on SIGTERM with no
//   validation-layer message.
//
// Usage: node test_console.mjs PATH/TO/hdrpostd. TAP on stdout. Chromium is /usr/bin/chromium unless
// HDRPOST_CHROMIUM names another; playwright-core comes from tests/node/node_modules (npm ci --prefix tests/node).
// A missing browser or module is a failed point with what to do, never a skip. Screenshots of each step go to
// a temporary directory whose path is printed; it is kept. Standard library otherwise (a PNG decoder below).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import zlib from 'node:zlib';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const CONSOLE_DIR = path.join(ROOT, 'console');
const PLAYWRIGHT = path.join(ROOT, 'tests', 'node', 'node_modules', 'playwright-core', 'index.mjs');
const CHROMIUM = process.env.HDRPOST_CHROMIUM || '/usr/bin/chromium';
const EXE = process.argv[2] || '';
const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 90000; // lavapipe compiles every pipeline before /readyz
const STEP_TIMEOUT_MS = 60000; // one render, or the page reacting to one action
const STOP_TIMEOUT_MS = 60000;
const TOKEN = 'console-test-' + randomBytes(8).toString('hex');
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; " +
  "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const SAMPLE = path.join(CONSOLE_DIR, 'samples', 'park.exr'); // 256x128 half RGB, ZIP
const ACES_CONFIG = path.join(ROOT, 'tests', 'data', 'ocio', 'aces_builtin', 'config.ocio'); // OCIO built-ins, no LUT

// --- TAP ------------------------------------------------------------------------------------------------

let count = 0;
let failures = 0;

function point(name, ok, detail = '') {
  count++;
  if (!ok) failures++;
  console.log(`${ok ? 'ok' : 'not ok'} ${count} - ${name}`);
  if (!ok && detail) for (const line of String(detail).split('\n').slice(-40)) console.log(`# ${line}`);
  return Boolean(ok);
}

function note(text) {
  console.log(`# ${text}`);
}

function bail(name, detail) {
  point(name, false, detail);
  console.log(`1..${count}`);
  process.exit(1);
}

// --- The daemon -----------------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, HOST, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// The test's environment without HDRPOST_* (an operator's settings must not leak in), as harness.py does.
function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('HDRPOST_') && k !== 'NOTIFY_SOCKET') env[k] = v;
  }
  if (process.env.HDRPOST_TEST_PRELOAD) env.LD_PRELOAD = process.env.HDRPOST_TEST_PRELOAD;
  return env;
}

class Daemon {
  constructor(label, port, args) {
    this.label = label;
    this.port = port;
    this.base = `http://${HOST}:${port}`;
    this.log = [];
    const device = process.env.HDRPOST_TEST_DEVICE ? [`--device=${process.env.HDRPOST_TEST_DEVICE}`] : [];
    this.proc = spawn(EXE, [`--listen=${HOST}:${port}`, '--validation', '--pipeline_cache=', '--log_level=info',
      ...device, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
    for (const s of [this.proc.stdout, this.proc.stderr]) {
      s.setEncoding('utf8');
      let rest = '';
      s.on('data', (d) => {
        const lines = (rest + d).split('\n');
        rest = lines.pop();
        this.log.push(...lines);
      });
    }
  }

  // port: a port of an earlier daemon, to start one again where a page is looking for it.
  static async start(label, args = [], port = null) {
    const d = new Daemon(label, port || await freePort(), args);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let ready = false;
    while (Date.now() < deadline && d.proc.exitCode === null) {
      try {
        if ((await fetch(`${d.base}/readyz`)).status === 200) {
          ready = true;
          break;
        }
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (point(`${label}: the daemon becomes ready (/readyz 200)`, ready, d.log.join('\n'))) return d;
    d.proc.kill('SIGKILL');
    return null;
  }

  validationLines() {
    return this.log.filter((l) => /vulkan validation|VUID-|Validation (Error|Warning)/i.test(l));
  }

  async stop() {
    if (this.proc.exitCode === null) this.proc.kill('SIGTERM');
    const timer = new Promise((r) => setTimeout(() => r(null), STOP_TIMEOUT_MS));
    const end = await Promise.race([this.exited, timer]);
    if (!end) this.proc.kill('SIGKILL');
    const bad = this.validationLines();
    point(`${this.label}: SIGTERM exits 0 with no validation-layer message`, end && end.code === 0 && !bad.length,
      `exit ${JSON.stringify(end)}\n${(bad.length ? bad : this.log.slice(-20)).join('\n')}`);
    process.stderr.write(`----- hdrpostd log: ${this.label} -----\n${this.log.join('\n')}\n`);
  }
}

// --- PNG -------------------------------------------------------------------------------------------------

// A non-interlaced 8- or 16-bit greyscale, RGB or RGBA PNG -> {width, height, channels, depth, data (the
// samples, row after row, unfiltered)}. Enough to compare two of the daemon's images pixel for pixel.
function pngDecode(buf) {
  if (!buf.subarray(0, 8).equals(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]))) throw new Error('no PNG signature');
  let pos = 8;
  let ihdr = null;
  const idat = [];
  while (pos + 8 <= buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('latin1', pos + 4, pos + 8);
    const body = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') ihdr = body;
    else if (type === 'IDAT') idat.push(body);
    else if (type === 'IEND') break;
    pos += 12 + len;
  }
  if (!ihdr || !idat.length) throw new Error('no IHDR or IDAT');
  const width = ihdr.readUInt32BE(0);
  const height = ihdr.readUInt32BE(4);
  const depth = ihdr[8];
  const channels = { 0: 1, 2: 3, 4: 2, 6: 4 }[ihdr[9]];
  if (!channels || (depth !== 8 && depth !== 16) || ihdr[12] !== 0) {
    throw new Error(`colour type ${ihdr[9]}, depth ${depth}, interlace ${ihdr[12]}`);
  }
  const bpp = (channels * depth) / 8;
  const stride = width * bpp;
  const raw = zlib.inflateSync(Buffer.concat(idat));
  if (raw.length !== height * (stride + 1)) throw new Error(`${raw.length} bytes of image data`);
  const out = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const o = y * stride;
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? out[o + i - bpp] : 0;
      const b = y ? out[o - stride + i] : 0;
      const c = y && i >= bpp ? out[o - stride + i - bpp] : 0;
      let pred = 0;
      if (f === 1) pred = a;
      else if (f === 2) pred = b;
      else if (f === 3) pred = (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (f !== 0) throw new Error(`filter ${f} on row ${y}`);
      out[o + i] = (line[i] + pred) & 0xff;
    }
  }
  return { width, height, channels, depth, data: out };
}

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

// --- Checks of the files ----------------------------------------------------------------------------------

function listedConsoleFiles() {
  const text = fs.readFileSync(path.join(CONSOLE_DIR, 'meson.build'), 'utf8');
  const list = /console_files\s*=\s*\[([^\]]*)\]/.exec(text);
  return list ? [...list[1].matchAll(/'([^']+)'/g)].map((m) => m[1]) : [];
}

function filesUnder(dir, prefix = '') {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix + e.name;
    if (e.isDirectory()) out.push(...filesUnder(path.join(dir, e.name), rel + '/'));
    else out.push(rel);
  }
  return out;
}

async function checkFiles(d) {
  const root = await fetch(`${d.base}/`);
  const rootBody = Buffer.from(await root.arrayBuffer());
  point('GET / is console/index.html with the strict CSP, X-Frame-Options DENY and nosniff',
    root.status === 200 && root.headers.get('content-type')?.startsWith('text/html') &&
    root.headers.get('content-security-policy') === CSP && root.headers.get('x-frame-options') === 'DENY' &&
    root.headers.get('x-content-type-options') === 'nosniff' &&
    rootBody.equals(fs.readFileSync(path.join(CONSOLE_DIR, 'index.html'))),
  `${root.status} ${JSON.stringify(Object.fromEntries(root.headers))}`);

  const listed = listedConsoleFiles();
  const onDisk = filesUnder(CONSOLE_DIR).filter((f) => f !== 'meson.build');
  const unlisted = onDisk.filter((f) => !listed.includes(f));
  point('every file under console/ is listed in console/meson.build (the build embeds exactly those)',
    listed.length > 0 && unlisted.length === 0, `not listed: ${unlisted.join(', ')}`);

  const bad = [];
  const types = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml',
    '.json': 'application/json', '.exr': 'application/octet-stream', '.md': 'text/markdown', '.txt': 'text/plain' };
  for (const f of listed) {
    const res = await fetch(`${d.base}/console/${f}`);
    const body = Buffer.from(await res.arrayBuffer());
    const want = types[path.extname(f)];
    const disk = fs.existsSync(path.join(CONSOLE_DIR, f)) ? fs.readFileSync(path.join(CONSOLE_DIR, f)) : null;
    if (res.status !== 200 || !disk || !body.equals(disk) || (want && !res.headers.get('content-type')?.startsWith(want)) ||
        res.headers.get('content-security-policy') !== CSP) {
      bad.push(`${f}: ${res.status} ${res.headers.get('content-type')} ${body.length} bytes, on disk ${disk ? disk.length : 'missing'}`);
    }
  }
  point(`the ${listed.length} listed files are served as they are on disk, each with its type and the CSP`,
    listed.length > 0 && bad.length === 0, bad.join('\n'));

  const missing = await fetch(`${d.base}/console/no-such-file.js`);
  const err = await missing.json().catch(() => null);
  point('a console path that is not listed is 404 with the JSON error', missing.status === 404 &&
    err?.error?.code === 'not_found', `${missing.status} ${JSON.stringify(err)}`);

  // console/vendor/README.md: | `file` | from the package | `sha256` |
  const readme = fs.readFileSync(path.join(CONSOLE_DIR, 'vendor', 'README.md'), 'utf8');
  const recorded = [...readme.matchAll(/^\|\s*`([^`]+)`\s*\|[^|]*\|\s*`([0-9a-f]{64})`\s*\|\s*$/gm)]
    .map((m) => ({ file: m[1], sum: m[2] }));
  const vendored = filesUnder(path.join(CONSOLE_DIR, 'vendor')).filter((f) => f !== 'README.md');
  const problems = [];
  for (const f of vendored) if (!recorded.some((r) => r.file === f)) problems.push(`${f}: no sha256 recorded`);
  for (const r of recorded) {
    const file = path.join(CONSOLE_DIR, 'vendor', r.file);
    const disk = fs.existsSync(file) ? sha256(fs.readFileSync(file)) : 'missing';
    const served = sha256(Buffer.from(await (await fetch(`${d.base}/console/vendor/${r.file}`)).arrayBuffer()));
    if (disk !== r.sum) problems.push(`${r.file}: on disk ${disk}, README ${r.sum}`);
    if (served !== r.sum) problems.push(`${r.file}: served ${served}, README ${r.sum}`);
  }
  point(`every vendored file (${recorded.map((r) => r.file).join(', ')}) has the sha256 of console/vendor/README.md, ` +
    'on disk and as served', recorded.length >= 3 && problems.length === 0, problems.join('\n'));
  const integrity = /sha512-[A-Za-z0-9+/]+=*/.exec(readme);
  point('console/vendor/README.md records the package version and its sha512 integrity',
    /uplot@1\.6\.32/.test(readme) && integrity !== null, readme.slice(0, 400));
}

// --- The browser ----------------------------------------------------------------------------------------

// A page that records what must not happen: console errors, uncaught exceptions, CSP violations. expected(msg)
// says which console errors an action of the test caused on purpose (a 400 it provoked is logged by Chromium as
// "Failed to load resource").
async function openPage(browser, shots) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  const page = await context.newPage();
  const record = { errors: [], exceptions: [], violations: [], expected: [] };
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = `${m.text()} (${m.location().url})`;
    if (record.expected.some((rx) => rx.test(text))) return;
    record.errors.push(text);
  });
  page.on('pageerror', (e) => record.exceptions.push(e.stack || e.message));
  page.shot = async (name, selector = null) => {
    const file = path.join(shots, `${name}.png`);
    await (selector ? page.locator(selector).screenshot({ path: file }) : page.screenshot({ path: file }));
    return file;
  };
  page.problems = async () => {
    const csp = await page.evaluate(() => window.__csp.slice()).catch(() => []);
    record.violations = csp;
    return [...record.errors.map((e) => `console error: ${e}`), ...record.exceptions.map((e) => `exception: ${e}`),
      ...csp.map((v) => `CSP violation: ${v}`)];
  };
  page.record = record;
  return page;
}

// The pixels an image shows in the page, read back through a canvas: {width, height, data: RGBA bytes}. source:
// a selector of an <img> of the page, or the bytes of a PNG, shown in the same page through a data: URL (which
// the CSP's img-src allows) so that both go through the same colour management: the daemon's PNG for the
// local gamma carries gAMA 1/2.2 and cHRM but no sRGB chunk, and the browser converts it for the display. (The
// page's blob: URL itself cannot be fetched back from the page: connect-src 'self' forbids it, rightly.)
async function shownPixels(page, source) {
  const arg = typeof source === 'string' ? { sel: source } : { b64: source.toString('base64') };
  const r = await page.evaluate(async ({ sel, b64 }) => {
    let img;
    if (sel) {
      img = document.querySelector(sel);
    } else {
      img = new Image();
      img.src = `data:image/png;base64,${b64}`;
    }
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext('2d', { willReadFrequently: true });
    g.drawImage(img, 0, 0);
    const data = g.getImageData(0, 0, c.width, c.height).data;
    let s = '';
    for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
    return { width: c.width, height: c.height, b64: btoa(s) };
  }, arg);
  return { width: r.width, height: r.height, data: Buffer.from(r.b64, 'base64') };
}

// '' when the page's <img> shows what the PNG shows in the same page, else what differs.
async function shownDiff(page, selector, png) {
  const shown = await shownPixels(page, selector);
  const want = await shownPixels(page, png);
  if (shown.width !== want.width || shown.height !== want.height) {
    return `shown ${shown.width}x${shown.height}, PNG ${want.width}x${want.height}`;
  }
  let n = 0;
  let worst = 0;
  for (let i = 0; i < want.data.length; i++) {
    const d = Math.abs(shown.data[i] - want.data[i]);
    if (d) n++;
    worst = Math.max(worst, d);
  }
  return n ? `${n} samples differ, by up to ${worst}` : '';
}

// '' when two PNGs decode to the same samples, else what differs.
function pixelDiff(pngA, pngB) {
  let a;
  let b;
  try {
    a = pngDecode(pngA);
    b = pngDecode(pngB);
  } catch (e) {
    return `not a PNG: ${e.message}`;
  }
  for (const k of ['width', 'height', 'channels', 'depth']) if (a[k] !== b[k]) return `${k} ${a[k]} != ${b[k]}`;
  if (a.data.equals(b.data)) return '';
  let n = 0;
  for (let i = 0; i < a.data.length; i++) if (a.data[i] !== b.data[i]) n++;
  return `${n} of ${a.data.length} samples differ`;
}

const doneSeq = (page) => page.evaluate(() => Number(document.body.dataset.done || 0));

// Runs action, then waits for the page's next render to be over (body[data-done] past where it was).
async function afterRender(page, action) {
  const before = await doneSeq(page);
  await action();
  await page.waitForFunction((n) => Number(document.body.dataset.done || 0) > n, before, { timeout: STEP_TIMEOUT_MS });
  return page.evaluate(() => document.body.dataset.outcome);
}

// Every POST /v1/render the page sends, in order.
function renderRequests(page) {
  const list = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url().includes('/v1/render')) list.push(r);
  });
  return list;
}

// The requests for the tone-mapped image, not for the comparison's linear clip.
function mainRenders(requests) {
  return requests.filter((r) => r.url().includes('/v1/render') && !r.url().includes('tonemap.operator=linear'));
}

async function handRender(d, url, body, headers = {}) {
  const target = url.startsWith('/') ? d.base + url : url.replace(/^https?:\/\/[^/]+/, d.base);
  const res = await fetch(target, { method: 'POST', body, headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

// The tick labels a uPlot chart of the page drew (the chart's container holds its uPlot as .uplot), per axis, and
// those that do not fit: a y label wider than its axis's room (it runs into the axis's title or off the canvas's
// left edge), an x label past either edge of the canvas. Widths are measured in the axis's own font.
async function axisLabels(page, id) {
  return page.evaluate((chartId) => {
    const u = document.getElementById(chartId).uplot;
    if (!u) return null;
    const ctx = document.createElement('canvas').getContext('2d');
    const axes = [];
    const clipped = [];
    u.axes.forEach((a, i) => {
      const values = (a._values || []).map((v) => (v === null ? '' : String(v)));
      const splits = a._splits || [];
      ctx.font = a.font[0];
      const width = (text) => Math.max(...text.split('\n').map((t) => ctx.measureText(t).width)) * (a.font[2] / a.font[1]);
      const tick = a.ticks.show ? a.ticks.size : 0;
      values.forEach((text, k) => {
        if (!text) return;
        const w = width(text);
        if (a.side === 3 && w > a._size - tick - a.gap) clipped.push(`axis ${i}: "${text}" ${w.toFixed(1)} px in ${a._size - tick - a.gap} px`);
        if (a.side === 2) {
          const x = u.bbox.left / (a.font[1] / a.font[2]) + u.valToPos(splits[k], a.scale);
          if (x - w / 2 < 0 || x + w / 2 > u.width) clipped.push(`axis ${i}: "${text}" from ${(x - w / 2).toFixed(1)} to ${(x + w / 2).toFixed(1)} of ${u.width} px`);
        }
      });
      axes.push({ side: a.side, values, splits });
    });
    return { axes, clipped };
  }, id);
}

// A PFM (colour, little-endian) of width x height whose pixels are grey at the luminance value(x, y) gives.
function pfm(width, height, value) {
  const head = Buffer.from(`PF\n${width} ${height}\n-1.0\n`, 'latin1');
  const body = Buffer.alloc(width * height * 12);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const v = value(x, y);
      const o = (y * width + x) * 12;
      body.writeFloatLE(v, o);
      body.writeFloatLE(v, o + 4);
      body.writeFloatLE(v, o + 8);
    }
  }
  return Buffer.concat([head, body]);
}

async function consoleSession(browser, d, shots) {
  const page = await openPage(browser, shots);
  const requests = renderRequests(page);
  const stats = await (await fetch(`${d.base}/v1/stats`)).json();
  const schema = await (await fetch(`${d.base}/v1/params`)).json();

  await page.goto(`${d.base}/`);
  let readyShown = false;
  try {
    await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: STEP_TIMEOUT_MS });
    readyShown = true;
  } catch {
    // reported below
  }
  const state = await page.textContent('#state');
  const device = await page.textContent('#device');
  point('the status view says ready and names the device of /v1/stats', readyShown && state.trim() === 'ready' &&
    stats.device && device.includes(stats.device.name), `state "${state}", device "${device}", stats ${JSON.stringify(stats.device)}`);
  const charts = await page.evaluate(() => ['chart-throughput', 'chart-stages']
    .map((id) => document.querySelectorAll(`#${id} canvas`).length));
  point('the status view draws its two charts (uPlot canvases)', charts.every((n) => n === 1), JSON.stringify(charts));

  await page.click('#tab-try');
  await page.waitForSelector('#param-groups .param', { state: 'attached', timeout: STEP_TIMEOUT_MS });
  const form = await page.evaluate(() => ({
    params: [...document.querySelectorAll('#param-groups [data-param]')].map((e) => e.dataset.param),
    groups: [...document.querySelectorAll('#param-groups > details.group')].map((e) => e.dataset.group),
    looks: [...document.querySelectorAll('#look option')].map((o) => o.value),
  }));
  // ocio.* have controls only with an OCIO config (ocioSession), as selects of the config's names.
  const formParams = schema.parameters.filter((p) => p.name !== 'look' && !p.name.startsWith('ocio.'));
  const wantParams = formParams.map((p) => p.name);
  const wantGroups = [...new Set(formParams.map((p) => p.group))];
  point('the form has a control for every parameter of /v1/params but ocio.*, grouped by stage, in the table\'s order, and every look',
    JSON.stringify(form.params) === JSON.stringify(wantParams) && JSON.stringify(form.groups) === JSON.stringify(wantGroups) &&
    JSON.stringify(form.looks) === JSON.stringify(schema.looks.map((l) => l.name)),
    `form ${JSON.stringify(form)}\nwant ${JSON.stringify({ wantParams, wantGroups })}`);
  await page.waitForFunction(() => document.getElementById('s-ocio').textContent !== '', null, { timeout: STEP_TIMEOUT_MS });
  const noOcio = await page.evaluate(() => ({
    block: document.getElementById('ocio-block').hidden,
    controls: document.querySelectorAll('#ocio-display, #ocio-view, #ocio-looks, [data-param^="ocio."]').length,
    header: document.getElementById('ocio-config').hidden,
    status: document.getElementById('s-ocio').textContent,
    spaces: [...document.querySelectorAll('#p-input-colorspace option')].map((o) => o.value),
  }));
  const ownSpaces = schema.parameters.find((p) => p.name === 'input.colorspace').choices;
  point('without an OCIO config: no OCIO block, select or ocio.* control, input.colorspace offers hdrpostd\'s own ' +
    'spaces alone, and the status says "OCIO config: none"', noOcio.block && noOcio.controls === 0 && noOcio.header &&
    noOcio.status === 'OCIO config: none' && JSON.stringify(noOcio.spaces) === JSON.stringify(ownSpaces),
  JSON.stringify(noOcio));
  let problems = await page.problems();
  point('the page loaded with no console error, uncaught exception or CSP violation', problems.length === 0,
    problems.join('\n'));

  // A frame through the file input.
  const frame = fs.readFileSync(SAMPLE);
  const outcome = await afterRender(page, () => page.setInputFiles('#file', SAMPLE));
  const main = mainRenders(requests).at(-1);
  const query = main ? new URL(main.url()).searchParams : new URLSearchParams();
  const sentLength = main ? Number((await main.allHeaders())['content-length']) : 0;
  const logged = d.log.some((l) => l.includes(`POST /v1/render ${frame.length} bytes exr 256x128 200`));
  point('the file input renders the frame: POST /v1/render?output.format=png with the file as its body',
    outcome === 'ok' && main && query.get('output.format') === 'png' && sentLength === frame.length && logged,
    `outcome ${outcome}, url ${main && main.url()}, Content-Length ${sentLength} of ${frame.length}, logged ${logged}`);
  const hand = await handRender(d, main.url(), frame);
  const diff = await shownDiff(page, '#img-after', hand.bytes);
  const dims = await page.evaluate(() => [document.getElementById('img-after').naturalWidth,
    document.getElementById('img-after').naturalHeight]);
  point('the page shows the pixels of the same request made by hand (256x128, shown alike in the same page)',
    hand.status === 200 && diff === '' && dims[0] === 256 && dims[1] === 128,
    `hand ${hand.status}, ${diff || 'same pixels'}, ${dims}`);

  const clipRequest = requests.filter((r) => r.url().includes('tonemap.operator=linear')).at(-1);
  const beforeQuery = new URLSearchParams(await page.getAttribute('#img-before', 'data-query'));
  const clip = new URLSearchParams(query);
  clip.set('tonemap.operator', 'linear');
  clip.set('gamma.mode', 'srgb');
  const handClip = await handRender(d, `/v1/render?${clip}`, frame);
  const clipDiff = clipRequest ? await shownDiff(page, '#img-before', handClip.bytes) : 'no request';
  point('the comparison\'s left image is the same request with tonemap.operator=linear&gamma.mode=srgb',
    beforeQuery.toString() === clip.toString() && handClip.status === 200 && clipDiff === '',
    `page ${beforeQuery}, want ${clip}, ${clipDiff}`);

  const phases = (hand.headers.get('server-timing') || '').split(',').map((p) => p.trim().split(';')[0])
    .filter((n) => n && n !== 'total' && n !== 'encode_cpu');
  const segs = await page.evaluate(() => [...document.querySelectorAll('#timing-bar .seg')].map((s) => s.dataset.stage));
  point('the timing bar has one segment for each phase of Server-Timing',
    phases.length > 3 && JSON.stringify([...segs].sort()) === JSON.stringify([...phases].sort()),
    `bar ${segs}, header ${phases}`);

  const analysis = await (await fetch(`${d.base}/v1/analyze`, { method: 'POST', body: frame,
    headers: { Accept: 'application/json' } })).json();
  const la = analysis.stats.log_average;
  const laText = String(Number(la.toPrecision(4)));
  const analysisShown = await page.evaluate(() => ({
    hidden: document.getElementById('analysis').hidden,
    canvas: document.querySelectorAll('#chart-histogram canvas').length,
    text: document.getElementById('analysis-facts').textContent,
  }));
  point('the analysis shows the histogram and the log-average of /v1/analyze',
    !analysisShown.hidden && analysisShown.canvas === 1 && analysisShown.text.includes(`log-average${laText} `),
    `${JSON.stringify(analysisShown)}, log_average ${la}`);

  const [download] = await Promise.all([page.waitForEvent('download', { timeout: STEP_TIMEOUT_MS }),
    page.click('#download')]);
  const dlPath = await download.path();
  const dlBytes = dlPath ? fs.readFileSync(dlPath) : Buffer.alloc(0);
  const dlDiff = pixelDiff(dlBytes, hand.bytes);
  point('the download link saves the image the page got: decoded, the pixels of the same request by hand (and its bytes)',
    /\.png$/.test(download.suggestedFilename()) && dlDiff === '' && dlBytes.equals(hand.bytes),
    `${download.suggestedFilename()}, ${dlBytes.length} bytes, ${dlDiff || 'same pixels'}`);
  await page.waitForTimeout(2500); // one more status poll, so the charts hold the frames
  await page.shot('02-try-a-frame');

  // The operator changes the image.
  const op = await afterRender(page, () => page.selectOption('#p-tonemap-operator', 'hable'));
  const main2 = mainRenders(requests).at(-1);
  const hand2 = await handRender(d, main2.url(), frame);
  const changed = await shownDiff(page, '#img-after', hand.bytes);
  const hableOpen = await page.evaluate(() => document.querySelector('details[data-group="tonemap.hable"]').open);
  point('choosing another operator renders again with tonemap.operator=hable, the image changes, hable\'s group opens',
    op === 'ok' && new URL(main2.url()).searchParams.get('tonemap.operator') === 'hable' && changed !== '' && hableOpen,
    `outcome ${op}, url ${main2.url()}, ${changed || 'the same pixels'}, hable's group open ${hableOpen}`);
  const diff2 = await shownDiff(page, '#img-after', hand2.bytes);
  point('... and shows the pixels of the same request made by hand', diff2 === '', diff2);
  await page.shot('03-hable');
  problems = await page.problems();
  point('rendering caused no console error, uncaught exception or CSP violation', problems.length === 0,
    problems.join('\n'));

  // A parameter out of range: the daemon's message beside its field.
  const field = 'exposure.compensation_ev';
  page.record.expected.push(/Failed to load resource: the server responded with a status of 400/);
  const bad = new URLSearchParams(new URL(main2.url()).searchParams);
  bad.set(field, '99');
  const handBad = await handRender(d, `/v1/render?${bad}`, frame);
  const badErr = JSON.parse(handBad.bytes.toString()).error;
  const out3 = await afterRender(page, () => page.fill('#p-exposure-compensation_ev', '99'));
  const beside = await page.evaluate((f) => {
    const box = document.querySelector(`[data-param="${f}"] .field-error`);
    return { text: box.textContent, hidden: box.hidden, visible: box.getClientRects().length > 0,
      banner: document.getElementById('banner').hidden };
  }, field);
  point(`a number out of range shows the daemon's message beside ${field}, not at the top`,
    out3 === 'error' && handBad.status === 400 && badErr.field === field && beside.text === badErr.message &&
    !beside.hidden && beside.visible && beside.banner,
    `outcome ${out3}, page ${JSON.stringify(beside)}, daemon ${handBad.status} ${JSON.stringify(badErr)}`);
  const kept = await page.evaluate(() => ({ box: !document.getElementById('compare-box').hidden,
    src: document.getElementById('img-after').getAttribute('src') || '', placeholder: document.getElementById('placeholder').hidden,
    name: document.getElementById('frame-name').textContent }));
  point('a refused parameter keeps the last picture of the same frame, under the same name',
    kept.box && kept.src.startsWith('blob:') && kept.placeholder && kept.name.startsWith('park.exr'), JSON.stringify(kept));
  await page.locator(`[data-param="${field}"]`).scrollIntoViewIfNeeded();
  await page.shot('04-field-error');

  // Back to a valid value (the field's reset button), then a bad file: the picture of the frame before goes (the name
  // above it is the new file's) and the daemon's message takes its place.
  const out35 = await afterRender(page, () => page.click(`[data-param="${field}"] .reset`));
  point('the field\'s reset button clears its error and renders again', out35 === 'ok' &&
    await page.evaluate((f) => document.querySelector(`[data-param="${f}"] .field-error`).hidden, field), `outcome ${out35}`);
  page.record.expected.push(/Failed to load resource: the server responded with a status of 415/);
  const junk = randomBytes(100);
  const handJunk = await handRender(d, main2.url(), junk);
  const junkErr = JSON.parse(handJunk.bytes.toString()).error;
  const out4 = await afterRender(page, () => page.setInputFiles('#file',
    { name: 'random.exr', mimeType: 'application/octet-stream', buffer: junk }));
  const refused = await page.evaluate(() => {
    const shown = (id) => !document.getElementById(id).hidden;
    return { name: document.getElementById('frame-name').textContent, picture: shown('compare-box'),
      src: document.getElementById('img-after').getAttribute('src'), placeholder: shown('placeholder'),
      text: document.getElementById('placeholder').textContent, banner: shown('banner'), timing: shown('timing'),
      analysis: shown('analysis'), download: shown('download'), facts: document.getElementById('facts').children.length };
  });
  point('100 random bytes given after a good frame: the label names random.exr, the picture of park.exr is gone with ' +
    'its timing, facts, analysis and download, and the daemon\'s message is in its place (once: not also at the top)',
  out4 === 'error' && handJunk.status >= 400 && refused.name.startsWith('random.exr') && !refused.picture &&
    !refused.src && refused.placeholder && refused.text.includes('random.exr') && refused.text.includes(junkErr.message) &&
    !refused.banner && !refused.timing && !refused.analysis && !refused.download && refused.facts === 0,
  `outcome ${out4}, page ${JSON.stringify(refused)}, daemon ${handJunk.status} ${JSON.stringify(junkErr)}`);
  await page.shot('05-bad-file');

  // A good frame after the refused one renders again. It is large and even (512x512, half the pixels at one
  // luminance, a quarter at another), so the histogram's counts pass 100000: each tick label of its axes must be
  // drawn whole inside the canvas (the y axis's were cut at its left edge) and read as the count it marks.
  const even = pfm(512, 512, (x, y) => (y < 256 ? 0.18 : y < 384 ? 1 : 2 ** ((x / 512) * 16 - 8)));
  const out5 = await afterRender(page, () => page.setInputFiles('#file',
    { name: 'even.pfm', mimeType: 'application/octet-stream', buffer: even }));
  const back = await page.evaluate(() => ({ name: document.getElementById('frame-name').textContent,
    picture: !document.getElementById('compare-box').hidden, placeholder: !document.getElementById('placeholder').hidden,
    analysis: !document.getElementById('analysis').hidden }));
  point('a good frame after the refused one is shown again under its own name, with its analysis',
    out5 === 'ok' && back.name.startsWith('even.pfm') && back.picture && !back.placeholder && back.analysis, JSON.stringify(back));
  const hist = await axisLabels(page, 'chart-histogram');
  const counts = hist ? hist.axes.find((a) => a.side === 3) : null;
  const parse = (t) => Number(t.replace(/k$/, 'e3').replace(/M$/, 'e6'));
  const misread = counts ? counts.values.filter((t, k) => t && Math.abs(parse(t) - counts.splits[k]) >
    0.005 * Math.max(1, Math.abs(counts.splits[k]))) : ['no chart'];
  point('the histogram of a 512x512 frame: its count axis reaches 100000 and every tick label is whole in the canvas and ' +
    'reads as its count (100k, 50k, ...)', hist && hist.clipped.length === 0 && misread.length === 0 &&
    Math.max(...counts.splits) >= 1e5, JSON.stringify({ clipped: hist && hist.clipped, misread, counts }));
  await page.locator('#analysis').scrollIntoViewIfNeeded();
  await page.shot('05b-histogram', '#analysis');

  // The status view follows the daemon: a few seconds of frames sent from here, then its table counts them all
  // (it polls every 2 s) and the throughput is above zero.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.click('#tab-status');
  const ops = ['agx', 'hable', 'aces_hill', 'reinhard', 'khronos_neutral', 'drago'];
  for (let i = 0; i < 16; i++) {
    await handRender(d, `/v1/render?output.format=png&tonemap.operator=${ops[i % ops.length]}`, frame);
    await new Promise((r) => setTimeout(r, 200));
  }
  const frames = (await (await fetch(`${d.base}/v1/stats`)).json()).stages_ms.total.count;
  let followed = false;
  try {
    await page.waitForFunction((n) => {
      const row = document.querySelector('#stage-table tr.total');
      return row && Number(row.cells[3].textContent) === n && Number(document.getElementById('s-fps').textContent) > 0;
    }, frames, { timeout: 10000 });
    followed = true;
  } catch {
    // reported below
  }
  point(`the status view follows the daemon: its stage table counts the ${frames} frames of /v1/stats, frames/s > 0`,
    followed, await page.textContent('#stage-table'));
  // The stage chart's ms axis: zero as 0 (not 0.000), every label with the decimals its step needs (the same for
  // all), whole inside the canvas, and reading as the value it marks.
  const stageAxis = await axisLabels(page, 'chart-stages');
  const msAxis = stageAxis ? stageAxis.axes.find((a) => a.side === 3) : null;
  const ticks = msAxis ? msAxis.values.filter((t) => t) : [];
  const decimals = new Set(ticks.filter((t) => t !== '0').map((t) => (t.split('.')[1] || '').length));
  const step = msAxis && msAxis.splits.length > 1 ? msAxis.splits[1] - msAxis.splits[0] : 0;
  const wrong = msAxis ? msAxis.values.filter((t, k) => t && Math.abs(Number(t) - msAxis.splits[k]) > step / 100) : [];
  point('the stage chart\'s ms axis: 0 at zero, one number of decimals for the rest, each label whole and reading as its value',
    msAxis && ticks.length >= 2 && msAxis.splits[0] === 0 && ticks[0] === '0' && !ticks.includes('0.000') &&
    decimals.size === 1 && wrong.length === 0 && stageAxis.clipped.length === 0,
  JSON.stringify({ msAxis, clipped: stageAxis && stageAxis.clipped, wrong }));
  await page.shot('01-status');
  problems = await page.problems();
  point('the whole session had no console error other than the two answers provoked, no exception, no CSP violation',
    problems.length === 0, problems.join('\n'));

  // The check above can fail: an inline script is refused and reported.
  const ran = await page.evaluate(() => {
    const s = document.createElement('script');
    s.textContent = 'window.__inlineRan = true;';
    document.head.append(s);
    return new Promise((r) => setTimeout(() => r(Boolean(window.__inlineRan)), 300));
  });
  const after = await page.problems();
  point('the CSP is enforced and its violations are seen: an inline script does not run and is reported',
    !ran && after.some((p) => /CSP violation: script-src/.test(p)), `ran ${ran}\n${after.join('\n')}`);
  await page.context().close();
}

// The daemon stopped under an open page, then started again on the same port (its listener sets SO_REUSEADDR): the
// page says it is unreachable, greys the last answer's figures with that answer's time, and comes back by itself.
async function outageSession(browser, daemons, shots) {
  const first = await Daemon.start('console, the daemon to stop under the page');
  if (!first) return;
  daemons.push(first);
  const page = await openPage(browser, shots);
  page.record.expected.push(/Failed to load resource: net::ERR_CONNECTION_REFUSED/);
  await page.goto(`${first.base}/`);
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: STEP_TIMEOUT_MS });
  const fresh = await page.evaluate(() => ({ stale: document.body.dataset.stale,
    note: document.getElementById('stale-note')?.hidden, cls: document.getElementById('view-status').className }));
  point('while the daemon answers, nothing is marked stale', fresh.stale === 'false' && fresh.note &&
    !/stale/.test(fresh.cls), JSON.stringify(fresh));

  // Stopped with SIGSTOP, the daemon's socket still takes connections but nothing answers them: a poll would wait
  // for ever, and the page kept its green "ready". It gives up on a poll after 5 s and says why.
  const waitStale = async (want) => {
    try {
      await page.waitForFunction((w) => document.body.dataset.stale === w && (w === 'true' || document.body.dataset.ready === 'true'),
        want, { timeout: STEP_TIMEOUT_MS });
      return true;
    } catch {
      return false;
    }
  };
  first.proc.kill('SIGSTOP');
  const hung = await waitStale('true');
  const silent = await page.evaluate(() => ({ pill: document.getElementById('state').textContent,
    pillClass: document.getElementById('state').className, reason: document.getElementById('state-reason').textContent,
    state: document.getElementById('s-state').textContent }));
  first.proc.kill('SIGCONT');
  point('a daemon that takes the connection but does not answer (SIGSTOP): the pill turns from ready to unreachable, ' +
    '"no answer in 5 s"', hung && silent.pill === 'unreachable' && /pill-bad/.test(silent.pillClass) &&
    /no answer in 5 s/.test(silent.reason) && silent.state === 'unreachable', JSON.stringify(silent));
  const resumed = await waitStale('false');
  point('... and back to ready by itself when it answers again (SIGCONT)', resumed &&
    await page.textContent('#state') === 'ready', await page.textContent('#state'));

  await first.stop();
  daemons.splice(daemons.indexOf(first), 1);
  let marked = false;
  try {
    await page.waitForFunction(() => document.body.dataset.stale === 'true', null, { timeout: STEP_TIMEOUT_MS });
    marked = true;
  } catch {
    // reported below
  }
  const gone = await page.evaluate(() => {
    const $ = (id) => document.getElementById(id);
    return { pill: $('state').textContent, pillClass: $('state').className, reason: $('state-reason').textContent,
      ready: document.body.dataset.ready, note: $('stale-note')?.hidden === false ? $('stale-note').textContent : null,
      card: $('card-state').className, state: $('s-state').textContent, seen: $('s-reason').textContent,
      viewClass: $('view-status').className,
      queueOpacity: Number(getComputedStyle($('s-queue').closest('.card')).opacity),
      chartOpacity: Number(getComputedStyle($('chart-stages').closest('.charts')).opacity) };
  });
  const time = /last seen at \d{1,2}:\d\d:\d\d/;
  point('the daemon stopped: the pill says unreachable (not green), with the time it last answered', marked &&
    gone.pill === 'unreachable' && /pill-bad/.test(gone.pillClass) && !/pill-ok/.test(gone.pillClass) &&
    time.test(gone.reason) && gone.ready === 'false', JSON.stringify(gone));
  point('... the State card says unreachable and when it was last seen; the other figures and the charts are greyed ' +
    'under a note giving the last answer\'s time', gone.state === 'unreachable' && /card-bad/.test(gone.card) &&
    time.test(gone.seen) && gone.note && /last answer, at \d{1,2}:\d\d:\d\d/.test(gone.note) && /stale/.test(gone.viewClass) &&
    gone.queueOpacity < 0.6 && gone.chartOpacity < 0.6, JSON.stringify(gone));
  await page.shot('10-unreachable');

  const again = await Daemon.start('console, the daemon started again on the same port', [], first.port);
  if (!again) {
    await page.context().close();
    return;
  }
  daemons.push(again);
  let back = false;
  try {
    await page.waitForFunction(() => document.body.dataset.stale === 'false' && document.body.dataset.ready === 'true',
      null, { timeout: STEP_TIMEOUT_MS });
    back = true;
  } catch {
    // reported below
  }
  const recovered = await page.evaluate(() => ({ pill: document.getElementById('state').textContent,
    note: document.getElementById('stale-note')?.hidden, viewClass: document.getElementById('view-status').className,
    state: document.getElementById('s-state').textContent, uptime: document.getElementById('s-uptime').textContent }));
  point('the daemon started again on the same port: the page recovers by itself (ready, no note, nothing greyed)',
    back && recovered.pill === 'ready' && recovered.note && !/stale/.test(recovered.viewClass) &&
    recovered.state === 'ready', JSON.stringify(recovered));
  await page.shot('11-recovered');
  const problems = await page.problems();
  point('the outage had no console error other than the refused connections, no exception, no CSP violation',
    problems.length === 0, problems.join('\n'));
  await page.context().close();
}

async function tokenSession(browser, d, shots) {
  const page = await openPage(browser, shots);
  page.record.expected.push(/Failed to load resource: the server responded with a status of 401/);
  const apiCalls = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname.startsWith('/v1/')) apiCalls.push(r);
  });
  await page.goto(`${d.base}/#try`);
  let asked = false;
  try {
    await page.waitForSelector('#token-dialog[open]', { timeout: STEP_TIMEOUT_MS });
    asked = true;
  } catch {
    // reported below
  }
  await page.waitForTimeout(500); // both the poll and the form's table met the 401 by now
  const dialogs = await page.evaluate(() => document.querySelectorAll('dialog[open]').length);
  point('with auth_token set, the page asks for the token (one dialog)', asked && dialogs === 1,
    `asked ${asked}, open dialogs ${dialogs}`);
  await page.shot('06-token');

  // Cancel: the page does not ask again by itself (its poll would every 2 s) but says it needs the token.
  await page.click('#token-cancel');
  await page.waitForTimeout(4500); // two polls
  const cancelled = await page.evaluate(() => ({ open: document.getElementById('token-dialog').open,
    pill: document.getElementById('state').textContent, button: !document.getElementById('token-button').hidden }));
  point('after Cancel the dialog stays closed through the polls, the header says "token needed" with a button',
    !cancelled.open && cancelled.pill === 'token needed' && cancelled.button, JSON.stringify(cancelled));
  await page.click('#token-button');
  await page.waitForSelector('#token-dialog[open]', { timeout: STEP_TIMEOUT_MS });

  await page.fill('#token-input', 'wrong-token');
  await page.press('#token-input', 'Enter');
  let refused = '';
  try {
    await page.waitForFunction(() => document.getElementById('token-dialog').open &&
      /refused/.test(document.getElementById('token-why').textContent), null, { timeout: STEP_TIMEOUT_MS });
    refused = await page.textContent('#token-why');
  } catch {
    // reported below
  }
  point('a wrong token is refused and the dialog says so', /refused/.test(refused), refused);

  await page.fill('#token-input', TOKEN);
  await page.click('#token-ok');
  let works = false;
  try {
    await page.waitForFunction(() => document.body.dataset.ready === 'true' &&
      document.querySelectorAll('#param-groups .param').length > 10, null, { timeout: STEP_TIMEOUT_MS });
    works = true;
  } catch {
    // reported below
  }
  const stored = await page.evaluate(() => sessionStorage.getItem('hdrpostd.token'));
  point('with the right token the status and the form load, and the token is kept in sessionStorage',
    works && stored === TOKEN, `loaded ${works}, stored ${stored}`);

  const outcome = await afterRender(page, () => page.click('button[data-sample="street.exr"]'));
  const last = mainRenders(apiCalls).at(-1);
  const auth = last ? await last.headerValue('authorization') : null;
  point('a sample frame renders with Authorization: Bearer <token> on its request',
    outcome === 'ok' && auth === `Bearer ${TOKEN}`, `outcome ${outcome}, authorization ${auth}`);
  await page.shot('07-token-render');

  // A look, then a checkbox of a collapsed group: the query carries the look and what was changed, the controls
  // show the look's values, and the answer's depth of field is shown.
  const lookDone = await afterRender(page, () => page.selectOption('#look', 'blender'));
  const lookQuery = new URL(mainRenders(apiCalls).at(-1).url()).searchParams;
  const operator = await page.inputValue('#p-tonemap-operator');
  point('choosing the look blender renders with look=blender alone, and the operator control shows its agx',
    lookDone === 'ok' && lookQuery.get('look') === 'blender' && !lookQuery.has('tonemap.operator') && operator === 'agx',
    `outcome ${lookDone}, query ${lookQuery}, operator shown ${operator}`);
  await page.click('details[data-group="dof"] > summary');
  const dofDone = await afterRender(page, () => page.check('#p-dof-enabled'));
  const dofQuery = new URL(mainRenders(apiCalls).at(-1).url()).searchParams;
  const facts = await page.textContent('#facts');
  point('ticking dof.enabled renders with dof.enabled=true on the street sample\'s depth, and its X-Depth-Of-Field is shown',
    dofDone === 'ok' && dofQuery.get('dof.enabled') === 'true' && /depth of fieldfocus_m=/.test(facts),
    `outcome ${dofDone}, query ${dofQuery}, facts ${facts}`);
  await page.shot('08-look-dof');
  const problems = await page.problems();
  point('the token session had no console error other than the 401s, no exception, no CSP violation',
    problems.length === 0, problems.join('\n'));
  await page.context().close();
}

// The try view with the daemon's OCIO config (issue 34): the selects hold the config's names and defaults, what a
// view replaces is disabled and not sent, a frame through a chosen view, look and config colour space is the same
// request made by hand, and "none" gives the built-in form back.
async function ocioSession(browser, d, shots) {
  const page = await openPage(browser, shots);
  const requests = renderRequests(page);
  const doc = await (await fetch(`${d.base}/v1/ocio`)).json();
  const schema = await (await fetch(`${d.base}/v1/params`)).json();
  await page.goto(`${d.base}/#try`);
  await page.waitForSelector('#ocio-block:not([hidden]) #ocio-view option', { state: 'attached', timeout: STEP_TIMEOUT_MS });
  await page.waitForFunction(() => document.getElementById('s-ocio').textContent !== '', null, { timeout: STEP_TIMEOUT_MS });
  const shown = await page.evaluate(() => {
    const opts = (sel) => [...document.querySelectorAll(`${sel} option`)].map((o) => o.value);
    return {
      name: document.getElementById('ocio-name').textContent, header: document.getElementById('ocio-config').textContent,
      status: document.getElementById('s-ocio').textContent, displays: opts('#ocio-display'),
      display: document.getElementById('ocio-display').value, views: opts('#ocio-view'),
      view: document.getElementById('ocio-view').value, looks: opts('#ocio-looks'), spaces: opts('#p-input-colorspace'),
      inBlock: Boolean(document.querySelector('#ocio-block [data-param="input.colorspace"]')),
    };
  });
  const own = schema.parameters.find((p) => p.name === 'input.colorspace').choices;
  const defaultDisplay = doc.displays.find((x) => x.name === doc.default_display);
  point(`with an OCIO config: its name (${doc.config.name}) in the try view, the header and the status card`,
    shown.name === doc.config.name && shown.header.includes(doc.config.name) && shown.status.includes(doc.config.name),
    JSON.stringify(shown));
  point('the display select lists none and the config\'s displays, at its default display; the view select that ' +
    'display\'s views, at its default view; the look select none and each look as +Name',
  JSON.stringify(shown.displays) === JSON.stringify(['', ...doc.displays.map((x) => x.name)]) &&
    shown.display === doc.default_display && JSON.stringify(shown.views) === JSON.stringify(defaultDisplay.views) &&
    shown.view === defaultDisplay.default_view &&
    JSON.stringify(shown.looks) === JSON.stringify(['', ...doc.looks.map((l) => `+${l}`)]), JSON.stringify(shown));
  point('the input colour-space select (in the OCIO block) offers hdrpostd\'s spaces and the config\'s',
    shown.inBlock && JSON.stringify(shown.spaces) === JSON.stringify([...own, ...doc.colorspaces.filter((c) => !own.includes(c))]),
    JSON.stringify(shown.spaces));
  const off = await page.evaluate(() => ['tonemap.operator', 'gamma.mode', 'gamma.radius', 'output.colorspace'].map((n) => {
    const row = document.querySelector(`[data-param="${n}"]`);
    const note = row.querySelector('.replaced-note');
    return row.querySelector('select, input').disabled && note && !note.hidden && /OCIO view/.test(note.textContent);
  }));
  point('what the view replaces (tonemap.operator, gamma.mode, gamma.radius, output.colorspace) is disabled, saying why',
    off.every(Boolean), JSON.stringify(off));

  // The default display and view first, then a chosen view, look and config colour space.
  const frame = fs.readFileSync(SAMPLE);
  const first = await afterRender(page, () => page.setInputFiles('#file', SAMPLE));
  const q1 = new URL(mainRenders(requests).at(-1).url()).searchParams;
  point('a frame renders through the default display and view: ocio.display and ocio.view sent, no ocio.looks, no operator',
    first === 'ok' && q1.get('ocio.display') === doc.default_display && q1.get('ocio.view') === defaultDisplay.default_view &&
    !q1.has('ocio.looks') && !q1.has('tonemap.operator'), `outcome ${first}, query ${q1}`);
  const display = doc.displays.find((x) => x.name !== doc.default_display && x.views.includes('Un-tone-mapped')) || defaultDisplay;
  const view = display.views.find((v) => v !== display.default_view);
  const look = doc.looks[0];
  await afterRender(page, () => page.selectOption('#ocio-display', display.name));
  await afterRender(page, () => page.selectOption('#ocio-view', view));
  await afterRender(page, () => page.selectOption('#ocio-looks', `+${look}`));
  const out = await afterRender(page, () => page.selectOption('#p-input-colorspace', doc.scene_linear));
  const main = mainRenders(requests).at(-1);
  const q = new URL(main.url()).searchParams;
  const hand = await handRender(d, main.url(), frame);
  const diff = hand.status === 200 ? await shownDiff(page, '#img-after', hand.bytes) : `hand ${hand.status} ${hand.bytes}`;
  point(`display "${display.name}", view "${view}", look +${look}, input ${doc.scene_linear}: sent as chosen, and the ` +
    'page shows the pixels of the same request made by hand',
  out === 'ok' && q.get('ocio.display') === display.name && q.get('ocio.view') === view && q.get('ocio.looks') === `+${look}` &&
    q.get('input.colorspace') === doc.scene_linear && diff === '', `outcome ${out}, query ${q}, ${diff || 'same pixels'}`);
  const clip = new URLSearchParams(await page.getAttribute('#img-before', 'data-query'));
  point('the comparison\'s linear clip is the built-in curve: no ocio.*, no config colour space',
    clip.get('tonemap.operator') === 'linear' && ![...clip.keys()].some((k) => k.startsWith('ocio.')) &&
    !clip.has('input.colorspace'), String(clip));
  await page.shot('09-ocio');

  // Back to none: the built-in form, nothing of OCIO sent, the config's space back to auto.
  const none = await afterRender(page, () => page.selectOption('#ocio-display', ''));
  const q3 = new URL(mainRenders(requests).at(-1).url()).searchParams;
  const enabled = await page.evaluate(() => !document.getElementById('p-tonemap-operator').disabled &&
    document.getElementById('p-input-colorspace').value === 'auto' && document.getElementById('ocio-view').disabled);
  point('display none: nothing of OCIO sent, the operator enabled again, the input colour space back to auto',
    none === 'ok' && ![...q3.keys()].some((k) => k.startsWith('ocio.')) && !q3.has('input.colorspace') && enabled,
    `outcome ${none}, query ${q3}, enabled ${enabled}`);
  const hable = await afterRender(page, () => page.selectOption('#p-tonemap-operator', 'hable'));
  const q4 = new URL(mainRenders(requests).at(-1).url()).searchParams;
  point('... and an operator chosen then renders as without a config', hable === 'ok' && q4.get('tonemap.operator') === 'hable',
    `outcome ${hable}, query ${q4}`);
  // A look of the daemon's own that names a view (studio_looks): the operator chosen above is then not sent (the
  // view replaces it; the daemon would refuse the pair), and the comparison's clip drops the look's view.
  const studio = await afterRender(page, () => page.selectOption('#look', 'review'));
  const q5 = new URL(mainRenders(requests).at(-1).url()).searchParams;
  const clip5 = new URLSearchParams(await page.getAttribute('#img-before', 'data-query'));
  point('the studio look "review" (a view at 0 EV) renders: look=review sent, the operator it replaces not sent; the ' +
    'clip spells out its exposure without its view',
  studio === 'ok' && q5.get('look') === 'review' && !q5.has('tonemap.operator') && !clip5.has('look') &&
    ![...clip5.keys()].some((k) => k.startsWith('ocio.')) && clip5.get('exposure.mode') === 'fixed' &&
    clip5.get('tonemap.operator') === 'linear', `outcome ${studio}, query ${q5}, clip ${clip5}`);
  const problems = await page.problems();
  point('the OCIO session had no console error, exception or CSP violation', problems.length === 0, problems.join('\n'));
  await page.context().close();
}

// --- Main ---------------------------------------------------------------------------------------------

async function main() {
  if (!EXE || !fs.existsSync(EXE)) bail(`${EXE || 'the daemon'} is built and executable`, 'usage: test_console.mjs PATH/TO/hdrpostd');
  if (!fs.existsSync(CHROMIUM)) {
    bail(`Chromium is installed (${CHROMIUM})`, 'apt-get install chromium (deploy/debian.sh test installs it), ' +
      'or set HDRPOST_CHROMIUM to a Chromium binary');
  }
  if (!fs.existsSync(PLAYWRIGHT)) {
    bail('playwright-core is installed in tests/node/node_modules',
      `${PLAYWRIGHT} is missing: run npm ci --prefix tests/node (deploy/debian.sh test does)`);
  }
  const { chromium } = await import(pathToFileURL(PLAYWRIGHT).href);
  const shots = fs.mkdtempSync(path.join(os.tmpdir(), 'hdrpost-console-'));
  note(`screenshots in ${shots}`);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hdrpost-chromium-home-'));
  let browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--force-color-profile=srgb'],
      env: { ...process.env, HOME: home } });
  } catch (e) {
    bail(`Chromium starts (${CHROMIUM})`, e.message);
  }
  point(`Chromium starts (${browser.version()})`, true);

  const daemons = [];
  try {
    const d = await Daemon.start('console');
    if (d) {
      daemons.push(d);
      await checkFiles(d);
      await consoleSession(browser, d, shots);
    }
    await outageSession(browser, daemons, shots);
    const o = await Daemon.start('console with an OCIO config', [`--ocio_config=${ACES_CONFIG}`,
      '--studio_looks=review: ocio.view=Un-tone-mapped&exposure.mode=fixed&exposure.stops=0']);
    if (o) {
      daemons.push(o);
      await ocioSession(browser, o, shots);
    }
    const t = await Daemon.start('console with auth_token', [`--auth_token=${TOKEN}`]);
    if (t) {
      daemons.push(t);
      const page = await fetch(`${t.base}/`);
      const stats = await fetch(`${t.base}/v1/stats`);
      point('with auth_token, the page itself is public and the API is not (/ 200, /v1/stats 401)',
        page.status === 200 && stats.status === 401, `${page.status} ${stats.status}`);
      await tokenSession(browser, t, shots);
    }
    const off = await Daemon.start('console off', ['--console=off']);
    if (off) {
      daemons.push(off);
      const root = await fetch(`${off.base}/`);
      const js = await fetch(`${off.base}/console/app.js`);
      const stats = await fetch(`${off.base}/v1/stats`);
      point('console=off: / and /console/app.js are 404, the API still answers', root.status === 404 &&
        js.status === 404 && stats.status === 200, `${root.status} ${js.status} ${stats.status}`);
    }
  } catch (e) {
    point('the test ran to the end', false, e.stack || String(e));
  } finally {
    if (browser) await browser.close().catch(() => {});
    for (const d of daemons) await d.stop();
    fs.rmSync(home, { recursive: true, force: true });
  }
  note(`screenshots in ${shots}`);
  console.log(`1..${count}`);
  process.exit(failures ? 1 : 0);
}

await main();
