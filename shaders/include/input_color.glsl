// A frame of other primaries into the working space (the output's primaries: linear Rec.709 for sRGB) where a
// stage first reads it (issue 17; pipeline/colorspace.h, hp_input_color): the tone pass, and with depth of
// field the DOF setup and composite, so that every stage after the reduction works in one space (the DOF's
// luminance weights and its SAT's channel bound are the working space's, from tone_state). The matrix is in tone_state (hp_shared.h), copied there from tone_params by
// the exposure stage. pipeline/cpu_tone.c, hp_cpu_input_color, is the same in double, where the CPU
// reference reads the frame.
#ifndef HP_INPUT_COLOR_GLSL
#define HP_INPUT_COLOR_GLSL

#include "hp_shared.h"

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InputColor {
    float w[HP_TONE_STATE_WORDS];
};

// Negative channels are 0 first (no light is negative, DECISIONS.md 2); then the matrix; then a colour
// outside the working gamut, which has a channel under 0, is pulled toward the grey of its own luminance just enough
// to bring that channel to 0, so its luminance and hue stay (the mirror of the tone pass's fold above 1);
// a colour of no luminance (imaginary primaries: AP0's blue) becomes black. A pixel with a NaN or infinite
// channel is left as it is: the stages exclude it. The caller knows whether the frame needs it: the tone
// pass from a push-constant flag, the DOF stages from input_color_wanted().
vec4 input_color(uvec2 state, vec4 c)
{
    InputColor ic = InputColor(state);
    uvec3 exponent = floatBitsToUint(c.rgb) & 0x7f800000u;
    if (any(equal(exponent, uvec3(0x7f800000u))))
        return c;
    const uint m = HP_TONE_STATE_CONVERT + 1u;
    mat3 to_work = mat3(ic.w[m + 0u], ic.w[m + 3u], ic.w[m + 6u],
                      ic.w[m + 1u], ic.w[m + 4u], ic.w[m + 7u],
                      ic.w[m + 2u], ic.w[m + 5u], ic.w[m + 8u]);
    vec3 rgb = vec3(c.r > 0.0 ? c.r : 0.0, c.g > 0.0 ? c.g : 0.0, c.b > 0.0 ? c.b : 0.0);
    // The matrices' entries reach 2.5 (AP0): a channel near FLT_MAX would overflow in fp32 where the CPU's
    // double does not. Such a pixel is converted at 2^-64 of its size (exact: a power of two) and scaled
    // back; the fold below does not depend on the scale.
    bool huge = max(rgb.r, max(rgb.g, rgb.b)) > 1e36;
    vec3 v = to_work * (rgb * (huge ? uintBitsToFloat(0x1f800000u) /* 2^-64 */ : 1.0));
    const uint l = HP_TONE_STATE_LUMA;
    float Y = dot(v, vec3(ic.w[l], ic.w[l + 1u], ic.w[l + 2u]));
    float low = min(v.r, min(v.g, v.b));
    if (low < 0.0)
        v = Y > 0.0 ? Y + (v - Y) * (Y / (Y - low)) : vec3(0.0);
    return vec4(max(v, vec3(0.0)) * (huge ? uintBitsToFloat(0x5f800000u) /* 2^64 */ : 1.0), c.a);
}

// The working space's Y row (tone_state, copied from tone_params by the exposure stage).
vec3 working_luma(uvec2 state)
{
    InputColor ic = InputColor(state);
    const uint l = HP_TONE_STATE_LUMA;
    return vec3(ic.w[l], ic.w[l + 1u], ic.w[l + 2u]);
}

bool input_color_wanted(uvec2 state)
{
    return floatBitsToUint(InputColor(state).w[HP_TONE_STATE_CONVERT]) != 0u;
}

#endif
