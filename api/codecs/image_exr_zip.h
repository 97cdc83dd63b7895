/* EXR ZIP frames for the GPU's decoders (api/codecs/image_exr_zip.c, pipeline/exr_zip_gpu.h): which frames they can
 * take, their chunks gathered for the GPU's inflate, or inflated here for the split. */
#ifndef HP_IMAGE_EXR_ZIP_H
#define HP_IMAGE_EXR_ZIP_H

#include "api/codecs/image_decoder.h"
#include "pipeline/exr_zip_gpu.h"

/* EXR ZIP frames inflated on the GPU (pipeline/exr_zip_gpu.h). For a frame whose chunks the GPU can take
 * (scanlines, ZIP or ZIPS, every channel of the part unsampled, the colour and alpha half or float: any
 * channels beside them, any order, either line order), fills *frame and, with dst, writes
 * the chunk table (frame->table_bytes) at dst and the chunks' bytes as they lie in the file right after it,
 * then HP_EXR_ZIP_PACKED_PAD zero bytes: table_bytes + packed_bytes + HP_EXR_ZIP_PACKED_PAD bytes in all.
 * dst NULL: the sizes only. Each chunk's sizes are checked against the file and its lines, as the CPU's
 * decode checks them; its stream is not looked at (the GPU's status words tell). HP_ERR_UNUSABLE: not such
 * a frame (more than 65535 chunks, or 2 GiB of chunks, included), or dst_size too small: the caller decodes
 * it on the CPU; other codes as hp_image_decode's. The chunks'
 * offsets are the data window's: first_line 0 is the data window's first row. */
/* Why an EXR frame cannot take the GPU's decoders (issue 36): each a label of /metrics'
 * hdrpost_exr_cpu_frames_total. */
typedef enum hp_exr_gpu_unfit {
    HP_EXR_GPU_FITS = 0,
    HP_EXR_UNFIT_TILED,       /* tiles, not scanlines */
    HP_EXR_UNFIT_COMPRESSION, /* not ZIP or ZIPS (PIZ, DWA, ...; none) */
    HP_EXR_UNFIT_SUBSAMPLED,  /* a subsampled channel, or the library's own unpack asked for */
    HP_EXR_UNFIT_UINT,        /* a colour or alpha channel of 32-bit unsigned integers */
    HP_EXR_UNFIT_CHUNKS,      /* more chunks than a dispatch's workgroups */
    HP_EXR_UNFIT_CHANNELS,    /* no channel list the GPU can lay out */
    HP_EXR_GPU_UNFIT_COUNT
} hp_exr_gpu_unfit;
/* "tiled", "compression", ... */
const char *hp_exr_gpu_unfit_name(hp_exr_gpu_unfit why);

/* hp_image_zip_gather's test from the header alone (with opt->arrival it waits only for the header's
 * bytes): HP_OK with *frame's layout (its channels, slots and chunk count: not its sizes, which need the
 * chunks), HP_ERR_UNUSABLE (why, and *unfit: NULL or set then) when the GPU cannot take it. */
hp_code hp_image_zip_fits(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                          hp_exr_zip_frame *frame, hp_exr_gpu_unfit *unfit, hp_err *err);

/* The frame's chunk table and packed bytes written into dst (pipeline/exr_zip_gpu.h's input layout), *frame
 * their sizes; dst NULL: the sizes alone. With opt->arrival a body still arriving is gathered as it comes,
 * each chunk copied once its bytes are in (HP_ERR_INVALID_ARGUMENT when the body ends before them). */
hp_code hp_image_zip_gather(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                            void *dst, size_t dst_size, hp_exr_zip_frame *frame, hp_err *err);

/* The split: a frame hp_image_zip_gather takes, its chunks inflated here (libdeflate, as the CPU's decoder
 * does) and the rest left to the GPU (pipeline/exr_zip_gpu.h's hp_exr_zip_gpu_finish: EXR's predictor, the
 * byte split and the planes, 15% of the decoder's CPU a 4K frame with 16 clients, 30% of one thread's at
 * 8K). Fills *frame and writes at dst the chunk table (frame->table_bytes; each entry's status
 * HP_EXR_ZIP_OK and its stream's Adler-32 in word 7), then every chunk's inflated bytes at its
 * unpacked_offset (frame->unpacked_bytes in all). As the body arrives (opt->arrival), on opt->threads threads
 * shared with the frames decoding as hp_image_decode shares them.
 * HP_ERR_UNUSABLE: not such a frame, or dst_size too small; HP_ERR_INVALID_ARGUMENT: a damaged chunk, in
 * the CPU decoder's words (the caller may still decode it on the CPU for the exact verdict). */
hp_code hp_image_zip_inflate(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                             void *dst, size_t dst_size, hp_exr_zip_frame *frame, hp_err *err);

#endif
