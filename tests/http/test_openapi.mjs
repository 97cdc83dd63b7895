// GET /openapi.json (issue 18) against the real daemon: the document is valid OpenAPI 3.1 by a real validator
// (@seriousme/openapi-schema-validator, tests/node/package.json), and every JSON Schema in it is valid 2020-12
// under Ajv's strict mode (the validator package's own Ajv: the OpenAPI meta-schema takes any object as a
// schema, so a misspelt type would pass it); its (method, path) pairs are exactly api/routes/routes.c's route table
// (read from the source), its security the table's open column and what the daemon does without the token;
// every parameter of GET /v1/params is a query parameter of both frame routes with the same type, default,
// range and choices; and real answers (an error, /v1/stats, /v1/params, /v1/gpu, the health checks, a render
// as JSON and as an image, an analysis, a form) conform to the schemas the document gives them.
//
// Usage: node test_openapi.mjs HDRPOSTD API_HTTP_C. Node 20; TAP on stdout; the daemon's log on stderr.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { isDeepStrictEqual } from "node:util";

const [exe, httpSource] = process.argv.slice(2);
const HOST = "127.0.0.1";
const TOKEN = "openapi-test-token";

// --- TAP ----------------------------------------------------------------------------------------------------

let count = 0;
let failed = 0;

function point(name, ok, detail = "") {
    count++;
    if (!ok) failed++;
    console.log(`${ok ? "ok" : "not ok"} ${count} - ${name}`);
    if (!ok && detail)
        for (const line of String(detail).split("\n").slice(-40)) console.log(`# ${line}`);
    return ok;
}

function finish() {
    console.log(`1..${count}`);
    process.exit(failed ? 1 : 0);
}

// --- The packages: missing is a failure, not a skip ---------------------------------------------------------

const modules = new URL("../node/node_modules/", import.meta.url);
let Validator, Ajv2020, addFormats;
try {
    ({ Validator } = await import(new URL("@seriousme/openapi-schema-validator/index.js", modules).href));
    Ajv2020 = (await import(new URL("ajv/dist/2020.js", modules).href)).default;
    addFormats = (await import(new URL("ajv-formats/dist/index.js", modules).href)).default;
} catch (e) {
    point("the Node packages are installed in tests/node/node_modules", false,
          `${e.message}\nInstall them as tests/node/package-lock.json pins them: npm ci --prefix tests/node`);
    finish();
}
if (!exe || !httpSource) {
    point("called as: node test_openapi.mjs HDRPOSTD API_HTTP_C", false);
    finish();
}

// --- The daemon ---------------------------------------------------------------------------------------------

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on("error", reject);
        s.listen(0, HOST, () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

const port = await freePort();
const base = `http://${HOST}:${port}`;
// An operator's HDRPOST_* settings must not reach the daemon (tests/http/harness.py does the same).
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("HDRPOST_") && k !== "NOTIFY_SOCKET"));
if (process.env.HDRPOST_TEST_PRELOAD) env.LD_PRELOAD = process.env.HDRPOST_TEST_PRELOAD;
const args = [`--listen=${HOST}:${port}`, "--validation", "--pipeline_cache=", "--log_level=info", `--auth_token=${TOKEN}`,
              "--console=on"];
if (process.env.HDRPOST_TEST_DEVICE) args.push(`--device=${process.env.HDRPOST_TEST_DEVICE}`);
const daemon = spawn(exe, args, { env, stdio: ["ignore", "pipe", "pipe"] });
let log = "";
daemon.stdout.on("data", (b) => (log += b));
daemon.stderr.on("data", (b) => (log += b));
const exited = new Promise((resolve) => daemon.on("exit", (code, signal) => resolve({ code, signal })));
process.on("exit", () => daemon.exitCode === null && daemon.kill("SIGKILL"));

async function call(method, path, { body, headers = {}, token = true } = {}) {
    const h = { ...headers };
    if (token) h.Authorization = `Bearer ${TOKEN}`;
    const res = await fetch(base + path, { method, headers: h, body, signal: AbortSignal.timeout(60000) });
    const bytes = Buffer.from(await res.arrayBuffer());
    let json;
    if ((res.headers.get("content-type") || "").startsWith("application/json")) {
        try {
            json = JSON.parse(bytes.toString("utf8"));
        } catch {
            json = undefined;
        }
    }
    return { status: res.status, headers: res.headers, bytes, json };
}

async function waitReady() {
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline && daemon.exitCode === null) {
        try {
            if ((await call("GET", "/readyz", { token: false })).status === 200) return true;
        } catch {
            // not listening yet
        }
        await new Promise((r) => setTimeout(r, 100));
    }
    return false;
}

async function stop() {
    if (daemon.exitCode === null) daemon.kill("SIGTERM");
    const timer = setTimeout(() => daemon.kill("SIGKILL"), 60000);
    const { code, signal } = await exited;
    clearTimeout(timer);
    const validation = log.split("\n").filter((l) => /vulkan validation|VUID-|Validation (Error|Warning)/i.test(l));
    point("the daemon exits 0 on SIGTERM with no validation-layer message", code === 0 && !validation.length,
          `exit code ${code} signal ${signal}\n${validation.join("\n")}`);
    process.stderr.write(`----- hdrpostd log -----\n${log}\n`);
}

if (!point("the daemon becomes ready (/readyz 200)", await waitReady(), log)) {
    await stop();
    finish();
}

// --- A frame: a 4x4 RGB PFM, bottom row first, little-endian (negative scale) ----------------------------------

function pfm(width = 4, height = 4) {
    const header = Buffer.from(`PF\n${width} ${height}\n-1.0\n`, "ascii");
    const data = Buffer.alloc(width * height * 3 * 4);
    for (let i = 0; i < width * height * 3; i++) data.writeFloatLE(0.05 + (i % 7) * 0.3, i * 4);
    return Buffer.concat([header, data]);
}
const frame = pfm();

// --- The document -------------------------------------------------------------------------------------------

const unauthenticated = await call("GET", "/openapi.json", { token: false });
point("GET /openapi.json without the token is 401 (the route is not open)", unauthenticated.status === 401,
      `status ${unauthenticated.status}`);
const fetched = await call("GET", "/openapi.json");
const doc = fetched.json;
if (!point("GET /openapi.json is 200 application/json", fetched.status === 200 && doc && typeof doc === "object",
           `status ${fetched.status} content-type ${fetched.headers.get("content-type")}\n${fetched.bytes.toString().slice(0, 2000)}`)) {
    await stop();
    finish();
}
const docText = JSON.stringify(doc); // the validator below may add to the object it validates

{
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(docText));
    point("the OpenAPI validator accepts the document as OpenAPI 3.1", result.valid && validator.version === "3.1",
          `version ${validator.version}\n${JSON.stringify(result.errors, null, 1)}`);
}

const stats0 = await call("GET", "/v1/stats");
point("info.version is the daemon's version (as /v1/stats gives it)",
      doc.openapi === "3.1.0" && typeof doc.info?.version === "string" && doc.info.version === stats0.json?.version,
      `openapi ${doc.openapi}, info.version ${doc.info?.version}, /v1/stats version ${stats0.json?.version}`);

// $refs of the document (#/...) resolved.
function pointer(ref) {
    if (!ref.startsWith("#/")) throw new Error(`not a local $ref: ${ref}`);
    return ref.slice(2).split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
        .reduce((at, key) => (at === undefined ? undefined : at[key]), doc);
}
function resolve(obj) {
    for (let i = 0; obj && obj.$ref && i < 16; i++) obj = pointer(obj.$ref);
    return obj;
}

// --- Every JSON Schema of the document, under Ajv's strict mode ---------------------------------------------

const SCHEMAS = "urn:hdrpost:openapi";
// The document's schema references, made to point into one schema resource that holds them all.
function rewrite(value) {
    if (Array.isArray(value)) return value.map(rewrite);
    if (value && typeof value === "object") {
        const out = {};
        for (const [k, v] of Object.entries(value))
            out[k] = k === "$ref" && typeof v === "string" && v.startsWith("#/components/schemas/")
                ? `${SCHEMAS}#/$defs/${v.slice("#/components/schemas/".length)}` : rewrite(v);
        return out;
    }
    return value;
}
// OpenAPI 3.1's dialect adds these keywords to JSON Schema 2020-12; anything else unknown is an error.
const ajv = new Ajv2020({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: true });
addFormats(ajv);
ajv.addVocabulary(["discriminator", "xml", "externalDocs", "example"]);
{
    const problems = [];
    try {
        ajv.addSchema({ $id: SCHEMAS, $defs: rewrite(doc.components?.schemas ?? {}) });
        ajv.getSchema(SCHEMAS); // compiles: the meta-schema check and strict mode run here
    } catch (e) {
        problems.push(`components/schemas: ${e.message}`);
    }
    // The schemas outside components/schemas: parameters', headers' and media types'.
    let inline = 0;
    (function walk(node, where) {
        if (!node || typeof node !== "object") return;
        for (const [k, v] of Object.entries(node)) {
            const at = `${where}/${k}`;
            if (at === "#/components/schemas") continue;
            if (k === "schema" && v && typeof v === "object" && !Array.isArray(v)) {
                inline++;
                try {
                    ajv.compile(rewrite(v));
                } catch (e) {
                    problems.push(`${at}: ${e.message}`);
                }
            } else {
                walk(v, at);
            }
        }
    })(doc, "#");
    point(`every JSON Schema in the document is valid 2020-12 under Ajv's strict mode (components and ${inline} inline)`,
          !problems.length && inline > 0, problems.join("\n"));
}

function conforms(schema, value) {
    try {
        const validate = ajv.compile(rewrite(schema));
        return validate(value) ? "" : ajv.errorsText(validate.errors, { separator: "\n" });
    } catch (e) {
        return e.message;
    }
}

// --- The route table ----------------------------------------------------------------------------------------

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const source = readFileSync(httpSource, "utf8");
const tableStart = source.indexOf("const hp_route hp_api_routes[] = {");
const tableText = tableStart < 0 ? "" : source.slice(tableStart, source.indexOf("};", tableStart));
const rows = [...tableText.matchAll(/^\s*\{\s*"([A-Z]+)"\s*,\s*"([^"]*)"\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(true|false)\s*,\s*(true|false)\s*,\s*(true|false)\s*,\s*(true|false)\s*\}/gm)]
    .map((m) => ({ method: m[1].toLowerCase(), path: m[2], open: m[6] === "true" }))
    // A prefix route ("/console/") holds every path under it: the document's template for it.
    .map((r) => ({ ...r, path: r.path.length > 1 && r.path.endsWith("/") ? `${r.path}{file}` : r.path }));
const tableKeys = new Set(rows.map((r) => `${r.method.toUpperCase()} ${r.path}`));
const docOps = [];
for (const [path, item] of Object.entries(doc.paths ?? {}))
    for (const method of METHODS)
        if (item[method]) docOps.push({ method, path, op: item[method] });
const docKeys = new Set(docOps.map((o) => `${o.method.toUpperCase()} ${o.path}`));
{
    const missing = [...tableKeys].filter((k) => !docKeys.has(k));
    const extra = [...docKeys].filter((k) => !tableKeys.has(k));
    point(`the document's operations are the route table's ${rows.length} routes, nothing more or less (HEAD implied by GET)`,
          rows.length >= 10 && !missing.length && !extra.length,
          `${rows.length} rows parsed from ${httpSource}\nnot in the document: ${missing.join(", ") || "none"}\n` +
          `not in the table: ${extra.join(", ") || "none"}`);
}
{
    const bare = docOps.filter((o) => o.op["x-hdrpost-undescribed"] || !o.op.operationId || !o.op.responses?.["200"]);
    point("every operation is described (an operationId and a 200; none marked x-hdrpost-undescribed)", !bare.length,
          bare.map((o) => `${o.method.toUpperCase()} ${o.path}`).join("\n"));
}
{
    const wrong = [];
    for (const r of rows) {
        const op = doc.paths?.[r.path]?.[r.method];
        if (!op) continue;
        const want = r.open ? [] : [{ bearerAuth: [] }];
        if (!isDeepStrictEqual(op.security, want))
            wrong.push(`${r.method.toUpperCase()} ${r.path}: open=${r.open}, security ${JSON.stringify(op.security)}`);
        if (!r.open && !op.responses?.["401"]) wrong.push(`${r.method.toUpperCase()} ${r.path}: no 401 response`);
    }
    const scheme = doc.components?.securitySchemes?.bearerAuth;
    point("security: [] on the table's open routes, bearerAuth (http bearer) with a 401 on the others",
          !wrong.length && scheme?.type === "http" && scheme?.scheme === "bearer", wrong.join("\n"));
}
{
    // What the daemon does without the token, on every route of the document.
    const wrong = [];
    for (const r of rows) {
        const path = r.path.replace("{file}", "index.html");
        const res = await call(r.method.toUpperCase(), path, { token: false, body: r.method === "post" ? "" : undefined });
        if ((res.status === 401) === r.open) wrong.push(`${r.method.toUpperCase()} ${path}: ${res.status} without the token`);
    }
    point("without the token, the open routes answer and the others are 401, as the security says", !wrong.length,
          wrong.join("\n"));
}
{
    const heads = [];
    for (const r of rows.filter((r) => r.method === "get")) {
        const path = r.path.replace("{file}", "index.html");
        const res = await call("HEAD", path);
        if (res.status !== 200) heads.push(`HEAD ${path}: ${res.status}`);
    }
    point("every GET route answers HEAD (implied, as info.description says)", !heads.length, heads.join("\n"));
}

// --- The parameters ------------------------------------------------------------------------------------------

const paramsAnswer = await call("GET", "/v1/params");
const table = paramsAnswer.json?.parameters ?? [];
const JSON_TYPE = { number: "number", number_or_auto: "number", integer: "integer", boolean: "boolean", enum: "string", string: "string" };
for (const route of ["/v1/render", "/v1/analyze"]) {
    const op = doc.paths?.[route]?.post;
    const query = (op?.parameters ?? []).map(resolve).filter((p) => p?.in === "query");
    const byName = new Map(query.map((p) => [p.name, p]));
    const wrong = [];
    for (const row of table) {
        const p = byName.get(row.name);
        if (!p) {
            wrong.push(`${row.name}: not a query parameter`);
            continue;
        }
        const schema = resolve(p.schema);
        let number = schema;
        if (row.type === "number_or_auto") {
            number = (schema.oneOf ?? []).map(resolve).find((s) => s.type === "number");
            if (!number || !(schema.oneOf ?? []).some((s) => s.const === "auto")) {
                wrong.push(`${row.name}: number_or_auto is not oneOf a number and "auto": ${JSON.stringify(schema)}`);
                continue;
            }
        }
        if (number.type !== JSON_TYPE[row.type]) wrong.push(`${row.name}: type ${number.type} for ${row.type}`);
        if (!isDeepStrictEqual(schema.default, row.default))
            wrong.push(`${row.name}: default ${JSON.stringify(schema.default)}, /v1/params ${JSON.stringify(row.default)}`);
        for (const k of ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "maxLength"])
            if (number[k] !== row[k]) wrong.push(`${row.name}: ${k} ${number[k]}, /v1/params ${row[k]}`);
        if (!isDeepStrictEqual(number.enum, row.choices))
            wrong.push(`${row.name}: enum ${JSON.stringify(number.enum)}, /v1/params choices ${JSON.stringify(row.choices)}`);
        if (!String(p.description ?? "").includes(row.description)) wrong.push(`${row.name}: the description differs`);
        const defaultProblem = conforms(schema, row.default);
        if (defaultProblem) wrong.push(`${row.name}: its default does not validate against its schema: ${defaultProblem}`);
    }
    const known = new Set(table.map((r) => r.name));
    for (const p of query) if (!known.has(p.name)) wrong.push(`${p.name}: a query parameter /v1/params does not have`);
    point(`every one of /v1/params' ${table.length} parameters is a query parameter of POST ${route}, with the same type, ` +
          "default, range and choices, and nothing else", table.length > 0 && !wrong.length, wrong.join("\n"));
}
{
    // The JSON params object: nested, dotted and mixed are taken; unknown keys, wrong types and ranges are not.
    const params = { $ref: "#/components/schemas/Params" };
    const good = [{ tonemap: { operator: "hable", hable: { white: 8 } }, output: { format: "png" } },
                  { "tonemap.operator": "hable", "output.format": "png", look: "blender" },
                  { exposure: { key: "auto" }, "dof.enabled": true }];
    const bad = [{ tonemap: { operater: "hable" } }, { "tonemap.operater": "hable" }, { output: { quality: 101 } },
                 { tonemap: "hable" }, { exposure: { key: "automatic" } }, { output: { format: "gif" } }];
    const wrong = [...good.filter((b) => conforms(params, b)).map((b) => `refused: ${JSON.stringify(b)}: ${conforms(params, b)}`),
                   ...bad.filter((b) => !conforms(params, b)).map((b) => `taken: ${JSON.stringify(b)}`)];
    point("components/schemas/Params takes nested, dotted and mixed parameters and refuses unknown keys, types and ranges",
          !wrong.length, wrong.join("\n"));
}

// --- Real answers against the document's schemas -------------------------------------------------------------

function responseOf(path, method, status) {
    return resolve(doc.paths?.[path]?.[method]?.responses?.[String(status)]);
}
function schemaOf(path, method, status, media = "application/json") {
    return responseOf(path, method, status)?.content?.[media]?.schema;
}
function checkAnswer(name, path, method, res, status, media = "application/json") {
    const response = responseOf(path, method, status);
    const schema = schemaOf(path, method, status, media);
    const problem = res.status !== status ? `status ${res.status}, wanted ${status}: ${res.bytes.toString().slice(0, 500)}`
        : !schema ? `the document gives ${method.toUpperCase()} ${path} no ${status} ${media} schema`
        : conforms(schema, res.json);
    const codes = response?.["x-error-codes"];
    const codeProblem = status >= 400 && codes && !codes.includes(res.json?.error?.code)
        ? `code ${res.json?.error?.code} is not among the response's x-error-codes ${JSON.stringify(codes)}` : "";
    return point(name, !problem && !codeProblem, `${problem}\n${codeProblem}`);
}

{
    const res = await call("POST", "/v1/render?tonemap.operator=nope", { body: frame });
    checkAnswer("an error answer (tonemap.operator=nope: 400) validates against the Error schema and its code is listed",
                "/v1/render", "post", res, 400);
    point("... and names the parameter in field", res.json?.error?.field === "tonemap.operator", JSON.stringify(res.json));
}
{
    const res = await call("POST", "/v1/analyze", { token: false, body: frame });
    checkAnswer("a 401 answer validates against the Error schema, with WWW-Authenticate", "/v1/analyze", "post", res, 401);
}
{
    const res = await call("GET", "/no/such/path");
    const schema = resolve(doc.components?.responses?.NotFound)?.content?.["application/json"]?.schema;
    point("a 404 for an unknown path validates against components/responses/NotFound",
          res.status === 404 && schema && !conforms(schema, res.json), `${res.status} ${conforms(schema ?? {}, res.json)}`);
    const r405 = await call("DELETE", "/v1/render");
    const s405 = resolve(doc.components?.responses?.MethodNotAllowed)?.content?.["application/json"]?.schema;
    point("a 405 validates against components/responses/MethodNotAllowed", r405.status === 405 && s405 && !conforms(s405, r405.json),
          `${r405.status} ${conforms(s405 ?? {}, r405.json)}`);
}
checkAnswer("GET /livez's answer validates against its 200 schema", "/livez", "get", await call("GET", "/livez"), 200);
checkAnswer("GET /readyz's answer validates against its 200 schema", "/readyz", "get", await call("GET", "/readyz"), 200);
checkAnswer("GET /v1/gpu's answer validates against its 200 schema", "/v1/gpu", "get", await call("GET", "/v1/gpu"), 200);
checkAnswer("GET /v1/params' answer validates against its 200 schema", "/v1/params", "get", paramsAnswer, 200);
checkAnswer("GET /openapi.json's answer validates against its own 200 schema", "/openapi.json", "get", fetched, 200);
{
    const res = await call("GET", "/metrics");
    const content = responseOf("/metrics", "get", 200)?.content ?? {};
    const type = Object.keys(content).find((t) => t.split(";")[0] === "text/plain");
    point("GET /metrics answers text/plain as documented", res.status === 200 && type &&
          res.headers.get("content-type")?.split(";")[0] === "text/plain" && res.bytes.toString().includes("hdrpost_"),
          `${res.status} ${res.headers.get("content-type")} documented ${Object.keys(content)}`);
}
let rendered;
{
    const res = await call("POST", "/v1/render?output.format=png", { body: frame, headers: { Accept: "application/json" } });
    rendered = res.json;
    checkAnswer("a render with Accept: application/json validates against RenderResult (its params against Params)",
                "/v1/render", "post", res, 200);
}
{
    const res = await call("POST", "/v1/render?output.format=png", { body: frame });
    const response = responseOf("/v1/render", "post", 200);
    const type = res.headers.get("content-type");
    const missing = ["X-Request-Id", "Server-Timing", "X-Luminance-Stats", "X-Exposure", "X-Input-Colorspace", "X-Output-Colorspace"]
        .filter((h) => !response?.headers?.[h] || !res.headers.get(h));
    const undocumented = [...res.headers.keys()].filter((h) => h.startsWith("x-") && h !== "x-content-type-options" &&
        !Object.keys(response?.headers ?? {}).some((d) => d.toLowerCase() === h));
    point("a rendered image comes as a documented content type with the documented headers",
          res.status === 200 && response?.content?.[type] && !missing.length && !undocumented.length,
          `${res.status} ${type}; documented ${Object.keys(response?.content ?? {})}\nmissing: ${missing}\nundocumented: ${undocumented}`);
}
checkAnswer("an analysis validates against AnalyzeResult", "/v1/analyze", "post",
            await call("POST", "/v1/analyze", { body: frame }), 200);
{
    const form = new FormData();
    form.append("frame", new Blob([frame], { type: "application/octet-stream" }), "frame.pfm");
    form.append("params", JSON.stringify({ tonemap: { operator: "agx" }, "output.format": "png" }));
    const res = await call("POST", "/v1/render", { body: form, headers: { Accept: "application/json" } });
    const formSchema = resolve(doc.paths?.["/v1/render"]?.post?.requestBody)?.content?.["multipart/form-data"]?.schema;
    const parts = formSchema && !conforms(formSchema, { frame: "...", params: { tonemap: { operator: "agx" }, "output.format": "png" } });
    checkAnswer("a multipart/form-data render (frame and params parts, as the form schema describes) validates against " +
                "RenderResult", "/v1/render", "post", res, 200);
    point("... the form schema takes those parts and refuses an unknown one",
          parts && formSchema && !!conforms(formSchema, { frame: "...", image: "..." }) && res.json?.params?.tonemap?.operator === "agx",
          JSON.stringify(formSchema));
}
point("the echoed parameters of a render are every parameter of /v1/params",
      rendered && table.every((row) => row.name.split(".").reduce((at, k) => at?.[k], rendered.params) !== undefined),
      JSON.stringify(rendered?.params));
// After errors and frames, so that its lists and maps are not empty.
{
    const res = await call("GET", "/v1/stats");
    checkAnswer("GET /v1/stats' answer (after errors and frames) validates against its 200 schema", "/v1/stats", "get", res, 200);
    point("... with recent errors and stage percentiles in it",
          res.json?.recent_errors?.length > 0 && Object.keys(res.json?.stages_ms ?? {}).length > 0, JSON.stringify(res.json).slice(0, 1000));
}

await stop();
finish();
