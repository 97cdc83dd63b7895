/* Depth of field and bokeh: constants and buffer layouts shared by the shaders (shaders/dof_*.comp,
 * bokeh_*.comp), the host (pipeline/dof.c) and the CPU reference (pipeline/cpu_dof.c). Only #define
 * lines and comments: included by C and GLSL (see hp_shared.h for the rules). */
#ifndef HP_DOF_H
#define HP_DOF_H

/* The blurred fields are gathered at half resolution (algorithms.md 5.2 step 1: what is out of focus
 * has no detail to lose). A tile is HP_DOF_TILE x HP_DOF_TILE half-resolution pixels (16 x 16 of the
 * frame); the setup pass is one workgroup per tile and records each tile's largest near and far CoC. */
#define HP_DOF_TILE 8

/* Largest CoC radius, frame pixels (dof.max_coc_px's bound). */
#define HP_DOF_MAX_COC_PX 64

/* Gather pattern: a centre tap and K concentric rings of 8k taps (ring k at radius k*R/K), K from 1 to
 * HP_DOF_MAX_RINGS chosen so rings are about two half-resolution pixels apart. Every tap then stands
 * for the same area, pi/4 * (R/K)^2 (ring k's annulus, 2 pi k (R/K)^2, over its 8k taps), which makes
 * the coverage sum of the near field a plain sum. 1 + 4 K (K + 1) taps: 121 for K = 5. The directions
 * are one table (hp_dof_taps.h, written by tools/gen_dof_taps.py from cos and sin in double) that the
 * shader and the CPU reference both read, so they pick the same pixels. */
#define HP_DOF_MAX_RINGS 5
#define HP_DOF_TAPS 121
#define HP_DOF_RING_SPACING 2.0
/* Large blurs gather from quarter resolution: a pixel whose kernel radius is over
 * HP_DOF_QUARTER_ABOVE half-resolution pixels (16 frame pixels) takes at most HP_DOF_QUARTER_RINGS rings
 * (49 taps) of 2x2-averaged quarter-resolution pixels, which stand for the area between the taps instead
 * of skipping it. The cost of a pixel is then bounded by 81 taps (4 rings at half resolution, radius 8)
 * instead of growing with the blur. The quarter-resolution colour and CoC follow the half resolution's
 * rule (near dilated, far eroded); the setup pass writes them. */
#define HP_DOF_QUARTER_ABOVE 8.0
#define HP_DOF_QUARTER_RINGS 3

/* Depth samples at or above this are the background, at infinity (Blender writes 1e10 for the sky;
 * api/codecs/image.h HP_IMAGE_DEPTH_BACKGROUND). NaN and +inf are background too. */
#define HP_DOF_DEPTH_BACKGROUND 1e9

/* Bokeh sprites. The sprite buffer starts with HP_BOKEH_CTL_WORDS control words, then the records.
 *   word 0  counter   appended by the setup pass (atomicAdd); may exceed the budget: it counts every
 *                     pixel that qualified, so the response can say the budget was reached
 *   1..3    dispatch  VkDispatchIndirectCommand for the splat pass: (min(counter, budget), 1, 1)
 *   4       wanted    the counter, copied by bokeh_args.glsl, which then resets the counter
 * A record is HP_BOKEH_SPRITE_WORDS floats: x, y (centre, frame pixels), signed CoC radius (pixels,
 * near < 0), depth (metres; 3e38 for the background), r, g, b (the pixel's scene-linear colour: its
 * whole energy), unused. */
#define HP_BOKEH_CTL_WORDS 8
#define HP_BOKEH_CTL_COUNTER 0
#define HP_BOKEH_CTL_DISPATCH 1
#define HP_BOKEH_CTL_WANTED 4
#define HP_BOKEH_SPRITE_WORDS 8
#define HP_BOKEH_MAX_SPRITES 65535
/* The splat pass: one workgroup per sprite. */
#define HP_BOKEH_SPLAT_WG 256

/* Summed-area table (dof.method = "sat", algorithms.md 7): 64-bit integer sums of the half-resolution
 * colour in fixed point, so a box sum is exact whatever the table's size (wrap-around arithmetic would
 * even keep it exact past 2^64). Each channel is quantized as trunc(v * 2^F) with
 * F = HP_SAT_FIXED_BITS - e, where 2^e bounds the frame's largest channel (the channel bound times its
 * largest luminance: Y >= w_B B for non-negative channels, w_B the working space's smallest weight; the
 * bound is HP_SAT_CHANNEL_BOUND, 14, for Rec.709 (w_B 0.0722) and P3 (0.0793), and 17 for BT.2020 (0.0593),
 * tone_state's sat_bound from shaders/exposure.comp), or 2^16 times its 99th percentile
 * when that is lower: a lone firefly does not take the others' precision, and is clipped to the bound
 * (2^HP_SAT_FIXED_BITS). A box of (2 * 32 + 1)^2 < 2^13 pixels of values below 2^HP_SAT_FIXED_BITS then
 * sums below 2^62. Values within 2^-25 of the bound keep every bit of their fp32 mantissa. */
#define HP_SAT_FIXED_BITS 49
/* A box of the same area as the CoC's disc: half-size sqrt(pi) / 2 times the radius, so a highlight
 * spreads to the same brightness whichever path blurs it. */
#define HP_SAT_BOX_SCALE 0.886226925
#define HP_SAT_CHANNEL_BOUND 14.0
#define HP_SAT_ROW_WG 256
#define HP_SAT_COL_X 32
#define HP_SAT_COL_SEGMENTS 16

#endif
