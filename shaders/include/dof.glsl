// Shared by the depth-of-field and bokeh shaders (issue 5; DECISIONS.md 8, 9). pipeline/cpu_dof.c is the
// same in double precision.

// The frame as the stages before it read it: a pixel with a NaN or infinite channel, or whose luminance
// overflows, is black (DECISIONS.md 2, as the reduction and the tone pass treat it); negative channels
// count as 0, since no light is negative. `excluded` tells the composite to write the pixel as the tone
// pass would have drawn it. luma: the working space's Y row (input_color.glsl's working_luma(); Rec.709's
// HP_LUMA_* for sRGB output).
vec3 dof_sanitize(vec4 c, vec3 luma, out bool excluded)
{
    uvec3 exponent = floatBitsToUint(c.rgb) & 0x7f800000u;
    vec3 p = max(c.rgb, vec3(0.0));
    precise float y = luma.r * p.r + luma.g * p.g + luma.b * p.b;
    excluded = any(equal(exponent, uvec3(0x7f800000u))) || isinf(y);
    return excluded ? vec3(0.0) : p;
}

float dof_luminance(vec3 p, vec3 luma)
{
    return luma.r * p.r + luma.g * p.g + luma.b * p.b;
}

// Signed CoC radius in frame pixels from a depth sample, thin lens (algorithms.md 5.1, Potmesil and
// Chakravarty 1981): c(z) = (f/N) f (z - S1) / (z (S1 - f)) on the sensor; in pixels of a frame whose
// width spans the sensor, halved for the radius, it is k (1 - S1 / z) with k = c(inf) in pixels
// (pipeline/dof.c computes k in double). Near < 0 < far. The background (NaN, +inf, Blender's 1e10) is
// at infinity; a depth of 0 or below is not a distance and is left in focus.
float dof_coc(float depth, float k, float focus_m, float depth_scale, float max_coc)
{
    float c;
    if (!(depth < float(HP_DOF_DEPTH_BACKGROUND))) {
        c = k;
    } else {
        float z = depth * depth_scale;
        precise float t = k * (1.0 - focus_m / z);
        c = z > 0.0 ? t : 0.0;
    }
    return clamp(c, -max_coc, max_coc);
}

// The blurred fields are stored as RGBA16F (8 bytes a texel: half the traffic of the composite's
// bilinear reads) of exposed values (times the exposure scale), which sit where half floats are precise:
// the display range. Past 65504 (a light 2^16 times brighter than white after exposure) a value is
// clamped rather than turned into infinity.
uvec2 dof_pack_field(vec4 v, float scale)
{
    vec4 e = min(vec4(v.rgb * scale, v.a), vec4(65504.0));
    return uvec2(packHalf2x16(e.rg), packHalf2x16(e.ba));
}

// The radius of a regular n-gon with circumradius 1 in direction theta (CRYENGINE's NGon, algorithms.md 6
// step 4): 1 at the vertices, cos(pi/n) at the middle of the edges.
float dof_ngon(float theta, float n)
{
    const float PI = 3.14159265358979;
    float sector = 2.0 * PI / n;
    return cos(PI / n) / cos(theta - sector * floor((n * theta + PI) / (2.0 * PI)));
}
