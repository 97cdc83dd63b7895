#!/usr/bin/env python3
"""Studio colour over HTTP (issue 34): the daemon's OpenColorIO config, end to end on 127.0.0.1.

The config loaded at start (ocio_config, else the OCIO environment variable) and what the log and GET /v1/ocio say
of it; renders through its views, looks and input colour spaces, each PNG against tools/cpu_render (OCIO's own CPU
processor after the reference's exposure); every bad name refused with its field and the valid names; the starts
that must fail; the LRU of programs (ocio_cache) seen through /v1/ocio; the OCIO environment variable; and the
first use of a view that was not warmed, timed (a TAP comment: performance is the benchmarks' business).

Usage: test_ocio.py PATH/TO/hdrpostd PATH/TO/cpu_render PATH/TO/blender/config.ocio. Prints TAP.

The configs: tests/data/ocio/aces_builtin (OCIO's built-in ACES transforms, no LUT file), tests/data/ocio/missing_lut
(a view whose LUT is missing) and Blender's (.cache/blender-ocio, fetched by deploy/debian.sh test; a missing file is
a failed point, not a skip). Every daemon gets its OCIO explicitly: the test's own OCIO variable is removed from
its environment (harness.clean_env keeps everything but HDRPOST_*), and the points about the variable set it.

Images: 8-bit PNGs within 1 level of cpu_render everywhere; 16-bit within max(2 levels, 1e-3 of the value).
"""

import array
import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Daemon, PngError, json_body, multipart, png_decode, point, request, run_suite,  # noqa: E402
                     scaled, serving, start_ready)

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
CPU_RENDER = sys.argv[2] if len(sys.argv) > 2 else "cpu_render"
BLENDER = sys.argv[3] if len(sys.argv) > 3 else ""
AVIF_TO_RGBA = sys.argv[4] if len(sys.argv) > 4 else "avif_to_rgba"
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data"))
ACES = os.path.join(DATA, "ocio", "aces_builtin", "config.ocio")
MISSING_LUT = os.path.join(DATA, "ocio", "missing_lut", "config.ocio")
PARK = "pmndrs_park.exr"                              # 512x256, RGB half
STREET = "blender_street_960x540_singlelayer.exr"     # 960x540

REQUEST_TIMEOUT_S = 120  # a frame through a view not made yet compiles its pipeline first (seconds on lavapipe)
CPU_TIMEOUT_S = 120
EXIT_TIMEOUT_S = 60      # a start that must fail: from the start to the exit

SRGB, P3, PQ, HLG = "sRGB - Display", "Display P3 - Display", "Rec.2100-PQ - Display", "Rec.2100-HLG - Display"
SDR = "ACES 1.0 - SDR Video"
HDR_2020 = "ACES 1.1 - HDR Video (1000 nits & Rec.2020 lim)"
UNTONED = "Un-tone-mapped"
GAMUT_LOOK = "ACES 1.3 Reference Gamut Compression"

# What tests/data/ocio/aces_builtin/config.ocio says, written out here from the file (not from the daemon).
ACES_DISPLAYS = {
    SRGB: [SDR, UNTONED, "Raw"],
    "Rec.1886 Rec.709 - Display": [SDR, UNTONED, "Raw"],
    P3: [SDR, UNTONED, "Raw"],
    PQ: [HDR_2020, "ACES 1.1 - HDR Video (1000 nits & P3 lim)", UNTONED, "Raw"],
    HLG: [HDR_2020, "ACES 1.1 - HDR Video (1000 nits & P3 lim)", UNTONED, "Raw"],
}
ACES_LOOKS = [GAMUT_LOOK, "Blue Light Artifact Fix"]
ACES_SPACES = ["CIE-XYZ-D65", SRGB, "Rec.1886 Rec.709 - Display", P3, PQ, HLG, "ACES2065-1", "ACEScg", "ACEScct",
               "Linear Rec.709 (sRGB)", "Linear P3-D65", "Linear Rec.2020", "sRGB - Texture", "Raw"]
ACES_ROLES = {"aces_interchange": "ACES2065-1", "cie_xyz_d65_interchange": "CIE-XYZ-D65",
              "color_picking": "sRGB - Texture", "color_timing": "ACEScct", "compositing_log": "ACEScct",
              "data": "Raw", "default": "ACES2065-1", "matte_paint": "ACEScct", "reference": "ACES2065-1",
              "rendering": "ACEScg", "scene_linear": "ACEScg", "texture_paint": "sRGB - Texture"}

# The daemons' environment: the test's OCIO never reaches a daemon unless a point puts it there.
os.environ.pop("OCIO", None)


# --- Helpers -----------------------------------------------------------------------------------------------


def read_data(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


def query(params):
    """A flat {name: value} as a query string, each value quoted (the names have spaces, '&', '+')."""
    return "&".join(f"{k}={urllib.parse.quote(str(v), safe='')}" for k, v in params.items())


def nested(flat):
    """{"ocio.view": v, ...} -> {"ocio": {"view": v}, ...}: the params JSON of a multipart request and cpu_render."""
    out = {}
    for name, value in flat.items():
        if "." not in name:  # look: a top-level parameter
            out[name] = value
            continue
        group, key = name.split(".", 1)
        out.setdefault(group, {})[key] = value
    return out


def render(d, frame, flat, timeout=REQUEST_TIMEOUT_S):
    """POST /v1/render with the frame and the params as a multipart params part: (status, headers, body, seconds)."""
    body, ctype = multipart([("frame", read_data(frame), frame, "application/octet-stream"),
                             ("params", json.dumps(nested(flat)).encode(), None, "application/json")])
    t0 = time.monotonic()
    status, headers, data = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype}, timeout=timeout)
    return status, headers, data, time.monotonic() - t0


def render_query(d, flat, frame=PARK):
    """POST /v1/render with the params in the query and the frame as the raw body: (status, error or None, body)."""
    status, _, data = request(d.port, "POST", "/v1/render?" + query(flat), read_data(frame), timeout=REQUEST_TIMEOUT_S)
    doc = json_body(data)
    err = doc.get("error") if isinstance(doc, dict) and isinstance(doc.get("error"), dict) else None
    return status, err, data


_cpu_cache = {}


def cpu(tmp, frame, flat, config):
    """cpu_render's (statistics, RGBA bytes) for the frame with the same params JSON, OCIO=config in its env."""
    text = json.dumps(nested(flat), sort_keys=True)
    key = (frame, text, config)
    if key not in _cpu_cache:
        out = os.path.join(tmp, f"cpu-{len(_cpu_cache)}.rgba")
        env = {k: v for k, v in os.environ.items() if k != "OCIO"}
        if config:
            env["OCIO"] = config
        proc = subprocess.run([CPU_RENDER, os.path.join(DATA, frame), text, out], capture_output=True, env=env,
                              timeout=scaled(CPU_TIMEOUT_S))
        if proc.returncode != 0:
            raise RuntimeError(f"cpu_render {frame} {text!r} (OCIO={config}) exited {proc.returncode}: "
                               f"{proc.stderr.decode(errors='replace')}")
        with open(out, "rb") as f:
            _cpu_cache[key] = (json.loads(proc.stdout), f.read())
    return _cpu_cache[key]


def compare(png, ref_stats, ref, depth):
    """The PNG against cpu_render's RGBA (alpha left out where the PNG has none): (ok, detail). 8-bit: every value
    within 1 level; 16-bit: within max(2 levels, 1e-3 of the larger value)."""
    try:
        w, h, ch, d, got = png_decode(png)
    except PngError as e:
        return False, f"PNG decode: {e}"
    if (w, h, d) != (ref_stats["width"], ref_stats["height"], depth):
        return False, f"PNG {w}x{h} {d}-bit, expected {ref_stats['width']}x{ref_stats['height']} {depth}-bit"
    if depth == 16:
        want = array.array("H", ref)
        if sys.byteorder == "big":
            want.byteswap()
    else:
        want = ref
    if ch == 3:
        want = [v for i, v in enumerate(want) if i % 4 != 3]
    if len(want) != len(got):
        return False, f"{len(want)} reference values against {len(got)} decoded"
    same = bad = worst = 0
    where = None
    for i, (a, b) in enumerate(zip(got, want)):
        if a == b:
            same += 1
            continue
        diff = abs(a - b)
        worst = max(worst, diff)
        allowed = 1 if depth == 8 else max(2, 1e-3 * max(a, b))
        if diff > allowed:
            bad += 1
            if where is None:
                where = (i // ch % w, i // ch // w, i % ch, a, b)
    n = len(got)
    detail = (f"{w}x{h} {ch} channels {d}-bit: {same}/{n} identical ({100.0 * same / n:.3f}%), {bad} beyond the "
              f"tolerance, largest difference {worst}" + (f"; first beyond at (x, y, channel, got, want) {where}"
                                                          if where else ""))
    return n > 0 and bad == 0, detail


def check_render(d, tmp, label, frame, flat, config, depth=8):
    """A render through the daemon and cpu_render with the same params: one point. The seconds the request took."""
    status, headers, data, secs = render(d, frame, flat)
    name = f"{d.label}: {label}: 200 PNG within {'1 level' if depth == 8 else 'max(2 levels, 1e-3)'} of cpu_render"
    if status != 200 or headers.get("content-type") != "image/png":
        point(name, False, f"{status} {headers.get('content-type')} {data[:400]!r}")
        return secs
    stats, ref = cpu(tmp, frame, flat, config)
    ok, detail = compare(data, stats, ref, depth)
    point(name, ok, detail)
    return secs


def ocio_doc(d):
    status, _, body = request(d.port, "GET", "/v1/ocio")
    return status, json_body(body)


def programs(d):
    return (ocio_doc(d)[1] or {}).get("programs") or {}


def log_has(child, *texts):
    log = child.log()
    return all(t in log for t in texts)


# --- A JSON Schema subset, enough for the schemas /openapi.json gives /v1/ocio ------------------------------


def schema_errors(value, schema, root, where="$"):
    """What in value breaks schema (type, required, properties, additionalProperties, items, $ref)."""
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return schema_errors(value, node, root, where)
    errs = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        is_kind = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
                   "string": lambda v: isinstance(v, str), "null": lambda v: v is None,
                   "boolean": lambda v: isinstance(v, bool),
                   "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
                   "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}
        if not any(is_kind[k](value) for k in kinds):
            return [f"{where}: {value!r:.80} is not {kinds}"]
    if isinstance(value, dict):
        errs += [f"{where}: no {k}" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errs += schema_errors(v, props[k], root, f"{where}.{k}")
            elif extra is False:
                errs.append(f"{where}: {k} is not in the schema")
            elif isinstance(extra, dict):
                errs += schema_errors(v, extra, root, f"{where}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errs += schema_errors(v, schema["items"], root, f"{where}[{i}]")
    return errs


def documented_shape(d, doc):
    """/v1/ocio's answer against the 200 schema /openapi.json gives it: (ok, detail)."""
    status, _, body = request(d.port, "GET", "/openapi.json", timeout=30)
    api = json_body(body)
    try:
        resp = api["paths"]["/v1/ocio"]["get"]["responses"]["200"]
        if "$ref" in resp:
            resp = api["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
        schema = resp["content"]["application/json"]["schema"]
    except (KeyError, TypeError) as e:
        return False, f"/openapi.json {status}: no schema for GET /v1/ocio's 200 ({e!r})"
    errs = schema_errors(doc, schema, api)
    return not errs, "\n".join(errs) or "valid"


# --- 1. The ACES daemon: its log and /v1/ocio -----------------------------------------------------------------


def aces_describe(d):
    log = d.log()
    lines = [l for l in log.splitlines() if "ocio:" in l]
    displays_logged = all(any(f'display "{disp}"' in l and all(f'"{v}"' in l for v in views) for l in lines)
                          for disp, views in ACES_DISPLAYS.items())
    point("aces: the log names the config (path and name) and each display with its views",
          any(ACES in l and "hdrpostd-aces-builtin-v1" in l for l in lines) and displays_logged,
          "\n".join(lines) or log[-3000:])
    writes = {f'"{HDR_2020}" writes BT.2020 primaries, PQ (ST 2084) transfer',
              f'"{SDR}" writes BT.709 primaries, sRGB transfer', f'"{SDR}" writes Display P3 primaries, sRGB transfer',
              f'"{SDR}" writes BT.709 primaries, 2.4 power (BT.1886) transfer',
              f'"{HDR_2020}" writes BT.2020 primaries, HLG transfer'}
    point("aces: the log says what each view writes, as measured (sRGB, P3, BT.1886, PQ and HLG among them)",
          all(any(w in l for l in lines) for w in writes), "\n".join(lines) or log[-3000:])
    status, doc = ocio_doc(d)
    doc = doc or {}
    config = doc.get("config") or {}
    displays = doc.get("displays") or []
    point("aces: GET /v1/ocio names the config: its path, name and description",
          status == 200 and config.get("path") == ACES and config.get("name") == "hdrpostd-aces-builtin-v1" and
          config.get("description", "").startswith("hdrpostd test config: ACES 1.3"), f"{status} {config}")
    point("aces: GET /v1/ocio lists the displays in order, each with its views and default view, and the default "
          "display",
          [x.get("name") for x in displays] == list(ACES_DISPLAYS) and
          all(x.get("views") == ACES_DISPLAYS[x.get("name")] and x.get("default_view") == x["views"][0]
              for x in displays if x.get("name") in ACES_DISPLAYS) and doc.get("default_display") == SRGB,
          json.dumps(displays, indent=1) + f"\ndefault_display {doc.get('default_display')}")
    point("aces: GET /v1/ocio lists the looks, the colour spaces and the roles (scene_linear -> ACEScg, "
          "scene_linear ACEScg)",
          doc.get("looks") == ACES_LOOKS and doc.get("colorspaces") == ACES_SPACES and
          doc.get("roles") == ACES_ROLES and doc.get("scene_linear") == "ACEScg",
          f"looks {doc.get('looks')}\ncolorspaces {doc.get('colorspaces')}\nroles {doc.get('roles')}\n"
          f"scene_linear {doc.get('scene_linear')}")
    progs = doc.get("programs") or {}
    point("aces: before any request the warmed program is made (programs.made >= 1, kept >= 1, failed 0)",
          progs.get("made", 0) >= 1 and progs.get("kept", 0) >= 1 and progs.get("failed") == 0 and
          progs.get("made_ms_total", 0) > 0, f"{progs}")
    ok, detail = documented_shape(d, doc)
    point("aces: GET /v1/ocio validates against its schema in /openapi.json", ok, detail)


# --- 2. Renders through the ACES config's views ---------------------------------------------------------------


def aces_renders(d, tmp):
    fixed = {"exposure.mode": "fixed", "exposure.stops": 1.5}
    no_dither = {"output.dither": False, "output.format": "png"}
    check_render(d, tmp, "sRGB / ACES 1.0 SDR (warmed), exposure auto", PARK,
                 {"ocio.display": SRGB, "ocio.view": SDR, **no_dither}, ACES)
    # The first use of a view not warmed, then the same request again: timed, not asserted.
    p3 = {"ocio.display": P3, "ocio.view": SDR, "output.format": "png", "output.dither": True, **fixed}
    first = check_render(d, tmp, "Display P3 / ACES 1.0 SDR (first use), exposure fixed +1.5 stops, dithered",
                         PARK, p3, ACES)
    second = check_render(d, tmp, "Display P3 / ACES 1.0 SDR again (the program kept)", PARK, p3, ACES)
    print(f"# first-use latency: the first render through {P3} / {SDR} (not warmed) took {first * 1e3:.0f} ms, "
          f"the second {second * 1e3:.0f} ms (512x256 EXR, whole request)", flush=True)
    check_render(d, tmp, "Rec.2100-PQ / ACES 1.1 HDR 1000 nit Rec.2020, 16-bit PNG, exposure auto", PARK,
                 {"ocio.display": PQ, "ocio.view": HDR_2020, "output.bit_depth": 16, **no_dither}, ACES, depth=16)
    check_render(d, tmp, "Rec.2100-HLG / Un-tone-mapped, 16-bit PNG, exposure fixed", PARK,
                 {"ocio.display": HLG, "ocio.view": UNTONED, "output.bit_depth": 16, **no_dither, **fixed}, ACES,
                 depth=16)
    check_render(d, tmp, f"sRGB / ACES 1.0 SDR with the look +{GAMUT_LOOK}, exposure fixed", PARK,
                 {"ocio.display": SRGB, "ocio.view": SDR, "ocio.looks": "+" + GAMUT_LOOK, **no_dither, **fixed}, ACES)
    check_render(d, tmp, "input.colorspace ACES2065-1 through the default display and view, exposure auto", PARK,
                 {"input.colorspace": "ACES2065-1", **no_dither}, ACES)
    check_render(d, tmp, "input.colorspace the role scene_linear, Display P3 / Un-tone-mapped, exposure fixed",
                 STREET, {"input.colorspace": "scene_linear", "ocio.display": P3, "ocio.view": UNTONED,
                          **no_dither, "exposure.mode": "fixed", "exposure.stops": -1}, ACES)
    progs = programs(d)
    point("aces: after the renders /v1/ocio counts programs made, found and none failed",
          progs.get("made", 0) >= 7 and progs.get("found", 0) >= 1 and progs.get("failed") == 0, f"{progs}")


# --- 4. Bad names and conflicts ----------------------------------------------------------------------------


def error_point(label, status, err, want_status, code, field, must_list=(), detail=""):
    msg = (err or {}).get("message", "")
    missing = [n for n in must_list if n not in msg]
    point(label, status == want_status and err is not None and err.get("code") == code and
          err.get("field") == field and not missing,
          f"{status} {err} {detail}" + (f"\nnot in the message: {missing}" if missing else ""))


def aces_errors(d):
    s, e, _ = render_query(d, {"ocio.display": "No Such Display", "output.format": "png"})
    error_point("aces: an unknown ocio.display: 400 invalid_parameter, field ocio.display, listing every display",
                s, e, 400, "invalid_parameter", "ocio.display", list(ACES_DISPLAYS) + ["No Such Display"])
    s, e, _ = render_query(d, {"ocio.display": PQ, "ocio.view": SDR})
    error_point("aces: a view of another display: 400 invalid_parameter, field ocio.view, listing the display's "
                "views", s, e, 400, "invalid_parameter", "ocio.view", ACES_DISPLAYS[PQ])
    s, e, _ = render_query(d, {"ocio.view": "Filmic"})
    error_point("aces: an unknown ocio.view on the default display: 400 invalid_parameter, field ocio.view, listing "
                "its views", s, e, 400, "invalid_parameter", "ocio.view", ACES_DISPLAYS[SRGB] + ["Filmic"])
    s, e, _ = render_query(d, {"ocio.looks": "+" + GAMUT_LOOK + ", -Teal Orange"})
    error_point("aces: an unknown look among known ones: 400 invalid_parameter, field ocio.looks, naming it and "
                "listing the looks", s, e, 400, "invalid_parameter", "ocio.looks", ACES_LOOKS + ["Teal Orange"])
    s, e, _ = render_query(d, {"input.colorspace": "ARRI LogC4"})
    error_point("aces: an unknown input.colorspace: 400 invalid_parameter, field input.colorspace, listing every "
                "colour space", s, e, 400, "invalid_parameter", "input.colorspace", ACES_SPACES + ["ARRI LogC4"])
    # The roles come after the colour spaces: the message has room for both lists (hp_err.message, 1024 bytes;
    # it was cut at 511 before).
    msg = (e or {}).get("message", "")
    missing = [r for r in ACES_ROLES if f'"{r}"' not in msg]
    point("aces: the unknown input.colorspace's message lists every role of the config too", s == 400 and not missing,
          f"{len(msg)} characters; roles not in it: {missing}")
    for field, value in (("tonemap.operator", "agx"), ("gamma.mode", "srgb"), ("gamma.radius", 4),
                         ("output.colorspace", "display_p3"), ("input.colorspace", "acescg")):
        s, e, _ = render_query(d, {"ocio.view": SDR, field: value, "output.format": "png"})
        # hdrpostd's "acescg" beside the config's "ACEScg": the refusal points at the config's spelling.
        hint = ['"ACEScg" is named as the config spells it'] if field == "input.colorspace" else []
        error_point(f"aces: {field}={value} with ocio.view: 400 ocio_conflict naming {field}"
                    + (" and the config's ACEScg" if hint else ""), s, e, 400, "ocio_conflict", field, [field] + hint)
    s, e, _ = render_query(d, {"ocio.view": SDR, "input.colorspace": "p3d65", "output.format": "png"})
    error_point("aces: input.colorspace=p3d65 (no config space of that name) with ocio.view: 400 ocio_conflict "
                "pointing at GET /v1/ocio and the config's scene_linear", s, e, 400, "ocio_conflict",
                "input.colorspace", ["GET /v1/ocio", '"ACEScg"'])
    s, e, _ = render_query(d, {"ocio.display": PQ, "ocio.view": HDR_2020, "output.format": "webp"})
    error_point("aces: a PQ display to WebP: 400 naming output.format and the display's measured encoding",
                s, e, 400, "invalid_parameter", "output.format", ["BT.2020 primaries, PQ (ST 2084) transfer"])
    # An explicit default asks for nothing and passes.
    status, headers, data, _ = render(d, PARK, {"ocio.view": SDR, "gamma.radius": 0, "output.format": "png"})
    point("aces: gamma.radius at its default (0) with ocio.view is not a conflict (200 PNG)",
          status == 200 and headers.get("content-type") == "image/png", f"{status} {data[:300]!r}")
    status, _, data, _ = render(d, PARK, {"ocio.display": SRGB, "output.format": "png"})
    point("aces: after the refusals the daemon still renders (200) and says ready",
          status == 200 and request(d.port, "GET", "/readyz")[0] == 200 and d.alive(), f"{status} {data[:300]!r}")


def no_config_errors(d):
    for field, value in (("ocio.display", SRGB), ("ocio.view", SDR), ("ocio.looks", "+" + GAMUT_LOOK)):
        s, e, _ = render_query(d, {field: value, "output.format": "png"})
        error_point(f"{d.label}: {field} without an OCIO config: 400 no_ocio_config naming {field}", s, e, 400,
                    "no_ocio_config", field, [field])
    s, e, _ = render_query(d, {"input.colorspace": "ACEScg", "output.format": "png"})
    error_point(f"{d.label}: input.colorspace naming no built-in space, without a config: 400 invalid_parameter, "
                "field input.colorspace", s, e, 400, "invalid_parameter", "input.colorspace", ["ACEScg"])
    s, _, data = request(d.port, "POST", "/v1/render?input.colorspace=acescg&output.format=png", read_data(PARK),
                         timeout=REQUEST_TIMEOUT_S)
    status, doc = ocio_doc(d)
    doc = doc or {}
    point(f"{d.label}: a built-in input.colorspace (acescg) still renders, and /v1/ocio says config null, "
          "programs null, empty lists",
          s == 200 and status == 200 and doc.get("config", 0) is None and doc.get("programs", 0) is None and
          doc.get("displays") == [] and doc.get("looks") == [] and doc.get("roles") == {} and
          doc.get("default_display", 0) is None and doc.get("scene_linear", 0) is None,
          f"render {s} {data[:200]!r}\n/v1/ocio {status} {doc}")


# --- 3. Blender's config -----------------------------------------------------------------------------------------


def blender(tmp):
    point("Blender's OCIO config is there (deploy/debian.sh test fetches it into .cache/blender-ocio)",
          BLENDER and os.path.isfile(BLENDER), f"not found: {BLENDER!r}")
    if not (BLENDER and os.path.isfile(BLENDER)):
        return
    with serving(start_ready(EXE, "blender", [f"--ocio_config={BLENDER}", "--warm_frame=none"],
                             ready_timeout=120)) as d:
        if not d:
            return
        status, doc = ocio_doc(d)
        doc = doc or {}
        srgb = next((x for x in doc.get("displays") or [] if x.get("name") == "sRGB"), {})
        point("blender: /v1/ocio names the config and lists the sRGB display's views and the looks",
              status == 200 and (doc.get("config") or {}).get("path") == BLENDER and
              {"Standard", "Filmic", "Filmic Log", "Raw", "False Color"} <= set(srgb.get("views") or []) and
              "Medium High Contrast" in (doc.get("looks") or []) and doc.get("scene_linear") == "Linear",
              f"{status} {json.dumps(doc)[:1500]}")
        base = {"ocio.display": "sRGB", "ocio.view": "Filmic", "output.format": "png", "output.dither": False}
        check_render(d, tmp, "sRGB / Filmic (a 3D LUT after a shaper), exposure auto", STREET, base, BLENDER)
        check_render(d, tmp, "sRGB / Filmic with +Medium High Contrast, exposure fixed", STREET,
                     {**base, "ocio.looks": "+Medium High Contrast", "exposure.mode": "fixed", "exposure.stops": 0.5},
                     BLENDER)
        check_render(d, tmp, "sRGB / False Color, dithered", PARK,
                     {**base, "ocio.view": "False Color", "output.dither": True}, BLENDER)


# --- 5. Starts that must fail ------------------------------------------------------------------------------------


def must_fail(label, args, names, env=None):
    """A daemon that must exit non-zero before ready, its log naming each of names."""
    d = Daemon(EXE, label, ["--warm_frame=none", *args], env)
    ready = d.wait_ready()
    rc = d.wait_exit(EXIT_TIMEOUT_S)
    d.kill()
    log = d.log()
    missing = [n for n in names if n not in log]
    ok = point(f"{label}: the daemon exits non-zero before ready, its log naming {', '.join(names)}",
               not ready and rc is not None and rc != 0 and not missing,
               f"ready {ready}, exit code {rc}, not in the log: {missing}\n" + "\n".join(log.splitlines()[-15:]))
    if not ok:
        d.dump()


# A studio's own named look (studio_looks): a view at a fixed exposure, undithered, as the artist's viewer shows it.
REVIEW = {"ocio.view": SDR, "exposure.mode": "fixed", "exposure.stops": 0, "output.dither": False}
STUDIO_LOOKS = ("review: ocio.view=ACES%201.0%20-%20SDR%20Video&exposure.mode=fixed&exposure.stops=0&"
                "output.dither=false; hdr_review: ocio.display=Rec.2100-PQ%20-%20Display&output.format=png&"
                "output.bit_depth=16")


def studio_looks(d):
    """look=review is its parameters: the same bytes as the request that spells them out; the request's own
    parameters still override it; /v1/params lists the daemon's looks; an unknown look lists them in its refusal."""
    status, _, by_look, _ = render(d, PARK, {"look": "review", "output.format": "png"})
    status2, _, spelled, _ = render(d, PARK, {**REVIEW, "output.format": "png"})
    point("studio look: look=review gives the very bytes of its parameters spelled out (a view at 0 EV)",
          status == status2 == 200 and by_look == spelled, f"{status} {status2}, {len(by_look)} and {len(spelled)} bytes")
    status, _, brighter, _ = render(d, PARK, {"look": "review", "exposure.stops": 1, "output.format": "png"})
    status2, _, spelled, _ = render(d, PARK, {**REVIEW, "exposure.stops": 1, "output.format": "png"})
    point("studio look: the request's own exposure.stops=1 overrides the look's 0 (the bytes of the spelled-out "
          "request, and not the look's)", status == status2 == 200 and brighter == spelled and brighter != by_look,
          f"{status} {status2}")
    status, headers, data, _ = render(d, PARK, {"look": "hdr_review"})
    point("studio look: look=hdr_review (a PQ display, 16-bit PNG) answers a cICP-tagged PQ PNG",
          status == 200 and headers.get("content-type") == "image/png" and
          "cicp=9/16/0/1" in headers.get("x-output-colorspace", ""), f"{status} {headers.get('x-output-colorspace')}")
    status, _, body = request(d.port, "GET", "/v1/params")
    looks = {l.get("name"): l for l in ((json_body(body) or {}).get("looks") or [])}
    review = looks.get("review") or {}
    point("studio look: GET /v1/params lists the daemon's looks after the built-in ones, marked studio, with what "
          "they set", status == 200 and review.get("studio") is True and looks.get("blender", {}).get("studio") is False
          and review.get("sets", {}).get("ocio.view") == SDR and list(looks)[-2:] == ["review", "hdr_review"],
          f"{status} {list(looks)} {review}")
    s, e, _ = render_query(d, {"look": "dailies"})
    error_point("studio look: an unknown look: 400 naming look and listing the built-in and studio looks", s, e, 400,
                "invalid_parameter", "look", ["blender", "review", "hdr_review", "dailies"])


def start_failures(tmp):
    must_fail("missing LUT", [f"--ocio_config={MISSING_LUT}"],
              ["show_grade.cube", "could not be located", MISSING_LUT])
    must_fail("ocio_warm naming a view the config lacks",
              [f"--ocio_config={ACES}", f"--ocio_warm={SRGB}/{UNTONED};{SRGB}/Filmic Punchy"], ["Filmic Punchy"])
    must_fail("ocio_warm naming a display the config lacks", [f"--ocio_config={ACES}", "--ocio_warm=P3-DCI/Raw"],
              ["P3-DCI"])
    must_fail("studio_looks naming a view the config lacks", [f"--ocio_config={ACES}",
              "--studio_looks=review: ocio.view=Filmic%20Punchy"], ["studio_looks", '"review"', "Filmic Punchy"])
    must_fail("studio_looks reusing a built-in look's name", [f"--ocio_config={ACES}",
              "--studio_looks=blender: exposure.stops=1"], ["studio_looks", '"blender" is already a built-in look'])
    must_fail("studio_looks with a look inside a look", ["--studio_looks=mine: look=blender&exposure.stops=1"],
              ["studio_looks", '"mine" sets look'])
    must_fail("studio_looks with a look inside a look, its name escaped", ["--studio_looks=mine: lo%6Fk=blender"],
              ["studio_looks", '"mine" sets look'])
    must_fail("studio_looks naming a PQ display without an output that can hold it", [f"--ocio_config={ACES}",
              "--studio_looks=hdr: ocio.display=Rec.2100-PQ%20-%20Display"], ["studio_looks", '"hdr"', "output.format",
                                                                             "PQ (ST 2084)"])
    must_fail("studio_looks with a name that is not a-z, 0-9, _ and -", ["--studio_looks=My Look: exposure.stops=1"],
              ["studio_looks", '"My Look"'])
    must_fail("studio_looks naming OCIO on a daemon with no config", ["--studio_looks=review: ocio.view=Raw"],
              ["studio_looks", "no OCIO config"])
    nowhere = os.path.join(tmp, "no-such-dir", "config.ocio")
    must_fail("ocio_config naming a file that does not exist", [f"--ocio_config={nowhere}"], [nowhere])
    # The OCIO variable naming nothing is the same failure, not a silent start without a config.
    must_fail("the OCIO environment variable naming a file that does not exist", [], [nowhere],
              env={"OCIO": nowhere})


# --- 6. The LRU of programs -------------------------------------------------------------------------------------


def lru(tmp):
    with serving(start_ready(EXE, "ocio_cache 1", [f"--ocio_config={ACES}", "--ocio_cache=1",
                                                   "--warm_frame=none"])) as d:
        if not d:
            return
        before = programs(d)
        point("ocio_cache 1, no warm: /v1/ocio programs all zero before any request",
              before.get("made") == 0 and before.get("kept") == 0 and before.get("evicted") == 0, f"{before}")
        a = {"ocio.display": SRGB, "ocio.view": SDR, "output.format": "png", "output.dither": False}
        b = {**a, "ocio.view": UNTONED}
        for label, flat in (("view A (sRGB / ACES 1.0 SDR)", a), ("view B (sRGB / Un-tone-mapped)", b),
                            ("view A again, after its eviction", a)):
            check_render(d, tmp, label, PARK, flat, ACES)
        after = programs(d)
        point("ocio_cache 1: A, B, A -> programs made 3, evicted 2, kept 1, found 0, failed 0",
              after.get("made") == 3 and after.get("evicted") == 2 and after.get("kept") == 1 and
              after.get("found") == 0 and after.get("failed") == 0, f"{after}")
        check_render(d, tmp, "view A once more (kept: found, not made)", PARK, a, ACES)
        again = programs(d)
        point("ocio_cache 1: A while kept is found: made still 3, found 1",
              again.get("made") == 3 and again.get("found") == 1 and again.get("kept") == 1, f"{again}")


# --- 7. The OCIO environment variable ---------------------------------------------------------------------------


def environment():
    with serving(start_ready(EXE, "OCIO in the environment", ["--warm_frame=none"], env={"OCIO": ACES})) as d:
        if d:
            status, doc = ocio_doc(d)
            point("OCIO=<aces config> and no ocio_config: the config is loaded (/v1/ocio config.path) and the log "
                  "says it came from the environment",
                  status == 200 and ((doc or {}).get("config") or {}).get("path") == ACES and
                  log_has(d, f'config: ocio_config = "{ACES}" (environment)'), f"{status} {(doc or {}).get('config')}\n"
                  + "\n".join(l for l in d.log().splitlines() if "ocio" in l))
            status, _, data, _ = render(d, PARK, {"ocio.view": SDR, "output.format": "png"})
            point("OCIO in the environment: a render through a view is 200 PNG", status == 200, f"{status} {data[:300]!r}")
    with serving(start_ready(EXE, "ocio_config empty, OCIO set", ["--ocio_config=", "--warm_frame=none"],
                             env={"OCIO": ACES})) as d:
        if d:
            status, doc = ocio_doc(d)
            point("--ocio_config= (empty) with OCIO set: no config is loaded (/v1/ocio config null)",
                  status == 200 and doc is not None and doc.get("config", 0) is None and
                  not any("ocio: config" in l for l in d.log().splitlines()), f"{status} {doc}")
            s, e, _ = render_query(d, {"ocio.view": SDR})
            error_point("--ocio_config= (empty) with OCIO set: ocio.view is 400 no_ocio_config", s, e, 400,
                        "no_ocio_config", "ocio.view")


def aces_avif(d, tmp):
    """HDR AVIF through the PQ and HLG views at quality 100 (lossless, RGB as it is): decoded by libavif, within 1
    code value at the file's depth of OCIO's CPU processor (cpu_render's 16-bit samples taken to that depth), and
    the CICP of the display."""
    for bits, display, transfer in ((10, PQ, 16), (12, HLG, 18)):
        flat = {"ocio.display": display, "output.format": "avif", "output.bit_depth": bits, "output.quality": 100,
                "exposure.mode": "fixed", "exposure.stops": 0.5}
        status, headers, data, _ = render(d, PARK, flat)
        path, raw = os.path.join(tmp, f"pq{bits}.avif"), os.path.join(tmp, f"pq{bits}.rgba")
        ok, detail = status == 200 and headers.get("content-type") == "image/avif", f"{status} {data[:200]!r}"
        if ok:
            with open(path, "wb") as f:
                f.write(data)
            proc = subprocess.run([AVIF_TO_RGBA, path, raw], capture_output=True, text=True, timeout=scaled(60))
            info = proc.stdout.split()
            ok = proc.returncode == 0 and info[2:7] == [str(bits), "9", str(transfer), "0", "1"]
            detail = f"avif_to_rgba: {proc.stdout.strip()} {proc.stderr.strip()}"
        if ok:
            got = array.array("H", open(raw, "rb").read())
            _, ref16 = cpu(tmp, PARK, {**flat, "output.format": "png", "output.bit_depth": 16}, ACES)
            want = array.array("H", ref16)
            top = (1 << bits) - 1
            worst = max(abs(g - round(w * top / 65535)) for i, (g, w) in enumerate(zip(got, want)) if i % 4 != 3)
            ok = len(got) == len(want) and worst <= 1
            detail = f"worst {worst} code values of {top}"
        point(f"aces: {display} as a {bits}-bit AVIF at quality 100: CICP 9/{transfer}/0, full range, within 1 code "
              f"value of OCIO's CPU processor", ok, detail)


def aces_luma(d):
    """A frame in a config's space is weighed by that space's Y row: /v1/analyze with input.colorspace ACES2065-1 (the
    config's) gives the statistics of hdrpostd's own aces2065, not Rec.709's, and a render's auto exposure agrees."""
    def stats(space):
        status, _, data = request(d.port, "POST", "/v1/analyze?" + query({"input.colorspace": space}), read_data(PARK),
                                  timeout=REQUEST_TIMEOUT_S)
        doc = json_body(data) if status == 200 else None
        st = doc.get("stats") if isinstance(doc, dict) else None
        return (st.get("log_average"), doc.get("colorspace", {}).get("input")) if isinstance(st, dict) else (None, data[:300])
    (config, config_name), (own, _), (rec709, _) = stats("ACES2065-1"), stats("aces2065"), stats("rec709")
    ok = all(isinstance(v, (int, float)) for v in (config, own, rec709))
    point("aces: /v1/analyze with input.colorspace ACES2065-1 (the config's) has hdrpostd's aces2065 log-average "
          "(within 1e-5 relative), not Rec.709's (more than 1e-3 apart), and names the config's space",
          ok and abs(config - own) <= 1e-5 * abs(own) and abs(config - rec709) > 1e-3 * abs(rec709)
          and config_name == "ACES2065-1",
          f"log-averages: config {config}, aces2065 {own}, rec709 {rec709}; colour space {config_name!r}")


def aces_respelled_and_dof(d):
    """One transform written several ways is one program; depth of field before a view on a half frame."""
    before = programs(d)
    looks = ["+" + GAMUT_LOOK, " +" + GAMUT_LOOK.lower() + " ,", ",+" + GAMUT_LOOK.upper() + ",,"]
    statuses = [render(d, PARK, {"ocio.display": SRGB, "ocio.looks": spelled, "output.format": "png"})[0]
                for spelled in looks]
    statuses += [render(d, PARK, {"ocio.display": SRGB, "input.colorspace": space, "output.format": "png"})[0]
                 for space in ("scene_linear", "rendering", "ACEScg")]
    after = programs(d)
    point("aces: a look respelled (case, spaces, empty tokens) and a role for its colour space are one program each "
          "(2 made for 6 requests)", statuses == [200] * 6 and after["made"] - before["made"] <= 2,
          f"statuses {statuses}, programs before {before}, after {after}")
    # The street render is half RGBA with a float depth: the DOF composite (RGBA32F) is what the view reads.
    for bits in (8, 16):
        status, headers, data, _ = render(d, STREET, {"dof.enabled": True, "ocio.display": PQ if bits == 16 else SRGB,
                                                       "output.format": "png", "output.bit_depth": bits})
        ok = status == 200
        try:
            w, h, _, depth, _ = png_decode(data) if ok else (0, 0, 0, 0, None)
            ok = ok and (w, h, depth) == (960, 540, bits)
        except PngError as e:
            ok, data = False, str(e).encode()
        point(f"aces: depth of field then a view on a half frame, {bits}-bit PNG: 200 and the daemon lives",
              ok and d.alive(), f"{status} {data[:300]!r}")


def main():
    def body(tmp):
        # 1, 2, 4 (and 8, timed inside 2): the ACES daemon.
        with serving(start_ready(EXE, "aces", [f"--ocio_config={ACES}", f"--ocio_warm={SRGB}/{SDR}",
                                               f"--studio_looks={STUDIO_LOOKS}", "--warm_frame=none"],
                                 ready_timeout=120)) as d:
            if d:
                aces_describe(d)
                aces_renders(d, tmp)
                aces_errors(d)
                aces_luma(d)
                studio_looks(d)
                aces_respelled_and_dof(d)
                aces_avif(d, tmp)
        # 4: a daemon with no config at all (and no OCIO variable).
        with serving(start_ready(EXE, "no config", ["--warm_frame=none"])) as d:
            if d:
                no_config_errors(d)
        blender(tmp)        # 3
        start_failures(tmp)  # 5
        lru(tmp)            # 6
        environment()       # 7

    return run_suite([EXE, CPU_RENDER], "hdrpost-ocio-", body)


if __name__ == "__main__":
    sys.exit(main())
