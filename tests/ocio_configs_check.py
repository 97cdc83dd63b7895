#!/usr/bin/python3
"""Check that OpenColorIO configs build every processor the daemon may be asked for.

Usage: ocio_configs_check.py [--report] [CONFIG ...]

With no CONFIG it checks the repository's configs: tests/data/ocio/aces_builtin must validate and
build, for every (input colour space, display, view) and every look, a CPU processor and a GLSL 4.0
shader; tests/data/ocio/missing_lut must load and validate but fail to build its view with OCIO's
missing-file message, which is what the daemon has to report when it refuses to start.
A CONFIG given on the command line (for example Blender's, fetched by tools/fetch_blender_ocio.sh)
gets the first check, except that a colour space that cannot be inverted into a source is only noted. --report prints the textures, uniforms and dynamic properties each
(display, view, look) needs in the shader, and the sampler declarations of its first view.

Uses Debian's python3-pyopencolorio (OCIO 2.1), hence /usr/bin/python3 rather than a pyenv one.
Exit status: 0 all good, 1 a check failed, 77 PyOpenColorIO is not installed (skipped).
"""

import os
import re
import sys

try:
    import PyOpenColorIO as OCIO
except ImportError:
    print("1..0 # SKIP PyOpenColorIO not installed (Debian: python3-pyopencolorio)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ACES_BUILTIN = os.path.join(HERE, "data", "ocio", "aces_builtin", "config.ocio")
MISSING_LUT = os.path.join(HERE, "data", "ocio", "missing_lut", "config.ocio")

# Names the daemon's OCIO stage gives the generated shader (pipeline/ owns the real values).
FUNCTION_NAME = "hp_ocio"
RESOURCE_PREFIX = "hp_ocio_"
PIXEL_NAME = "px"

# Scene-referred probes: black, mid grey, diffuse white, a bright highlight, a saturated colour.
PROBES = [0.0, 0.0, 0.0, 0.18, 0.18, 0.18, 1.0, 1.0, 1.0, 16.0, 16.0, 16.0, 0.9, 0.05, 0.02]


def shader_desc():
    return OCIO.GpuShaderDesc.CreateShaderDesc(
        language=OCIO.GPU_LANGUAGE_GLSL_4_0,
        functionName=FUNCTION_NAME,
        resourcePrefix=RESOURCE_PREFIX,
        pixelName=PIXEL_NAME,
    )


def build(config, transform):
    """Build the CPU processor and the GLSL 4.0 shader of one transform; return (processor, desc)."""
    proc = config.getProcessor(transform)
    cpu = proc.getDefaultCPUProcessor()
    cpu.applyRGB(list(PROBES))
    desc = shader_desc()
    proc.getDefaultGPUProcessor().extractGpuShaderInfo(desc)
    text = desc.getShaderText()
    if FUNCTION_NAME + "(" not in text.replace(" (", "("):
        raise RuntimeError("shader text has no function " + FUNCTION_NAME)
    return proc, desc


def display_views(config):
    for display in config.getDisplays():
        for view in config.getViews(display):
            yield display, view


def viewing_pipeline(src, display, view, look):
    pipe = OCIO.LegacyViewingPipeline()
    pipe.setDisplayViewTransform(OCIO.DisplayViewTransform(src=src, display=display, view=view))
    if look is not None:
        pipe.setLooksOverride(look)
        pipe.setLooksOverrideEnabled(True)
    return pipe


def resources(proc, desc):
    """One line describing what the shader needs from the host."""
    parts = []
    for tex in desc.get3DTextures():
        parts.append("3D %s edge %d %s" % (tex.samplerName, tex.edgeLen, tex.interpolation.name))
    for tex in desc.getTextures():
        kind = "1D" if tex.height == 1 else "2D"
        parts.append("%s %s %dx%d %s %s" % (kind, tex.samplerName, tex.width, tex.height,
                                           "RGB" if tex.channel == OCIO.GpuShaderDesc.TEXTURE_RGB_CHANNEL
                                           else "R", tex.interpolation.name))
    uniforms = [u[0] if isinstance(u, tuple) else str(u) for u in desc.getUniforms()]
    if uniforms:
        parts.append("uniforms " + ", ".join(uniforms))
    dyn = [t for name, t in OCIO.DynamicPropertyType.__members__.items() if proc.hasDynamicProperty(t)]
    if dyn:
        parts.append("dynamic " + ", ".join(t.name for t in dyn))
    return "; ".join(parts) if parts else "no textures, no uniforms"


def check_config(path, report, strict_inputs):
    """strict_inputs: a colour space that cannot be a source (no inverse) is a failure, not a note."""
    failures = []
    notes = []
    config = OCIO.Config.CreateFromFile(path)
    label = config.getName() or os.path.basename(os.path.dirname(os.path.abspath(path)))
    config.validate()
    spaces = list(config.getColorSpaceNames(OCIO.SEARCH_REFERENCE_SPACE_ALL, OCIO.COLORSPACE_ALL))
    pairs = list(display_views(config))
    looks = list(config.getLookNames())
    built = 0

    for src in spaces:
        for display, view in pairs:
            try:
                proc, _ = build(config, OCIO.DisplayViewTransform(src=src, display=display, view=view))
                built += 1
            except Exception as exc:  # OCIO raises its own Exception type; keep its message
                (failures if strict_inputs else notes).append("%s -> (%s, %s): %s" % (src, display, view, exc))

    scene_linear = config.getColorSpace(OCIO.ROLE_SCENE_LINEAR).getName()
    for look in looks:
        process_space = config.getLook(look).getProcessSpace()
        try:
            build(config, OCIO.LookTransform(src=scene_linear, dst=process_space, looks=look))
            built += 1
        except Exception as exc:
            failures.append("look %s: %s" % (look, exc))
        for display, view in pairs:
            try:
                proc = viewing_pipeline(scene_linear, display, view, look).getProcessor(config)
                desc = shader_desc()
                proc.getDefaultGPUProcessor().extractGpuShaderInfo(desc)
                proc.getDefaultCPUProcessor().applyRGB(list(PROBES))
                built += 1
            except Exception as exc:
                failures.append("look %s on (%s, %s): %s" % (look, display, view, exc))

    print("# %s: %s, profile %d.%d, %d colour spaces, %d (display, view), %d looks, %d processors built"
          % (label, path,
             config.getMajorVersion(), config.getMinorVersion(),
             len(spaces), len(pairs), len(looks), built))
    for note in notes:
        print("#   note: cannot be a source: " + note)
    if report:
        print_report(config, label, scene_linear, pairs, looks)
    return failures


def print_report(config, label, scene_linear, pairs, looks):
    for display, view in pairs:
        for look in [None] + looks:
            proc = viewing_pipeline(scene_linear, display, view, look).getProcessor(config)
            desc = shader_desc()
            proc.getDefaultGPUProcessor().extractGpuShaderInfo(desc)
            print("#   %s from %s -> (%s, %s)%s: %s" % (label, scene_linear,
                  display, view, "" if look is None else " + look " + look, resources(proc, desc)))
    for display, view in pairs[:1]:
        desc = build(config, OCIO.DisplayViewTransform(src=scene_linear, display=display, view=view))[1]
        decls = re.findall(r"^uniform sampler\w+ \w+;$", desc.getShaderText(), re.M)
        print("#   GLSL 4.0 declarations for (%s, %s), texture max width %d: %s"
              % (display, view, desc.getTextureMaxWidth(), " ".join(decls) or "none"))


def check_missing_lut(path):
    """The config loads and validates; only building its view fails, naming the file."""
    config = OCIO.Config.CreateFromFile(path)
    config.validate()
    display = config.getDefaultDisplay()
    view = config.getDefaultView(display)
    try:
        config.getProcessor(OCIO.DisplayViewTransform(src=OCIO.ROLE_SCENE_LINEAR, display=display, view=view))
    except Exception as exc:
        if "could not be located" in str(exc) and "show_grade.cube" in str(exc):
            print("# missing_lut: the processor fails as expected: %s" % exc)
            return []
        return ["missing_lut: unexpected error: %s" % exc]
    return ["missing_lut: the processor was built although show_grade.cube does not exist"]


def main(argv):
    report = "--report" in argv
    paths = [a for a in argv if a != "--report"]
    # The repository's config must work from every colour space; a config from elsewhere (Blender's
    # has output-only spaces such as False Color, whose luminance matrix has no inverse) only notes it.
    checks = [(p, False) for p in paths] if paths else [(ACES_BUILTIN, False), (MISSING_LUT, True)]
    strict_inputs = not paths
    print("1..%d" % len(checks))
    failed = 0
    for number, (path, expect_missing) in enumerate(checks, 1):
        try:
            failures = check_missing_lut(path) if expect_missing else check_config(path, report, strict_inputs)
        except Exception as exc:
            failures = ["%s: %s" % (path, exc)]
        for failure in failures:
            print("#   FAIL " + failure)
        print("%s %d - %s" % ("not ok" if failures else "ok", number, path))
        failed += bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
