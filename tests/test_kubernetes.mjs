// deploy/kubernetes/ against the Kubernetes API's schemas, as `kubectl apply` would judge it, without a
// cluster. Every directory with a kustomization.yaml (the base, each overlay, the Prometheus adapter's rule)
// is rendered (tests/kustomize.mjs) and every object validated:
// - against its kind's JSON schema (the npm package kubernetes-models for the API's own kinds,
//   @kubernetes-models/prometheus-operator for ServiceMonitor): types, enums, required fields, formats;
// - for fields the schema does not know. The schemas leave additionalProperties open, so a misspelled field
//   passes them (and the API server would drop it, or refuse it under kubectl's strict field validation).
//   The object is validated through a Proxy that records every property the schema's validator reads: a
//   structure's validator reads only its known fields, a map's reads every key, so a key never read is an
//   unknown field.
// The validator is then shown to be real: a copy of each kind with a field misspelled, and one with a field
// of the wrong type, must each be refused.
// Then what holds the objects together: selectors, ports, the autoscaler's target and metric against the
// adapter's rule, the GPU per replica, and the memory the queue can hold against the pod's budget.
// The daemon itself, run with the pod's settings, is tests/test_deploy.py's.
//
// Usage: node tests/test_kubernetes.mjs [SOURCE_ROOT]. TAP; a missing tests/node/node_modules fails.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), ".."));
const k8sDir = path.join(root, "deploy", "kubernetes");

let count = 0;
let failures = 0;
function point(description, ok, detail = "") {
  count++;
  if (!ok)
    failures++;
  console.log(`${ok ? "ok" : "not ok"} ${count} - ${description}`);
  if (!ok && detail)
    for (const line of String(detail).split("\n"))
      console.log(`# ${line}`);
  return ok;
}
function finish() {
  console.log(`1..${count}`);
  process.exit(failures ? 1 : 0);
}

// --- The packages ---------------------------------------------------------------------------------------
const MODELS = {
  "apps/v1 Deployment": ["kubernetes-models/apps/v1/Deployment", "Deployment"],
  "v1 Service": ["kubernetes-models/v1/Service", "Service"],
  "v1 ConfigMap": ["kubernetes-models/v1/ConfigMap", "ConfigMap"],
  "policy/v1 PodDisruptionBudget": ["kubernetes-models/policy/v1/PodDisruptionBudget", "PodDisruptionBudget"],
  "autoscaling/v2 HorizontalPodAutoscaler": ["kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler",
    "HorizontalPodAutoscaler"],
  "monitoring.coreos.com/v1 ServiceMonitor": [
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor", "ServiceMonitor"],
};
let kustomize;
let YAML;
const models = {};
try {
  kustomize = await import("./kustomize.mjs");
  YAML = kustomize.requireTestPackage("yaml");
  for (const [key, [module, name]] of Object.entries(MODELS))
    models[key] = kustomize.requireTestPackage(module)[name];
  point("the npm packages of tests/node are installed (kubernetes-models, @kubernetes-models/prometheus-operator, " +
        "yaml)", true);
} catch (e) {
  point("the npm packages of tests/node are installed (kubernetes-models, @kubernetes-models/prometheus-operator, " +
        "yaml)", false, e.message);
  finish();
}

// --- The validator --------------------------------------------------------------------------------------
/** The problems kind's schema finds in obj, schema errors and unknown fields; [] when it is valid. */
function validate(obj) {
  const key = `${obj.apiVersion} ${obj.kind}`;
  const Model = models[key];
  if (!Model)
    return [`no schema for ${key}: add its model to MODELS in tests/test_kubernetes.mjs`];
  const reads = new Map(); // path -> { value, keys read }
  const watch = (value, where) => {
    if (value === null || typeof value !== "object")
      return value;
    if (!reads.has(where))
      reads.set(where, { value, keys: new Set() });
    const seen = reads.get(where).keys;
    return new Proxy(value, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (typeof prop !== "string" || !Object.hasOwn(target, prop))
          return v;
        seen.add(prop);
        return watch(v, `${where}/${prop}`);
      },
      has(target, prop) {
        if (typeof prop === "string")
          seen.add(prop);
        return Reflect.has(target, prop);
      },
    });
  };
  const problems = [];
  try {
    Model.prototype.validate.call(watch(structuredClone(obj), ""));
  } catch (e) {
    problems.push(e.message);
  }
  for (const [where, { value, keys }] of reads)
    if (!Array.isArray(value))
      for (const k of Object.keys(value))
        if (!keys.has(k))
          problems.push(`${where}/${k}: unknown field`);
  return problems;
}

// --- Render and validate everything --------------------------------------------------------------------
function kustomizationDirs(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory())
      out.push(...kustomizationDirs(p));
    else if (entry.name === "kustomization.yaml")
      out.push(dir);
  }
  return out.sort();
}
const rel = (p) => path.relative(k8sDir, p) || ".";
const dirs = kustomizationDirs(k8sDir);
const expected = ["base", "overlays/nvidia", "overlays/lavapipe", "prometheus-adapter"];
point(`deploy/kubernetes has ${expected.join(", ")}`, expected.every((d) => dirs.map(rel).includes(d)),
      `found ${dirs.map(rel)}`);

const rendered = {};
const usedFiles = new Set();
for (const dir of dirs) {
  let objects = null;
  try {
    objects = kustomize.render(dir);
  } catch (e) {
    point(`${rel(dir)} renders`, false, e.message);
    continue;
  }
  rendered[rel(dir)] = objects;
  point(`${rel(dir)} renders: ${objects.map((o) => o.kind).join(", ")}`, objects.length > 0);
  for (const obj of objects) {
    const problems = validate(obj);
    point(`${rel(dir)}: ${obj.kind} ${obj.metadata.name} is valid against the ${obj.apiVersion} schema, with no ` +
          "unknown field", problems.length === 0, problems.join("\n"));
  }
  const k = YAML.parse(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
  usedFiles.add(path.join(dir, "kustomization.yaml"));
  for (const r of k.resources ?? [])
    usedFiles.add(path.resolve(dir, r));
  for (const p of k.patches ?? [])
    if (p.path)
      usedFiles.add(path.resolve(dir, p.path));
}
const yamlFiles = [];
(function walk(d) {
  for (const e of fs.readdirSync(d, { withFileTypes: true }))
    if (e.isDirectory())
      walk(path.join(d, e.name));
    else if (/\.ya?ml$/.test(e.name))
      yamlFiles.push(path.join(d, e.name));
})(k8sDir);
const orphans = yamlFiles.filter((f) => !usedFiles.has(f)).map(rel);
point("every YAML file under deploy/kubernetes is a kustomization, or a resource or patch of one (so it was " +
      "validated above)", orphans.length === 0, `not used: ${orphans}`);

// --- The validator refuses what it should ----------------------------------------------------------------
// [kind, the field to misspell as [path, wrong name], the field to give a wrong type as [path, value]]
const MUTATIONS = [
  ["Deployment", [["spec", "template", "spec", "terminationGracePeriodSeconds"], "terminationGracePeriodSecond"],
    [["spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"], "8080"]],
  ["Service", [["spec", "ports", 0, "targetPort"], "targetPorts"], [["spec", "ports", 0, "port"], "80"]],
  ["PodDisruptionBudget", [["spec", "minAvailable"], "minAvailible"],
    [["spec", "selector", "matchLabels"], ["app.kubernetes.io/name"]]],
  ["HorizontalPodAutoscaler", [["spec", "behavior"], "behaviour"],
    [["spec", "metrics", 1, "resource", "target", "averageUtilization"], "70"]],
  ["ServiceMonitor", [["spec", "endpoints", 0, "scrapeTimeout"], "scrapeTimout"],
    [["spec", "endpoints", 0, "interval"], 15]],
  ["ConfigMap", [["data"], "datas"], [["data", "config.yaml"], 5]],
];
const everything = Object.values(rendered).flat();
for (const [kind, [misspell, wrongName], [typed, wrongValue]] of MUTATIONS) {
  const original = everything.find((o) => o.kind === kind);
  if (!point(`a ${kind} is rendered to mutate`, original !== undefined))
    continue;
  const parentOf = (obj, p) => p.slice(0, -1).reduce((o, k) => o?.[k], obj);
  const misspelt = structuredClone(original);
  const parent = parentOf(misspelt, misspell);
  const last = misspell[misspell.length - 1];
  const present = parent !== undefined && last in parent;
  if (present) {
    parent[wrongName] = parent[last];
    delete parent[last];
  }
  const p1 = present ? validate(misspelt) : [];
  const at1 = "/" + [...misspell.slice(0, -1), wrongName].join("/");
  point(`mutation: a ${kind} with ${misspell.join(".")} misspelled ${wrongName} is refused, naming the field`,
        present && p1.some((p) => p.includes(at1)), present ? p1.join("\n") || "accepted" : "no such field to misspell");
  const wrong = structuredClone(original);
  const parent2 = parentOf(wrong, typed);
  const last2 = typed[typed.length - 1];
  const present2 = parent2 !== undefined && last2 in parent2;
  if (present2)
    parent2[last2] = wrongValue;
  const p2 = present2 ? validate(wrong) : [];
  point(`mutation: a ${kind} with ${typed.join(".")} = ${JSON.stringify(wrongValue)} (a wrong type) is refused, ` +
        "naming the field", present2 && p2.some((p) => p.includes(`data/${typed.join("/")}`)),
        present2 ? p2.join("\n") || "accepted" : "no such field");
}

// --- What holds the objects together ---------------------------------------------------------------------
const adapterObjects = rendered["prometheus-adapter"] ?? [];
const adapterConfig = adapterObjects.find((o) => o.kind === "ConfigMap")?.data?.["config.yaml"];
let rules = [];
try {
  rules = YAML.parse(adapterConfig ?? "").rules ?? [];
} catch (e) {
  point("the adapter's config.yaml parses", false, e.message);
}
const metricOf = (q) => /^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(q ?? "")?.[1];
const labelsMatch = (selector, labels) =>
  selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
const envOf = (c) => Object.fromEntries((c?.env ?? []).filter((e) => "value" in e).map((e) => [e.name, e.value]));
const bytes = (q) => {
  const m = /^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q ?? ""));
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return m ? Number(m[1]) * (m[2] ? unit[m[2]] : 1) : NaN;
};

for (const name of ["base", "overlays/nvidia", "overlays/lavapipe"]) {
  const objects = rendered[name] ?? [];
  const of = (kind) => objects.find((o) => o.kind === kind);
  const [dep, svc, pdb, hpa, sm] = ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler",
    "ServiceMonitor"].map(of);
  if (!point(`${name}: a Deployment, a Service, a PodDisruptionBudget, a HorizontalPodAutoscaler and a ` +
             "ServiceMonitor", dep && svc && pdb && hpa && sm, objects.map((o) => o.kind).join(", ")))
    continue;
  const pod = dep.spec.template;
  const c = pod.spec.containers[0];
  const env = envOf(c);
  const containerPorts = (c.ports ?? []).map((p) => p.name);
  point(`${name}: the Deployment's, the Service's and the budget's selectors match the pods' labels`,
        [dep.spec.selector.matchLabels, svc.spec.selector, pdb.spec.selector.matchLabels].every((s) =>
          labelsMatch(s, pod.metadata.labels)));
  point(`${name}: the Service sends to a named container port`,
        svc.spec.ports.every((p) => containerPorts.includes(p.targetPort)), JSON.stringify(svc.spec.ports));
  point(`${name}: the ServiceMonitor selects the Service and scrapes a port it names, on /metrics`,
        labelsMatch(sm.spec.selector.matchLabels, svc.metadata.labels) && sm.spec.endpoints.length > 0 &&
        sm.spec.endpoints.every((e) => svc.spec.ports.some((p) => p.name === e.port) && e.path === "/metrics"),
        JSON.stringify(sm.spec));
  const target = hpa.spec.scaleTargetRef;
  point(`${name}: the autoscaler scales this Deployment, which sets no replica count of its own (an apply would ` +
        "undo the autoscaler's)", target.apiVersion === "apps/v1" && target.kind === "Deployment" &&
        target.name === dep.metadata.name && dep.spec.replicas === undefined, JSON.stringify(target));
  point(`${name}: the autoscaler keeps more replicas than the disruption budget needs available, so that a node ` +
        "drain can evict one", hpa.spec.minReplicas > pdb.spec.minAvailable,
        `minReplicas ${hpa.spec.minReplicas}, minAvailable ${pdb.spec.minAvailable}`);
  const podMetrics = hpa.spec.metrics.filter((m) => m.type === "Pods").map((m) => m.pods.metric.name);
  const served = rules.filter((r) => r.name?.as && new RegExp(r.name.matches).test(metricOf(r.seriesQuery)) &&
    r.resources?.overrides?.pod?.resource === "pod" && r.resources?.overrides?.namespace?.resource === "namespace" &&
    ["<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"].every((t) => r.metricsQuery?.includes(t)));
  point(`${name}: every per-pod metric the autoscaler reads is served by a rule of the Prometheus adapter that ` +
        "maps its series to pods", podMetrics.length > 0 && podMetrics.every((m) => served.some((r) => r.name.as === m)),
        `metrics ${podMetrics}; rules ${JSON.stringify(rules)}`);
  const cpu = Number(c.resources?.requests?.cpu);
  const threads = ["HDRPOST_DECODE_THREADS", "HDRPOST_ENCODE_THREADS", "HDRPOST_PNG_THREADS"].map((t) => Number(env[t]));
  point(`${name}: the thread settings equal the CPU request (with no CPU limit the daemon would count the node's ` +
        "cores)", cpu > 0 && threads.every((t) => t === cpu) && c.resources?.limits?.cpu === undefined,
        `cpu ${cpu}, threads ${threads}`);
  const request = bytes(c.resources?.requests?.memory);
  const limit = bytes(c.resources?.limits?.memory);
  point(`${name}: the memory request equals the limit`, request > 0 && request === limit,
        JSON.stringify(c.resources));
  // Memory (base/deployment.yaml's comment): the budget, max_inflight_mb or half the limit; the frames the
  // replica holds, at most Q waiting + 2 on the device + Q + 1 encoded-to-be + one per encode thread, each a
  // 4K RGBA half EXR (the benchmarks' 28.0 MB ZIP body, 8 bytes a pixel decoded, 4 its image).
  const budget = env.HDRPOST_MAX_INFLIGHT_MB ? Number(env.HDRPOST_MAX_INFLIGHT_MB) * 2 ** 20 : limit / 2;
  const q = Number(env.HDRPOST_QUEUE_DEPTH ?? 16);
  const held = 2 * q + 3 + threads[1];
  const frame4k = 28.0e6 + 3840 * 2160 * (8 + 4);
  point(`${name}: the ${held} frames the queue lets a replica hold, 4K EXRs, fit its memory budget: the queue ` +
        "answers 429 before the budget 503", held * frame4k <= budget,
        `${held} x ${(frame4k / 1e6).toFixed(1)} MB against ${(budget / 2 ** 30).toFixed(2)} GiB`);
  // The largest frame admitted (max_megapixels as RGBA32F, a 16-bit image, a form's body counted twice)
  // must fit the budget, or every such frame is answered 413.
  const pixels = Number(env.HDRPOST_MAX_MEGAPIXELS ?? 268.435456) * 1e6;
  const largest = pixels * (16 + 8) + 2 * Number(env.HDRPOST_MAX_BODY_MB ?? 2048) * 2 ** 20;
  point(`${name}: the largest frame the replica admits fits its memory budget`, largest <= budget,
        `${(largest / 2 ** 30).toFixed(2)} GiB against ${(budget / 2 ** 30).toFixed(2)} GiB`);
}

const nvidia = (rendered["overlays/nvidia"] ?? []).find((o) => o.kind === "Deployment");
const lavapipe = (rendered["overlays/lavapipe"] ?? []).find((o) => o.kind === "Deployment");
const base = (rendered.base ?? []).find((o) => o.kind === "Deployment");
if (point("the base and both overlays render a Deployment", nvidia && lavapipe && base)) {
  const gpu = (d) => d.spec.template.spec.containers.map((c) => c.resources?.limits?.["nvidia.com/gpu"]);
  const spec = nvidia.spec.template.spec;
  point("nvidia: each replica asks for one GPU, names it (HDRPOST_DEVICE), and may run on tainted GPU nodes",
        JSON.stringify(gpu(nvidia)) === "[1]" && envOf(spec.containers[0]).HDRPOST_DEVICE === "NVIDIA" &&
        (spec.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu" && t.operator === "Exists"),
        JSON.stringify({ gpu: gpu(nvidia), tolerations: spec.tolerations }));
  point("nvidia: replicas are spread over the GPU nodes (a node selector, and the spread over hostnames it " +
        "restricts)", Object.keys(spec.nodeSelector ?? {}).some((k) => k.startsWith("nvidia.com/")) &&
        (spec.topologySpreadConstraints ?? []).some((t) => t.topologyKey === "kubernetes.io/hostname" &&
          labelsMatch(t.labelSelector.matchLabels, nvidia.spec.template.metadata.labels)),
        JSON.stringify({ nodeSelector: spec.nodeSelector, spread: spec.topologySpreadConstraints }));
  point("lavapipe and the base ask for no GPU, and lavapipe names its CPU device",
        gpu(lavapipe).every((g) => g === undefined) && gpu(base).every((g) => g === undefined) &&
        envOf(lavapipe.spec.template.spec.containers[0]).HDRPOST_DEVICE === "llvmpipe",
        JSON.stringify({ lavapipe: gpu(lavapipe), base: gpu(base) }));
}

finish();
