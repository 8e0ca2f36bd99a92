#!/usr/bin/env bash
# Per-token fp8 activation rows wider than one block pass (gpt-oss-120b's N = 2880: 360 lanes): a cluster of blocks per
# row (activation_row_cluster_kernel, default) or one block per row (FUSEDMOE_ROW_CLUSTER=0, activation_row_vec_kernel).
# `bash bench/results/2026-11-28-h200-row-cluster/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_TIMEOUT=150 AB_VARIANTS='cluster: vec:FUSEDMOE_ROW_CLUSTER=0' \
  bash bench/ab_device.sh rowcluster - 'gpt-oss-120b 1,8,64 mxfp4-fp8'
