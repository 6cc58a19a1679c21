#include "cudnn_api.h"

#include <dlfcn.h>

#include <mutex>

#include "hymoe/common/error.h"

namespace hymoe::gpu {
namespace {

struct Loaded {
  CudnnApi api;
  std::string why;
  bool ok = false;
};

template <typename F>
bool bind(void* lib, const char* name, F& fn, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) why = std::string("libcudnn_graph lacks ") + name;
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  // The library stays loaded for the life of the process (dlclose while plans exist would
  // unmap their code); it is never closed.
  void* lib = nullptr;
  for (const char* name : {"libcudnn_graph.so.9", "libcudnn.so.9"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) {
    const char* err = dlerror();
    l.why = std::string("cuDNN 9 not found (") + (err ? err : "dlopen failed") + ")";
    return l;
  }
  CudnnApi& a = l.api;
  l.ok = bind(lib, "cudnnGetVersion", a.GetVersion, l.why) &&
         bind(lib, "cudnnGetErrorString", a.GetErrorString, l.why) &&
         bind(lib, "cudnnGetLastErrorString", a.GetLastErrorString, l.why) &&
         bind(lib, "cudnnCreate", a.Create, l.why) && bind(lib, "cudnnDestroy", a.Destroy, l.why) &&
         bind(lib, "cudnnSetStream", a.SetStream, l.why) &&
         bind(lib, "cudnnBackendCreateDescriptor", a.BackendCreateDescriptor, l.why) &&
         bind(lib, "cudnnBackendDestroyDescriptor", a.BackendDestroyDescriptor, l.why) &&
         bind(lib, "cudnnBackendSetAttribute", a.BackendSetAttribute, l.why) &&
         bind(lib, "cudnnBackendGetAttribute", a.BackendGetAttribute, l.why) &&
         bind(lib, "cudnnBackendFinalize", a.BackendFinalize, l.why) &&
         bind(lib, "cudnnBackendExecute", a.BackendExecute, l.why);
  if (l.ok && a.GetVersion() / 10000 != CUDNN_MAJOR) {
    l.ok = false;
    l.why = "cuDNN " + std::to_string(a.GetVersion()) + " is not major version " +
            std::to_string(CUDNN_MAJOR);
  }
  return l;
}

}  // namespace

const CudnnApi* CudnnApi::get(std::string* why) {
  static const Loaded loaded = load();  // thread-safe one-time initialisation
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

void throw_cudnn_error(cudnnStatus_t status, const char* expression, std::source_location where) {
  const CudnnApi* api = CudnnApi::get();
  char last[512] = {0};
  if (api != nullptr) api->GetLastErrorString(last, sizeof(last));
  const ErrorKind kind = status == CUDNN_STATUS_NOT_SUPPORTED ? ErrorKind::kUnsupported
                         : status == CUDNN_STATUS_ALLOC_FAILED ? ErrorKind::kResourceExhausted
                         : status == CUDNN_STATUS_BAD_PARAM    ? ErrorKind::kInvalidArgument
                                                               : ErrorKind::kInternal;
  throw_error_at(where, kind, "cuDNN call failed: {}: {} ({}){}{}", expression,
                 api ? api->GetErrorString(status) : "?", static_cast<int>(status),
                 last[0] ? ": " : "", last);
}

CudnnDescriptor::CudnnDescriptor(const CudnnApi& api, cudnnBackendDescriptorType_t type)
    : api_(&api) {
  HYMOE_CUDNN_CHECK(api.BackendCreateDescriptor(type, &desc_));
}

CudnnDescriptor::~CudnnDescriptor() {
  if (desc_ != nullptr) api_->BackendDestroyDescriptor(desc_);
}

CudnnDescriptor::CudnnDescriptor(CudnnDescriptor&& other) noexcept
    : api_(other.api_), desc_(other.desc_) {
  other.desc_ = nullptr;
}

void CudnnDescriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                          int64_t count, const void* values) {
  HYMOE_CUDNN_CHECK(api_->BackendSetAttribute(desc_, name, type, count, values));
}

void CudnnDescriptor::set_int64(cudnnBackendAttributeName_t name,
                                const std::vector<int64_t>& values) {
  set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
}

void CudnnDescriptor::set_float(cudnnBackendAttributeName_t name, float value) {
  set(name, CUDNN_TYPE_FLOAT, 1, &value);
}

void CudnnDescriptor::set_bool(cudnnBackendAttributeName_t name, bool value) {
  set(name, CUDNN_TYPE_BOOLEAN, 1, &value);
}

void CudnnDescriptor::set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t value) {
  set(name, CUDNN_TYPE_DATA_TYPE, 1, &value);
}

void CudnnDescriptor::set_desc(cudnnBackendAttributeName_t name, const CudnnDescriptor& value) {
  cudnnBackendDescriptor_t d = value.get();
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
}

void CudnnDescriptor::set_descs(cudnnBackendAttributeName_t name,
                                const std::vector<cudnnBackendDescriptor_t>& v) {
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(v.size()), v.data());
}

cudnnStatus_t CudnnDescriptor::try_finalize() { return api_->BackendFinalize(desc_); }

void CudnnDescriptor::finalize() { HYMOE_CUDNN_CHECK(api_->BackendFinalize(desc_)); }

}  // namespace hymoe::gpu
