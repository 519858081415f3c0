// The host half of the warp-tile example of docs/cuda.md, built and run as a test everywhere.
// cuda_warp_tile.cu compiled as plain C++: its warp code runs on emulation::host_warp.
#include "cuda_warp_tile.cu"
