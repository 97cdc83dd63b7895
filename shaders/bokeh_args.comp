#version 460
// Bokeh: sizes the splat pass on the GPU, with no read-back in between (algorithms.md 6 step 2, the
// "1-thread fix-up dispatch"): the indirect dispatch is one workgroup per sprite kept, the count of
// every pixel that qualified is kept for the response, and the counter is reset for the next frame.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_dof.h"

layout(local_size_x = 1) in;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Ctl { uint ctl[HP_BOKEH_CTL_WORDS]; };

layout(push_constant, std430) uniform Push {
    uvec2 sprites;
    uint max_sprites;
} pc;

void main()
{
    Ctl c = Ctl(pc.sprites);
    uint wanted = c.ctl[HP_BOKEH_CTL_COUNTER];
    c.ctl[HP_BOKEH_CTL_DISPATCH + 0] = min(wanted, pc.max_sprites);
    c.ctl[HP_BOKEH_CTL_DISPATCH + 1] = 1u;
    c.ctl[HP_BOKEH_CTL_DISPATCH + 2] = 1u;
    c.ctl[HP_BOKEH_CTL_WANTED] = wanted;
    c.ctl[HP_BOKEH_CTL_COUNTER] = 0u;
}
