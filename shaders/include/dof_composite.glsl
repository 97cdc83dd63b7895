// Depth of field's composite, shared by the fused tone pass (tonemap.comp with DOF on: the daemon's path,
// which never writes the composited frame to memory) and dof_composite.comp (the same image as RGBA32F,
// for tests and diagnostics). Back to full resolution, far first, then near by its coverage
// (DECISIONS.md 8; CRYENGINE's composite, algorithms.md 5.2 step 5):
//   B   = mix(sharp, far field, smoothstep(0.5, 1.5, CoC))   for far pixels (every pixel with the SAT)
//   B   = mix(sharp, near colour, smoothstep(0.5, 1.5, -CoC))  for near pixels
//   out = B * (1 - near coverage) + near field (premultiplied)
//   out += bokeh (the sprites' light, accumulated at half resolution: a quarter per frame pixel)
// The half-resolution fields are interpolated bilinearly. A pixel that became a sprite is black in the
// sharp image: its light is in the sprite. A pixel in focus with no blurred foreground in reach comes
// out exactly as it went in, so DOF with everything in focus changes nothing.
// Needs hp_dof.h and dof.glsl, GL_EXT_buffer_reference(_uvec2).

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer DofF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer DofU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer DofField { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer DofVec2 { vec2 v[]; };
// The bokeh light: RGB and an unused word per half pixel, so that one 16-byte load reads a texel.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer DofAccum { vec4 v[]; };

struct DofInputs {
    uvec2 coc, mask, near, far, accum; // pipeline/dof.h hp_dof_frame; accum 0 without bokeh
    uvec2 dilated;                     // the tiles' dilated near CoC (dof_tiles.comp)
    float inv_scale;                   // 1 / the exposure scale: the fields are exposed (dof_pack_field)
    uint width, half_w, half_h;
    bool sat;                          // dof.method = "sat": one blurred field, no near layer
};

vec4 dof_field(DofField b, uint i)
{
    uvec2 v = b.v[i];
    return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
}

vec4 dof_bilinear(uvec2 address, vec2 u, uint half_w, uint half_h)
{
    DofField b = DofField(address);
    vec2 i0 = floor(u);
    vec2 f = u - i0;
    ivec2 last = ivec2(half_w, half_h) - 1;
    ivec2 a = clamp(ivec2(i0), ivec2(0), last);
    ivec2 c = clamp(ivec2(i0) + 1, ivec2(0), last);
    vec4 v00 = dof_field(b, uint(a.y) * half_w + uint(a.x)), v10 = dof_field(b, uint(a.y) * half_w + uint(c.x));
    vec4 v01 = dof_field(b, uint(c.y) * half_w + uint(a.x)), v11 = dof_field(b, uint(c.y) * half_w + uint(c.x));
    return mix(mix(v00, v10, f.x), mix(v01, v11, f.x), f.y);
}

vec3 dof_accum_at(DofAccum acc, ivec2 h, uint half_w)
{
    return acc.v[uint(h.y) * half_w + uint(h.x)].rgb;
}

// `sharp` is the pixel as dof_sanitize() returns it.
vec3 dof_composite(DofInputs d, uvec2 xy, vec3 sharp)
{
    uint idx = xy.y * d.width + xy.x;
    if (d.accum != uvec2(0u)) { // only bokeh makes sprites
        uint mask = DofU32(d.mask).v[(xy.y / 2u) * d.half_w + xy.x / 2u];
        if ((mask & (1u << (2u * (xy.y & 1u) + (xy.x & 1u)))) != 0u)
            sharp = vec3(0.0);
    }
    float s = DofF32(d.coc).v[idx];

    // Frame pixel centre x + 0.5 is half-resolution coordinate (x + 0.5) / 2; texel centres sit at i + 0.5.
    vec2 u = (vec2(xy) + 0.5) * 0.5 - 0.5;
    vec3 b = sharp;
    float blurred = d.sat ? abs(s) : s;
    if (blurred > 0.0) {
        // The far field's alpha marks far pixels: interpolating (rgb * alpha, alpha) and dividing keeps
        // only their colour (an eroded half pixel beside this one is in focus and has none).
        vec4 far = dof_bilinear(d.far, u, d.half_w, d.half_h);
        if (far.a > 0.0)
            b = mix(sharp, far.rgb * (d.inv_scale / far.a), smoothstep(0.5, 1.5, blurred));
    }
    vec3 o = b;
    // The near field is read only where some near pixel could reach: the rest of the frame skips four
    // loads and gets the same result (a zero field changes nothing below).
    uint tiles_w = (d.half_w + HP_DOF_TILE - 1u) / HP_DOF_TILE;
    bool near_here = !d.sat && DofVec2(d.dilated).v[(xy.y / (2u * HP_DOF_TILE)) * tiles_w + xy.x / (2u * HP_DOF_TILE)].y > 0.0;
    if (near_here) {
        vec4 near = dof_bilinear(d.near, u, d.half_w, d.half_h);
        near.rgb *= d.inv_scale;
        // A near pixel's own light is in the near field already, spread over its CoC: its sharp self must
        // go, or a small near light would stay a sharp dot inside its own blur where the coverage is
        // thin. What was behind it is not in the frame; the blurred foreground around it stands in.
        if (s < 0.0 && near.a > 0.0)
            b = mix(b, near.rgb / near.a, smoothstep(0.5, 1.5, -s));
        o = b * (1.0 - near.a) + near.rgb;
    }
    if (d.accum != uvec2(0u)) {
        DofAccum acc = DofAccum(d.accum);
        vec2 i0 = floor(u);
        vec2 f = u - i0;
        ivec2 last = ivec2(d.half_w, d.half_h) - 1;
        ivec2 a = clamp(ivec2(i0), ivec2(0), last), c = clamp(ivec2(i0) + 1, ivec2(0), last);
        vec3 light = mix(mix(dof_accum_at(acc, a, d.half_w), dof_accum_at(acc, ivec2(c.x, a.y), d.half_w), f.x),
                         mix(dof_accum_at(acc, ivec2(a.x, c.y), d.half_w), dof_accum_at(acc, c, d.half_w), f.x), f.y);
        o += 0.25 * light; // a half-resolution pixel's light spread over its four frame pixels
    }
    return o;
}
