// upsim's own GPU ground truth: CUDA microbenchmarks whose tables feed `upsim calibrate kernels`
// and the hardware profile's `kernel_overhead`. Built only when CMake finds a CUDA compiler
// (bench/gpu/CMakeLists.txt); never run by the tests. scripts/gpu_microbench.sh runs the whole
// set on a lent GPU machine and writes everything under one folder.
//
// usage: gpu_microbench SUITE OUT_DIR [--quick]
//   SUITE: gemm | memory | launch | all
//   writes OUT_DIR/gemm.csv, memory.csv (upsim measurement CSV, calibration/kernel_measurements.h:
//   op, dtype, m, n[, k, batch], time_us) and launch.csv (quantity, bytes, time_us); every file
//   starts with `#` lines naming the GPU, driver and runtime versions, clocks, SM count and the
//   UTC time of the run.
//
// Timing (every table): CUDA events around `calls` back-to-back launches on one stream after
// warm-up, `calls` chosen so that one trial lasts about kTrialSeconds; the median of kTrials
// trials, divided by `calls`, is the time of one call as the GPU runs it in a busy stream (no
// host launch or synchronisation cost, which launch.csv measures apart).
//
// GEMMs (cuBLASLt, column-major TN: C[m x n] = A^T[k x m]^T B[k x n], as cuBLASLt requires for
// fp8): fp32, tf32 (fp32 with TF32 compute), fp16, bf16 (fp32 accumulate) and fp8 (e4m3 inputs
// with per-tensor scales, bf16 output); batched GEMMs with strided batches. Shapes: square and
// skinny sweeps as LLMCompass' matmul sweep (M x N x N), XLA's perf-table grid (m, n, k in
// 256-4096, batch 1, 2, 4) and the transformer shapes of the shipped configs (GPT-3 175B TP 4
// projections and attention bmm, Llama-3 70B TP 8).
//
// Memory-bound kernels (our own, one grid-stride kernel per op; fp16 and bf16 storage, fp32
// math): copy, relu, gelu (tanh), binary (a + b), and row-wise softmax, layernorm, rms_norm, sum
// over rows of n elements (one block per row, rows read once more from L1 / L2 when they fit):
// sizes from 1 KiB to 4 GiB per tensor, the HBM and L2 regimes.
//
// Launch floor (launch.csv): an empty kernel's GPU time per call back to back
// (empty_kernel_back_to_back), host wall time of launch + cudaStreamSynchronize
// (empty_kernel_launch_and_sync), host cost of cudaEventRecord and cudaStreamWaitEvent, and
// cudaMemcpyAsync host <-> device, pageable and pinned, 4 B - 1 GiB.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr int kTrials = 5;
constexpr double kTrialSeconds = 0.002;  // per trial, whatever the kernel's length
constexpr int kMaxCalls = 2000;

#define CUDA_CHECK(expr)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (expr);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define CUBLAS_CHECK(expr)                                                             \
  do {                                                                                 \
    const cublasStatus_t s_ = (expr);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #expr, \
                   static_cast<int>(s_));                                              \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

/// Median per-call time in microseconds of `launch` (which enqueues one call on `stream`).
double time_per_call_us(cudaStream_t stream, const std::function<void()>& launch) {
  for (int i = 0; i < 3; ++i)
    launch();  // warm-up (also cuBLASLt's first-call setup)
  cudaEvent_t start;
  cudaEvent_t stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  // One call timed alone sizes the trials.
  CUDA_CHECK(cudaEventRecord(start, stream));
  launch();
  CUDA_CHECK(cudaEventRecord(stop, stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float one_ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&one_ms, start, stop));
  const double one_s = std::max(1e-7, static_cast<double>(one_ms) * 1e-3);
  const int calls = std::clamp(static_cast<int>(kTrialSeconds / one_s), 1, kMaxCalls);
  std::vector<double> per_call;
  for (int t = 0; t < kTrials; ++t) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int c = 0; c < calls; ++c)
      launch();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    per_call.push_back(static_cast<double>(ms) * 1e3 / calls);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

/// `#` lines describing the device and the run, for the head of every table.
std::string metadata(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0;
  int runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  int sm_clock_khz = 0;
  int mem_clock_khz = 0;
  int bus_width = 0;
  cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, device);
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char text[1024];
  std::snprintf(text, sizeof(text),
                "# gpu: %s\n# cuda_driver: %d\n# cuda_runtime: %d\n# cublaslt: %zu\n"
                "# sm_count: %d\n# sm_clock_max_mhz: %d\n# memory_clock_max_mhz: %d\n"
                "# memory_bus_bits: %d\n# l2_bytes: %d\n# global_memory_bytes: %zu\n"
                "# measured_utc: %s\n# timing: CUDA events around back-to-back calls on one "
                "stream, median of %d trials of about %.0f ms each, per call\n",
                prop.name, driver, runtime, cublasLtGetVersion(), prop.multiProcessorCount,
                sm_clock_khz / 1000, mem_clock_khz / 1000, bus_width, prop.l2CacheSize,
                prop.totalGlobalMem, when, kTrials, kTrialSeconds * 1e3);
  return text;
}

FILE* open_table(const std::string& path, const std::string& meta, const char* header) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fputs(meta.c_str(), f);
  std::fputs(header, f);
  return f;
}

// ---- GEMM (cuBLASLt) ------------------------------------------------------------------------

struct GemmType {
  const char* name;  // upsim dtype_name()
  cudaDataType_t ab;
  cudaDataType_t cd;
  cublasComputeType_t compute;
  size_t ab_bytes;
  size_t cd_bytes;
  bool scaled;  // fp8: per-tensor scale pointers for A and B
};

const GemmType kGemmTypes[] = {
    {"fp32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4, false},
    {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, false},
    {"fp16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, false},
    {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, false},
    {"fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, true},
};

struct GemmShape {
  int64_t m, n, k, batch;
};

std::vector<GemmShape> gemm_shapes(bool quick) {
  std::vector<GemmShape> s;
  // LLMCompass' matmul sweep (ae/figure5/ab): M x N x N with N = K.
  for (int64_t m : {64, 256, 1024, 4096, 8192})
    for (int64_t nk : {1024, 4096, 12288})
      s.push_back({m, nk, nk, 1});
  // XLA's matmul perf table grid (third_party/xla/.../matmul_interpolator_data.h).
  const std::vector<int64_t> dims =
      quick ? std::vector<int64_t>{256, 4096} : std::vector<int64_t>{256, 1024, 4096};
  for (int64_t b : {1, 4})
    for (int64_t m : dims)
      for (int64_t n : dims)
        for (int64_t k : dims)
          s.push_back({m, n, k, b});
  // GPT-3 175B, TP 4, batch 8 x 2048 tokens (calibration/transformer_layer_check.h).
  s.push_back({16384, 3072, 12288, 1});   // Q, K or V projection
  s.push_back({16384, 12288, 3072, 1});   // Wo
  s.push_back({16384, 12288, 12288, 1});  // W1 / W2
  s.push_back({2048, 2048, 128, 192});    // Q K^T per head
  s.push_back({2048, 128, 2048, 192});    // A V per head
  s.push_back({8, 3072, 12288, 1});       // decode Q, K or V
  s.push_back({8, 12288, 3072, 1});       // decode Wo
  s.push_back({8, 12288, 12288, 1});      // decode W1 / W2
  s.push_back({1, 3073, 128, 192});       // decode Q K^T
  s.push_back({1, 128, 3073, 192});       // decode A V
  // Llama-3 70B, TP 8, 4096 tokens: QKV (GQA), O, gate/up, down.
  s.push_back({4096, 1280, 8192, 1});
  s.push_back({4096, 8192, 1024, 1});
  s.push_back({4096, 7168, 8192, 1});
  s.push_back({4096, 8192, 3584, 1});
  return s;
}

/// One GEMM set up once and launched many times.
class LtGemm {
 public:
  LtGemm(cublasLtHandle_t lt, const GemmType& t, const GemmShape& s, void* workspace,
         size_t workspace_bytes, cudaStream_t stream)
      : lt_(lt),
        type_(t),
        workspace_(workspace),
        workspace_bytes_(workspace_bytes),
        stream_(stream) {
    const cublasOperation_t ta = CUBLAS_OP_T;
    const cublasOperation_t tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, t.compute, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    const size_t a_elems = static_cast<size_t>(s.k * s.m);
    const size_t b_elems = static_cast<size_t>(s.k * s.n);
    const size_t c_elems = static_cast<size_t>(s.m * s.n);
    CUDA_CHECK(cudaMalloc(&a_, a_elems * s.batch * t.ab_bytes));
    CUDA_CHECK(cudaMalloc(&b_, b_elems * s.batch * t.ab_bytes));
    CUDA_CHECK(cudaMalloc(&c_, c_elems * s.batch * t.cd_bytes));
    CUDA_CHECK(cudaMemsetAsync(a_, 0, a_elems * s.batch * t.ab_bytes, stream));
    CUDA_CHECK(cudaMemsetAsync(b_, 0, b_elems * s.batch * t.ab_bytes, stream));
    if (t.scaled) {
      const float one[2] = {1.0f, 1.0f};
      CUDA_CHECK(cudaMalloc(&scales_, sizeof(one)));
      CUDA_CHECK(cudaMemcpy(scales_, one, sizeof(one), cudaMemcpyHostToDevice));
      float* a_scale = scales_;
      float* b_scale = scales_ + 1;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                  &a_scale, sizeof(a_scale)));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                  &b_scale, sizeof(b_scale)));
    }
    layout(&a_desc_, t.ab, s.k, s.m, s.batch, static_cast<int64_t>(a_elems));
    layout(&b_desc_, t.ab, s.k, s.n, s.batch, static_cast<int64_t>(b_elems));
    layout(&c_desc_, t.cd, s.m, s.n, s.batch, static_cast<int64_t>(c_elems));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref,
                                                      CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes_, sizeof(workspace_bytes_)));
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, op_, a_desc_, b_desc_, c_desc_,
                                                             c_desc_, pref, 1, &heuristic_, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    ok_ = st == CUBLAS_STATUS_SUCCESS && found > 0;
  }
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(a_desc_);
    cublasLtMatrixLayoutDestroy(b_desc_);
    cublasLtMatrixLayoutDestroy(c_desc_);
    cublasLtMatmulDescDestroy(op_);
    cudaFree(a_);
    cudaFree(b_);
    cudaFree(c_);
    if (scales_ != nullptr) cudaFree(scales_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  /// False when cuBLASLt has no algorithm for this type and shape.
  bool ok() const { return ok_; }
  void launch() const {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt_, op_, &alpha, a_, a_desc_, b_, b_desc_, &beta, c_, c_desc_, c_,
                                c_desc_, &heuristic_.algo, workspace_, workspace_bytes_, stream_));
  }

 private:
  static void layout(cublasLtMatrixLayout_t* desc, cudaDataType_t type, int64_t rows, int64_t cols,
                     int64_t batch, int64_t stride) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(desc, type, rows, cols, rows));
    if (batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                    &count, sizeof(count)));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          *desc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }

  cublasLtHandle_t lt_;
  GemmType type_;
  void* workspace_;
  size_t workspace_bytes_;
  cudaStream_t stream_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_desc_ = nullptr;
  cublasLtMatrixLayout_t b_desc_ = nullptr;
  cublasLtMatrixLayout_t c_desc_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  void* a_ = nullptr;
  void* b_ = nullptr;
  void* c_ = nullptr;
  float* scales_ = nullptr;
  bool ok_ = false;
};

void run_gemm(const std::string& out_dir, const std::string& meta, bool quick,
              cudaStream_t stream) {
  FILE* f = open_table(out_dir + "/gemm.csv", meta, "op,dtype,m,n,k,batch,time_us\n");
  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  const size_t workspace_bytes = size_t{32} << 20;
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  for (const GemmType& t : kGemmTypes) {
    for (const GemmShape& s : gemm_shapes(quick)) {
      // fp8 GEMMs need every dimension a multiple of 16 (cuBLASLt's fp8 requirements).
      if (t.scaled && (s.m % 16 != 0 || s.n % 16 != 0 || s.k % 16 != 0)) continue;
      LtGemm g(lt, t, s, workspace, workspace_bytes, stream);
      if (!g.ok()) {
        std::fprintf(stderr, "gemm %s %lldx%lldx%ld batch %lld: no cuBLASLt algorithm, skipped\n",
                     t.name, static_cast<long long>(s.m), static_cast<long long>(s.n),
                     static_cast<long>(s.k), static_cast<long long>(s.batch));
        continue;
      }
      const double us = time_per_call_us(stream, [&] { g.launch(); });
      std::fprintf(f, "gemm,%s,%lld,%lld,%lld,%lld,%.4f\n", t.name, static_cast<long long>(s.m),
                   static_cast<long long>(s.n), static_cast<long long>(s.k),
                   static_cast<long long>(s.batch), us);
    }
    std::fflush(f);
  }
  CUDA_CHECK(cudaFree(workspace));
  CUBLAS_CHECK(cublasLtDestroy(lt));
  std::fclose(f);
}

// ---- Memory-bound kernels -------------------------------------------------------------------

template <typename T>
__device__ float load(const T* p, int64_t i) {
  return static_cast<float>(p[i]);
}
template <>
__device__ float load<__half>(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
template <>
__device__ float load<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
template <typename T>
__device__ T store(float v);
template <>
__device__ __half store<__half>(float v) {
  return __float2half(v);
}
template <>
__device__ __nv_bfloat16 store<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

enum class Elementwise { kCopy, kRelu, kGelu, kBinary };

template <typename T, Elementwise kOp>
__global__ void elementwise(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = load(a, i);
    float y = x;
    if constexpr (kOp == Elementwise::kRelu) y = fmaxf(x, 0.0f);
    if constexpr (kOp == Elementwise::kGelu) {
      y = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    }
    if constexpr (kOp == Elementwise::kBinary) y = x + load(b, i);
    out[i] = store<T>(y);
  }
}

/// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
    total += partial[w];
  return total;
}

__device__ float block_max(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
    total = fmaxf(total, partial[w]);
  return total;
}

enum class RowOp { kSoftmax, kLayerNorm, kRmsNorm, kSum };

/// One block per row of n elements.
template <typename T, RowOp kOp>
__global__ void rowwise(const T* in, const T* weight, const T* bias, T* out, int64_t n) {
  const T* row = in + blockIdx.x * n;
  if constexpr (kOp == RowOp::kSum) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      s += load(row, j);
    s = block_sum(s);
    if (threadIdx.x == 0) out[blockIdx.x] = store<T>(s);
    return;
  }
  T* dst = out + blockIdx.x * n;
  if constexpr (kOp == RowOp::kSoftmax) {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      m = fmaxf(m, load(row, j));
    m = block_max(m);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      s += __expf(load(row, j) - m);
    s = block_sum(s);
    const float inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      dst[j] = store<T>(__expf(load(row, j) - m) * inv);
    }
  } else {
    float s = 0.0f;
    float s2 = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float x = load(row, j);
      s += x;
      s2 += x * x;
    }
    s = block_sum(s);
    s2 = block_sum(s2);
    const float mean = kOp == RowOp::kLayerNorm ? s / n : 0.0f;
    const float var = s2 / n - mean * mean;
    const float rstd = rsqrtf(var + 1e-5f);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      float y = (load(row, j) - mean) * rstd * load(weight, j);
      if constexpr (kOp == RowOp::kLayerNorm) y += load(bias, j);
      dst[j] = store<T>(y);
    }
  }
}

template <typename T>
void run_memory_dtype(FILE* f, const char* dtype, bool quick, cudaStream_t stream, int sms) {
  // Tensors of 1 KiB to 4 GiB (powers of 4; --quick: up to 256 MiB).
  const int64_t max_bytes = quick ? (int64_t{1} << 28) : (int64_t{1} << 32);
  const int64_t max_elems = max_bytes / static_cast<int64_t>(sizeof(T));
  T* a = nullptr;
  T* b = nullptr;
  T* out = nullptr;
  CUDA_CHECK(cudaMalloc(&a, max_bytes));
  CUDA_CHECK(cudaMalloc(&b, max_bytes));
  CUDA_CHECK(cudaMalloc(&out, max_bytes));
  CUDA_CHECK(cudaMemsetAsync(a, 0, max_bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(b, 0, max_bytes, stream));
  const int threads = 256;
  for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = bytes / static_cast<int64_t>(sizeof(T));
    const int blocks =
        static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, int64_t{sms} * 32));
    struct Op {
      const char* name;
      void (*kernel)(const T*, const T*, T*, int64_t);
    };
    const Op ops[] = {{"copy", elementwise<T, Elementwise::kCopy>},
                      {"relu", elementwise<T, Elementwise::kRelu>},
                      {"gelu", elementwise<T, Elementwise::kGelu>},
                      {"binary", elementwise<T, Elementwise::kBinary>}};
    for (const Op& op : ops) {
      const double us = time_per_call_us(
          stream, [&] { op.kernel<<<blocks, threads, 0, stream>>>(a, b, out, n); });
      CUDA_CHECK(cudaGetLastError());
      std::fprintf(f, "%s,%s,1,%lld,%.4f\n", op.name, dtype, static_cast<long long>(n), us);
    }
    // Row-wise ops: rows of 1 Ki, 4 Ki, 16 Ki and 64 Ki elements (as many rows as fit).
    for (int64_t row : {int64_t{1024}, int64_t{4096}, int64_t{16384}, int64_t{65536}}) {
      if (row > n || row > max_elems) continue;
      const int64_t rows = n / row;
      const int row_threads = row >= 4096 ? 1024 : 256;
      struct RowKernel {
        const char* name;
        void (*kernel)(const T*, const T*, const T*, T*, int64_t);
      };
      const RowKernel row_ops[] = {{"softmax", rowwise<T, RowOp::kSoftmax>},
                                   {"layernorm", rowwise<T, RowOp::kLayerNorm>},
                                   {"rms_norm", rowwise<T, RowOp::kRmsNorm>},
                                   {"sum", rowwise<T, RowOp::kSum>}};
      for (const RowKernel& op : row_ops) {
        const double us = time_per_call_us(stream, [&] {
          op.kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(a, b, b, out, row);
        });
        CUDA_CHECK(cudaGetLastError());
        std::fprintf(f, "%s,%s,%lld,%lld,%.4f\n", op.name, dtype, static_cast<long long>(rows),
                     static_cast<long long>(row), us);
      }
    }
    std::fflush(f);
  }
  // The row-wise ops of the GPT-3 175B layer (TP 4, batch 8; calibration/transformer_layer_check.h)
  // at their own row lengths: softmax over 8 x 24 x 2048 rows of 2048 (prefill) and 192 rows of
  // 3073 (decode); layer norm over 16384 and 8 rows of 12288.
  struct LayerRow {
    const char* name;
    void (*kernel)(const T*, const T*, const T*, T*, int64_t);
    int64_t rows, row;
  };
  const LayerRow layer_rows[] = {{"softmax", rowwise<T, RowOp::kSoftmax>, 393216, 2048},
                                 {"softmax", rowwise<T, RowOp::kSoftmax>, 192, 3073},
                                 {"layernorm", rowwise<T, RowOp::kLayerNorm>, 16384, 12288},
                                 {"layernorm", rowwise<T, RowOp::kLayerNorm>, 8, 12288}};
  // ... and its GeLU over 16384 x 12288 (prefill) and 8 x 12288 (decode) elements.
  for (const int64_t n : {int64_t{16384} * 12288, int64_t{8} * 12288}) {
    if (n > max_elems) continue;
    const int blocks =
        static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, int64_t{sms} * 32));
    const double us = time_per_call_us(stream, [&] {
      elementwise<T, Elementwise::kGelu><<<blocks, threads, 0, stream>>>(a, b, out, n);
    });
    CUDA_CHECK(cudaGetLastError());
    std::fprintf(f, "gelu,%s,1,%lld,%.4f\n", dtype, static_cast<long long>(n), us);
  }
  for (const LayerRow& op : layer_rows) {
    if (op.rows * op.row > max_elems) continue;
    const double us = time_per_call_us(stream, [&] {
      op.kernel<<<static_cast<unsigned>(op.rows), 1024, 0, stream>>>(a, b, b, out, op.row);
    });
    CUDA_CHECK(cudaGetLastError());
    std::fprintf(f, "%s,%s,%lld,%lld,%.4f\n", op.name, dtype, static_cast<long long>(op.rows),
                 static_cast<long long>(op.row), us);
  }
  std::fflush(f);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  CUDA_CHECK(cudaFree(out));
}

void run_memory(const std::string& out_dir, const std::string& meta, bool quick,
                cudaStream_t stream, int sms) {
  FILE* f = open_table(out_dir + "/memory.csv", meta, "op,dtype,m,n,time_us\n");
  run_memory_dtype<__half>(f, "fp16", quick, stream, sms);
  run_memory_dtype<__nv_bfloat16>(f, "bf16", quick, stream, sms);
  std::fclose(f);
}

// ---- Launch floor and copies ----------------------------------------------------------------

__global__ void empty_kernel() {}

double host_us(const std::function<void()>& body, int repeats) {
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void run_launch(const std::string& out_dir, const std::string& meta, bool quick,
                cudaStream_t stream) {
  FILE* f = open_table(out_dir + "/launch.csv", meta, "quantity,bytes,time_us\n");
  // GPU time per empty kernel launched back to back: the per-kernel floor of a busy stream
  // (the hardware profile's kernel_overhead).
  const double back_to_back =
      time_per_call_us(stream, [&] { empty_kernel<<<1, 32, 0, stream>>>(); });
  std::fprintf(f, "empty_kernel_back_to_back,0,%.4f\n", back_to_back);
  const double launch_sync = host_us(
      [&] {
        empty_kernel<<<1, 32, 0, stream>>>();
        CUDA_CHECK(cudaStreamSynchronize(stream));
      },
      1000);
  std::fprintf(f, "empty_kernel_launch_and_sync,0,%.4f\n", launch_sync);
  const double launch_only = host_us([&] { empty_kernel<<<1, 32, 0, stream>>>(); }, 1000);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::fprintf(f, "empty_kernel_launch_host,0,%.4f\n", launch_only);
  cudaEvent_t event;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const double record = host_us([&] { CUDA_CHECK(cudaEventRecord(event, stream)); }, 1000);
  std::fprintf(f, "event_record_host,0,%.4f\n", record);
  cudaStream_t other;
  CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  const double wait = host_us([&] { CUDA_CHECK(cudaStreamWaitEvent(other, event, 0)); }, 1000);
  std::fprintf(f, "stream_wait_event_host,0,%.4f\n", wait);
  CUDA_CHECK(cudaStreamSynchronize(other));
  CUDA_CHECK(cudaStreamDestroy(other));
  CUDA_CHECK(cudaEventDestroy(event));
  // Host <-> device copies, pageable and pinned, 4 B to 1 GiB (--quick: 64 MiB).
  const size_t max_bytes = quick ? (size_t{1} << 26) : (size_t{1} << 30);
  void* device = nullptr;
  void* pinned = nullptr;
  CUDA_CHECK(cudaMalloc(&device, max_bytes));
  CUDA_CHECK(cudaMallocHost(&pinned, max_bytes));
  std::vector<unsigned char> pageable(max_bytes, 0);
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    const int repeats = bytes >= (size_t{1} << 26) ? 5 : 50;
    struct Copy {
      const char* name;
      void* dst;
      const void* src;
      cudaMemcpyKind kind;
    };
    const Copy copies[] = {
        {"memcpy_h2d_pinned", device, pinned, cudaMemcpyHostToDevice},
        {"memcpy_d2h_pinned", pinned, device, cudaMemcpyDeviceToHost},
        {"memcpy_h2d_pageable", device, pageable.data(), cudaMemcpyHostToDevice},
        {"memcpy_d2h_pageable", pageable.data(), device, cudaMemcpyDeviceToHost}};
    for (const Copy& c : copies) {
      const double us = host_us(
          [&] {
            CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, bytes, c.kind, stream));
            CUDA_CHECK(cudaStreamSynchronize(stream));
          },
          repeats);
      std::fprintf(f, "%s,%zu,%.4f\n", c.name, bytes, us);
    }
    std::fflush(f);
  }
  CUDA_CHECK(cudaFree(device));
  CUDA_CHECK(cudaFreeHost(pinned));
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: gpu_microbench gemm|memory|launch|all OUT_DIR [--quick]\n"
                 "writes OUT_DIR/gemm.csv, memory.csv, launch.csv (see bench/gpu/README.md)\n");
    return 2;
  }
  const std::string suite = argv[1];
  const std::string out_dir = argv[2];
  const bool quick = argc > 3 && std::string(argv[3]) == "--quick";
  if (suite != "gemm" && suite != "memory" && suite != "launch" && suite != "all") {
    std::fprintf(stderr, "unknown suite `%s`: expected gemm, memory, launch or all\n",
                 suite.c_str());
    return 2;
  }
  int device = 0;
  CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string meta = metadata(device);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (suite == "launch" || suite == "all") run_launch(out_dir, meta, quick, stream);
  if (suite == "memory" || suite == "all") {
    run_memory(out_dir, meta, quick, stream, prop.multiProcessorCount);
  }
  if (suite == "gemm" || suite == "all") run_gemm(out_dir, meta, quick, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
