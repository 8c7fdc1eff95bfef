#include "kernels/adam_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/adam_math.h"
#include "kernels/cuda_check.h"
#include "kernels/vector_split.h"

namespace zerosim::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;  // 2048 resident threads per SM on sm_80/sm_90
constexpr std::int64_t kVec = kAdamVecWidth;

// ---- gradient loads -------------------------------------------------------------------------

template <DType G>
__device__ __forceinline__ float widen16(unsigned bits) {
  if constexpr (G == DType::F16)
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  else
    return __uint_as_float(bits << 16);
}

template <DType G>
__device__ __forceinline__ float load_grad(const void* grad, std::int64_t i) {
  if constexpr (G == DType::F32) {
    return static_cast<const float*>(grad)[i];
  } else {
    return widen16<G>(static_cast<const unsigned short*>(grad)[i]);
  }
}

// Four consecutive gradients starting at i (a multiple of 4 past an aligned base).
template <DType G>
__device__ __forceinline__ float4 load_grad4(const void* grad, std::int64_t i) {
  if constexpr (G == DType::F32) {
    return *reinterpret_cast<const float4*>(static_cast<const float*>(grad) + i);
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(grad) + i);
    return make_float4(widen16<G>(q.x & 0xFFFFu), widen16<G>(q.x >> 16), widen16<G>(q.y & 0xFFFFu),
                       widen16<G>(q.y >> 16));
  }
}

// ---- 16-bit copy stores; C == F32 means "no copy" -------------------------------------------

template <DType C>
__device__ __forceinline__ unsigned narrow16(float x) {
  if constexpr (C == DType::F16) return __half_as_ushort(__float2half_rn(x));
  else return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

template <DType C>
__device__ __forceinline__ void store_copy(void* copy, std::int64_t i, float x) {
  if constexpr (C != DType::F32)
    static_cast<unsigned short*>(copy)[i] = static_cast<unsigned short>(narrow16<C>(x));
}

template <DType C>
__device__ __forceinline__ void store_copy4(void* copy, std::int64_t i, float4 x) {
  if constexpr (C != DType::F32) {
    uint2 q;
    q.x = narrow16<C>(x.x) | (narrow16<C>(x.y) << 16);
    q.y = narrow16<C>(x.z) | (narrow16<C>(x.w) << 16);
    *reinterpret_cast<uint2*>(static_cast<unsigned short*>(copy) + i) = q;
  }
}

// ---- kernel -----------------------------------------------------------------------------------

// Vector body and scalar head/tail as VectorSplit describes; the launcher guarantees every array
// is vector-aligned at element sp.head.
template <DType G, DType C>
__global__ void __launch_bounds__(kThreads)
    sharded_adam_kernel(AdamShardView s, AdamScalars k, VectorSplit sp) {
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;

  float* __restrict__ master = s.master;
  float* __restrict__ m = s.exp_avg;
  float* __restrict__ v = s.exp_avg_sq;

  for (std::int64_t j = tid; j < sp.nvec; j += stride) {
    const std::int64_t i = sp.head + j * kVec;
    float4 p = *reinterpret_cast<const float4*>(master + i);
    float4 mm = *reinterpret_cast<const float4*>(m + i);
    float4 vv = *reinterpret_cast<const float4*>(v + i);
    const float4 g = load_grad4<G>(s.grad, i);
    adam_update_element(k, g.x, p.x, mm.x, vv.x);
    adam_update_element(k, g.y, p.y, mm.y, vv.y);
    adam_update_element(k, g.z, p.z, mm.z, vv.z);
    adam_update_element(k, g.w, p.w, mm.w, vv.w);
    *reinterpret_cast<float4*>(master + i) = p;
    *reinterpret_cast<float4*>(m + i) = mm;
    *reinterpret_cast<float4*>(v + i) = vv;
    store_copy4<C>(s.param_copy, i, p);
  }

  const std::int64_t n_scalar = sp.n_scalar();
  for (std::int64_t j = tid; j < n_scalar; j += stride) {
    const std::int64_t i = sp.scalar_index(j);
    float p = master[i];
    float mm = m[i];
    float vv = v[i];
    adam_update_element(k, load_grad<G>(s.grad, i), p, mm, vv);
    master[i] = p;
    m[i] = mm;
    v[i] = vv;
    store_copy<C>(s.param_copy, i, p);
  }
}

// ---- host side ---------------------------------------------------------------------------------

template <DType G, DType C>
void launch_typed(const AdamShardView& s, const AdamScalars& k, cudaStream_t stream) {
  const VectorSplit sp = split_for_vectors(s);
  const std::int64_t work = std::max(sp.nvec, sp.n_scalar());
  int device = 0;
  int sms = 0;
  ZEROSIM_CUDA_CHECK(cudaGetDevice(&device));
  ZEROSIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t max_blocks = static_cast<std::int64_t>(std::max(sms, 1)) * kBlocksPerSm;
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, max_blocks));
  sharded_adam_kernel<G, C><<<blocks, kThreads, 0, stream>>>(s, k, sp);
  ZEROSIM_CUDA_CHECK(cudaGetLastError());
}

template <DType G>
void dispatch_copy(const AdamShardView& s, const AdamScalars& k, cudaStream_t stream) {
  if (s.param_copy == nullptr) return launch_typed<G, DType::F32>(s, k, stream);
  switch (s.param_dtype) {
    case DType::F16: return launch_typed<G, DType::F16>(s, k, stream);
    case DType::BF16: return launch_typed<G, DType::BF16>(s, k, stream);
    case DType::F32: break;
  }
  throw std::invalid_argument("launch_sharded_adam: unsupported param_dtype " +
                              std::string(to_string(s.param_dtype)));
}

}  // namespace

void launch_sharded_adam_async(const AdamShardView& shard, const AdamParams& params,
                               cudaStream_t stream) {
  check_adam_args("launch_sharded_adam", shard, params);
  if (shard.n == 0) return;
  const AdamScalars k = adam_scalars(params);
  switch (shard.grad_dtype) {
    case DType::F32: return dispatch_copy<DType::F32>(shard, k, stream);
    case DType::F16: return dispatch_copy<DType::F16>(shard, k, stream);
    case DType::BF16: return dispatch_copy<DType::BF16>(shard, k, stream);
  }
  throw std::invalid_argument("launch_sharded_adam: unsupported grad_dtype " +
                              std::string(to_string(shard.grad_dtype)));
}

void launch_sharded_adam(const AdamShardView& shard, const AdamParams& params) {
  launch_sharded_adam_async(shard, params, nullptr);
  ZEROSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

}  // namespace zerosim::kernels
