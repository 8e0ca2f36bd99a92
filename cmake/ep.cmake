# Expert parallelism (src/ep, include/fusedmoe/ep.hpp). Included by the root CMakeLists.txt.
#
# Always: the EP layer, the host engine and the in-process thread transport (CPU backend; the CPU
# tests run the whole EP logic with them). With CUDA: the device engine (route / pack / combine
# kernels). With CUDA and NCCL: the NCCL transport and the one-thread-per-GPU launcher; without
# NCCL those entry points throw NotImplemented (src/ep/nccl_stub.cpp).
#
# NCCL is looked for in NCCL_ROOT (cache or environment), the CUDA toolkit's include / lib64
# folders, and the PyPI package (nvidia-nccl-cu13 / -cu12: site-packages/nvidia/nccl).
set(FUSEDMOE_NCCL AUTO CACHE STRING "NCCL transport for expert parallelism: AUTO (when CUDA and NCCL are found), ON or OFF")
set_property(CACHE FUSEDMOE_NCCL PROPERTY STRINGS AUTO ON OFF)

target_sources(fusedmoe PRIVATE
  ${PROJECT_SOURCE_DIR}/src/ep/ep_layer.cpp
  ${PROJECT_SOURCE_DIR}/src/ep/host_barrier.cpp
  ${PROJECT_SOURCE_DIR}/src/ep/host_engine.cpp
  ${PROJECT_SOURCE_DIR}/src/ep/thread_transport.cpp)
if(FUSEDMOE_WITH_CUDA)
  target_sources(fusedmoe PRIVATE ${PROJECT_SOURCE_DIR}/src/ep/device_engine.cu)
else()
  target_sources(fusedmoe PRIVATE ${PROJECT_SOURCE_DIR}/src/ep/device_stub.cpp)
endif()

set(FUSEDMOE_WITH_NCCL OFF)
if(FUSEDMOE_WITH_CUDA AND NOT FUSEDMOE_NCCL STREQUAL "OFF")
  set(_nccl_hints)
  if(NCCL_ROOT)
    list(APPEND _nccl_hints ${NCCL_ROOT})
  endif()
  if(DEFINED ENV{NCCL_ROOT})
    list(APPEND _nccl_hints $ENV{NCCL_ROOT})
  endif()
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
  endif()
  if(CUDAToolkit_INCLUDE_DIRS)
    foreach(_d IN LISTS CUDAToolkit_INCLUDE_DIRS)
      get_filename_component(_p ${_d} DIRECTORY)
      list(APPEND _nccl_hints ${_p})
    endforeach()
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE _nccl_pip OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _nccl_pip_rc)
    if(_nccl_pip_rc EQUAL 0 AND _nccl_pip)
      list(APPEND _nccl_hints ${_nccl_pip})
    endif()
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(FUSEDMOE_WITH_NCCL ON)
  elseif(FUSEDMOE_NCCL STREQUAL "ON")
    message(FATAL_ERROR "FUSEDMOE_NCCL=ON but NCCL was not found (nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}); "
                        "set NCCL_ROOT or pip install nvidia-nccl-cu13")
  endif()
elseif(FUSEDMOE_NCCL STREQUAL "ON")
  message(FATAL_ERROR "FUSEDMOE_NCCL=ON needs the CUDA backend (FUSEDMOE_CUDA)")
endif()

if(FUSEDMOE_WITH_NCCL)
  target_sources(fusedmoe PRIVATE ${PROJECT_SOURCE_DIR}/src/ep/nccl_transport.cpp)
  # PUBLIC in the build tree: callers that create their own ncclComm_t (tests) see the same nccl.h.
  target_include_directories(fusedmoe SYSTEM PUBLIC $<BUILD_INTERFACE:${NCCL_INCLUDE_DIR}>)
  target_link_libraries(fusedmoe PUBLIC ${NCCL_LIBRARY})
  target_compile_definitions(fusedmoe PUBLIC FUSEDMOE_WITH_NCCL=1)
  message(STATUS "fusedmoe: NCCL transport ON (${NCCL_LIBRARY})")
else()
  target_sources(fusedmoe PRIVATE ${PROJECT_SOURCE_DIR}/src/ep/nccl_stub.cpp)
  message(STATUS "fusedmoe: NCCL transport OFF (expert parallelism with the thread transport only)")
endif()
