#version 460
// Holds the GPU's clocks up while the frame graph's queue waits for a frame (pipeline/clock_hold.h says
// why; docs/BENCHMARKS.md "One client: the clocks between frames" measured it): `rounds` rounds of 16
// steps x -> (x ^ (x >> 15)) * 0x2c1b3c6d mod 2^32 (a xorshift and an odd multiply, the two halves of the
// integer hashes of Wellons' "hash-prospector"), each step depending on the last, from a seed of its own
// per invocation (2 id + 1). Not an affine step: a compiler folds a chain of x -> a x + c into one
// multiply-add (LLVM did, on lavapipe), and the hold would be shorter than its rounds say. It reads no
// memory. Both halves are bijections that keep 0 at 0, so no invocation, starting odd, ever ends on 0: the
// host passes `never` = 0 and nothing is written, and yet the loop cannot be optimised away; a test passes
// an invocation's own result to check that the loop ran exactly that many steps (tests/test_clock_hold.c).
// Rounds of 16 unrolled steps because llvmpipe (lavapipe) ends a shader's loops after 65535 iterations in
// all (LP_MAX_TGSI_LOOP_ITERATIONS), fewer than a hold's steps.
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
            x = (x ^ (x >> 15)) * 0x2c1b3c6du;
    }
    if (x == pc.never)
        Sink(pc.sink).v[0] = gl_GlobalInvocationID.x;
}
