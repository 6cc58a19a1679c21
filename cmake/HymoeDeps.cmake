# System dependencies, all from Debian 12 apt (scripts/install-deps installs them).
# On machines that lack a header-only or static dependency (the GPU machine has no httplib.h,
# pcre2.h or CLI11), point HYMOE_EXTRA_PREFIX at a folder with include/ and lib/ holding them.
set(HYMOE_EXTRA_PREFIX "" CACHE PATH "Extra prefix searched for httplib.h, CLI11, PCRE2")
if(HYMOE_EXTRA_PREFIX)
  list(PREPEND CMAKE_PREFIX_PATH ${HYMOE_EXTRA_PREFIX})
endif()

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(SYSTEMD IMPORTED_TARGET libsystemd)
find_library(NUMA_LIBRARY numa REQUIRED)

# CLI11 (header-only): package config where installed, else a plain include path.
find_package(CLI11 QUIET CONFIG)
if(NOT TARGET CLI11::CLI11)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp HINTS ${HYMOE_EXTRA_PREFIX}/cli11/include REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()

# cpp-httplib: Debian builds it as a library (libcpp-httplib.so, with OpenSSL and zlib, and its
# header then declares what the library defines), found through pkg-config; elsewhere the
# single header (e.g. from HYMOE_EXTRA_PREFIX) is the whole library.
pkg_check_modules(CPP_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
if(NOT TARGET hymoe::httplib)
  if(CPP_HTTPLIB_FOUND)
    add_library(hymoe::httplib INTERFACE IMPORTED)
    target_link_libraries(hymoe::httplib INTERFACE PkgConfig::CPP_HTTPLIB Threads::Threads)
  else()
    find_path(HTTPLIB_INCLUDE_DIR httplib.h)
    if(HTTPLIB_INCLUDE_DIR)
      add_library(hymoe::httplib INTERFACE IMPORTED)
      target_include_directories(hymoe::httplib INTERFACE ${HTTPLIB_INCLUDE_DIR})
      target_link_libraries(hymoe::httplib INTERFACE Threads::Threads)
      # Debian's header carried without pkg-config (scripts/make-carry): its library beside it.
      find_library(HTTPLIB_LIBRARY cpp-httplib)
      if(HTTPLIB_LIBRARY)
        target_link_libraries(hymoe::httplib INTERFACE ${HTTPLIB_LIBRARY})
        # The library's build options, which its header's layouts depend on (make-carry writes
        # pkg-config's --cflags beside it).
        get_filename_component(_httplib_dir ${HTTPLIB_LIBRARY} DIRECTORY)
        if(EXISTS ${_httplib_dir}/cpp-httplib.cflags)
          file(READ ${_httplib_dir}/cpp-httplib.cflags _httplib_cflags)
          string(STRIP "${_httplib_cflags}" _httplib_cflags)
          separate_arguments(_httplib_cflags UNIX_COMMAND "${_httplib_cflags}")
          target_compile_options(hymoe::httplib INTERFACE ${_httplib_cflags})
        endif()
      endif()
    endif()
  endif()
endif()

# PCRE2 (8-bit code units), shared from apt or a static library in HYMOE_EXTRA_PREFIX.
find_path(PCRE2_INCLUDE_DIR pcre2.h)
find_library(PCRE2_LIBRARY NAMES pcre2-8)
if(PCRE2_INCLUDE_DIR AND PCRE2_LIBRARY AND NOT TARGET hymoe::pcre2)
  add_library(hymoe::pcre2 INTERFACE IMPORTED)
  target_include_directories(hymoe::pcre2 INTERFACE ${PCRE2_INCLUDE_DIR})
  target_link_libraries(hymoe::pcre2 INTERFACE ${PCRE2_LIBRARY})
  target_compile_definitions(hymoe::pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=8)
  if(PCRE2_LIBRARY MATCHES "\\.a$")  # the carried static library (scripts/make-carry)
    target_compile_definitions(hymoe::pcre2 INTERFACE PCRE2_STATIC)
  endif()
endif()

if(HYMOE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(HYMOE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
