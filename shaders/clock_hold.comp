#version 460
// Holds the GPU's clocks up while the frame graph's queue waits for a frame (pipeline/clock_hold.h says
// why; docs/BENCHMARKS.md "One client: the clocks between frames" measured it): `rounds` rounds of 16 steps
// of a linear congruential generator (x -> 1664525 x + 1013904223 mod 2^32, Numerical Recipes' constants),
// each step depending on the last, from a seed of its own per invocation (2 id + 1). It reads no memory.
// The invocation whose result equals `never` writes its id to the sink: the host passes the generator's
// image of 0 after the hold's steps, which no invocation reaches (the map is a bijection and every seed is
// odd), so that nothing is written and yet the loop cannot be optimised away; a test passes an invocation's
// own result to check that the loop ran exactly that many steps (tests/test_clock_hold.c). Rounds of 16
// unrolled steps because llvmpipe (lavapipe) ends a shader's loops after 65535 iterations in all
// (LP_MAX_TGSI_LOOP_ITERATIONS), fewer than a hold's steps.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;

layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer Sink { uint v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 sink;
    uint rounds; // at most 65535
    uint never;
} pc;

void main()
{
    uint x = gl_GlobalInvocationID.x * 2u + 1u;
    for (uint r = 0u; r < pc.rounds; r++) {
        [[unroll]] for (uint k = 0u; k < 16u; k++)
            x = x * 1664525u + 1013904223u;
    }
    if (x == pc.never)
        Sink(pc.sink).v[0] = gl_GlobalInvocationID.x;
}
