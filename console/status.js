// The status view and the header's state: GET /v1/stats every 2 s (the next poll starts when the last one has
// answered, so a slow daemon is never asked twice at once). A poll that fails (no answer in POLL_TIMEOUT_MS, the
// connection refused, an error) leaves the figures of the last answer on the page, marked stale: the pill says
// why, the figures are greyed under a note with the time of that answer, and the next answer clears it.
import { api, ApiError } from './api.js';
import { StageChart, ThroughputChart } from './charts.js';
import { ocioInfo } from './ocio.js';
import { bytes, clock, duration, el, ms, num, orderStages } from './util.js';

const PERIOD_MS = 2000;
const POLL_TIMEOUT_MS = 5000; // /v1/stats answers in a millisecond or two; a daemon this late counts as gone
const $ = (id) => document.getElementById(id);

const STATE_PILL = {
  ready: ['pill-ok', 'ready'],
  starting: ['pill-wait', 'starting'],
  draining: ['pill-wait', 'draining'],
  device_lost: ['pill-bad', 'device lost'],
};

function setPill(cls, text, reason) {
  const pill = $('state');
  pill.className = `pill ${cls}`;
  pill.textContent = text;
  $('state-reason').textContent = reason || '';
}

function meter(bar, used, total) {
  const f = total > 0 ? Math.min(1, used / total) : 0;
  bar.style.width = `${(f * 100).toFixed(1)}%`;
  bar.classList.toggle('meter-high', f >= 0.85);
}

export class StatusView {
  constructor() {
    this.throughput = new ThroughputChart($('chart-throughput'));
    this.stages = new StageChart($('chart-stages'));
    this.last = null;
    this.seenAt = null; // Date.now() of the last answer
    this.visible = false;
    this.timer = null;
    this.ocioShown = false;
    window.addEventListener('resize', () => this.resize());
  }

  start() {
    this.poll();
  }

  show(visible) {
    this.visible = visible;
    if (visible && this.last) this.drawCharts(this.last);
    this.resize();
  }

  resize() {
    if (!this.visible) return;
    this.throughput.resize();
    this.stages.resize();
  }

  async poll() {
    clearTimeout(this.timer);
    try {
      const res = await api('/v1/stats', { timeoutMs: POLL_TIMEOUT_MS });
      const s = await res.json();
      this.last = s;
      this.seenAt = Date.now();
      this.render(s);
      if (!this.ocioShown) this.showOcio();
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        this.stale('token_needed', 'pill-wait', 'token needed', 'the daemon answered 401; enter its token');
        $('token-button').hidden = false;
      } else if (e instanceof ApiError) {
        this.stale('error', 'pill-bad', `error ${e.status}`, e.message);
      } else {
        const why = e.name === 'TimeoutError' ? `no answer in ${POLL_TIMEOUT_MS / 1000} s` : 'no answer from the daemon';
        this.stale('unreachable', 'pill-bad', 'unreachable', `${why}; retrying every ${PERIOD_MS / 1000} s`);
      }
    }
    this.timer = setTimeout(() => this.poll(), PERIOD_MS);
  }

  // The last poll failed: the pill and the State card say so, and what the view shows from an earlier answer is
  // greyed under a note with that answer's time (body[data-stale] for a test or a script).
  stale(state, cls, text, why) {
    const seen = this.seenAt ? `last seen at ${clock(this.seenAt / 1000)}` : 'not seen yet';
    setPill(cls, text, `${why} · ${seen}`);
    document.body.dataset.state = state;
    document.body.dataset.ready = 'false';
    document.body.dataset.stale = 'true';
    $('view-status').classList.add('stale');
    $('stale-note').textContent = this.seenAt
      ? `${text}: ${why}. The figures below are the daemon's last answer, at ${clock(this.seenAt / 1000)}.`
      : `${text}: ${why}.`;
    $('stale-note').hidden = false;
    $('s-state').textContent = text;
    $('card-state').className = `card ${cls === 'pill-bad' ? 'card-bad' : 'card-wait'}`;
    $('s-reason').textContent = seen;
  }

  render(s) {
    const [cls, text] = STATE_PILL[s.state] || (s.ready ? ['pill-ok', 'ready'] : ['pill-wait', s.state]);
    const notReady = !s.ready && s.state === 'ready' ? ['pill-wait', 'not ready'] : null;
    setPill(...(notReady || [cls, text]), s.ready ? '' : s.reason);
    $('token-button').hidden = true;
    $('view-status').classList.remove('stale');
    $('stale-note').hidden = true;
    document.body.dataset.stale = 'false';
    document.body.dataset.state = s.state;
    document.body.dataset.ready = String(Boolean(s.ready));

    const d = s.device;
    $('device').textContent = d ? `${d.name} · ${d.driver}` : 'no device yet';
    $('device').title = d ? `driver ${d.driver}, ${d.driver_info}` : '';

    $('s-state').textContent = s.ready ? 'ready' : (STATE_PILL[s.state] || [null, s.state])[1];
    $('card-state').className = `card ${s.ready ? 'card-ok' : s.state === 'device_lost' ? 'card-bad' : 'card-wait'}`;
    $('s-reason').textContent = s.ready ? (d ? `${d.name}, ${d.driver}` : '') : s.reason || '';

    const q = s.queue || {};
    $('s-queue').textContent = `${q.depth ?? '–'} / ${q.capacity ?? '–'}`;
    meter($('s-queue-bar'), q.depth || 0, q.capacity || 0);
    $('s-inflight').textContent = `waiting / capacity · ${q.in_flight ?? 0} on the GPU`;

    $('s-fps').textContent = num(s.frames_per_s, 3);
    $('s-rps').textContent = num(s.requests_per_s, 3);

    const g = s.gpu_memory;
    if (g) {
      $('s-gpumem').textContent = bytes(g.used_bytes);
      meter($('s-gpumem-bar'), g.used_bytes, g.budget_bytes);
      $('s-gpumem-sub').textContent = `of a budget of ${bytes(g.budget_bytes)}`;
    } else {
      $('s-gpumem').textContent = 'n/a';
      meter($('s-gpumem-bar'), 0, 0);
      $('s-gpumem-sub').textContent = 'the driver reports no budget (VK_EXT_memory_budget)';
    }
    const m = s.inflight_memory || {};
    $('s-reqmem').textContent = bytes(m.used_bytes);
    meter($('s-reqmem-bar'), m.used_bytes || 0, m.limit_bytes || 0);
    $('s-reqmem-sub').textContent = `held by requests in flight, of ${bytes(m.limit_bytes)} (max_inflight_mb)`;

    $('s-version').textContent = s.version || '–';
    $('s-uptime').textContent = `up ${duration(s.uptime_s || 0)}`;

    this.renderStageTable(s.stages_ms || {});
    this.renderErrors(s);
    if (this.visible) this.drawCharts(s);
  }

  // The OCIO config, read once (the daemon loads it at start): in the Daemon card, and by the device in the
  // header when there is one. A failure is asked again at the next poll.
  async showOcio() {
    let doc;
    try {
      doc = await ocioInfo();
    } catch {
      return;
    }
    this.ocioShown = true;
    const c = doc && doc.config;
    const header = $('ocio-config');
    header.hidden = !c;
    if (c) {
      header.textContent = `OCIO ${c.name || c.path}`;
      header.title = `${c.path}: ${doc.displays.length} displays, default ${doc.default_display}`;
    }
    $('s-ocio').textContent = c ? `OCIO ${c.name || '(unnamed)'} · ${doc.displays.length} displays` : 'OCIO config: none';
    $('s-ocio').title = c ? `${c.path}${c.description ? `\n${c.description}` : ''}` : 'no ocio_config set';
  }

  drawCharts(s) {
    if (!s.per_second) return;
    this.throughput.update(s.per_second);
    this.stages.update(s.per_second);
  }

  renderStageTable(stages) {
    const names = orderStages(Object.keys(stages).filter((k) => k !== 'total'));
    if (stages.total) names.push('total');
    const rows = names.map((k) => {
      const st = stages[k];
      return el('tr', { class: k === 'total' ? 'total' : '' },
        el('td', {}, el('span', { class: `swatch swatch-${k}` }), k),
        el('td', { class: 'num', text: st.count ? ms(st.p50) : '–' }),
        el('td', { class: 'num', text: st.count ? ms(st.p99) : '–' }),
        el('td', { class: 'num', text: String(st.count ?? 0) }));
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'no frames yet' })));
    $('stage-table').tBodies[0].replaceChildren(...rows);
  }

  renderErrors(s) {
    const codes = Object.entries(s.errors_by_code || {}).sort((a, b) => b[1] - a[1]);
    $('error-codes').replaceChildren(...(codes.length
      ? codes.map(([code, n]) => el('span', { class: 'chip chip-bad' }, code, el('b', { text: String(n) })))
      : [el('span', { class: 'chip chip-ok', text: 'no errors' })]));
    const rows = (s.recent_errors || []).map((e) => el('tr', {},
      el('td', { text: clock(e.time) }),
      el('td', { class: 'num', text: String(e.status) }),
      el('td', {}, el('code', { text: e.code })),
      el('td', { class: 'message', text: e.message, title: e.message }),
      el('td', { text: e.path })));
    $('error-table').tBodies[0].replaceChildren(...rows);
    $('error-table').classList.toggle('empty', rows.length === 0);
  }
}
