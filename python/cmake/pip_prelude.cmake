# Included right after project(fusedmoe) by pip builds (pyproject.toml sets
# CMAKE_PROJECT_fusedmoe_INCLUDE to this file). With nvcc present and FUSEDMOE_CUDA not OFF, the
# CUDA backend needs the CUTLASS headers: use FUSEDMOE_CUTLASS_DIR or third_party/cutlass when
# there, else fetch the nvidia-cutlass wheel's headers into the build folder; if that fails too,
# FUSEDMOE_CUDA=AUTO builds the CPU backend only (with a warning), FUSEDMOE_CUDA=ON stops.
set(_fm_mode AUTO)
if(DEFINED FUSEDMOE_CUDA)
  set(_fm_mode "${FUSEDMOE_CUDA}")
endif()
if(NOT _fm_mode STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(DEFINED FUSEDMOE_CUTLASS_DIR)
      set(_fm_cutlass "${FUSEDMOE_CUTLASS_DIR}")
    else()
      set(_fm_cutlass "${CMAKE_SOURCE_DIR}/third_party/cutlass/cutlass_library/source")
    endif()
    if(NOT EXISTS "${_fm_cutlass}/include/cutlass/cutlass.h")
      set(_fm_fetched "${CMAKE_BINARY_DIR}/_cutlass")
      if(NOT EXISTS "${_fm_fetched}/cutlass_library/source/include/cutlass/cutlass.h")
        find_package(Python COMPONENTS Interpreter QUIET)
        if(Python_EXECUTABLE)
          message(STATUS "fusedmoe (pip): fetching the CUTLASS headers (nvidia-cutlass==4.2.0.0)")
          execute_process(
            COMMAND "${Python_EXECUTABLE}" -m pip install -q --disable-pip-version-check --no-deps
                    --target "${_fm_fetched}" nvidia-cutlass==4.2.0.0
            RESULT_VARIABLE _fm_rc OUTPUT_QUIET ERROR_QUIET)
        endif()
      endif()
      if(EXISTS "${_fm_fetched}/cutlass_library/source/include/cutlass/cutlass.h")
        set(FUSEDMOE_CUTLASS_DIR "${_fm_fetched}/cutlass_library/source" CACHE PATH "CUTLASS headers" FORCE)
      elseif(_fm_mode STREQUAL "ON")
        message(FATAL_ERROR "FUSEDMOE_CUDA=ON but the CUTLASS headers were not found under ${_fm_cutlass} "
                            "and could not be fetched: run scripts/setup.sh, or pass "
                            "-C cmake.define.FUSEDMOE_CUTLASS_DIR=<nvidia-cutlass>/cutlass_library/source")
      else()
        message(WARNING "fusedmoe (pip): nvcc found but no CUTLASS headers (looked in ${_fm_cutlass}); "
                        "building the CPU backend only. Run scripts/setup.sh, or set FUSEDMOE_CUTLASS_DIR, "
                        "or FUSEDMOE_CUDA=ON to make this an error.")
        set(FUSEDMOE_CUDA OFF CACHE STRING "Build the CUDA backend: AUTO, ON or OFF" FORCE)
      endif()
    endif()
  endif()
endif()
