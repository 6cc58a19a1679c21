// libFuzzer target for the safetensors header parser (scripts/test.d/10-fuzz-safetensors builds
// and runs it). Any input must either parse into a header whose every tensor lies inside the
// file, in order and without overlap, or be refused with hymoe::Error; anything else (a crash,
// a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "hymoe/common/error.h"
#include "hymoe/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    hymoe::SafetensorsHeader h = hymoe::parse_safetensors_header(bytes, size, "fuzz.safetensors");
    if (h.data_offset + h.data_bytes != size) std::abort();
    uint64_t covered = 0;
    unsigned sum = 0;
    for (const hymoe::SafetensorsEntry& e : h.tensors) {
      if (e.begin != covered || e.end < e.begin || e.end > h.data_bytes) std::abort();
      if (e.nbytes() != static_cast<uint64_t>(hymoe::dtype_size(e.dtype)) *
                            static_cast<uint64_t>(hymoe::TensorSpec{e.name, e.dtype, e.shape}.numel())) {
        std::abort();
      }
      // Touch every byte the header claims: the sanitizer catches any read past the input.
      for (uint64_t i = e.begin; i < e.end; ++i) sum += data[h.data_offset + i];
      covered = e.end;
    }
    if (covered != h.data_bytes) std::abort();
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const hymoe::Error&) {
    // refused: the expected outcome for malformed input
  }
  return 0;
}
