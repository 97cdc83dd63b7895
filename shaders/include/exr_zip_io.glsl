// EXR ZIP decoding on the GPU: what every pass of exr_zip.comp and exr_inflate_wide.comp reads and writes
// (pipeline/exr_zip_gpu.c binds it).
#include "hp_shared.h"
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RwWords { uint v[]; };

// Push constants; pipeline/exr_zip_gpu.c's struct exr_zip_push mirrors it.
//   offset  field            meaning
//   0       packed           the chunks' bytes as read from the file, 16 bytes of padding after the last
//   8       chunks           HP_EXR_ZIP_CHUNK_WORDS words per chunk (hp_shared.h)
//   16      unpacked         each chunk's bytes (the inflate pass writes them, finish_chunk undoes the predictor)
//   24      image            RGBA16F or RGBA32F (float_image), width x height pixels (finish_chunk writes it)
//   32      chunk_count
//   36      width            pixels
//   40      height           rows
//   44      pixel_bytes      a pixel's bytes of every channel: a line is width times this
//   48      lines_per_chunk  16 (ZIP) or 1 (ZIPS)
//   52      float_image      0: RGBA16F, the file's half bits; 1: RGBA32F
//   56      slot[4]          R, G, B, A: the bytes before the slot's channel in a pixel's | its type << 16
//                            (SLOT_ABSENT, SLOT_HALF, SLOT_FLOAT: exr_zip_gpu.h's HP_EXR_ZIP_*)
//   72      tables           the serial inflate's code tables, HP_EXR_ZIP_TABLE_WORDS words a chunk
layout(push_constant, std430) uniform Push {
    uvec2 packed;
    uvec2 chunks;
    uvec2 unpacked;
    uvec2 image;
    uint chunk_count;
    uint width;
    uint height;
    uint pixel_bytes;
    uint lines_per_chunk;
    uint float_image;
    uint slot[4];
    uvec2 tables;
} pc;
#define SLOT_ABSENT 0u
#define SLOT_HALF 1u
#define SLOT_FLOAT 2u

// The image's words a pixel.
uint image_words() { return pc.float_image != 0u ? 4u : 2u; }

layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer CoherentWords { uint v[]; };

