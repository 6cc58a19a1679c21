// Shape, stride and alignment checks shared by every MLA prefill implementation (kInvalidArgument).
#pragma once

#include "hymoe/gpu/mla_prefill.h"

namespace hymoe::gpu {

// pointers = false: shapes and strides only (a "would this run?" question); null pointers pass
// (their alignment trivially holds).
void check_mla_prefill_params(const MlaPrefillParams& p, bool pointers = true);

}  // namespace hymoe::gpu
