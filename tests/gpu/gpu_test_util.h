// Shared by the GPU tests: skip cleanly where no GPU is present (CI machines), so a GPU build's test
// suite passes everywhere and only a device run exercises the kernels.
#pragma once

#include <gtest/gtest.h>

#include "flashport/device.h"

#define FP_SKIP_WITHOUT_GPU()                                                                           \
    do {                                                                                                \
        if (::flashport::gpu_device_count() == 0)                                                       \
            GTEST_SKIP() << "no GPU present: the " << ::flashport::gpu_backend_name()                   \
                         << " driver reports no device, so GPU kernels cannot run here";                \
    } while (0)
