// Everything of kernels_lib's device side, for a kernel source to include in one line.
#pragma once
#include "pbuf.cuh"
#include "vec.cuh"
#include "signal.cuh"
#include "tma.cuh"
#include "roles.cuh"
#include "multimem.cuh"
