/* What every GPU test shares: the device, with the Khronos validation layer on (any message it prints
 * fails the test), chosen by HDRPOST_TEST_DEVICE when set (an index or a name substring, as the daemon's
 * --device), the pipelines of the frame graph, and the closing check of the validation layer. */
#ifndef HP_GPU_TEST_H
#define HP_GPU_TEST_H

#include <stdlib.h>

#include "common/log.h"
#include "pipeline/frame_graph.h"
#include "tap.h"

/* Returns 0, or the exit status of a test that could not start (one failed point, never a skip). */
static inline int gpu_test_open(hp_gpu **gpu, hp_frame_graph **graph, hp_err *err)
{
    hp_log_set_level(HP_LOG_WARN);
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.validation = true;
    cfg.device = getenv("HDRPOST_TEST_DEVICE");
    if (hp_gpu_create(&cfg, gpu, err) != HP_OK)
        return tap_bail("create the Vulkan device: %s", err->message);
    if (graph && hp_frame_graph_create(*gpu, graph, err) != HP_OK)
        return tap_bail("create the pipelines: %s", err->message);
    return 0;
}

/* The last point of a GPU test, after every Vulkan object is destroyed (the layer reports leaks then). */
static inline void gpu_test_validation_clean(void)
{
    tap_ok(hp_gpu_validation_messages() == 0, "validation layer reported nothing (%u messages)",
           hp_gpu_validation_messages());
}

#endif
