// Speculative verification on the GPU: the rules of kernels/spec/verify_ref.h
// (which this includes) as a CUDA kernel over a batch of variable-k sequences.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/spec/verify_ref.h"

// The CUDA kernel (kernels/spec/verify.cu; built with CUDA only): the same
// rules on device pointers, one block per sequence. Sums run in chunks (in
// double), so a draw can differ from the reference only when u * total falls
// within rounding of a token boundary. A draft token outside [0, vocab) is
// rejected. Returns cudaErrorInvalidValue for a malformed batch.
namespace testbed {
cudaError_t launch_verify(const VerifyBatch& batch, const VerifyOutput& out, bool rejection, cudaStream_t stream);

}  // namespace testbed
