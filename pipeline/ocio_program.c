/* One OCIO transform on the GPU: the shader compiled at run time, its LUTs, its pipelines
 * (pipeline/ocio_program.h).
 *
 * Why glslang at run time: the shader's middle is OCIO's GLSL for the config's transform, known only once the
 * config is loaded. OCIO 2.1 writes GLSL 4.0 for OpenGL (its Vulkan language came with 2.5); glslang takes it
 * under Vulkan rules once each LUT sampler has an explicit binding, which bind_samplers() gives it. Debian 12's
 * shaderc (2023.2) would be the other choice; the build's glslc is shaderc, but its library lacks the relaxed
 * rules glslang's C interface has, which we keep on for loose OpenGL forms. */
#include "pipeline/ocio_program.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>

#include "common/log.h"
#include "pipeline/gpu_internal.h"

#include "ocio_display.glsl.inc" /* hp_ocio_display_glsl: shaders/ocio_display.comp with its includes */

#define MARKER "// @HP_OCIO_TRANSFORM@"

static pthread_once_t glslang_once = PTHREAD_ONCE_INIT;
static int glslang_ready;

static void glslang_start(void)
{
    glslang_ready = glslang_initialize_process();
}

hp_code hp_glsl_compile(const char *source, const char *name, uint32_t **spirv, size_t *bytes, hp_err *err)
{
    *spirv = NULL;
    *bytes = 0;
    pthread_once(&glslang_once, glslang_start);
    if (!glslang_ready)
        return hp_fail(err, HP_ERR_INTERNAL, "%s: glslang did not initialise", name);
    glslang_input_t in = {
        .language = GLSLANG_SOURCE_GLSL,
        .stage = GLSLANG_STAGE_COMPUTE,
        .client = GLSLANG_CLIENT_VULKAN,
        .client_version = GLSLANG_TARGET_VULKAN_1_2,
        .target_language = GLSLANG_TARGET_SPV,
        .target_language_version = GLSLANG_TARGET_SPV_1_5,
        .code = source,
        .default_version = 460,
        .default_profile = GLSLANG_NO_PROFILE,
        .messages = GLSLANG_MSG_DEFAULT_BIT | GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT,
        .resource = glslang_default_resource(),
    };
    glslang_shader_t *shader = glslang_shader_create(&in);
    glslang_program_t *program = NULL;
    hp_code code = HP_OK;
    if (!shader)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "%s: glslang made no shader", name);
    glslang_shader_set_options(shader, GLSLANG_SHADER_AUTO_MAP_LOCATIONS | GLSLANG_SHADER_VULKAN_RULES_RELAXED);
    if (!glslang_shader_preprocess(shader, &in) || !glslang_shader_parse(shader, &in)) {
        code = hp_fail(err, HP_ERR_UNUSABLE, "%s: glslang: %s", name, glslang_shader_get_info_log(shader));
        goto done;
    }
    program = glslang_program_create();
    glslang_program_add_shader(program, shader);
    if (!glslang_program_link(program, GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT)) {
        code = hp_fail(err, HP_ERR_UNUSABLE, "%s: glslang link: %s", name, glslang_program_get_info_log(program));
        goto done;
    }
    glslang_program_SPIRV_generate(program, GLSLANG_STAGE_COMPUTE);
    size_t words = glslang_program_SPIRV_get_size(program);
    *spirv = malloc(words * 4);
    if (!*spirv) {
        code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "%s: %zu words of SPIR-V", name, words);
        goto done;
    }
    glslang_program_SPIRV_get(program, *spirv);
    *bytes = words * 4;
done:
    if (program)
        glslang_program_delete(program);
    glslang_shader_delete(shader);
    return code;
}

/* --- OCIO's text --------------------------------------------------------------------------------------- */

/* text with `cut` bytes at `at` replaced by `with`: a new string; text is freed either way (NULL: out of
 * memory). */
static char *splice(char *text, size_t at, size_t cut, const char *with)
{
    size_t len = strlen(text), add = strlen(with);
    char *out = malloc(len - cut + add + 1);
    if (out) {
        memcpy(out, text, at);
        memcpy(out + at, with, add);
        memcpy(out + at + add, text + at + cut, len - at - cut + 1);
    }
    free(text);
    return out;
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Occurrences of the identifier `name` in text (not as part of a longer one). */
static size_t count_ident(const char *text, const char *name)
{
    size_t n = 0, len = strlen(name);
    for (const char *at = text; (at = strstr(at, name)); at += len)
        if ((at == text || !ident_char(at[-1])) && !ident_char(at[len]))
            n++;
    return n;
}

static size_t count_str(const char *text, const char *s)
{
    size_t n = 0;
    for (const char *at = text; (at = strstr(at, s)); at += strlen(s))
        n++;
    return n;
}

/* Whether a 3D LUT's reads can move from its sampler to a buffer (HP_OCIO_LUT3D_BUFFER_*): nearest (OCIO's
 * tetrahedral interpolation from fetches; a trilinear LUT needs the sampler's filter), declared once, and
 * named nowhere but in `texture(NAME, ` calls. */
static bool lut_bufferable(const char *text, const hp_ocio_lut *l)
{
    if (l->dims != 3 || l->linear || l->channels != 3 || l->height != l->width || l->depth != l->width)
        return false; /* buffer_lut indexes a cube */
    char decl[HP_OCIO_NAME_MAX + 32], call[HP_OCIO_NAME_MAX + 16];
    snprintf(decl, sizeof decl, "uniform sampler3D %s;", l->sampler);
    snprintf(call, sizeof call, "texture(%s, ", l->sampler);
    return count_str(text, decl) == 1 && count_ident(text, l->sampler) == 1 + count_str(text, call);
}

/* A 3D LUT read from a buffer: its declaration becomes a function of OCIO's normalized coordinate that reads
 * the texel the sampler would (nearest, clamped to the edge: floor(u * edge) clamped to [0, edge - 1], in integers
 * so that a NaN coordinate, whose conversion GLSL leaves undefined, still reads inside the buffer; OCIO
 * asks for texel centres, half a texel from any boundary, so rounding cannot move it), and each
 * `texture(NAME, ` becomes `NAME_fetch(`. The buffer's address is the push constants' luts[slot], so that the
 * SPIR-V is the same for the same transform in every daemon (the pipeline cache finds it). Texels x fastest, as
 * an image's upload lays them. The reference is a variable of its own: Debian 12's glslang (12.0) crashes
 * folding `.v` on a reference constructed in the expression. */
static char *buffer_lut(char *text, const hp_ocio_lut *l, uint32_t slot)
{
    char decl[HP_OCIO_NAME_MAX + 32], call[HP_OCIO_NAME_MAX + 16], fetch[HP_OCIO_NAME_MAX + 16], helper[4096];
    snprintf(decl, sizeof decl, "uniform sampler3D %s;", l->sampler);
    snprintf(call, sizeof call, "texture(%s, ", l->sampler);
    snprintf(fetch, sizeof fetch, "%s_fetch(", l->sampler);
    uint32_t e = l->width;
    snprintf(helper, sizeof helper,
             "layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer %s_texels { vec4 v[]; };\n"
             "vec4 %s_fetch(vec3 u)\n"
             "{\n"
             "  ivec3 i = clamp(ivec3(floor(u * %u.0)), ivec3(0), ivec3(%u));\n"
             "  %s_texels lut = %s_texels(pc.luts[%u]);\n"
             "  return lut.v[(i.z * %u + i.y) * %u + i.x];\n"
             "}\n",
             l->sampler, l->sampler, e, e - 1, l->sampler, l->sampler, slot, e, e);
    char *at = strstr(text, decl);
    text = splice(text, (size_t)(at - text), strlen(decl), helper);
    while (text && (at = strstr(text, call)))
        text = splice(text, (size_t)(at - text), strlen(call), fetch);
    return text;
}

/* OCIO's text with `layout(set = 0, binding = i)` before the declaration of each LUT's sampler, in the
 * order of the LUTs (the descriptor set's order; a LUT in a buffer has no binding). OCIO 2.1 declares each as
 * `uniform samplerND name;`. A nearest 3D LUT in a buffer becomes a function of its own (buffer_lut). */
static char *bind_samplers(const hp_ocio_shader *s, const hp_ocio_program *p, hp_err *err)
{
    char *text = strdup(s->text);
    uint32_t slot = 0;
    for (size_t i = 0; text && i < s->lut_count; i++) {
        if (p->luts[i].buffer.buffer) {
            text = buffer_lut(text, &s->luts[i], slot++);
            continue;
        }
        char decl[HP_OCIO_NAME_MAX + 32];
        snprintf(decl, sizeof decl, "uniform sampler%uD %s;", s->luts[i].dims, s->luts[i].sampler);
        char *at = strstr(text, decl);
        if (!at || strstr(at + 1, decl)) {
            free(text);
            hp_fail(err, HP_ERR_INTERNAL, "ocio shader: the declaration \"%s\" is not in OCIO's text once", decl);
            return NULL;
        }
        /* The text before the declaration, the layout, then the declaration and the rest. */
        size_t n = strlen(text) + 48;
        char *joined = malloc(n);
        if (joined)
            snprintf(joined, n, "%.*slayout(set = 0, binding = %zu) %s", (int)(at - text), text, i, at);
        free(text);
        text = joined;
    }
    if (!text)
        hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio shader: %zu bytes", strlen(s->text));
    return text;
}

/* shaders/ocio_display.comp with OCIO's transform where its marker is. */
static char *whole_source(const hp_ocio_shader *s, const hp_ocio_program *p, hp_err *err)
{
    char *transform = bind_samplers(s, p, err);
    if (!transform)
        return NULL;
    const char *marker = strstr(hp_ocio_display_glsl, MARKER);
    size_t head = (size_t)(marker - hp_ocio_display_glsl), tail_at = head + strlen(MARKER);
    size_t n = strlen(hp_ocio_display_glsl) + strlen(transform) + 2;
    char *src = malloc(n);
    if (src)
        snprintf(src, n, "%.*s%s\n%s", (int)head, hp_ocio_display_glsl, transform, hp_ocio_display_glsl + tail_at);
    else
        hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio shader: %zu bytes", n);
    free(transform);
    return src;
}

/* --- LUTs ------------------------------------------------------------------------------------------- */

/* RGB LUTs become RGBA32F: three-channel formats are seldom sampleable, and a 16-byte texel is one aligned load
 * from a buffer. Full floats as OCIO gives them: a half LUT would cost 16-bit outputs their last bits (measured:
 * Filmic's 3D LUT in halves put 16-bit output 31 levels from OCIO's CPU processor, docs/BENCHMARKS.md). */
static VkFormat lut_format(const hp_ocio_lut *l)
{
    return l->channels == 1 ? VK_FORMAT_R32_SFLOAT : VK_FORMAT_R32G32B32A32_SFLOAT;
}

static size_t lut_texels(const hp_ocio_lut *l)
{
    return (size_t)l->width * l->height * l->depth;
}

static size_t lut_bytes(const hp_ocio_lut *l, const hp_ocio_image *img)
{
    size_t texel = img->format == VK_FORMAT_R32_SFLOAT ? 4 : 16;
    return lut_texels(l) * texel;
}

static hp_code image_create(hp_gpu *gpu, const hp_ocio_lut *l, hp_ocio_image *img, hp_err *err)
{
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(gpu->physical, img->format, &fp);
    VkFormatFeatureFlags need = VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT |
                                (l->linear ? VK_FORMAT_FEATURE_SAMPLED_IMAGE_FILTER_LINEAR_BIT : 0);
    if ((fp.optimalTilingFeatures & need) != need)
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "ocio LUT %s: the device cannot sample %s 32-bit float images%s",
                       l->sampler, l->channels == 1 ? "R" : "RGBA", l->linear ? " with linear filtering" : "");
    VkImageType type = l->dims == 1 ? VK_IMAGE_TYPE_1D : l->dims == 2 ? VK_IMAGE_TYPE_2D : VK_IMAGE_TYPE_3D;
    VkImageCreateInfo ii = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
        .imageType = type,
        .format = img->format,
        .extent = {l->width, l->height, l->depth},
        .mipLevels = 1,
        .arrayLayers = 1,
        .samples = VK_SAMPLE_COUNT_1_BIT,
        .tiling = VK_IMAGE_TILING_OPTIMAL,
        .usage = VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
    };
    VkResult res = vkCreateImage(gpu->device, &ii, NULL, &img->image);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateImage (ocio LUT)");
    VkMemoryRequirements req;
    vkGetImageMemoryRequirements(gpu->device, img->image, &req);
    int type_index = hp_gpu_memory_type(gpu, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (type_index < 0)
        type_index = hp_gpu_memory_type(gpu, req.memoryTypeBits, 0, 0);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)type_index};
    if ((res = vkAllocateMemory(gpu->device, &ai, NULL, &img->memory)) != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkAllocateMemory (ocio LUT)");
    if ((res = vkBindImageMemory(gpu->device, img->image, img->memory, 0)) != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkBindImageMemory (ocio LUT)");
    VkImageViewCreateInfo vi = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO,
        .image = img->image,
        .viewType = l->dims == 1 ? VK_IMAGE_VIEW_TYPE_1D : l->dims == 2 ? VK_IMAGE_VIEW_TYPE_2D : VK_IMAGE_VIEW_TYPE_3D,
        .format = img->format,
        .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1},
    };
    if ((res = vkCreateImageView(gpu->device, &vi, NULL, &img->view)) != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateImageView (ocio LUT)");
    /* The filter OCIO asks for; where its shader interpolates itself (tetrahedral 3D LUTs, its 1D LUTs'
     * half-domain lookups) it asks for nearest. Clamped at the edges, as OCIO's OpenGL helper sets them. */
    VkFilter filter = l->linear ? VK_FILTER_LINEAR : VK_FILTER_NEAREST;
    VkSamplerCreateInfo si = {
        .sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
        .magFilter = filter,
        .minFilter = filter,
        .mipmapMode = VK_SAMPLER_MIPMAP_MODE_NEAREST,
        .addressModeU = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
        .addressModeV = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
        .addressModeW = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
        .maxLod = 0.0f,
    };
    if ((res = vkCreateSampler(gpu->device, &si, NULL, &img->sampler)) != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateSampler (ocio LUT)");
    return HP_OK;
}

static void image_destroy(hp_gpu *gpu, hp_ocio_image *img)
{
    if (img->buffer.buffer)
        hp_buffer_destroy(gpu, &img->buffer);
    if (img->sampler)
        vkDestroySampler(gpu->device, img->sampler, NULL);
    if (img->view)
        vkDestroyImageView(gpu->device, img->view, NULL);
    if (img->image)
        vkDestroyImage(gpu->device, img->image, NULL);
    if (img->memory)
        vkFreeMemory(gpu->device, img->memory, NULL);
    memset(img, 0, sizeof *img);
}

/* The LUTs' texels into the staging buffer, RGB padded to RGBA. */
static void stage_texels(const hp_ocio_shader *s, const hp_ocio_program *p, uint8_t *at)
{
    for (size_t i = 0; i < s->lut_count; i++) {
        const hp_ocio_lut *l = &s->luts[i];
        size_t n = lut_texels(l);
        if (l->channels == 1) {
            memcpy(at, l->values, n * 4);
        } else {
            float *dst = (float *)(void *)at;
            for (size_t t = 0; t < n; t++) {
                dst[4 * t + 0] = l->values[3 * t + 0];
                dst[4 * t + 1] = l->values[3 * t + 1];
                dst[4 * t + 2] = l->values[3 * t + 2];
                dst[4 * t + 3] = 1.0f;
            }
        }
        at += lut_bytes(l, &p->luts[i]);
    }
}

static void image_barrier(VkCommandBuffer cmd, VkImage image, VkImageLayout from, VkImageLayout to,
                          VkAccessFlags src, VkAccessFlags dst, VkPipelineStageFlags src_stage,
                          VkPipelineStageFlags dst_stage)
{
    VkImageMemoryBarrier b = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
        .srcAccessMask = src,
        .dstAccessMask = dst,
        .oldLayout = from,
        .newLayout = to,
        .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .image = image,
        .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1},
    };
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, NULL, 0, NULL, 1, &b);
}

/* Records the copies of every LUT from the staging buffer, each image left ready to be sampled. */
static void record_upload(VkCommandBuffer cmd, const hp_ocio_shader *s, const hp_ocio_program *p, VkBuffer staging)
{
    VkDeviceSize offset = 0;
    bool buffers = false;
    for (size_t i = 0; i < s->lut_count; i++) {
        const hp_ocio_lut *l = &s->luts[i];
        if (p->luts[i].buffer.buffer) {
            VkBufferCopy copy = {.srcOffset = offset, .size = lut_bytes(l, &p->luts[i])};
            vkCmdCopyBuffer(cmd, staging, p->luts[i].buffer.buffer, 1, &copy);
            offset += copy.size;
            buffers = true;
            continue;
        }
        VkImage image = p->luts[i].image;
        image_barrier(cmd, image, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 0,
                      VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
        VkBufferImageCopy copy = {.bufferOffset = offset,
                                  .imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                                  .imageExtent = {l->width, l->height, l->depth}};
        vkCmdCopyBufferToImage(cmd, staging, image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &copy);
        image_barrier(cmd, image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL,
                      VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
        offset += lut_bytes(l, &p->luts[i]);
    }
    if (buffers) {
        VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &b, 0,
                             NULL, 0, NULL);
    }
}

/* One command buffer of its own on the compute queue, waited for: a program is made once per transform. */
static hp_code upload_luts(hp_gpu *gpu, const hp_ocio_shader *s, const hp_ocio_program *p, hp_err *err)
{
    size_t total = 0;
    for (size_t i = 0; i < s->lut_count; i++)
        total += lut_bytes(&s->luts[i], &p->luts[i]);
    hp_buffer staging;
    hp_code code = hp_buffer_create(gpu, total, HP_MEM_UPLOAD, "ocio LUT staging", &staging, err);
    if (code != HP_OK)
        return code;
    stage_texels(s, p, staging.mapped);
    hp_buffer_flush(gpu, &staging);
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .queueFamilyIndex = gpu->compute_family};
    VkResult res = vkCreateCommandPool(gpu->device, &pi, NULL, &pool);
    if (res == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
        res = vkAllocateCommandBuffers(gpu->device, &ai, &cmd);
    }
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (res == VK_SUCCESS)
        res = vkCreateFence(gpu->device, &fi, NULL, &fence);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (res == VK_SUCCESS)
        res = vkBeginCommandBuffer(cmd, &bi);
    if (res == VK_SUCCESS) {
        record_upload(cmd, s, p, staging.buffer);
        res = vkEndCommandBuffer(cmd);
    }
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    if (res == VK_SUCCESS)
        res = hp_gpu_submit(gpu, &submit, fence);
    if (res == VK_SUCCESS)
        res = vkWaitForFences(gpu->device, 1, &fence, VK_TRUE, UINT64_MAX);
    if (res != VK_SUCCESS)
        code = hp_vk_fail(err, res, "uploading the OCIO LUTs");
    if (fence)
        vkDestroyFence(gpu->device, fence, NULL);
    if (pool)
        vkDestroyCommandPool(gpu->device, pool, NULL);
    hp_buffer_destroy(gpu, &staging);
    return code;
}

/* The set layout, pool and set of the LUTs' combined image samplers, binding i for LUT i (none for a LUT in a
 * buffer). */
static hp_code make_descriptors(hp_gpu *gpu, hp_ocio_program *p, hp_err *err)
{
    VkDescriptorSetLayoutBinding b[HP_OCIO_MAX_LUTS];
    VkDescriptorImageInfo info[HP_OCIO_MAX_LUTS];
    VkWriteDescriptorSet w[HP_OCIO_MAX_LUTS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->lut_count; i++) {
        if (p->luts[i].buffer.buffer)
            continue;
        b[n] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                                              .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
        info[n] = (VkDescriptorImageInfo){p->luts[i].sampler, p->luts[i].view, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL};
        w[n] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                                      .pImageInfo = &info[n]};
        n++;
    }
    if (n == 0)
        return HP_OK;
    VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = n, .pBindings = b};
    VkResult res = vkCreateDescriptorSetLayout(gpu->device, &li, NULL, &p->set_layout);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateDescriptorSetLayout (ocio)");
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, n};
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                     .poolSizeCount = 1, .pPoolSizes = &size};
    if ((res = vkCreateDescriptorPool(gpu->device, &pi, NULL, &p->pool)) != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateDescriptorPool (ocio)");
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = p->pool, .descriptorSetCount = 1, .pSetLayouts = &p->set_layout};
    if ((res = vkAllocateDescriptorSets(gpu->device, &ai, &p->set)) != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkAllocateDescriptorSets (ocio)");
    for (uint32_t k = 0; k < n; k++)
        w[k].dstSet = p->set;
    vkUpdateDescriptorSets(gpu->device, n, w, 0, NULL);
    return HP_OK;
}

static double ms_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* Each LUT as an image, or a buffer where OCIO's text lets its reads move (lut_bufferable; at most
 * HP_OCIO_MAX_BUFFER_LUTS, the push constants' slots), uploaded: before the shader's text is finished, which
 * gives each buffer its slot. A nearest 3D LUT read from a buffer goes through the L1 rather than the texture
 * units, which fetch 128-bit texels at a quarter of their rate: Blender's Filmic pass took 0.194 ms with its
 * 65^3 LUT as an image and 0.115 ms as a buffer on the H200, the same values (docs/BENCHMARKS.md). */
static hp_code make_luts(hp_gpu *gpu, const hp_ocio_shader *s, const hp_ocio_program_options *o, hp_ocio_program *p,
                         hp_err *err)
{
    if (s->lut_count > HP_OCIO_MAX_LUTS)
        return hp_fail(err, HP_ERR_UNUSABLE, "the OCIO transform needs %zu LUTs; hdrpostd binds at most %u",
                       s->lut_count, HP_OCIO_MAX_LUTS);
    p->lut_count = (uint32_t)s->lut_count;
    for (uint32_t i = 0; i < p->lut_count; i++) {
        const hp_ocio_lut *l = &s->luts[i];
        hp_ocio_image *img = &p->luts[i];
        bool in_buffer = !o->lut3d_images && p->buffer_luts < HP_OCIO_MAX_BUFFER_LUTS && lut_bufferable(s->text, l);
        img->format = lut_format(l);
        hp_code code = in_buffer
                           ? hp_buffer_create(gpu, lut_bytes(l, img), HP_MEM_DEVICE, "ocio LUT", &img->buffer, err)
                           : image_create(gpu, l, img, err);
        if (code != HP_OK)
            return code;
        p->buffer_luts += in_buffer;
    }
    if (p->lut_count == 0)
        return HP_OK;
    hp_code code = upload_luts(gpu, s, p, err);
    return code != HP_OK ? code : make_descriptors(gpu, p, err);
}

hp_code hp_ocio_program_make(hp_gpu *gpu, const hp_ocio_config *config, const hp_ocio_view_key *key,
                             const hp_ocio_program_options *options, hp_ocio_program *out, hp_err *err)
{
    static const hp_ocio_program_options today = {0};
    const hp_ocio_program_options *o = options ? options : &today;
    memset(out, 0, sizeof *out);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hp_ocio_shader *s = NULL;
    hp_code code = hp_ocio_shader_make(config, key, &s, err);
    if (code != HP_OK)
        return code;
    code = make_luts(gpu, s, o, out, err);
    char *src = NULL;
    if (code == HP_OK && !(src = whole_source(s, out, err)))
        code = err ? err->code : HP_ERR_INTERNAL;
    if (code == HP_OK)
        code = hp_glsl_compile(src, "ocio_display", &out->spirv, &out->spirv_size, err);
    free(src);
    hp_ocio_shader_free(s);
    if (code != HP_OK) {
        hp_ocio_program_destroy(gpu, out);
        return code;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->compile_ms = ms_between(&t0, &t1);
    return HP_OK;
}

hp_code hp_ocio_program_pipeline(hp_gpu *gpu, hp_ocio_program *p, hp_pixel_format format, hp_tone_output kind,
                                 const hp_compute **out, hp_err *err)
{
    if (kind != HP_TONE_OUT_RGBA8 && kind != HP_TONE_OUT_RGBA16)
        return hp_fail(err, HP_ERR_INTERNAL, "the OCIO stage writes RGBA8 or RGBA16, not kind %d", (int)kind);
    hp_compute *c = &p->pipelines[format == HP_PIXEL_RGBA16F ? 1 : 0][kind == HP_TONE_OUT_RGBA16 ? 1 : 0];
    if (!c->pipeline) {
        uint32_t spec[2] = {format == HP_PIXEL_RGBA16F, (uint32_t)kind};
        hp_compute_desc d = {.name = "ocio_display", .spirv = p->spirv, .spirv_size = p->spirv_size,
                             .push_constant_size = HP_OCIO_PUSH_BYTES, .spec_values = spec, .spec_count = 2,
                             .set_layout = p->set_layout};
        hp_code code = hp_compute_create(gpu, &d, c, err);
        if (code != HP_OK)
            return code;
    }
    *out = c;
    return HP_OK;
}

void hp_ocio_program_destroy(hp_gpu *gpu, hp_ocio_program *p)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (p->pipelines[i][j].pipeline || p->pipelines[i][j].layout)
                hp_compute_destroy(gpu, &p->pipelines[i][j]);
    if (p->pool)
        vkDestroyDescriptorPool(gpu->device, p->pool, NULL);
    if (p->set_layout)
        vkDestroyDescriptorSetLayout(gpu->device, p->set_layout, NULL);
    for (uint32_t i = 0; i < HP_OCIO_MAX_LUTS; i++)
        image_destroy(gpu, &p->luts[i]);
    free(p->spirv);
    memset(p, 0, sizeof *p);
}
