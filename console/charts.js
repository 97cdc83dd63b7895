// The console's three charts, on uPlot (console/vendor, README.md there): the status view's throughput and
// stacked time per stage, and the analysis's histogram of log2 luminance. uPlot draws on a canvas and sets its
// elements' sizes through element.style (CSSOM), which the page's CSP (style-src 'self') allows.
import uPlot from './vendor/uPlot.esm.js';
import { cssVar, ms, orderStages, stageColour } from './util.js';

const HEIGHT = 210;
const bars = uPlot.paths.bars({ size: [0.8, 24], gap: 1 });

// The room a y axis's tick labels need: its widest label measured in the axis's own font, plus the tick and the
// gap. uPlot's fixed 50 px cut the left of a count such as 1.00e+5 off at the canvas's edge. After its second pass
// uPlot gets the size it has, as uPlot's own demos do, so that the layout settles.
function fitLabels(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  const [font, devicePx, cssPx] = axis.font;
  u.ctx.save();
  u.ctx.font = font;
  let widest = 0;
  for (const v of values || []) widest = Math.max(widest, u.ctx.measureText(v).width * (cssPx / devicePx));
  u.ctx.restore();
  return Math.ceil(widest + (axis.ticks.show ? axis.ticks.size : 0) + axis.gap + 4);
}

// Tick labels with the decimals that the ticks' step needs (0, 0.5, 1.0 or 0, 10, 20), the same for the whole
// axis, and zero as 0: ms() gave every tick three significant digits, so the stage chart's axis began at 0.000.
export function tickText(vals, step) {
  let digits = 0;
  while (digits < 6) {
    const scaled = step * 10 ** digits;
    if (Math.abs(scaled - Math.round(scaled)) <= 1e-6 * Math.max(1, scaled)) break;
    digits++;
  }
  return vals.map((v) => (v === null ? '' : Math.abs(v) < step / 2 ? '0' : v.toFixed(digits)));
}

// A pixel count as a tick label: 2500, 12.5k, 1.2M.
export function countText(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(3))}k`;
  return String(Math.round(v));
}

function axes(yLabel, yValues) {
  const stroke = cssVar('--muted');
  const grid = { stroke: cssVar('--grid'), width: 1 };
  const ticks = { stroke: cssVar('--grid'), width: 1 };
  return [
    { stroke, grid, ticks },
    { stroke, grid, ticks, label: yLabel, labelSize: 18, size: fitLabels, values: yValues },
  ];
}

function widthOf(container) {
  return Math.max(280, Math.floor(container.clientWidth || 0));
}

// One uPlot in a container, made again when its series change and sized to the container's width.
class Chart {
  constructor(container) {
    this.container = container;
    this.plot = null;
    this.key = '';
  }

  ensure(key, makeOpts, data) {
    if (!this.plot || key !== this.key) {
      if (this.plot) this.plot.destroy();
      this.key = key;
      this.plot = new uPlot({ ...makeOpts(), width: widthOf(this.container), height: HEIGHT }, data, this.container);
      this.container.uplot = this.plot; // for a test or a script reading what the chart drew
    } else {
      this.plot.setData(data);
    }
  }

  resize() {
    if (this.plot && this.container.clientWidth) this.plot.setSize({ width: widthOf(this.container), height: HEIGHT });
  }
}

function xsOf(perSecond) {
  const n = perSecond.requests.length;
  return Array.from({ length: n }, (_, i) => perSecond.t_end - (n - 1) + i);
}

// Requests, frames and errors per second over the last minute.
export class ThroughputChart extends Chart {
  update(perSecond) {
    const data = [xsOf(perSecond), perSecond.requests, perSecond.frames, perSecond.errors];
    this.ensure('throughput', () => ({
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      axes: axes('per s'),
      series: [
        {},
        { label: 'requests', stroke: cssVar('--series-requests'), width: 1.5, points: { show: false } },
        { label: 'frames', stroke: cssVar('--series-frames'), fill: cssVar('--series-frames-fill'), width: 2,
          points: { show: false } },
        { label: 'errors', stroke: cssVar('--series-errors'), width: 1.5, points: { show: false } },
      ],
    }), data);
  }
}

// The mean time of each stage per frame, one bar a second, stacked in the pipeline's order (recv at the
// bottom, encode on top), with the mean total as a dashed line over them. uPlot has no stacking of its own:
// each series is drawn as bars of its running sum, the top of the stack first, so that each stage shows above
// the one below; the legend shows each stage's own value, not the sum. Seconds without frames have no bar.
export class StageChart extends Chart {
  update(perSecond) {
    const all = perSecond.stages_ms || {};
    const stages = orderStages(Object.keys(all).filter((s) => s !== 'total'));
    const n = perSecond.requests.length;
    const sums = stages.map(() => new Array(n).fill(null));
    for (let i = 0; i < n; i++) {
      if (!stages.some((s) => all[s] && all[s][i] !== null && all[s][i] !== undefined)) continue;
      let acc = 0;
      stages.forEach((s, k) => {
        acc += (all[s] && all[s][i]) || 0;
        sums[k][i] = acc;
      });
    }
    const top = stages.map((_, k) => stages.length - 1 - k); // drawing order: top of the stack first
    const raw = [null, ...top.map((k) => all[stages[k]] || []), all.total || []];
    this.raw = raw;
    const data = [xsOf(perSecond), ...top.map((k) => sums[k]), all.total || new Array(n).fill(null)];
    this.ensure(stages.join(','), () => ({
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.05)] } },
      axes: axes('ms', (u, vals, axisIdx, space, step) => tickText(vals, step)),
      series: [
        {},
        ...top.map((k) => ({
          label: stages[k],
          stroke: stageColour(stages[k]),
          fill: stageColour(stages[k]),
          paths: bars,
          width: 0,
          points: { show: false },
          value: (u, v, si, di) => (di === null || di === undefined ? '–' : ms(this.raw[si][di])),
        })),
        { label: 'total', stroke: cssVar('--text'), width: 1, dash: [4, 3], points: { show: false }, spanGaps: false,
          value: (u, v) => ms(v) },
      ],
    }), data);
  }
}

// The histogram of /v1/analyze: 256 bins of log2 luminance over [min_log2, max_log2], bin 0 holding what is
// below (shown in the facts, not as a bar, so it does not flatten the rest). The x range is trimmed to the
// occupied bins; a line marks the log-average.
export class HistogramChart extends Chart {
  update(histogram, logAverage) {
    const counts = histogram.counts;
    const lo = histogram.min_log2;
    const step = (histogram.max_log2 - lo) / counts.length;
    let first = counts.length;
    let last = 0;
    for (let i = 1; i < counts.length; i++) {
      if (counts[i] > 0) {
        first = Math.min(first, i);
        last = i;
      }
    }
    if (first > last) {
      first = 1;
      last = counts.length - 1;
    }
    first = Math.max(1, first - 3);
    last = Math.min(counts.length - 1, last + 3);
    const xs = [];
    const ys = [];
    for (let i = first; i <= last; i++) {
      xs.push(lo + (i + 0.5) * step);
      ys.push(counts[i]);
    }
    this.marker = logAverage > 0 ? Math.log2(logAverage) : null;
    this.ensure('histogram', () => ({
      cursor: { drag: { x: false, y: false } },
      legend: { show: false },
      scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.05)] } },
      axes: [
        { stroke: cssVar('--muted'), grid: { stroke: cssVar('--grid'), width: 1 }, label: 'log2 luminance (stops)',
          labelSize: 18 },
        { stroke: cssVar('--muted'), grid: { stroke: cssVar('--grid'), width: 1 }, size: fitLabels,
          values: (u, vals, axisIdx, space, step) => (step >= 1 ? vals.map(countText) : tickText(vals, step)) },
      ],
      series: [
        {},
        { label: 'pixels', stroke: cssVar('--series-frames'), fill: cssVar('--series-frames-fill'),
          paths: uPlot.paths.bars({ size: [1, Infinity], gap: 0 }), points: { show: false } },
      ],
      hooks: {
        draw: [(u) => {
          if (this.marker === null) return;
          const x = u.valToPos(this.marker, 'x', true);
          if (!(x >= u.bbox.left && x <= u.bbox.left + u.bbox.width)) return;
          const c = u.ctx;
          c.save();
          c.strokeStyle = cssVar('--accent');
          c.lineWidth = 2;
          c.setLineDash([5, 4]);
          c.beginPath();
          c.moveTo(x, u.bbox.top);
          c.lineTo(x, u.bbox.top + u.bbox.height);
          c.stroke();
          c.fillStyle = cssVar('--accent');
          c.font = `${12 * devicePixelRatio}px sans-serif`;
          // Right of the line, or left of it when the text would run past the plot's right edge.
          const text = 'log-average';
          const room = u.bbox.left + u.bbox.width - x;
          const gap = 4 * devicePixelRatio;
          const left = c.measureText(text).width + gap > room;
          c.textAlign = left ? 'right' : 'left';
          c.fillText(text, left ? x - gap : x + gap, u.bbox.top + 14 * devicePixelRatio);
          c.restore();
        }],
      },
    }), [xs, ys]);
  }
}
