# fusedmoe-bench --flush-mode, without a GPU (--dry-run): the mode asked for is the one the JSON
# records (peers.py and report.py read it from there), and an unknown mode is a usage error (2).
foreach(mode read write)
  file(REMOVE_RECURSE "${OUT}/${mode}")
  execute_process(COMMAND "${BENCH}" --dry-run --preset qwen3-30b-a3b-tp1 --m 1 --formats fp8-tensor
                          --flush-mode ${mode} --out-dir "${OUT}/${mode}"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fusedmoe-bench --dry-run --flush-mode ${mode}: exit ${rc}")
  endif()
  file(READ "${OUT}/${mode}/fusedmoe-bench.json" json)
  string(JSON got GET "${json}" method flush_mode)
  if(NOT got STREQUAL mode)
    message(FATAL_ERROR "--flush-mode ${mode}: the JSON records '${got}'")
  endif()
endforeach()
execute_process(COMMAND "${BENCH}" --dry-run --preset qwen3-30b-a3b-tp1 --m 1 --flush-mode memset
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "flush-mode")
  message(FATAL_ERROR "--flush-mode memset: expected a usage error naming --flush-mode, got exit ${rc}: ${err}")
endif()
