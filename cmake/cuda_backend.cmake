# The CUDA backend (Hopper, sm_90a). Included by the root CMakeLists.txt when CUDA is on.
#
# Sources: every src/cuda/*.cu and *.cpp (routing.cu included). The CUTLASS grouped-GEMM
# instances live two or three per file (sm90_grouped_gemm_<family>.cu, the bf16-D ones in
# sm90_grouped_gemm_<family>_d16.cu, GEMM1 + activation in sm90_grouped_gemm_<family>_act.cu for
# bf16, fp8 and fp8_blockwise) because each costs about a
# minute and several GB of compiler memory; FUSEDMOE_SKIP_GPU_FORMATS leaves families out
# (bf16, fp16, fp8 = fp8-tensor/fp8-channel, fp8_blockwise = fp8-block; their formats are then
# refused by can_implement() with a reason naming the option). The 4-bit formats' own kernels
# (w4_gemm.cu, w4_wgmma.cu, w4a8_wgmma.cu) are always built.

file(GLOB FUSEDMOE_CUDA_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/cuda/*.cu ${PROJECT_SOURCE_DIR}/src/cuda/*.cpp)

set(_fusedmoe_gpu_families bf16 fp16 fp8 fp8_blockwise)
foreach(_family IN LISTS FUSEDMOE_SKIP_GPU_FORMATS)
  if(NOT _family IN_LIST _fusedmoe_gpu_families)
    message(FATAL_ERROR "FUSEDMOE_SKIP_GPU_FORMATS: unknown kernel family '${_family}' "
                        "(known: ${_fusedmoe_gpu_families})")
  endif()
  list(FILTER FUSEDMOE_CUDA_SOURCES EXCLUDE REGEX "sm90_grouped_gemm_${_family}(_d16|_d16_dequant|_act|_act_channel)?\\.cu$")
  string(TOUPPER ${_family} _FAMILY)
  target_compile_definitions(fusedmoe PRIVATE FUSEDMOE_SKIP_GPU_${_FAMILY}=1)
  message(STATUS "fusedmoe: GPU kernel family ${_family} skipped")
endforeach()

if(NOT EXISTS ${FUSEDMOE_CUTLASS_DIR}/include/cutlass/cutlass.h)
  message(FATAL_ERROR "CUTLASS headers not found under FUSEDMOE_CUTLASS_DIR=${FUSEDMOE_CUTLASS_DIR} "
                      "(expected include/cutlass/cutlass.h; pip install nvidia-cutlass==4.2.0.0 "
                      "--target third_party/cutlass)")
endif()

target_sources(fusedmoe PRIVATE ${FUSEDMOE_CUDA_SOURCES})
# CUTLASS's device-side asserts are function calls inside the wgmma mainloop: ptxas then
# serialises the wgmma pipeline (warning C7510). Build the GEMM instances without them in
# every build type.
set(_fusedmoe_sm90_sources ${FUSEDMOE_CUDA_SOURCES})
list(FILTER _fusedmoe_sm90_sources INCLUDE REGEX "sm90_.*\\.cu$")
set_source_files_properties(${_fusedmoe_sm90_sources} PROPERTIES COMPILE_DEFINITIONS NDEBUG)
target_include_directories(fusedmoe SYSTEM PRIVATE
  ${FUSEDMOE_CUTLASS_DIR}/include ${FUSEDMOE_CUTLASS_DIR}/tools/util/include)
target_link_libraries(fusedmoe PUBLIC CUDA::cudart)
target_compile_definitions(fusedmoe PUBLIC FUSEDMOE_WITH_CUDA=1)

# wgmma / setmaxnreg need the arch-specific target; the -gencode form avoids a plain sm_90 pass
# that rejects them (docs: HOPPER.md). Respect a user-chosen CMAKE_CUDA_ARCHITECTURES otherwise.
set_property(TARGET fusedmoe PROPERTY CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES})
set_property(TARGET fusedmoe PROPERTY CUDA_SEPARABLE_COMPILATION OFF)
target_compile_options(fusedmoe PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fPIC>
  # Exact IEEE division / sqrt: the quantisation steps (x / s) must round like the CPU oracle.
  $<$<COMPILE_LANGUAGE:CUDA>:-prec-div=true>
  $<$<COMPILE_LANGUAGE:CUDA>:-prec-sqrt=true>
  $<$<COMPILE_LANGUAGE:CUDA>:-ftz=false>)
if(FUSEDMOE_PTXAS_VERBOSE)
  target_compile_options(fusedmoe PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
endif()
