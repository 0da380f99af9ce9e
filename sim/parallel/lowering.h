// Lowering of a model and a parallel plan into the per-device task graph of one iteration.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"
#include "sim/parallel/task_graph.h"

namespace ts::parallel {

struct LoweringOptions {
  bool full = false;              // every rank simulated (else one rank per pipeline stage)
  // Chains of compute and tensor-parallel steps as single tasks (see Chain): the same replay with
  // fewer tasks, for runs that need no per-task output. Applies in symmetric mode only, where a
  // tensor-parallel collective has one simulated member.
  bool coarse = false;
  // Memory of one layer and micro-batch (from the memory model): what its forward keeps for the
  // backward (under full recompute: only its input), what recompute rebuilds (full: the rest of
  // the layer; the op policy: the outputs it reruns), and the LM head's logits and loss buffers,
  // live from the head's forward to its backward.
  Bytes layer_kept;
  Bytes layer_rematerialized;
  // With full recompute of only some layers of each chunk (ParallelPlan::recompute_layers): what
  // a layer that does not recompute keeps (all its activations).
  Bytes layer_kept_whole;
  // The same three for the dense layers of a mixture of experts (its first
  // ModelSpec::moe->dense_layers), which keep a dense MLP's activations in place of the experts'.
  Bytes dense_layer_kept;
  Bytes dense_layer_rematerialized;
  Bytes dense_layer_kept_whole;
  Bytes head_transient;
  Bytes optimizer_bytes_per_param;  // HBM traffic of the optimizer step per local parameter
  // Block programs (lower_blocks): a steady run's periods after the first that finds known
  // templates only and leaves the lowering's state as it found it repeat its templates without
  // being lowered. false: every block is lowered in turn (the same program, slower; for tests).
  bool repeat_steady_runs = true;
  // Block programs: a device's block that lowers as another device's template did (the same
  // block, the same registers holding a task, model chunks alike relative to each device: see
  // Lowerer::ChunkView) copies that template's tasks with its own layers, communicators and
  // micro-batches instead of being lowered. false: every template is lowered (the same program,
  // slower; for tests).
  bool share_templates = true;
  bool operator==(const LoweringOptions&) const = default;
};

// Layers of each virtual pipeline stage (pp · model_chunks entries, virtual stage c·pp + s is
// chunk c of rank s): the explicit split if given, else an even one.
std::vector<std::int64_t> virtual_stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model);
// Layers held by each pipeline rank (summed over its model chunks).
std::vector<std::int64_t> stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model);

// Parameters of layer `layer` on one rank that the data-parallel (DP × CP) ranks share: the
// whole layer split over TP in a dense model; in an MoE layer all but the routed experts (split
// over EP × ETP, shared by the expert-DP ranks). ZeRO-3 gathers and reduce-scatters these per layer.
std::int64_t layer_shared_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t layer);
// ZeRO-3's groups for those gathers and reduce-scatters (Layout::group masks): all data-parallel
// ranks (DP × CP), or with hybrid sharding (zero_shard_group) the rank's shard group.
unsigned zero3_shard_axes(const ParallelPlan& plan);
// Parameters held by one rank of pipeline stage `stage` (after TP, before ZeRO sharding).
std::int64_t stage_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage);
// Of those, the routed experts' (split over EP × ETP); 0 for a dense model.
std::int64_t stage_expert_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage);
// The global indices of the layers pipeline rank `stage` holds, in order; the LM head's rank
// also holds the multi-token-prediction modules' layers, numbered after the model's (num_layers,
// num_layers + 1, …), as Megatron-Core places them with the loss on the last virtual stage.
std::vector<std::int64_t> stage_layer_indices(const ParallelPlan& plan, const ir::ModelSpec& model,
                                              std::int64_t stage);
// Parameters of one multi-token-prediction module besides its layer, on one TP rank: the two
// norms and the 2h → h projection split over TP (DeepSeek-V3 Sec. 2.2; its embedding and LM
// head are the model's).
std::int64_t mtp_projection_parameters(const ir::ModelSpec& model, const ParallelPlan& plan);

// A coarse symmetric lowering without the repeats, for sweeps (see runtime::replay_blocks): each
// device's program as a sequence of blocks — the parameter gathers that open the iteration, one
// micro-batch's forward or backward on one model chunk, the optimizer step that closes it — each
// an instance of a template, the tasks that the block lowers to, stored once for all the blocks
// of the device that lower alike. Blocks lower alike when the lowering state they read agrees:
// their kind and model chunk, whether the micro-batch is the iteration's last, whether the chunk
// ran a forward before (the first one waits for the gathered parameters), the fill of the
// gradient bucket, and whether the registers they read hold a task. A template's tasks wait for
// tasks of the same template or, through registers, for the tasks that earlier blocks of the
// device left there (the layer whose compute lets the next ZeRO-3 gather start, the last
// gradient bucket, …): dependency ids from kRegisterBase on name register id − kRegisterBase.
// Lowering the blocks in order, each as its template with the registers' tasks for the ids,
// gives lower()'s coarse graph (up to the order of its tasks within a device).
struct BlockProgram {
  static constexpr std::int32_t kRegisterBase = std::int32_t{1} << 29;
  struct Template {
    std::int32_t device = 0;       // whose blocks it lowers (index into graph.devices)
    std::uint32_t task_begin = 0;  // its tasks: graph.tasks[task_begin, task_begin + task_count)
    std::uint32_t task_count = 0;
    // What the registers hold after the block, where it changed them: one of the template's
    // tasks, what another register held before the block, or no task.
    struct Write {
      std::int32_t reg = 0;
      std::int32_t task = -1;           // index among the template's tasks
      std::int32_t from_register = -1;
    };
    std::vector<Write> writes;
    // The template of another device it copies (LoweringOptions::share_templates): the same
    // tasks, chains and dependencies but for the device, layers, communicators and micro-batches;
    // -1 when lowered.
    std::int32_t copy_of = -1;
  };
  struct Block {
    std::uint32_t templ = 0;
    std::int32_t micro_batch = -1;  // the template's tasks carry its first block's
    // An overlapped forward and backward (DualPipeV): micro_batch is the forward's, this the
    // backward's (its tasks are those not of the forward pass); else -1.
    std::int32_t micro_batch2 = -1;
  };
  TaskGraph graph;  // the devices, and the templates' tasks with their chains, op lists, communicators
  std::vector<Template> templates;
  std::vector<std::vector<Block>> blocks;  // per device, in program order
  std::int32_t registers = 0;
};

// `options` must ask for a coarse, symmetric lowering. `storage`: as for lower().
BlockProgram lower_blocks(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                          BlockProgram storage = {});

// `storage`: a graph whose memory the result reuses, its contents discarded (a sweep lowers
// thousands of plans: growing and faulting in fresh task arrays cost more than filling them).
TaskGraph lower(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                TaskGraph storage = {});

}  // namespace ts::parallel
