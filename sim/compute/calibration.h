// Calibration: the measured kernel tables of one GPU kind, as plain data (loaded by sim/config).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/compute/gpu_spec.h"
#include "sim/ir/dtype.h"

namespace ts::compute {

// Where the numbers of a table come from (calibration.proto Provenance).
struct Provenance {
  std::string source;
  std::string date;
  std::string software;
  std::string method;
  std::string notes;
};

// Fit: the model is fitted to the table's points. Check: the points are only compared with
// the fitted model (another library or GPU variant), and reported apart.
enum class TableRole { kFit, kCheck };

// Where a point was read from, for reports: "calibration/H100-SXM5-80GB.textproto:57".
struct PointOrigin {
  std::string file;
  int line = 0;
};

// C[m,n] = A[m,k]·B[k,n], `batch` independent products, measured at `tflops`.
struct GemmPoint {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  ir::Dtype dtype = ir::Dtype::kBf16;
  double tflops = 0;
  PointOrigin origin;
};

// The GEMM kernel a table measures: a plain (or batched) GEMM, or a grouped GEMM of equal groups
// (the expert GEMMs of a mixture of experts; calibrated_model.h fits it apart).
enum class GemmKernel { kDense, kGrouped };
const char* gemm_kernel_name(GemmKernel k);  // "dense", "grouped"

struct GemmTable {
  std::string name;
  TableRole role = TableRole::kFit;
  GemmKernel kernel = GemmKernel::kDense;
  Provenance provenance;
  bool derived = false;  // points moved from another GPU generation: derived, not measured
  std::vector<GemmPoint> points;
};

// A CTA tile of the GEMM library: rows × columns of C computed by one thread block.
struct GemmTile {
  std::int64_t m = 0, n = 0;
};

enum class AttentionPass { kForward, kBackward, kForwardBackward };
const char* attention_pass_name(AttentionPass p);  // "fwd", "bwd", "fwd+bwd"

// One measured fused-attention run: `batch` sequences of `seq` tokens (queries = keys),
// `heads` heads of `head_dim`, at `tflops` with the FlashAttention FLOP convention.
struct AttentionPoint {
  AttentionPass pass = AttentionPass::kForward;
  bool causal = false;
  std::int64_t head_dim = 0, seq = 0, batch = 0, heads = 0;
  std::int64_t kv_heads = 0;  // GQA/MQA key/value heads; 0 = heads
  std::int64_t head_dim_v = 0;  // value head dimension; 0 = head_dim (MLA: 128 against 192)
  std::int64_t window = 0;      // causal sliding window (the table's); 0 = none
  double tflops = 0;
  PointOrigin origin;
};

struct AttentionTable {
  std::string name;
  std::string kernel;  // "FlashAttention-2", "FlashAttention-3"
  TableRole role = TableRole::kFit;
  Provenance provenance;
  bool derived = false;  // points moved from another GPU generation: derived, not measured
  std::vector<AttentionPoint> points;
  // kBf16, or kFp8 for FP8 attention (fitted apart from the kernel's bf16 points).
  ir::Dtype dtype = ir::Dtype::kBf16;
  // Causal sliding window of every point (keys per query); > 0: fitted apart from the kernel's
  // full-attention points, used for windowed layers. 0: full attention.
  std::int64_t window = 0;

  // The value head dimension of the table's points where narrower than the query/key one (MLA:
  // 128 against 192; every point of a table shares it), else 0. Such tables are fitted apart.
  std::int64_t narrow_value_dim() const {
    if (points.empty()) return 0;
    const auto& p = points.front();
    return p.head_dim_v > 0 && p.head_dim_v != p.head_dim ? p.head_dim_v : 0;
  }
};

// Which HBM directions a streaming kernel uses; training's elementwise kernels read and write.
// The norm patterns are PyTorch's native LayerNorm (compute::MemoryKernel), its GB/s counted over
// the op's streaming traffic: the forward reads x and writes y (2 passes of the activation), the
// backward reads dy and x and writes dx (3 passes), forward+backward 5. The fused_norm patterns are
// a fused norm kernel (cuDNN's RMSNorm/LayerNorm), forward and backward each timed alone, GB/s over
// the same passes (2 forward, 3 backward; the benchmark also counts the weight and the per-row
// fp32 statistics, under 0.1 % at the hidden sizes imported).
// The moe patterns are eager PyTorch's MoE token permutation kernels (compute::MemoryKernel), GB/s
// over the bytes tools/calibrate/bench_moe.py counts: the dispatch gather (index_select) reads
// each token once and writes its top-k copies, the combine (the routing weights' multiply, then
// index_add_) reads and writes the weighted copies and read-modify-writes the output rows (5
// passes of the copies), the router (softmax, then top-k over fp32 scores) 3 passes of the
// scores.
enum class MemoryPattern {
  kLoadStore,
  kLoad,
  kStore,
  kNormForward,
  kNormForwardBackward,
  kFusedNormForward,
  kFusedNormBackward,
  kMoeGather,
  kMoeCombine,
  kMoeRouter
};
bool is_moe_pattern(MemoryPattern p);
// 0, 1, 2 for the gather, combine and router patterns (the index of the kernel's own count).
std::size_t moe_kernel(MemoryPattern p);
bool is_norm_pattern(MemoryPattern p);
bool is_fused_norm_pattern(MemoryPattern p);
const char* memory_pattern_name(MemoryPattern p);

struct MemoryPoint {
  std::string kernel;
  MemoryPattern pattern = MemoryPattern::kLoadStore;
  double gbps = 0;
  PointOrigin origin;
};

struct MemoryTable {
  std::string name;
  TableRole role = TableRole::kFit;
  Provenance provenance;
  bool derived = false;  // points moved from another GPU generation: derived, not measured
  std::vector<MemoryPoint> points;
};

struct Calibration;

// The forward share of a forward+backward time taken from a kernel measured per direction:
// the same kernel on another GPU, or another kernel of the same GPU (used where a kernel is
// published only as forward+backward).
struct DirectionSplit {
  std::string reason;
  std::shared_ptr<const Calibration> reference;  // the other GPU's calibration; null: this one
  std::string kernel;                            // the kernel within it
};

// Device memory beyond the framework's allocations (calibration memory_overheads).
struct MemoryOverheads {
  Bytes cuda_context;
  Bytes nccl_buffers_per_communicator;
  // Share of the reserved dynamic memory lost to allocator fragmentation: reserved dynamic
  // memory = allocated / (1 - allocator_fragmentation).
  double allocator_fragmentation = 0;
};

// A block-scaled format's GEMM efficiency over fp8's, measured in one harness.
struct BlockScaledGemm {
  double ratio = 1;
  std::string source;
};

// Everything measured about one GPU kind. The compute model is fitted to it (fit.h).
struct Calibration {
  std::string file;                  // where it was loaded from, for reports
  GpuSpec gpu;                       // datasheet: name, peaks, memory, SMs (efficiencies unset)
  std::vector<std::string> aliases;  // other names for the command line
  Provenance datasheet_provenance;

  std::vector<GemmTile> gemm_tiles;
  Provenance gemm_model_provenance;
  std::vector<GemmTable> gemm;

  std::int64_t attention_block = 0;
  std::string attention_kernel;  // the kernel the simulator uses
  Provenance attention_model_provenance;
  std::optional<DirectionSplit> direction_split;
  std::vector<AttentionTable> attention;

  std::vector<MemoryTable> memory;

  std::optional<Duration> launch_overhead;  // measured; else the GEMM fit's fixed term
  Provenance launch_overhead_provenance;

  // mxfp8/nvfp4 GEMM efficiency over the fp8 fit's (calibration.proto BlockScaledGemm); a dtype
  // without an entry runs at the fp8 efficiency.
  std::map<ir::Dtype, BlockScaledGemm> block_scaled_gemm;

  MemoryOverheads memory_overheads;  // zero when the file has none
  Provenance memory_overheads_provenance;
};

}  // namespace ts::compute
