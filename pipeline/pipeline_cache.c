/* The pipeline cache file.
 *
 * Layout: our own 48-byte header, then the driver's blob exactly as vkGetPipelineCacheData returned it.
 *     0  char[8]  magic "HDRPCACH"
 *     8  u32      format version (1)
 *    12  u32      vendorID    of the device that wrote it
 *    16  u32      deviceID
 *    20  u32      driverVersion
 *    24  u8[16]   pipelineCacheUUID
 *    40  u32      blob size in bytes
 *    44  u32      CRC-32 (zlib) of the blob
 * Why a header of our own when the blob starts with VkPipelineCacheHeaderVersionOne: drivers are meant to
 * reject foreign data themselves, but a truncated or bit-flipped file has crashed real drivers, and the
 * Vulkan header carries no checksum. So the file is checked here, completely, before the driver sees a
 * byte, and a foreign or damaged file is ignored with a warning: pipelines then compile from scratch.
 * zlib's crc32 is used rather than a hand-written hash: zlib is already linked through our codecs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/file.h"
#include "common/log.h"
#include "pipeline/pipeline_cache.h"
#include "pipeline/vk_result.h"

#define CACHE_MAGIC "HDRPCACH"
#define CACHE_VERSION 1u
#define CACHE_HEADER_SIZE 48u

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); } /* little-endian hosts only (x86-64, arm64) */
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static void make_header(const hp_cache_identity *id, const uint8_t *blob, size_t size, uint8_t h[CACHE_HEADER_SIZE])
{
    memset(h, 0, CACHE_HEADER_SIZE);
    memcpy(h, CACHE_MAGIC, 8);
    put_u32(h + 8, CACHE_VERSION);
    put_u32(h + 12, id->vendor_id);
    put_u32(h + 16, id->device_id);
    put_u32(h + 20, id->driver_version);
    memcpy(h + 24, id->uuid, VK_UUID_SIZE);
    put_u32(h + 40, (uint32_t)size);
    put_u32(h + 44, (uint32_t)crc32(crc32(0L, Z_NULL, 0), blob, (uInt)size));
}

/* Reads the whole file; returns NULL with errno set on failure. Caps the size: a cache is a few MiB. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *data = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= (256u << 20)) { /* no legitimate cache is this big */
                errno = EFBIG;
                free(data);
                fclose(f);
                return NULL;
            }
            cap = cap ? cap * 2 : 65536;
            uint8_t *grown = realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            data = grown;
        }
        size_t n = fread(data + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        errno = EIO;
        return NULL;
    }
    *size = len;
    return data;
}

/* Checks file contents against this device; returns the state and, when loaded, where the blob starts. */
static hp_cache_state check_file(const hp_cache_identity *id, const uint8_t *data, size_t size, const char **why)
{
    if (size < CACHE_HEADER_SIZE || memcmp(data, CACHE_MAGIC, 8) != 0) {
        *why = "not an hdrpostd pipeline cache (bad magic or too short)";
        return HP_CACHE_CORRUPT;
    }
    if (get_u32(data + 8) != CACHE_VERSION) {
        *why = "written by another hdrpostd cache format version";
        return HP_CACHE_FOREIGN;
    }
    uint32_t blob_size = get_u32(data + 40);
    if (blob_size != size - CACHE_HEADER_SIZE) {
        *why = "truncated or padded (blob size does not match the file)";
        return HP_CACHE_CORRUPT;
    }
    if (get_u32(data + 44) != (uint32_t)crc32(crc32(0L, Z_NULL, 0), data + CACHE_HEADER_SIZE, blob_size)) {
        *why = "checksum mismatch";
        return HP_CACHE_CORRUPT;
    }
    if (get_u32(data + 12) != id->vendor_id || get_u32(data + 16) != id->device_id ||
        get_u32(data + 20) != id->driver_version ||
        memcmp(data + 24, id->uuid, VK_UUID_SIZE) != 0) {
        *why = "written by another device or driver version";
        return HP_CACHE_FOREIGN;
    }
    /* The driver's own header (VkPipelineCacheHeaderVersionOne) must agree too. */
    const uint8_t *blob = data + CACHE_HEADER_SIZE;
    if (blob_size < 16 + VK_UUID_SIZE || get_u32(blob) < 16 + VK_UUID_SIZE ||
        get_u32(blob + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) {
        *why = "the driver's cache header is malformed";
        return HP_CACHE_CORRUPT;
    }
    if (get_u32(blob + 8) != id->vendor_id || get_u32(blob + 12) != id->device_id ||
        memcmp(blob + 16, id->uuid, VK_UUID_SIZE) != 0) {
        *why = "the driver's cache header names another device";
        return HP_CACHE_FOREIGN;
    }
    return HP_CACHE_LOADED;
}

const char *hp_cache_state_name(hp_cache_state state)
{
    switch (state) {
    case HP_CACHE_NONE: return "none";
    case HP_CACHE_ABSENT: return "absent";
    case HP_CACHE_LOADED: return "loaded";
    case HP_CACHE_FOREIGN: return "foreign";
    case HP_CACHE_CORRUPT: return "corrupt";
    }
    return "unknown";
}

hp_code hp_pipeline_cache_load(VkDevice device, const hp_cache_identity *id, const char *path,
                               VkPipelineCache *cache, hp_cache_state *state, size_t *bytes_loaded, hp_err *err)
{
    uint8_t *data = NULL;
    size_t size = 0;
    const uint8_t *blob = NULL;
    size_t blob_size = 0;

    *state = HP_CACHE_NONE;
    if (path) {
        data = read_file(path, &size);
        if (!data) {
            *state = HP_CACHE_ABSENT;
            if (errno == ENOENT)
                hp_info("pipeline cache: %s does not exist yet; pipelines compile from scratch", path);
            else
                hp_warn("pipeline cache: cannot read %s (%s); pipelines compile from scratch", path,
                        strerror(errno));
        } else {
            const char *why = "";
            *state = check_file(id, data, size, &why);
            if (*state == HP_CACHE_LOADED) {
                blob = data + CACHE_HEADER_SIZE;
                blob_size = size - CACHE_HEADER_SIZE;
                hp_info("pipeline cache: loaded %zu bytes from %s", blob_size, path);
            } else {
                hp_warn("pipeline cache: ignoring %s, %s: %s; pipelines compile from scratch", path,
                        hp_cache_state_name(*state), why);
            }
        }
    }

    VkPipelineCacheCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = blob_size,
        .pInitialData = blob,
    };
    VkResult res = vkCreatePipelineCache(device, &info, NULL, cache);
    free(data);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreatePipelineCache");
    *bytes_loaded = blob_size;
    return HP_OK;
}

hp_code hp_pipeline_cache_save(VkDevice device, const hp_cache_identity *id, const char *path,
                               VkPipelineCache cache, hp_err *err)
{
    if (!path || !cache)
        return HP_OK;
    size_t size = 0;
    VkResult res = vkGetPipelineCacheData(device, cache, &size, NULL);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkGetPipelineCacheData");
    uint8_t *blob = malloc(size ? size : 1);
    if (!blob)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    res = vkGetPipelineCacheData(device, cache, &size, blob);
    if (res != VK_SUCCESS) {
        free(blob);
        return hp_vk_fail(err, res, "vkGetPipelineCacheData");
    }
    uint8_t header[CACHE_HEADER_SIZE];
    make_header(id, blob, size, header);

    /* Written whole or not at all (common/file.h): a crash mid-write never leaves a half-written cache for the
     * next start, and the temporary name is unique, so that nobody can have planted a link at it. 0600: the
     * cache is the daemon's own. */
    hp_file_piece pieces[2] = {{header, sizeof(header)}, {blob, size}};
    int e = hp_write_file_atomically(path, pieces, 2, 0600);
    hp_code rc = HP_OK;
    if (e)
        rc = hp_fail(err, HP_ERR_IO, "cannot write pipeline cache %s: %s", path, strerror(e));
    else
        hp_info("pipeline cache: saved %zu bytes to %s", size, path);
    free(blob);
    return rc;
}
