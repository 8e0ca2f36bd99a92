#!/usr/bin/env bash
# The whole GPU suite at the session's last code (W4A8's stage-ahead instance included), from the carried test binary.
# `bash bench/results/2026-11-29-h200-suite-final/run.sh` from the repository root on the device.
SE_STEPS=suite bash bench/session_end.sh suite-final
