#!/usr/bin/env bash
# End of the second session of 2026-11-29: the whole GPU suite, a memcheck of the decode-size 4-bit tests, the W4A8
# one-token layers and the int4 device tests (W4A8's mma decode changed), the FUSEDMOE_W4_LEAN=0 default switch check,
# and the full 4-bit grid (1 .. 4096 tokens). `bash bench/results/2026-11-29-h200-session-end-11/run.sh` from the
# repository root on the device (the pack carried).
set -u
SE_MEMCHECK='Int4Fp8Device.*:Formats/W4Gpu.DecodeSizesMatchOracle/*:Shapes/DecodeLayerW4Gpu.MatchesOracle/*w4a8*' \
SE_OLD=bench/results/2026-11-29-h200-session-end-10/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-11
