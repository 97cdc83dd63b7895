// Bokeh: sizes the splat pass on the GPU, with no read-back in between (algorithms.md 6 step 2, the
// "1-thread fix-up dispatch"): the indirect dispatch is one workgroup per sprite kept, the count of every
// pixel that qualified is kept for the response, and the counter is reset for the next frame. One
// invocation of the pass after the setup runs it (dof_tiles.comp, or the SAT's rows), which saves a
// dispatch and a barrier of their own. Needs hp_dof.h and GL_EXT_buffer_reference(_uvec2).

layout(buffer_reference, std430, buffer_reference_align = 16) buffer BokehCtl { uint ctl[HP_BOKEH_CTL_WORDS]; };

void bokeh_args(uvec2 sprites, uint max_sprites)
{
    BokehCtl c = BokehCtl(sprites);
    uint wanted = c.ctl[HP_BOKEH_CTL_COUNTER];
    c.ctl[HP_BOKEH_CTL_DISPATCH + 0] = min(wanted, max_sprites);
    c.ctl[HP_BOKEH_CTL_DISPATCH + 1] = 1u;
    c.ctl[HP_BOKEH_CTL_DISPATCH + 2] = 1u;
    c.ctl[HP_BOKEH_CTL_WANTED] = wanted;
    c.ctl[HP_BOKEH_CTL_COUNTER] = 0u;
}
