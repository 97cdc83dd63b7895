// A studio's OpenColorIO config behind a C interface (ocio/config.h says what and why). C++ because
// OpenColorIO's API is C++ only; every OCIO call is inside a try block and every exception becomes an hp_err,
// so nothing of C++ leaves this file.
#include "ocio/config.h"

#include <OpenColorIO/OpenColorIO.h>

extern "C" {
#include "common/log.h" /* a C header: its functions have C names */
}

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace OCIO = OCIO_NAMESPACE;

struct hp_ocio_config {
    OCIO::ConstConfigRcPtr cfg;
    std::string path, name, description, default_input;
    std::vector<std::string> lists[4]; // by hp_ocio_list
    std::vector<std::string> role_spaces;
    std::vector<std::pair<std::string, std::string>> bad_inputs; /* colour spaces OCIO cannot take as an input */
    std::map<std::string, std::array<double, 3>> input_luma;     /* each good input's Y row (input_luma_of) */
};

struct hp_ocio_cpu {
    OCIO::ConstCPUProcessorRcPtr cpu;
};

namespace {

// OCIO's message, or the standard library's, as an hp_err. Allocation failures keep their meaning.
hp_code fail_from(hp_err *err, const char *what, const std::exception &e)
{
    if (dynamic_cast<const std::bad_alloc *>(&e))
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    return hp_fail(err, HP_ERR_UNUSABLE, "%s: %s", what, e.what());
}

// The processor of a key: OCIO's display/view transform from the input colour space, with the looks the key
// names in place of the view's own (LegacyViewingPipeline's looks override, as OCIO's applications do).
OCIO::ConstProcessorRcPtr processor_for(const hp_ocio_config *c, const hp_ocio_view_key *key)
{
    OCIO::DisplayViewTransformRcPtr dv = OCIO::DisplayViewTransform::Create();
    dv->setSrc(key->input);
    dv->setDisplay(key->display);
    dv->setView(key->view);
    OCIO::LegacyViewingPipelineRcPtr vp = OCIO::LegacyViewingPipeline::Create();
    vp->setDisplayViewTransform(dv);
    if (key->looks[0]) {
        vp->setLooksOverrideEnabled(true);
        vp->setLooksOverride(key->looks);
    }
    return vp->getProcessor(c->cfg);
}

// Every name of a list in one line for an error, cut where the message would overflow.
std::string joined(const std::vector<std::string> &names)
{
    std::string s;
    for (const std::string &n : names) {
        if (s.size() + n.size() > 400) {
            s += ", ... (GET /v1/ocio lists them all)";
            break;
        }
        s += s.empty() ? "" : ", ";
        s += "\"" + n + "\"";
    }
    return s;
}

bool contains(const std::vector<std::string> &names, const char *name)
{
    for (const std::string &n : names)
        if (n == name)
            return true;
    return false;
}

std::vector<std::string> views_of(const hp_ocio_config *c, const char *display)
{
    std::vector<std::string> v;
    int n = c->cfg->getNumViews(display);
    for (int i = 0; i < n; i++)
        v.emplace_back(c->cfg->getView(display, i));
    return v;
}

void read_lists(hp_ocio_config *c)
{
    const OCIO::ConstConfigRcPtr &cfg = c->cfg;
    for (int i = 0; i < cfg->getNumDisplays(); i++)
        c->lists[HP_OCIO_DISPLAYS].emplace_back(cfg->getDisplay(i));
    for (int i = 0; i < cfg->getNumLooks(); i++)
        c->lists[HP_OCIO_LOOKS].emplace_back(cfg->getLookNameByIndex(i));
    for (int i = 0; i < cfg->getNumColorSpaces(); i++)
        c->lists[HP_OCIO_COLORSPACES].emplace_back(cfg->getColorSpaceNameByIndex(i));
    for (int i = 0; i < cfg->getNumRoles(); i++) {
        c->lists[HP_OCIO_ROLES].emplace_back(cfg->getRoleName(i));
        c->role_spaces.emplace_back(cfg->getRoleColorSpace(i));
    }
    const char *name = cfg->getName();
    c->name = name ? name : "";
    const char *desc = cfg->getDescription();
    c->description = desc ? desc : "";
    OCIO::ConstColorSpaceRcPtr linear = cfg->getColorSpace(OCIO::ROLE_SCENE_LINEAR);
    if (!linear)
        linear = cfg->getColorSpace(OCIO::ROLE_DEFAULT);
    c->default_input = linear ? linear->getName() : "";
}

// OCIO's validate() checks the config's structure but opens no LUT file; a processor does. So every
// display/view is built once here, from the default input, so that a missing or broken LUT stops the start.
void build_every_view(const hp_ocio_config *c)
{
    for (const std::string &d : c->lists[HP_OCIO_DISPLAYS]) {
        for (const std::string &v : views_of(c, d.c_str())) {
            hp_ocio_view_key key = {};
            snprintf(key.input, sizeof key.input, "%s", c->default_input.c_str());
            snprintf(key.display, sizeof key.display, "%s", d.c_str());
            snprintf(key.view, sizeof key.view, "%s", v.c_str());
            try {
                processor_for(c, &key)->getDefaultCPUProcessor();
            } catch (const OCIO::ExceptionMissingFile &e) {
                throw OCIO::ExceptionMissingFile(("the view \"" + v + "\" of the display \"" + d + "\": " + e.what()).c_str());
            }
        }
    }
}

// A looks string in OCIO's syntax ("+grade, -shot | alt": looks separated by commas, alternatives by '|', a leading
// '+' or '-' for the direction) rewritten with the config's own spelling of each look and no spaces: OCIO finds
// looks whatever their case and spacing, and the programs' set is keyed by this text, so "+Grade" and " +grade"
// must be one program, not one each. *unknown gets the first name the config lacks.
std::string canonical_looks(const hp_ocio_config *c, const char *looks, std::string *unknown)
{
    std::string s(looks), tok, out;
    char before = ','; /* the separator before the token being read: '|' (an alternative) or ',' */
    for (size_t i = 0; i <= s.size(); i++) {
        char ch = i < s.size() ? s[i] : '\0';
        if (ch && ch != ',' && ch != '|') {
            tok += ch;
            continue;
        }
        size_t a = tok.find_first_not_of(" \t"), b = tok.find_last_not_of(" \t");
        std::string t = a == std::string::npos ? "" : tok.substr(a, b - a + 1), sign;
        if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
            sign = t.substr(0, 1);
            size_t n = t.find_first_not_of(" \t", 1);
            t = n == std::string::npos ? "" : t.substr(n);
        }
        OCIO::ConstLookRcPtr look = t.empty() ? nullptr : c->cfg->getLook(t.c_str());
        if (!t.empty() && !look && unknown->empty())
            *unknown = t;
        /* Empty tokens (",,", a trailing ',' or a lone '+') name nothing: left out, so they make no new key. */
        if (!t.empty()) {
            if (!out.empty())
                out += before;
            out += sign + (look ? look->getName() : t);
            before = ',';
        }
        if (ch == '|')
            before = '|';
        tok.clear();
    }
    return out;
}

// The default display and view from one input, with the given looks (or the view's own).
void build_from(const hp_ocio_config *c, const char *input, const char *looks)
{
    hp_ocio_view_key key = {};
    snprintf(key.input, sizeof key.input, "%s", input);
    snprintf(key.display, sizeof key.display, "%s", c->cfg->getDefaultDisplay());
    snprintf(key.view, sizeof key.view, "%s", c->cfg->getDefaultView(key.display));
    snprintf(key.looks, sizeof key.looks, "%s", looks);
    processor_for(c, &key)->getDefaultCPUProcessor();
}

// The Y row of a colour space of the config: the exposure stage weighs a frame in it by this (issue 34), as it
// weighs a frame of hdrpostd's own spaces by the Y row of its RGB -> XYZ (D65), a white other than D65 adapted by
// Bradford (pipeline/colorspace.h). OCIO has no call for it: getDefaultLumaCoefs is one row for the whole config,
// and configs leave it at Rec.709's (the ACES configs and Blender's write [0.2126, 0.7152, 0.0722]) whatever the
// space. So the row is measured: the three primaries through the config's own conversion into ACES2065-1 (its
// aces_interchange role), then OCIO's built-in AP0 -> CIE XYZ D65 (Bradford), whose Y is taken. A config without
// that role goes to its scene_linear and takes the config's luma there, which is what the config declares. A
// space that is not linear (a log or display encoding: f(2x) is not 2f(x)) has no Y row; it gets the config's
// luma, and auto exposure over such a frame weighs its code values.
std::array<double, 3> input_luma_of(const hp_ocio_config *c, const std::string &input)
{
    double coefs[3];
    c->cfg->getDefaultLumaCoefs(coefs);
    std::array<double, 3> fallback = {coefs[0], coefs[1], coefs[2]};
    OCIO::ConstColorSpaceRcPtr aces = c->cfg->getColorSpace(OCIO::ROLE_INTERCHANGE_SCENE);
    OCIO::GroupTransformRcPtr to_xyz = OCIO::GroupTransform::Create();
    OCIO::ColorSpaceTransformRcPtr to_ref = OCIO::ColorSpaceTransform::Create();
    to_ref->setSrc(input.c_str());
    to_ref->setDst(aces ? aces->getName() : c->default_input.c_str());
    to_xyz->appendTransform(to_ref);
    if (aces) {
        OCIO::BuiltinTransformRcPtr ap0 = OCIO::BuiltinTransform::Create();
        ap0->setStyle("UTILITY - ACES-AP0_to_CIE-XYZ-D65_BFD");
        to_xyz->appendTransform(ap0);
    }
    OCIO::ConstCPUProcessorRcPtr p = c->cfg->getProcessor(to_xyz)->getDefaultCPUProcessor();
    std::array<double, 3> y = {};
    for (int k = 0; k < 3; k++) {
        float one[3] = {0, 0, 0}, two[3] = {0, 0, 0};
        one[k] = 1.0f, two[k] = 2.0f;
        p->applyRGB(one);
        p->applyRGB(two);
        for (int j = 0; j < 3; j++)
            if (!std::isfinite(two[j]) || std::fabs(two[j] - 2.0f * one[j]) > 1e-4 * (1.0 + std::fabs(two[j])))
                return fallback;
        y[k] = aces ? one[1] : coefs[0] * one[0] + coefs[1] * one[1] + coefs[2] * one[2];
    }
    float zero[3] = {0, 0, 0};
    p->applyRGB(zero);
    return std::fabs(zero[0]) + std::fabs(zero[1]) + std::fabs(zero[2]) > 1e-6f ? fallback : y;
}

// The Y row, or the config's luma where measuring it fails (its aces_interchange space unusable, say): a space
// that builds as an input stays usable whatever its luminance row comes to, and the log says so.
std::array<double, 3> luma_or_coefs(const hp_ocio_config *c, const std::string &input)
{
    try {
        return input_luma_of(c, input);
    } catch (const OCIO::ExceptionMissingFile &) {
        throw; /* a missing file stops the start, wherever it is found */
    } catch (const OCIO::Exception &e) {
        double coefs[3];
        c->cfg->getDefaultLumaCoefs(coefs);
        hp_warn("ocio: the luminance of \"%s\" could not be measured (%s): the config's luma coefficients are used",
                input.c_str(), e.what());
        return {coefs[0], coefs[1], coefs[2]};
    }
}

// Each look and each colour space as an input, built once so that their LUT files are opened at start too. A
// missing file stops the start, as for a view. A colour space OCIO cannot invert (Blender's "False Color", a
// display-only space) is no error of the config: it is remembered, and a request naming it as its input is
// refused with OCIO's reason.
void build_looks_and_inputs(hp_ocio_config *c)
{
    for (const std::string &l : c->lists[HP_OCIO_LOOKS]) {
        try {
            build_from(c, c->default_input.c_str(), ("+" + l).c_str());
        } catch (const OCIO::ExceptionMissingFile &e) {
            throw OCIO::ExceptionMissingFile(("the look \"" + l + "\": " + e.what()).c_str());
        }
    }
    for (const std::string &cs : c->lists[HP_OCIO_COLORSPACES]) {
        try {
            build_from(c, cs.c_str(), "");
            c->input_luma[cs] = luma_or_coefs(c, cs);
        } catch (const OCIO::ExceptionMissingFile &e) {
            // ociocheck passes such a config (it opens no file); the daemon reads every file at start, so that no
            // request finds one missing. The message says which space needs it, and that it is as an input.
            throw OCIO::ExceptionMissingFile(("the colour space \"" + cs + "\" as a frame's input (its conversion "
                                              "to the reference): " + e.what()).c_str());
        } catch (const OCIO::Exception &e) {
            c->bad_inputs.emplace_back(cs, e.what());
        }
    }
}

// OCIO's own messages (a config's inactive names, a LUT's oddities) as lines of the daemon's log, with its time
// and level, not bare lines on stderr between them. OCIO_LOGGING_LEVEL still chooses which OCIO writes.
void log_from_ocio(const char *message)
{
    std::string m = message ? message : "";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' '))
        m.pop_back();
    static const struct {
        const char *prefix;
        hp_log_level level;
    } levels[] = {{"[OpenColorIO Error]: ", HP_LOG_ERROR},
                  {"[OpenColorIO Warning]: ", HP_LOG_WARN},
                  {"[OpenColorIO Info]: ", HP_LOG_INFO},
                  {"[OpenColorIO Debug]: ", HP_LOG_DEBUG}};
    for (const auto &l : levels)
        if (m.rfind(l.prefix, 0) == 0) {
            hp_log(l.level, "ocio: OpenColorIO says: %s", m.c_str() + strlen(l.prefix));
            return;
        }
    hp_log(HP_LOG_WARN, "ocio: OpenColorIO says: %s", m.c_str());
}

} // namespace

extern "C" {

hp_code hp_ocio_config_load(const char *path, hp_ocio_config **out, hp_err *err)
{
    *out = nullptr;
    if (!path || !path[0])
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "ocio_config: no path given");
    hp_ocio_config *c = new (std::nothrow) hp_ocio_config;
    if (!c)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio_config: out of memory");
    std::string what = std::string("ocio_config ") + path;
    static std::once_flag logging;
    std::call_once(logging, [] { OCIO::SetLoggingFunction(log_from_ocio); });
    /* A file that is not there is io, as a missing LUT is; OCIO 2.1 reads files only (ocio:// URIs came in 2.2). */
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        delete c;
        return hp_fail(err, HP_ERR_IO, "%s: %s", what.c_str(), strerror(e));
    }
    try {
        c->path = path;
        c->cfg = OCIO::Config::CreateFromFile(path);
        c->cfg->validate();
        read_lists(c);
        if (c->lists[HP_OCIO_DISPLAYS].empty())
            throw OCIO::Exception("the config has no display");
        if (c->default_input.empty())
            throw OCIO::Exception("the config has neither a scene_linear nor a default role");
        build_every_view(c);
        build_looks_and_inputs(c);
    } catch (const OCIO::ExceptionMissingFile &e) {
        delete c;
        return hp_fail(err, HP_ERR_IO, "%s: %s", what.c_str(), e.what());
    } catch (const OCIO::Exception &e) {
        delete c;
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "%s: %s", what.c_str(), e.what());
    } catch (const std::exception &e) {
        delete c;
        return fail_from(err, what.c_str(), e);
    }
    *out = c;
    return HP_OK;
}

void hp_ocio_config_free(hp_ocio_config *config)
{
    delete config;
}

const char *hp_ocio_config_path(const hp_ocio_config *c) { return c->path.c_str(); }
const char *hp_ocio_config_name(const hp_ocio_config *c) { return c->name.c_str(); }
const char *hp_ocio_config_description(const hp_ocio_config *c) { return c->description.c_str(); }
const char *hp_ocio_default_input(const hp_ocio_config *c) { return c->default_input.c_str(); }

size_t hp_ocio_count(const hp_ocio_config *c, hp_ocio_list list)
{
    return c->lists[list].size();
}

const char *hp_ocio_name(const hp_ocio_config *c, hp_ocio_list list, size_t i)
{
    return i < c->lists[list].size() ? c->lists[list][i].c_str() : nullptr;
}

const char *hp_ocio_role_colorspace(const hp_ocio_config *c, size_t i)
{
    return i < c->role_spaces.size() ? c->role_spaces[i].c_str() : nullptr;
}

size_t hp_ocio_view_count(const hp_ocio_config *c, const char *display)
{
    int n = c->cfg->getNumViews(display);
    return n > 0 ? (size_t)n : 0;
}

const char *hp_ocio_view_name(const hp_ocio_config *c, const char *display, size_t i)
{
    return i < hp_ocio_view_count(c, display) ? c->cfg->getView(display, (int)i) : nullptr;
}

const char *hp_ocio_default_display(const hp_ocio_config *c)
{
    return c->cfg->getDefaultDisplay();
}

const char *hp_ocio_default_view(const hp_ocio_config *c, const char *display)
{
    return c->cfg->getDefaultView(display);
}

void hp_ocio_input_luma(const hp_ocio_config *c, const char *input, double rgb[3])
{
    auto found = c->input_luma.find(input ? input : "");
    if (found != c->input_luma.end()) {
        for (int k = 0; k < 3; k++)
            rgb[k] = found->second[k];
        return;
    }
    c->cfg->getDefaultLumaCoefs(rgb);
}

bool hp_ocio_has_colorspace(const hp_ocio_config *c, const char *name)
{
    try {
        return name && name[0] && c->cfg->getColorSpace(name) != nullptr;
    } catch (const std::exception &) {
        return false;
    }
}

const char *hp_ocio_display_colorspace(const hp_ocio_config *c, const char *display, const char *view)
{
    try {
        const char *cs = c->cfg->getDisplayViewColorSpaceName(display, view);
        if (cs && !strcmp(cs, "<USE_DISPLAY_NAME>")) /* OCIO 2's token: the space named as the display */
            return c->cfg->getColorSpace(display) ? c->cfg->getColorSpace(display)->getName() : "";
        return cs ? cs : "";
    } catch (const std::exception &) {
        return "";
    }
}

hp_code hp_ocio_display_probe(const hp_ocio_config *c, const char *display, const char *view, float *xyz, size_t n,
                              hp_err *err)
{
    const char *dst = hp_ocio_display_colorspace(c, display, view);
    try {
        OCIO::ConstColorSpaceRcPtr xyz_space = c->cfg->getColorSpace("cie_xyz_d65_interchange");
        if (!xyz_space || !dst[0])
            return hp_fail(err, HP_ERR_UNUSABLE, "the config has no cie_xyz_d65_interchange role%s",
                           dst[0] ? "" : " and the view no display colour space");
        /* The same side of the config on both ends: between a scene-referred and a display-referred space OCIO
         * puts its default view transform. Configs written before OCIO 2's display-referred spaces (Blender 4's
         * AgX) make every space scene-referred, the interchange XYZ and the displays alike: measured as well. */
        OCIO::ConstColorSpaceRcPtr out = c->cfg->getColorSpace(dst);
        if (!out || xyz_space->getReferenceSpaceType() != out->getReferenceSpaceType())
            return hp_fail(err, HP_ERR_UNUSABLE, "the interchange XYZ and \"%s\" are not on the same side "
                           "(scene- or display-referred) of the config", dst);
        OCIO::ConstCPUProcessorRcPtr p =
            c->cfg->getProcessor(xyz_space->getName(), dst)->getDefaultCPUProcessor();
        for (size_t i = 0; i < n; i++)
            p->applyRGB(xyz + 3 * i);
    } catch (const std::exception &e) {
        return fail_from(err, "ocio display probe", e);
    }
    return HP_OK;
}

hp_code hp_ocio_resolve(const hp_ocio_config *c, hp_ocio_view_key *key, hp_err *err)
{
    try {
        if (!key->input[0])
            snprintf(key->input, sizeof key->input, "%s", c->default_input.c_str());
        else if (!hp_ocio_has_colorspace(c, key->input))
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "input.colorspace",
                                 "input.colorspace \"%s\" is neither one of hdrpostd's spaces nor a colour space or "
                                 "role of the OCIO config; its colour spaces: %s; its roles: %s",
                                 key->input, joined(c->lists[HP_OCIO_COLORSPACES]).c_str(),
                                 joined(c->lists[HP_OCIO_ROLES]).c_str());
        /* The space's own name: a role, an alias or another case is the same program. */
        snprintf(key->input, sizeof key->input, "%s", c->cfg->getColorSpace(key->input)->getName());
        for (const auto &bad : c->bad_inputs)
            if (bad.first == key->input)
                return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "input.colorspace",
                                     "input.colorspace \"%s\" cannot be a frame's colour space in this config: %s",
                                     key->input, bad.second.c_str());
        if (!key->display[0])
            snprintf(key->display, sizeof key->display, "%s", c->cfg->getDefaultDisplay());
        else if (!contains(c->lists[HP_OCIO_DISPLAYS], key->display))
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "ocio.display",
                                 "ocio.display \"%s\" is not a display of the OCIO config; its displays: %s",
                                 key->display, joined(c->lists[HP_OCIO_DISPLAYS]).c_str());
        std::vector<std::string> views = views_of(c, key->display);
        if (!key->view[0])
            snprintf(key->view, sizeof key->view, "%s", c->cfg->getDefaultView(key->display));
        else if (!contains(views, key->view))
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "ocio.view",
                                 "ocio.view \"%s\" is not a view of the display \"%s\"; its views: %s", key->view,
                                 key->display, joined(views).c_str());
        std::string bad;
        std::string looks = canonical_looks(c, key->looks, &bad);
        if (bad.empty())
            snprintf(key->looks, sizeof key->looks, "%s", looks.c_str());
        if (!bad.empty())
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "ocio.looks",
                                 "ocio.looks names \"%s\", not a look of the OCIO config; its looks: %s",
                                 bad.c_str(),
                                 c->lists[HP_OCIO_LOOKS].empty() ? "none" : joined(c->lists[HP_OCIO_LOOKS]).c_str());
    } catch (const std::exception &e) {
        return fail_from(err, "ocio", e);
    }
    return HP_OK;
}

// The C++ objects behind an hp_ocio_shader: the shader description owns the text and the LUT values.
struct shader_owner {
    OCIO::GpuShaderDescRcPtr desc;
    std::string text;
    std::vector<hp_ocio_lut> luts;
};

static void add_luts(shader_owner *o)
{
    const OCIO::GpuShaderDescRcPtr &d = o->desc;
    for (unsigned i = 0; i < d->getNumTextures(); i++) {
        const char *tex = nullptr, *sampler = nullptr;
        unsigned w = 0, h = 0;
        OCIO::GpuShaderDesc::TextureType channel;
        OCIO::Interpolation interp;
        d->getTexture(i, tex, sampler, w, h, channel, interp);
        hp_ocio_lut l = {};
        snprintf(l.sampler, sizeof l.sampler, "%s", sampler);
        // OCIO 2.1 declares a sampler2D for a LUT folded into rows (height > 1), else a sampler1D.
        l.dims = h > 1 ? 2 : 1;
        l.width = w;
        l.height = h;
        l.depth = 1;
        l.channels = channel == OCIO::GpuShaderDesc::TEXTURE_RED_CHANNEL ? 1 : 3;
        l.linear = interp != OCIO::INTERP_NEAREST;
        d->getTextureValues(i, l.values);
        o->luts.push_back(l);
    }
    for (unsigned i = 0; i < d->getNum3DTextures(); i++) {
        const char *tex = nullptr, *sampler = nullptr;
        unsigned edge = 0;
        OCIO::Interpolation interp;
        d->get3DTexture(i, tex, sampler, edge, interp);
        hp_ocio_lut l = {};
        snprintf(l.sampler, sizeof l.sampler, "%s", sampler);
        l.dims = 3;
        l.width = l.height = l.depth = edge;
        l.channels = 3;
        // Tetrahedral interpolation is computed in the shader from nearest fetches (OCIO's GPU Lut3D op);
        // only trilinear asks the sampler to interpolate.
        l.linear = interp == OCIO::INTERP_LINEAR || interp == OCIO::INTERP_DEFAULT;
        d->get3DTextureValues(i, l.values);
        o->luts.push_back(l);
    }
}

hp_code hp_ocio_shader_make(const hp_ocio_config *c, const hp_ocio_view_key *key, hp_ocio_shader **out, hp_err *err)
{
    *out = nullptr;
    std::unique_ptr<shader_owner> o(new (std::nothrow) shader_owner);
    hp_ocio_shader *s = (hp_ocio_shader *)calloc(1, sizeof *s);
    if (!o || !s) {
        free(s);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio shader: out of memory");
    }
    try {
        OCIO::ConstProcessorRcPtr proc = processor_for(c, key);
        OCIO::ConstGPUProcessorRcPtr gpu = proc->getDefaultGPUProcessor();
        o->desc = OCIO::GpuShaderDesc::CreateShaderDesc();
        o->desc->setLanguage(OCIO::GPU_LANGUAGE_GLSL_4_0);
        o->desc->setFunctionName("hp_ocio");
        o->desc->setResourcePrefix("hp_ocio_");
        o->desc->setPixelName("px");
        gpu->extractGpuShaderInfo(o->desc);
        if (o->desc->getNumUniforms() > 0) {
            OCIO::GpuShaderDesc::UniformData data;
            const char *u = o->desc->getUniform(0, data);
            free(s);
            return hp_fail(err, HP_ERR_UNUSABLE,
                           "the OCIO transform %s / %s from \"%s\" has dynamic properties (uniform %s), which "
                           "hdrpostd does not take: make them static in the config",
                           key->display, key->view, key->input, u);
        }
        o->text = o->desc->getShaderText();
        add_luts(o.get());
        snprintf(s->cache_id, sizeof s->cache_id, "%s", proc->getCacheID());
    } catch (const std::exception &e) {
        free(s);
        return fail_from(err, "ocio shader", e);
    }
    s->text = o->text.data();
    s->lut_count = o->luts.size();
    s->luts = o->luts.data();
    s->owner = o.release();
    *out = s;
    return HP_OK;
}

void hp_ocio_shader_free(hp_ocio_shader *s)
{
    if (!s)
        return;
    delete static_cast<shader_owner *>(s->owner);
    free(s);
}

hp_code hp_ocio_cpu_make(const hp_ocio_config *c, const hp_ocio_view_key *key, hp_ocio_cpu **out, hp_err *err)
{
    *out = nullptr;
    hp_ocio_cpu *p = new (std::nothrow) hp_ocio_cpu;
    if (!p)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio cpu: out of memory");
    try {
        p->cpu = processor_for(c, key)->getDefaultCPUProcessor();
    } catch (const std::exception &e) {
        delete p;
        return fail_from(err, "ocio cpu", e);
    }
    *out = p;
    return HP_OK;
}

void hp_ocio_cpu_apply(const hp_ocio_cpu *p, float *rgba, size_t n)
{
    // In rows of at most 1 << 20 pixels: PackedImageDesc takes a long width.
    const size_t row = (size_t)1 << 20;
    for (size_t at = 0; at < n; at += row) {
        long w = (long)(n - at < row ? n - at : row);
        OCIO::PackedImageDesc img(rgba + 4 * at, w, 1, 4);
        p->cpu->apply(img);
    }
}

void hp_ocio_cpu_free(hp_ocio_cpu *p)
{
    delete p;
}

} // extern "C"
