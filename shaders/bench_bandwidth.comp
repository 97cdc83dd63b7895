#version 460
// Bandwidth probes for bench/ (not used by the daemon): the ceilings the stages are measured against.
//   MODE 0  copy: dst[i] = src[i], 16 bytes per thread per iteration, grid-stride. vkCmdCopyBuffer may
//           run on a copy engine that is far slower than the SMs (about 0.85 TB/s on an H200), so the
//           copy ceiling is also measured the way a shader moves data.
//   MODE 1  read: sums src into a register and writes one value per thread only when the sum is a
//           value it can never be, so that the loads cannot be optimised away.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint FETCHES = 4;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Src { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer Dst { uvec4 v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 src;
    uvec2 dst;
    uint count; // 16-byte elements
} pc;

void main()
{
    uint wg = gl_WorkGroupSize.x;
    uint block = wg * FETCHES;
    uint stride = gl_NumWorkGroups.x * block;
    uvec4 acc = uvec4(0u);
    for (uint base = gl_WorkGroupID.x * block; base < pc.count; base += stride) {
        uvec4 v[FETCHES];
        [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
            uint i = base + k * wg + gl_LocalInvocationIndex;
            v[k] = i < pc.count ? Src(pc.src).v[i] : uvec4(0u);
        }
        [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
            uint i = base + k * wg + gl_LocalInvocationIndex;
            if (MODE == 0u) {
                if (i < pc.count)
                    Dst(pc.dst).v[i] = v[k];
            } else {
                acc ^= v[k];
            }
        }
    }
    if (MODE == 1u && acc == uvec4(0x12345678u, 0x9abcdef0u, 0x0fedcba9u, 0x87654321u))
        Dst(pc.dst).v[gl_GlobalInvocationID.x] = acc;
}
