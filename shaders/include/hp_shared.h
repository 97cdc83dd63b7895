/* Constants and buffer layouts shared by the GLSL shaders and the C code (host set-up and the CPU
 * reference in the tests), so the two paths cannot drift. Only #define lines and comments: this file is
 * included by both languages. In GLSL an unsuffixed literal is a float; in C it is a double, and C code
 * that must match the GPU bit for bit casts it to float (both round to nearest). */
#ifndef HP_SHARED_H
#define HP_SHARED_H

/* Relative luminance Y: the middle row of the full-precision Rec.709/D65 RGB->XYZ matrix
 * (docs/ALGORITHMS.md 2.1, docs/DECISIONS.md 2). Negative channels are clamped to 0 first. */
#define HP_LUMA_R 0.2126390059
#define HP_LUMA_G 0.7151686788
#define HP_LUMA_B 0.0721923154

/* Log-average delta: exp(mean(ln(delta + Y))), delta = 1e-5 as in Reinhard's own code
 * (pfstools tmo_reinhard02.cpp log_average(); DECISIONS.md 3). */
#define HP_LOG_AVG_DELTA 1e-5

/* Luminance histogram (DECISIONS.md 4, algorithms.md 1.4): 256 bins of log2 Y over [min, max].
 * Bin 0 holds Y < 2^min; bins 1..255 follow bin = uint(t * 254 + 1), t = clamp01((log2 Y - min) / range).
 * The GPU does not trust its own log2 at the bin edges: edge k (k = 1..255) is the float nearest to
 * 2^(min + (k - 1) * range / 254), computed once on the host in double, and a pixel belongs to the
 * highest bin whose edge is <= its fp32 luminance. That makes counts exact and identical on every device
 * and in the CPU reference. */
#define HP_HIST_BINS 256
#define HP_HIST_DEFAULT_MIN_LOG2 (-16.0)
#define HP_HIST_DEFAULT_MAX_LOG2 16.0

/* Reduction launch shape. HP_REDUCE_MAX_GROUPS bounds the partials that the last workgroup (single
 * dispatch) or the second pass (two-pass) combines: beyond it each thread loops over the frame
 * (grid-stride), which keeps the tail of the reduction short on 8K frames. */
#define HP_REDUCE_MAX_GROUPS 2048

/* Stats buffer (lum_stats), std430, byte offsets. Written by the reduction's last workgroup, read by
 * later stages on the GPU and copied back for the response.
 *   off  type   name
 *     0  uint   finite_count      pixels whose channels are all finite
 *     4  uint   nonfinite_count   pixels with a NaN or infinite channel (excluded, drawn black)
 *     8  float  min_y             over finite pixels; 0 when there are none
 *    12  float  max_y
 *    16  float  sum_log_hi        sum of ln(delta + Y) as an unevaluated float pair (hi + lo), lo the
 *    20  float  sum_log_lo          final combine's compensation; under 1e-4 of the log-average for any
 *                                   RGBA16F frame (DECISIONS 3; the bound: reduce.comp, combine_partials)
 *    24  float  sum_y_hi          sum of Y, likewise
 *    28  float  sum_y_lo
 *    32  float  log_average       exp(sum_log / finite_count), fp32, for later GPU stages
 *    36  float  mean_y
 *    40  float  hist_min_log2     the histogram range these counts were made with
 *    44  float  hist_max_log2
 *    48  uint   hist[256]         bin counts
 *  1072                           size */
#define HP_STATS_OFF_HIST 48
#define HP_STATS_SIZE 1072

/* Reduction scratch buffer (reduce_scratch), std430, byte offsets. The counter and the histogram
 * accumulators reset themselves: whoever combines the partials (the last workgroup, or the two-pass
 * second dispatch) moves the counts to lum_stats and leaves zeros, so a frame needs no clearing commands
 * (and no pipeline bubble for them) before its dispatch. hp_reduce_init_scratch() zeroes them once.
 *     0  uint   arrival_counter   single dispatch: workgroups that finished; the last resets it to 0
 *    16  float  hist_edges[256]   edge[k], k = 1..255 (edge[0] unused); uploaded when the range changes
 *  1040  uint   hist_accum[256]   every workgroup's counts, by global atomics
 *  2064  Partial partials[]       one per workgroup: sum_log2 (log2 units; the combine scales by ln 2),
 *                                 sum_y, min_y, max_y, nonfinite, 3 x pad */
#define HP_SCRATCH_OFF_EDGES 16
#define HP_SCRATCH_OFF_HIST 1040
#define HP_SCRATCH_OFF_PARTIALS 2064
#define HP_SCRATCH_PARTIAL_SIZE 32
/* Benchmark only (bench_reduce --timeline): after the largest grid's partials, each workgroup's phase
 * times, HP_REDUCE_TIMELINE_POINTS x (device clock, SM clock), 16 bytes each (shaders/reduce.comp). */
#define HP_SCRATCH_OFF_TIMELINE (HP_SCRATCH_OFF_PARTIALS + HP_REDUCE_MAX_GROUPS * HP_SCRATCH_PARTIAL_SIZE)
#define HP_REDUCE_TIMELINE_POINTS 11

/* --- Colour (algorithms.md 2.1, DECISIONS.md 5) -------------------------------------------------------
 * Linear Rec.709/sRGB primaries, D65 white. XYZ = M * RGB; rows given, full precision, so round trips
 * through Yxy are exact to fp32. */
#define HP_RGB2XYZ_00 0.4123907993
#define HP_RGB2XYZ_01 0.3575843394
#define HP_RGB2XYZ_02 0.1804807884
#define HP_RGB2XYZ_10 0.2126390059
#define HP_RGB2XYZ_11 0.7151686788
#define HP_RGB2XYZ_12 0.0721923154
#define HP_RGB2XYZ_20 0.0193308187
#define HP_RGB2XYZ_21 0.1191947798
#define HP_RGB2XYZ_22 0.9505321522
#define HP_XYZ2RGB_00 3.2409699419
#define HP_XYZ2RGB_01 (-1.5373831776)
#define HP_XYZ2RGB_02 (-0.4986107603)
#define HP_XYZ2RGB_10 (-0.9692436363)
#define HP_XYZ2RGB_11 1.8759675015
#define HP_XYZ2RGB_12 0.0415550574
#define HP_XYZ2RGB_20 0.0556300797
#define HP_XYZ2RGB_21 (-0.2039769589)
#define HP_XYZ2RGB_22 1.0569715142
/* Black (X + Y + Z = 0) takes the D65 chromaticity (colour-science, Lindbloom). */
#define HP_D65_X 0.3127
#define HP_D65_Y 0.3290

/* --- Tone operators (algorithms.md 3) -------------------------------------------------------------- */
/* Narkowicz ACES fit (3.4). */
#define HP_NARKOWICZ_A 2.51
#define HP_NARKOWICZ_B 0.03
#define HP_NARKOWICZ_C 2.43
#define HP_NARKOWICZ_D 0.59
#define HP_NARKOWICZ_E 0.14
/* Hill's ACES fit (3.5): input and output matrices, row-major, and RRTAndODTFit's constants. */
#define HP_ACES_IN_00 0.59719
#define HP_ACES_IN_01 0.35458
#define HP_ACES_IN_02 0.04823
#define HP_ACES_IN_10 0.07600
#define HP_ACES_IN_11 0.90834
#define HP_ACES_IN_12 0.01566
#define HP_ACES_IN_20 0.02840
#define HP_ACES_IN_21 0.13383
#define HP_ACES_IN_22 0.83777
#define HP_ACES_OUT_00 1.60475
#define HP_ACES_OUT_01 (-0.53108)
#define HP_ACES_OUT_02 (-0.07367)
#define HP_ACES_OUT_10 (-0.10208)
#define HP_ACES_OUT_11 1.10813
#define HP_ACES_OUT_12 (-0.00605)
#define HP_ACES_OUT_20 (-0.00327)
#define HP_ACES_OUT_21 (-0.07276)
#define HP_ACES_OUT_22 1.07602
#define HP_ACES_FIT_A 0.0245786
#define HP_ACES_FIT_B 0.000090537
#define HP_ACES_FIT_C 0.983729
#define HP_ACES_FIT_D 0.4329510
#define HP_ACES_FIT_E 0.238081
/* AgX (3.9), the exact Sobotka/EaryChow formation: Rec.709 -> Rec.2020 (derived from the primaries),
 * inset, log2 encoding over [minEV, maxEV], Jed Smith's tunable sigmoid, ^2.4, outset (the inverse of
 * SB2383's second inset, computed in double), Rec.2020 -> Rec.709. */
#define HP_709_TO_2020_00 0.6274038959
#define HP_709_TO_2020_01 0.3292830384
#define HP_709_TO_2020_02 0.0433130657
#define HP_709_TO_2020_10 0.0690972894
#define HP_709_TO_2020_11 0.9195403951
#define HP_709_TO_2020_12 0.0113623156
#define HP_709_TO_2020_20 0.0163914389
#define HP_709_TO_2020_21 0.0880133079
#define HP_709_TO_2020_22 0.8955952532
#define HP_2020_TO_709_00 1.6604910021
#define HP_2020_TO_709_01 (-0.5876411388)
#define HP_2020_TO_709_02 (-0.0728498633)
#define HP_2020_TO_709_10 (-0.1245504745)
#define HP_2020_TO_709_11 1.1328998971
#define HP_2020_TO_709_12 (-0.0083494226)
#define HP_2020_TO_709_20 (-0.0181507634)
#define HP_2020_TO_709_21 (-0.1005788980)
#define HP_2020_TO_709_22 1.1187296614
#define HP_AGX_INSET_00 0.856627153315983
#define HP_AGX_INSET_01 0.0951212405381588
#define HP_AGX_INSET_02 0.0482516061458583
#define HP_AGX_INSET_10 0.137318972929847
#define HP_AGX_INSET_11 0.761241990602591
#define HP_AGX_INSET_12 0.101439036467562
#define HP_AGX_INSET_20 0.11189821299995
#define HP_AGX_INSET_21 0.0767994186031903
#define HP_AGX_INSET_22 0.811302368396859
#define HP_AGX_OUTSET_00 1.127100581814437
#define HP_AGX_OUTSET_01 (-0.110606643096603)
#define HP_AGX_OUTSET_02 (-0.016493938717835)
#define HP_AGX_OUTSET_10 (-0.141329763498438)
#define HP_AGX_OUTSET_11 1.157823702216272
#define HP_AGX_OUTSET_12 (-0.016493938717834)
#define HP_AGX_OUTSET_20 (-0.141329763498438)
#define HP_AGX_OUTSET_21 (-0.110606643096603)
#define HP_AGX_OUTSET_22 1.251936406595040
#define HP_AGX_MIN_EV (-12.473931188332413) /* log2(0.18 * 2^-10) */
#define HP_AGX_MAX_EV 4.026068811667588     /* log2(0.18 * 2^6.5) */
#define HP_AGX_PIVOT_X 0.606060606060606    /* 10 / 16.5 */
#define HP_AGX_PIVOT_Y 0.489437089573878    /* 0.18^(1/2.4) */
#define HP_AGX_SLOPE 2.4
#define HP_AGX_POWER 1.5
#define HP_AGX_TOE_SCALE (-0.565675606654375)   /* -scale(1, 1, 1 - x_p, 1 - y_p, 1.5, 2.4) */
#define HP_AGX_SHOULDER_SCALE 0.715198286279044 /*  scale(1, 1, x_p, y_p, 1.5, 2.4) */
#define HP_AGX_FLOOR 1e-10                      /* keeps log2 finite (Godot uses 2e-10) */
/* Khronos PBR Neutral (3.10), the current reference revision. */
#define HP_NEUTRAL_F90 0.04
#define HP_NEUTRAL_KS 0.76
#define HP_NEUTRAL_KD 0.15

/* --- False colour (tonemap.operator false_color, issue 17) ------------------------------------------ *
 * hdrpostd's own palette, in the manner of the false-colour views of cinema cameras and Blender: one colour
 * per stop of exposed luminance from -6 to +6 around middle grey, display values (written as they are with
 * gamma.mode linear), blended linearly between whole stops; grey at 0 stops. R, G, B per stop, -6 first. */
#define HP_FALSE_COLOR_GREY 0.18
#define HP_FALSE_COLOR_MIN_STOPS (-6.0)
#define HP_FALSE_COLOR_STOPS 13
#define HP_FALSE_COLOR_RAMP \
    0.10, 0.00, 0.15, 0.30, 0.00, 0.50, 0.10, 0.10, 0.90, 0.00, 0.45, 1.00, 0.00, 0.75, 0.80, 0.10, 0.55, 0.35, \
    0.50, 0.50, 0.50, 0.45, 0.80, 0.20, 0.90, 0.90, 0.10, 1.00, 0.60, 0.00, 1.00, 0.15, 0.00, 1.00, 0.40, 0.80, \
    1.00, 1.00, 1.00

/* --- Dynamic local gamma (Kwon et al., algorithms.md 4, DECISIONS.md 7) ------------------------------ */
#define HP_KWON_A 0.444
#define HP_KWON_B 0.045
#define HP_KWON_C 0.6034

/* --- Tone stage buffers ----------------------------------------------------------------------------- *
 * tone_params (std430, written by the host with vkCmdUpdateBuffer at the start of each frame); every
 * field 4 bytes, in this order:
 *   uint operator, exposure_mode, key_auto, gamma_mode, dither, output_bits, lan_from_buffer, pad;
 *   float key, low_percent, high_percent, stops, adaptation, compensation_ev, white_point,
 *         drago_bias, drago_display_max, aces_input_scale,
 *         hable_a, hable_b, hable_c, hable_d, hable_e, hable_f, hable_white, hable_bias,
 *         lottes_a, lottes_d, lottes_b, lottes_c,
 *         uch_p, uch_a, uch_m, uch_l, uch_c, uch_b, uch_l0, uch_s0, uch_s1, uch_c2, uch_cp,
 *         drago_scene_log_average, drago_scene_max;
 *   uint  convert_input (1: the frame is not in the working space, issue 17); pad;
 *   float in_to_work[9] (row-major: the frame's RGB -> the working RGB, hp_input_color);
 *   float work_luma[3] (the working space's Y row: Rec.709's HP_LUMA_* for sRGB output); pad;
 *   float op_in[9], op_out[9] (row-major; read only under HP_TONE_FLAG_WIDE: the RGB operators' matrices
 *         composed with the working space's, pipeline/colorspace.h hp_working_space, packed by
 *         pipeline/tone.c hp_tone_pack_params)
 * tone_state (written by the exposure stage, read by the tone stage and copied back):
 *   float scale, key, adaptation, white, exposed_max, exposed_log_average, p01, p99, hist_mean,
 *         drago_norm, drago_inv_lwa, drago_inv_lsmax, drago_bias_exp;
 *   uint  translucent (0 from the exposure stage; the tone pass makes it 1 when any alpha it writes is
 *         below the output's maximum, so an opaque alpha need not be encoded); pad x 2;
 *   uint  convert_input, float in_to_work[9] (words HP_TONE_STATE_CONVERT..+9: tone_params' copies, made
 *         by the exposure stage for the stages that read the frame, shaders/include/input_color.glsl);
 *   float work_luma[3] (words HP_TONE_STATE_LUMA..+2: tone_params' copy, for the DOF stages and the input
 *         conversion's fold), sat_bound (HP_TONE_STATE_SAT_BOUND: hp_dof.h's channel bound for the working
 *         space); pad x 2 */
#define HP_TONE_PARAMS_WORDS 76
#define HP_TONE_PARAMS_WORK_LUMA 54
#define HP_TONE_STATE_WORDS 32
#define HP_TONE_STATE_TRANSLUCENT 13
#define HP_TONE_STATE_CONVERT 16
#define HP_TONE_STATE_LUMA 26
#define HP_TONE_STATE_SAT_BOUND 29
/* The tone pass converts the frame to the working space as it reads it (tone_state's convert_input, unless its input is
 * the DOF composite's image, converted already): a push-constant bit, so that a Rec.709 frame's pass pays
 * no memory read or branch per pixel for it (a 4K tone pass was 10-16% slower reading the flag per pixel). */
#define HP_TONE_FLAG_CONVERT 2u
/* The working space is not Rec.709 (output.colorspace display_p3 or rec2020): the RGB operators read their
 * matrices from tone_params. A push-constant bit, as above, so that sRGB output pays no read for them; the
 * working space's Y row itself is a push constant for every output (pipeline/tone.c). */
#define HP_TONE_FLAG_WIDE 4u

/* --- YUV 4:2:0 output (the tone pass's OUTPUT_KIND 3, for libwebp's lossy encoder) ------------------ *
 * Planes in this order, 8 bits a sample: Y (y_stride x y_rows), U and V (y_stride / 2 x y_rows / 2), then
 * with HP_TONE_FLAG_ALPHA an alpha plane laid out as Y. The shader stores whole 32-bit words, 4 samples
 * of Cb or Cr, so the stride is the width rounded up to 8 and the rows to 2; the samples past the frame
 * repeat its last column and row. Y'CbCr from the display-encoded R'G'B' in [0, 1]
 * by ITU-R BT.601's studio-range matrix (VP8, RFC 6386 section 2, uses BT.601's YCrCb): Y' in [16, 235],
 * Cb and Cr in [16, 240] around 128; Cb and Cr from the mean R'G'B' of each 2 x 2 block. */
#define HP_YUV_Y_STRIDE(w) ((((w) + 7u) / 8u) * 8u)
#define HP_YUV_Y_ROWS(h) ((((h) + 1u) / 2u) * 2u)
#define HP_YUV_PLANE_Y(w, h) (HP_YUV_Y_STRIDE(w) * HP_YUV_Y_ROWS(h))
#define HP_YUV_OFF_U(w, h) HP_YUV_PLANE_Y(w, h)
#define HP_YUV_OFF_V(w, h) (HP_YUV_PLANE_Y(w, h) + HP_YUV_PLANE_Y(w, h) / 4u)
#define HP_YUV_OFF_A(w, h) (HP_YUV_PLANE_Y(w, h) + HP_YUV_PLANE_Y(w, h) / 2u)
#define HP_YUV_BYTES(w, h, alpha) (HP_YUV_OFF_A(w, h) + ((alpha) ? HP_YUV_PLANE_Y(w, h) : 0u))
#define HP_BT601_YR 65.481
#define HP_BT601_YG 128.553
#define HP_BT601_YB 24.966
#define HP_BT601_UR (-37.797)
#define HP_BT601_UG (-74.203)
#define HP_BT601_UB 112.0
#define HP_BT601_VR 112.0
#define HP_BT601_VG (-93.786)
#define HP_BT601_VB (-18.214)
#define HP_TONE_FLAG_ALPHA 1u

/* --- EXR ZIP chunks inflated on the GPU (shaders/exr_zip.comp, pipeline/exr_zip_gpu.h) ------------------ *
 * The chunk table: HP_EXR_ZIP_CHUNK_WORDS words a chunk, host byte order; the host writes words 0-5 and
 * zeros in 6-15, the inflate pass writes 6-15.
 *   word  name             meaning
 *   0     packed_offset    the chunk's zlib stream (or stored bytes) in the packed buffer, in bytes
 *   1     packed_size      bytes; equal to unpacked_size: stored as is, no zlib and no transform
 *   2     unpacked_offset  where its bytes go in the unpacked buffer, a multiple of 4
 *   3     unpacked_size    bytes: lines x planes x width x 2
 *   4     first_line       the frame row of its first line
 *   5     lines
 *   6     status           HP_EXR_ZIP_OK or why not (below)
 *   7     adler            the Adler-32 at the stream's end, for finish_chunk to check
 *   8-13  where a run that ran out of its slice stopped, for the next dispatch to go on from: phase, bit
 *         position, block header's bit position, stored bytes left, last block and type, bytes written
 *   14-15 (unused) */
#define HP_EXR_ZIP_CHUNK_WORDS 16u
/* The serial inflate's code tables, a chunk's own words in the output buffer past the unpacked bytes
 * (shaders/include/exr_inflate.glsl's InflateTables: 2390 words used, 64-byte aligned a chunk). */
#define HP_EXR_ZIP_TABLE_WORDS 2400u
#define HP_EXR_ZIP_OK 0u
#define HP_EXR_ZIP_BAD_DATA 1u     /* not a valid zlib stream: header, block type, code or distance */
#define HP_EXR_ZIP_SHORT 2u        /* the final block came before unpacked_size bytes */
#define HP_EXR_ZIP_LONG 3u         /* the stream holds more than unpacked_size bytes */
#define HP_EXR_ZIP_CHECKSUM 4u     /* the Adler-32 after the final block differs (RFC 1950) */
#define HP_EXR_ZIP_TRUNCATED 5u    /* the stream runs past packed_size bytes */
#define HP_EXR_ZIP_UNFINISHED 6u   /* still going after the dispatches recorded (slices), or past the most work
                                    * a run may take (exr_zip.comp's MAX_WORK): the host decodes it on the CPU */

#endif
