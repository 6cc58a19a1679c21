// cuDNN's backend (graph) API, loaded at run time from libcudnn_graph.so.9: hymoe builds and runs
// on machines without cuDNN, and uses it where it is installed. Private to hymoe_gpu.
//   CudnnApi::get()       the process-wide function table, or nullptr with the reason it is absent
//   CudnnDescriptor       RAII backend descriptor (create / set attributes / finalize / destroy)
//   HYMOE_CUDNN_CHECK     turns a failed status into hymoe::Error with cuDNN's own last message
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace hymoe::gpu {

struct CudnnApi {
  decltype(&::cudnnGetVersion) GetVersion = nullptr;
  decltype(&::cudnnGetErrorString) GetErrorString = nullptr;
  decltype(&::cudnnGetLastErrorString) GetLastErrorString = nullptr;
  decltype(&::cudnnCreate) Create = nullptr;
  decltype(&::cudnnDestroy) Destroy = nullptr;
  decltype(&::cudnnSetStream) SetStream = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) BackendCreateDescriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) BackendDestroyDescriptor = nullptr;
  decltype(&::cudnnBackendSetAttribute) BackendSetAttribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) BackendGetAttribute = nullptr;
  decltype(&::cudnnBackendFinalize) BackendFinalize = nullptr;
  decltype(&::cudnnBackendExecute) BackendExecute = nullptr;

  // Loads the library once (thread-safe); nullptr when it is missing or too old (a 9.x with the
  // backend API), with the reason in *why.
  static const CudnnApi* get(std::string* why = nullptr);
};

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* expression,
                                    std::source_location where);

#define HYMOE_CUDNN_CHECK(expr)                                                          \
  do {                                                                                   \
    const cudnnStatus_t hymoe_cudnn_status_ = (expr);                                    \
    if (hymoe_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                      \
      ::hymoe::gpu::throw_cudnn_error(hymoe_cudnn_status_, #expr,                        \
                                      std::source_location::current());                  \
    }                                                                                    \
  } while (0)

// One backend descriptor. set() takes the attribute's element type and values; finalize() checks.
class CudnnDescriptor {
 public:
  CudnnDescriptor(const CudnnApi& api, cudnnBackendDescriptorType_t type);
  ~CudnnDescriptor();
  CudnnDescriptor(CudnnDescriptor&& other) noexcept;
  CudnnDescriptor& operator=(CudnnDescriptor&&) = delete;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  // Raw setter; the typed ones below cover what hymoe uses.
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values);
  void set_int64(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values);
  void set_float(cudnnBackendAttributeName_t name, float value);
  void set_bool(cudnnBackendAttributeName_t name, bool value);
  void set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t value);
  void set_desc(cudnnBackendAttributeName_t name, const CudnnDescriptor& value);
  void set_descs(cudnnBackendAttributeName_t name, const std::vector<cudnnBackendDescriptor_t>& v);
  // Status instead of a throw: engines that do not take a graph fail here, which is not an error.
  cudnnStatus_t try_finalize();
  void finalize();

 private:
  const CudnnApi* api_;
  cudnnBackendDescriptor_t desc_ = nullptr;
};

}  // namespace hymoe::gpu
