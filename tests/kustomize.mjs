// The part of Kustomize that deploy/kubernetes/ uses, for the tests: no kustomize binary is packaged for
// Debian 12 (kubernetes-client 1.20's `kubectl kustomize` is kustomize 2.0.3, which predates `patches:`), and
// the npm registry has none. What it does not implement it refuses, naming the field, so that a
// kustomization using more fails the tests instead of rendering something else than `kubectl apply -k` would.
//
// Implemented: resources (files and directories), patches given by path or inline as strategic-merge
// patches without a target (the patch's kind and name pick the object), images (newName, newTag, digest).
// Strategic merge as the API server's types declare it: maps merge, a null deletes, lists of the fields in
// MERGE_KEYS merge by their key, every other list is replaced.
//
// As a program: node tests/kustomize.mjs DIR prints DIR's objects as a JSON array (tests/test_deploy.py).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const nodeRequire = createRequire(path.join(here, "node", "package.json"));

/** The npm packages of tests/node (npm ci --prefix tests/node); throws naming the command when missing. */
export function requireTestPackage(name) {
  try {
    return nodeRequire(name);
  } catch (e) {
    throw new Error(`cannot load the npm package ${name} from tests/node/node_modules (${e.code || e.message}): ` +
      "run `npm ci --prefix tests/node` (deploy/debian.sh test does)");
  }
}

const YAML = requireTestPackage("yaml");

// patchMergeKey of the lists the API's types merge (k8s.io/api: Container, PodSpec, ServiceSpec); a list
// not named here is replaced by the patch's, as the API server's strategic merge does for such fields.
const MERGE_KEYS = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  env: "name",
  volumes: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  imagePullSecrets: "name",
  topologySpreadConstraints: "topologyKey",
  // Container ports merge by containerPort, a Service's by port.
  ports: (item) => ("containerPort" in item ? "containerPort" : "port"),
};
const KNOWN_FIELDS = new Set(["apiVersion", "kind", "resources", "patches", "images"]);

function fail(where, message) {
  throw new Error(`${where}: ${message}`);
}

function readDocs(file) {
  const text = fs.readFileSync(file, "utf8");
  const docs = YAML.parseAllDocuments(text);
  const out = [];
  for (const doc of docs) {
    if (doc.errors.length)
      fail(file, doc.errors.map((e) => e.message).join("; "));
    const value = doc.toJS({ maxAliasCount: 0 });
    if (value !== null && value !== undefined)
      out.push(value);
  }
  return out;
}

function isMap(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Strategic merge of patch into target (both plain JSON); returns the result, leaves both unchanged. */
export function strategicMerge(target, patch, where = "patch") {
  if (!isMap(patch))
    return structuredClone(patch);
  const out = isMap(target) ? structuredClone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith("$"))
      fail(where, `the directive ${key} is outside the part of Kustomize that tests/kustomize.mjs renders (its header lists it), refused rather than rendered wrong`);
    if (value === null) {
      delete out[key];
    } else if (Array.isArray(value) && key in MERGE_KEYS && Array.isArray(out[key])) {
      out[key] = mergeList(out[key], value, MERGE_KEYS[key], `${where}.${key}`);
    } else if (isMap(value)) {
      out[key] = strategicMerge(out[key], value, `${where}.${key}`);
    } else {
      out[key] = structuredClone(value);
    }
  }
  return out;
}

function mergeList(target, patch, mergeKey, where) {
  const out = target.map((item) => structuredClone(item));
  for (const item of patch) {
    if (!isMap(item))
      fail(where, "a merged list's items must be maps");
    const key = typeof mergeKey === "function" ? mergeKey(item) : mergeKey;
    if (!(key in item))
      fail(where, `an item without its merge key ${key}`);
    const at = out.findIndex((t) => isMap(t) && t[key] === item[key]);
    if (at >= 0)
      out[at] = strategicMerge(out[at], item, `${where}[${key}=${item[key]}]`);
    else
      out.push(strategicMerge({}, item, `${where}[${key}=${item[key]}]`));
  }
  return out;
}

function identity(obj) {
  const ns = obj.metadata?.namespace ? `${obj.metadata.namespace}/` : "";
  return `${obj.apiVersion} ${obj.kind} ${ns}${obj.metadata?.name}`;
}

function applyImages(objects, images, where) {
  for (const image of images) {
    for (const field of Object.keys(image))
      if (!["name", "newName", "newTag", "digest"].includes(field))
        fail(where, `images: ${field} is outside the part of Kustomize that tests/kustomize.mjs renders (its header lists it), refused rather than rendered wrong`);
    for (const obj of objects) {
      const spec = obj.spec?.template?.spec ?? obj.spec;
      for (const list of ["containers", "initContainers"]) {
        for (const c of spec?.[list] ?? []) {
          const m = /^(.*?)(?::([^:/@]+))?(?:@(.+))?$/.exec(c.image ?? "");
          if (!m || m[1] !== image.name)
            continue;
          const name = image.newName ?? m[1];
          if (image.digest)
            c.image = `${name}@${image.digest}`;
          else if (image.newTag)
            c.image = `${name}:${image.newTag}`;
          else
            c.image = name + (m[2] ? `:${m[2]}` : "") + (m[3] ? `@${m[3]}` : "");
        }
      }
    }
  }
}

/** The objects DIR's kustomization makes, as plain JSON, in the order of its resources. */
export function render(dir) {
  const names = ["kustomization.yaml", "kustomization.yml", "Kustomization"].filter((n) =>
    fs.existsSync(path.join(dir, n)));
  if (names.length !== 1)
    fail(dir, names.length ? `more than one kustomization file: ${names}` : "no kustomization.yaml");
  const file = path.join(dir, names[0]);
  const [k] = readDocs(file);
  if (!isMap(k) || k.kind !== "Kustomization")
    fail(file, "not a Kustomization");
  for (const field of Object.keys(k))
    if (!KNOWN_FIELDS.has(field))
      fail(file, `${field} is outside the part of Kustomize that tests/kustomize.mjs renders (its header lists it), refused rather than rendered wrong`);

  const objects = [];
  for (const entry of k.resources ?? []) {
    if (/^[a-z]+:\/\//i.test(entry) || entry.includes("?ref="))
      fail(file, `remote resource ${entry}: the tests render offline`);
    const where = path.resolve(dir, entry);
    if (!fs.existsSync(where))
      fail(file, `resource ${entry} does not exist`);
    const got = fs.statSync(where).isDirectory() ? render(where) : readDocs(where);
    for (const obj of got) {
      if (!isMap(obj) || !obj.apiVersion || !obj.kind || !obj.metadata?.name)
        fail(where, "an object without apiVersion, kind and metadata.name");
      if (objects.some((o) => identity(o) === identity(obj)))
        fail(file, `${identity(obj)} is defined twice`);
      objects.push(obj);
    }
  }
  for (const [i, p] of (k.patches ?? []).entries()) {
    const where = `${file} patches[${i}]`;
    for (const field of Object.keys(p))
      if (!["path", "patch"].includes(field))
        fail(where, `${field} is outside the part of Kustomize that tests/kustomize.mjs renders (its header lists it), refused rather than rendered wrong (a patch without target or options)`);
    const docs = p.path ? readDocs(path.resolve(dir, p.path)) : YAML.parseAllDocuments(p.patch).map((d) => d.toJS());
    for (const patch of docs) {
      if (!isMap(patch))
        fail(where, "a JSON 6902 patch or a list is outside the part of Kustomize that tests/kustomize.mjs renders (its header lists it), refused rather than rendered wrong (strategic merge only)");
      const at = objects.findIndex((o) => o.kind === patch.kind && o.metadata.name === patch.metadata?.name &&
        (o.metadata.namespace ?? "") === (patch.metadata?.namespace ?? "") &&
        o.apiVersion.split("/")[0] === String(patch.apiVersion).split("/")[0]);
      if (at < 0)
        fail(where, `no ${patch.apiVersion} ${patch.kind} ${patch.metadata?.name} to patch`);
      objects[at] = strategicMerge(objects[at], patch, `${where} ${patch.kind}`);
    }
  }
  if (k.images)
    applyImages(objects, k.images, file);
  return objects;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.length !== 3) {
    process.stderr.write("usage: node tests/kustomize.mjs DIR\n");
    process.exit(2);
  }
  try {
    process.stdout.write(JSON.stringify(render(process.argv[2]), null, 1) + "\n");
  } catch (e) {
    process.stderr.write(`kustomize.mjs: ${e.message}\n`);
    process.exit(1);
  }
}
