#version 460
// Separable Gaussian blur of a float image, one direction per dispatch: the local adaptation luminance
// for dynamic local gamma (gamma.radius > 0; algorithms.md 4 and DECISIONS.md 7, after the Gaussian
// blur of L in the Kwon-formula script the seed cites). sigma = radius / 2, taps over [-radius, radius],
// weights normalised over the taps, edges clamped. pipeline/cpu_tone.c hp_cpu_blur() is the same in
// double. At most 129 taps (radius 64): a gather per pixel is simpler than a shared-memory tile and
// costs well under a millisecond at 4K.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

layout(local_size_x = 32, local_size_y = 8) in;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutF32 { float v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 src;
    uvec2 dst;
    uint width;
    uint height;
    uint radius;
    uint vertical;
} pc;

void main()
{
    uvec2 xy = gl_GlobalInvocationID.xy;
    if (xy.x >= pc.width || xy.y >= pc.height)
        return;
    InF32 src = InF32(pc.src);
    float inv_two_sigma2 = 2.0 / (float(pc.radius) * float(pc.radius)); // 1 / (2 sigma^2), sigma = r / 2
    float sum = 0.0, wsum = 0.0;
    int r = int(pc.radius);
    for (int k = -r; k <= r; k++) {
        float w = exp(-float(k * k) * inv_two_sigma2);
        int x = int(xy.x), y = int(xy.y);
        if (pc.vertical != 0u)
            y = clamp(y + k, 0, int(pc.height) - 1);
        else
            x = clamp(x + k, 0, int(pc.width) - 1);
        sum += w * src.v[uint(y) * pc.width + uint(x)];
        wsum += w;
    }
    OutF32(pc.dst).v[xy.y * pc.width + xy.x] = sum / wsum;
}
