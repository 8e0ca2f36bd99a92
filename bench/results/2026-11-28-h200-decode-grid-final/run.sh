#!/usr/bin/env bash
# The decode part of the 4-bit grid (1, 8, 64 tokens) with the session's last binaries (the code of 84b8920: both
# early reads), compared with session-end-5's grid. `bash bench/results/2026-11-28-h200-decode-grid-final/run.sh`.
SE_STEPS=grid SE_M=1,8,64 SE_REPEAT=- \
SE_OLD=bench/results/2026-11-28-h200-session-end-5/grid/fusedmoe-bench.json.gz bash bench/session_end.sh decode-grid-final
