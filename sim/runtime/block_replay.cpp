#include "sim/runtime/block_replay.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/base/hash.h"
#include "sim/runtime/replay_internal.h"

namespace ts::runtime {

using parallel::BlockProgram;
using parallel::Stream;
using parallel::Task;
using parallel::TaskKind;

namespace internal {

enum class BlockTaskKind : std::uint8_t { kCompute, kChain, kReceive, kSend };
// A template's task as the block replay reads it.
struct BlockTask {
  Duration duration;
  std::uint32_t deps_begin = 0;  // its dependencies: BlockStorage::deps[deps_begin, deps_begin + dep_count)
  std::uint8_t dep_count = 0;
  BlockTaskKind kind = BlockTaskKind::kCompute;
  std::uint8_t stream = 0;
  TimeCategory category = TimeCategory::kIdle;
  // Transfers: the channel (index into BlockStorage::channels); chains: the chain; compute tasks:
  // the split of their interval (ChainSchedules::split_of).
  std::int32_t index = -1;
};
// A dependency: a task of the same template (its index there, ≥ 0) or register −1 − value.
using BlockDep = std::int32_t;
// A template's totals, and its memory changes relative to the level at its start.
struct BlockTemplate {
  std::int64_t tasks = 0;   // a chain counting as its steps
  std::uint64_t events = 0;
  // The channels of the transfers it receives, if any: one, or two where a block runs the
  // forward of one micro-batch beside the backward of another (DualPipeV).
  std::array<std::int32_t, 2> receive{-1, -1};
  bool allocates = false;
  Bytes peak;                 // highest level reached (when `allocates`)
  std::int32_t peak_task = -1, peak_step = -1;
  Bytes net;
};
// The transfers of one pipeline pair and direction (one point-to-point communicator), in order.
struct BlockChannel {
  std::int32_t sender = -1, receiver = -1;  // devices
  // The transfers by index, stored in `stored` but for those a skip of steady-state periods
  // (BlockReplay::skip_periods) passed over: from `jump_at` on, transfer i is stored at
  // i − jump_by (the ones before jump_at are stored at their index).
  std::vector<std::pair<SimTime, SimTime>> stored;
  std::uint32_t jump_at = std::numeric_limits<std::uint32_t>::max(), jump_by = 0;
  std::uint32_t sent = 0, received = 0;  // calls evaluated so far by the sender, the receiver
  std::int32_t waiting = -1;             // the receiver, when it stopped for the next transfer

  const std::pair<SimTime, SimTime>& transfer(std::uint32_t i) const { return stored[i < jump_at ? i : i - jump_by]; }
};
struct BlockDevice {
  std::array<SimTime, parallel::kNumStreams> free{};
  std::size_t registers = 0;  // its registers: BlockStorage::registers[registers, + program registers)
  std::size_t next_block = 0;
  SimTime last_end;
  Bytes current;
  DeviceMemory memory;
  std::uint64_t events = 0;
  std::int64_t tasks = 0;
  std::size_t limit = std::numeric_limits<std::size_t>::max();  // blocks it may not reach yet
};
// A device's steady state: from block `begin`, `periods` times the same `period` templates in
// the same order (BlockReplay::skip_periods).
struct SteadyRun {
  std::size_t begin = 0, periods = 0;
  std::uint16_t streams = 0;  // the streams its templates run on
  // The registers its templates read or write: BlockStorage::run_registers[from, to).
  std::uint32_t registers_from = 0, registers_to = 0;
};
// The hash of values, for BlockReplay::skip_periods' lookups.
inline std::uint64_t hash_values(const std::vector<std::int64_t>& values) {
  std::uint64_t h = kFnvOffset;
  for (const std::int64_t v : values) h = fnv_mix(h, static_cast<std::uint64_t>(v));
  return h;
}
// The replay's state at a cut (every device at the end of one steady-state period), to compare
// with other cuts: its times, then what must be equal (memory levels and peaks, transfers in
// flight), then the counters a skip advances.
struct CutState {
  std::vector<std::int64_t> times, exact, levels;  // levels: each device's memory in use
  std::vector<std::uint64_t> counts;
  // Equal for states that are one another shifted in time (times less the first, a 0 apart;
  // `exact` as it is), as BlockReplay::skip_from compares them; from `exact`'s hash_values.
  std::uint64_t shape_hash(std::uint64_t exact_hash) const {
    std::uint64_t h = exact_hash;
    for (const std::int64_t t : times) {
      h = fnv_mix(h, static_cast<std::uint64_t>(t == 0 ? std::numeric_limits<std::int64_t>::min() : t - times[0]));
    }
    return h;
  }
  void clear() {
    times.clear();
    exact.clear();
    levels.clear();
    counts.clear();
  }
};
// A template's last two evaluations (slots), to replay the next one at once when it finds the
// state of either shifted in time (see BlockReplay::evaluate_memoized): a warm-up or a drain
// often alternates between two. A slot's values (BlockStorage::memo_values, from
// values + slot·(inputs + outputs)) are the inputs, then the outputs, each less the first input.
struct BlockMemo {
  static constexpr std::size_t kSlots = 2;
  bool usable = false;  // the template's outputs are all inputs or task ends shifted in time
  std::array<bool, kSlots> valid{};  // which slots hold an evaluation
  std::uint8_t newest = 0;           // the slot evaluated or used last
  std::uint16_t streams = 0;                   // the device's streams it reads or writes
  std::uint32_t regs_begin = 0, reg_count = 0; // registers it reads: BlockStorage::memo_regs
  std::uint32_t sends_begin = 0, send_count = 0;  // channels of its sends, in order: memo_sends
  std::uint32_t first_sends_begin = 0, first_send_count = 0;  // each channel it sends on, once
  std::array<std::int32_t, 2> receives{-1, -1};  // channels of its receives, in order
  std::uint32_t values = 0, inputs = 0, outputs = 0;
  // In the recording pass, the intervals each slot recorded: BlockStorage::recorded.
  std::array<std::uint32_t, kSlots> recorded_begin{}, recorded_count{};
};
// An interval a memoized evaluation recorded, less its first input.
struct RecordedInterval {
  std::int64_t start, end;
  std::uint8_t stream;
  TimeCategory category;
  std::int32_t split;
};

// What block replays keep from one plan to the next (in ReplayBuffers): fresh memory for each
// plan's channels and tables costs as much as the evaluation.
struct BlockStorage {
  std::vector<BlockTask> tasks;          // by task of program.graph
  std::vector<BlockDep> deps;
  std::vector<BlockTemplate> templates;  // by template
  std::vector<std::int32_t> channel_of;  // by communicator: index into channels, or -1
  std::vector<BlockChannel> channels;    // the first channel_count are the plan's
  std::size_t channel_count = 0;
  std::vector<BlockDevice> devices;
  std::vector<SimTime> registers;        // of every device
  std::vector<SimTime> ends;             // of the tasks of the block being evaluated
  std::vector<SimTime> written;          // the values its writes give the registers
  std::vector<Duration> transfer_time;   // by communicator, while preparing
  std::vector<std::int32_t> stream_comm; // by (device, stream), while preparing
  std::vector<std::int32_t> work;        // devices that may advance
  std::vector<BlockMemo> memos;          // by template
  std::vector<std::int32_t> memo_regs, memo_sends;
  std::vector<std::int64_t> memo_values;
  // The intervals of the device whose breakdown is taken, by stream: kept, as their memory
  // (millions of intervals for plans with thousands of micro-batches) costs more to grow and
  // fault in than to fill.
  std::array<std::vector<StreamInterval>, parallel::kNumStreams> intervals;
  std::vector<RecordedInterval> recorded;
  std::vector<SteadyRun> runs;  // by device
  std::vector<std::uint8_t> run_touched;     // by register: read or written in its device's run
  std::vector<std::uint32_t> run_registers;  // those registers, by device (SteadyRun)
  std::vector<std::uint8_t> run_channels;   // by channel: the runs send or receive on it
  std::array<CutState, 3> cuts;  // of skip_periods
  std::unordered_map<std::uint64_t, std::size_t> cut_hashes;  // of skip_periods
  std::unordered_set<std::uint64_t> cut_exact_hashes;         // of skip_periods
  ChainSchedules chains;         // of the program's chains
  std::vector<std::int32_t> chain_source;  // by chain: the chain it copies, or -1
};

BlockStorage& block_storage(ReplayBuffers& buffers) {
  std::shared_ptr<BlockStorage>& slot = block_storage_slot(buffers);
  if (!slot) slot = std::make_shared<BlockStorage>();
  return *slot;
}

}  // namespace internal

namespace {

using internal::BlockChannel;
using internal::BlockDep;
using internal::BlockDevice;
using internal::BlockMemo;
using internal::BlockTask;
using internal::BlockTaskKind;
using internal::BlockTemplate;

// The replay semantics are the direct replay's (executor.cpp): a task starts when its stream is
// free and what it waits for is done; a collective starts when all its simulated members have
// issued it. A block program has the two kinds of communication of a symmetric lowering:
// collectives with one simulated member (tensor, context and data parallelism: one rank per
// pipeline stage is simulated), which start as compute does, and pipeline transfers between two
// simulated devices. A transfer's receiving call waits for nothing and its stream carries the
// calls of that transfer's pair only, so it is ready when the previous transfer of the pair
// ended: the sender alone fixes when each transfer runs,
//   start = max(sender's stream free, what the send waits for, end of the pair's previous transfer).
// So each device's blocks can be evaluated in program order, task by task within its template;
// a device stops at a block whose transfer its sender has not evaluated yet, and resumes when
// the sender gets there. (The pipeline schedules are deadlock-free with blocking receives; an
// evaluation that stalls anyway gives up.) Memory peaks follow program order alone: each
// template's peak over its start and its net change give the device's peak block by block. The
// time breakdown needs every interval of a device's streams: only the device finishing last's is
// reported, so its blocks are evaluated a second time, recording them (a block whose template's
// last evaluation found the same state shifted copies that evaluation's intervals, shifted).
class BlockReplay {
 public:
  BlockReplay(const BlockProgram& program, const parallel::Layout& layout, const compute::ComputeModel& compute,
              const network::NetworkModel& network, ReplayBuffers& buffers, double slowdown)
      : p_(program),
        g_(program.graph),
        costs_(program.graph, layout, compute, network, &internal::cost_cache(buffers)),
        st_(internal::block_storage(buffers)),
        slowdown_(slowdown) {
    // The chains of copied templates, by their sources'.
    st_.chain_source.assign(g_.chains.size(), -1);
    for (const BlockProgram::Template& t : p_.templates) {
      if (t.copy_of < 0) continue;
      const BlockProgram::Template& from = p_.templates[static_cast<std::size_t>(t.copy_of)];
      for (std::uint32_t k = 0; k < t.task_count; ++k) {
        const std::int32_t c = g_.tasks[t.task_begin + k].chain;
        if (c >= 0) st_.chain_source[static_cast<std::size_t>(c)] = g_.tasks[from.task_begin + k].chain;
      }
    }
    st_.chains.plan(g_, costs_, &st_.chain_source);
    applies_ = prepare();
  }

  std::optional<ReplaySummary> run() {
    if (!applies_) return std::nullopt;
    const std::size_t n = g_.devices.size();
    st_.devices.assign(n, BlockDevice{});
    st_.registers.assign(n * static_cast<std::size_t>(p_.registers), SimTime());
    for (std::size_t d = 0; d < n; ++d) st_.devices[d].registers = d * static_cast<std::size_t>(p_.registers);
    skip_periods();
    for (BlockDevice& dev : st_.devices) dev.limit = std::numeric_limits<std::size_t>::max();
    drain();
    ReplaySummary out;
    out.memory.resize(n);
    out.time.resize(n);
    for (std::size_t d = 0; d < n; ++d) {
      const BlockDevice& dev = st_.devices[d];
      if (dev.next_block != p_.blocks[d].size()) return std::nullopt;  // stalled
      out.events += dev.events;
      out.tasks += dev.tasks;
      out.memory[d] = dev.memory;
      if (dev.last_end > out.end) {
        out.end = dev.last_end;
        out.last_device = static_cast<std::int32_t>(d);
      }
    }
    out.time[static_cast<std::size_t>(out.last_device)] = breakdown(out.last_device, out.end);
    if (skip_.done) out.skipped_blocks = static_cast<std::int64_t>(skip_.spans * (skip_.last - skip_.first) * period_ * n);
    return out;
  }

 private:
  // The intervals of a device's streams, when recorded.
  using Intervals = decltype(internal::BlockStorage::intervals);

  static bool receives(Stream s) {
    return s == Stream::kPpRecvPrev || s == Stream::kPpRecvNext || s == Stream::kPpVRecvNext ||
           s == Stream::kPpVRecvPrev;
  }
  static bool sends(Stream s) {
    return s == Stream::kPpSendNext || s == Stream::kPpSendPrev || s == Stream::kPpVSendPrev ||
           s == Stream::kPpVSendNext;
  }

  // Task durations, channels and template totals; false when the program falls outside this
  // replay (see replay_blocks).
  bool prepare() {
    st_.tasks.assign(g_.tasks.size(), BlockTask{});
    st_.deps.clear();
    st_.channel_of.assign(g_.communicators.size(), -1);
    st_.channel_count = 0;
    std::vector<Duration>& transfer_time = st_.transfer_time;
    transfer_time.assign(g_.communicators.size(), Duration::max());
    // The one communicator whose transfers each (device, point-to-point stream) carries.
    std::vector<std::int32_t>& stream_comm = st_.stream_comm;
    stream_comm.assign(g_.devices.size() * parallel::kNumStreams, -1);
    st_.templates.assign(p_.templates.size(), BlockTemplate{});
    std::uint32_t largest = 0;
    for (std::uint32_t id = 0; id < p_.templates.size(); ++id) {
      const BlockProgram::Template& t = p_.templates[id];
      if (t.copy_of >= 0 ? !prepare_copy(id, t, transfer_time, stream_comm)
                         : !prepare_template(id, t, transfer_time, stream_comm)) {
        return false;
      }
      largest = std::max(largest, p_.templates[id].task_count);
    }
    st_.ends.resize(largest);
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      const BlockChannel& channel = st_.channels[c];
      if (channel.sender < 0 || channel.receiver < 0 || channel.sender == channel.receiver) return false;
    }
    prepare_memos();
    return true;
  }

  // What each template reads and writes of its device's state, for evaluate_memoized.
  void prepare_memos() {
    st_.memos.assign(p_.templates.size(), BlockMemo{});
    st_.memo_regs.clear();
    st_.memo_sends.clear();
    std::uint32_t values = 0;
    for (std::size_t id = 0; id < p_.templates.size(); ++id) {
      const BlockProgram::Template& t = p_.templates[id];
      BlockMemo& m = st_.memos[id];
      m.usable = t.task_count > 0;
      m.regs_begin = static_cast<std::uint32_t>(st_.memo_regs.size());
      m.sends_begin = static_cast<std::uint32_t>(st_.memo_sends.size());
      std::uint32_t receives = 0;
      auto read_register = [&](std::int32_t reg) {
        const auto begin = st_.memo_regs.begin() + m.regs_begin;
        if (std::find(begin, st_.memo_regs.end(), reg) == st_.memo_regs.end()) st_.memo_regs.push_back(reg);
      };
      // A copied template reads its source's streams and registers (its channels are its own).
      const bool copy = t.copy_of >= 0;
      if (copy) {
        const BlockMemo& from = st_.memos[static_cast<std::size_t>(t.copy_of)];
        m.streams = from.streams;
        m.regs_begin = from.regs_begin;
      }
      for (std::uint32_t k = 0; k < t.task_count; ++k) {
        const BlockTask& info = st_.tasks[t.task_begin + k];
        if (!copy) {
          m.streams |= static_cast<std::uint16_t>(1u << info.stream);
          for (std::uint32_t e = info.deps_begin; e < info.deps_begin + info.dep_count; ++e) {
            if (st_.deps[e] < 0) read_register(-1 - st_.deps[e]);
          }
        }
        switch (info.kind) {
          case BlockTaskKind::kCompute: break;
          case BlockTaskKind::kChain: {
            if (copy) break;
            const parallel::Chain& chain = g_.chains[static_cast<std::size_t>(info.index)];
            for (std::uint32_t s = chain.step_begin; s < chain.step_begin + chain.step_count; ++s) {
              m.streams |= static_cast<std::uint16_t>(1u << static_cast<unsigned>(g_.chain_steps[s].stream));
            }
            break;
          }
          case BlockTaskKind::kReceive:
            // A second receive from one channel would read a transfer further on: not memoized.
            if (receives == 2 || (receives == 1 && m.receives[0] == info.index)) m.usable = false;
            if (receives < 2) m.receives[receives++] = info.index;
            break;
          case BlockTaskKind::kSend: st_.memo_sends.push_back(info.index); break;
        }
      }
      m.send_count = static_cast<std::uint32_t>(st_.memo_sends.size()) - m.sends_begin;
      // The channels it sends on, once each: the end of each one's previous transfer is an input.
      m.first_sends_begin = static_cast<std::uint32_t>(st_.memo_sends.size());
      for (std::uint32_t k = 0; k < m.send_count; ++k) {
        const std::int32_t c = st_.memo_sends[m.sends_begin + k];
        const auto begin = st_.memo_sends.begin() + m.first_sends_begin;
        if (std::find(begin, st_.memo_sends.end(), c) == st_.memo_sends.end()) st_.memo_sends.push_back(c);
      }
      m.first_send_count = static_cast<std::uint32_t>(st_.memo_sends.size()) - m.first_sends_begin;
      for (const BlockProgram::Template::Write& w : t.writes) {
        if (w.task < 0 && w.from_register < 0) m.usable = false;  // a constant, not shifted
        if (w.from_register >= 0 && !copy) read_register(w.from_register);
      }
      m.reg_count = copy ? st_.memos[static_cast<std::size_t>(t.copy_of)].reg_count
                         : static_cast<std::uint32_t>(st_.memo_regs.size()) - m.regs_begin;
      const auto streams = static_cast<std::uint32_t>(std::popcount(m.streams));
      m.inputs = streams + m.reg_count + 2 * receives + m.first_send_count;
      m.outputs = streams + static_cast<std::uint32_t>(t.writes.size()) + 2 * m.send_count + 1;
      m.values = values;
      values += static_cast<std::uint32_t>(BlockMemo::kSlots) * (m.inputs + m.outputs);
    }
    st_.memo_values.resize(values);
  }

  bool prepare_template(std::uint32_t id, const BlockProgram::Template& t, std::vector<Duration>& transfer_time,
                        std::vector<std::int32_t>& stream_comm) {
    BlockTemplate& ti = st_.templates[id];
    const std::int32_t device = t.device;
    Bytes level;
    auto account = [&](const Task& task, std::int32_t index, std::int32_t step) {
      if (task.alloc_at_start.count() == 0 && task.free_at_end.count() == 0) return true;
      // Memory changes on the compute stream only: program order is then their time order.
      if (task.stream != Stream::kCompute) return false;
      level += task.alloc_at_start;
      if (!ti.allocates || level > ti.peak) {
        ti.allocates = true;
        ti.peak = level;
        ti.peak_task = index;
        ti.peak_step = step;
      }
      level -= task.free_at_end;
      return true;
    };
    for (std::uint32_t i = t.task_begin; i < t.task_begin + t.task_count; ++i) {
      const Task& task = g_.tasks[i];
      BlockTask& info = st_.tasks[i];
      info.stream = static_cast<std::uint8_t>(task.stream);
      info.category = task_category(task);
      info.deps_begin = static_cast<std::uint32_t>(st_.deps.size());
      info.dep_count = static_cast<std::uint8_t>(task.dep_count);
      if (task.dep_count > 255) return false;
      for (std::uint32_t k = task.dep_begin; k < task.dep_begin + task.dep_count; ++k) {
        const std::uint32_t dep = g_.deps[k];
        if (dep >= static_cast<std::uint32_t>(BlockProgram::kRegisterBase)) {
          st_.deps.push_back(-1 - static_cast<BlockDep>(dep - static_cast<std::uint32_t>(BlockProgram::kRegisterBase)));
        } else if (dep >= t.task_begin && dep < i) {
          st_.deps.push_back(static_cast<BlockDep>(dep - t.task_begin));
        } else {
          return false;
        }
      }
      ++ti.tasks;
      if (task.chain >= 0) {
        const parallel::Chain& chain = g_.chains[static_cast<std::size_t>(task.chain)];
        info.kind = BlockTaskKind::kChain;
        info.index = task.chain;
        ti.tasks += chain.step_count - 1;
        ti.events += chain.step_count;
        for (std::uint32_t s = chain.step_begin; s < chain.step_begin + chain.step_count; ++s) {
          if (!account(g_.chain_steps[s], static_cast<std::int32_t>(i), static_cast<std::int32_t>(s))) return false;
        }
        continue;
      }
      if (!account(task, static_cast<std::int32_t>(i), -1)) return false;
      if (task.kind == TaskKind::kCompute) {
        info.kind = BlockTaskKind::kCompute;
        info.duration = costs_.compute_time(task);
        info.index = st_.chains.split_of(task);
        ++ti.events;
        continue;
      }
      info.duration = costs_.comm_time(task, costs_.comm_cost(task));
      if (task.kind == TaskKind::kCollective) {
        if (costs_.members(task.communicator) != 1) return false;
        info.kind = BlockTaskKind::kCompute;
        ++ti.events;
        continue;
      }
      if (!prepare_transfer(task, info, device, ti, transfer_time, stream_comm)) return false;
      if (info.kind == BlockTaskKind::kSend) ++ti.events;  // a transfer is one event, counted with its send
    }
    ti.net = level;
    return true;
  }

  // A copied template (BlockProgram::Template::copy_of) as prepare_template would prepare it:
  // its source's tasks' durations, dependencies (shared), memory and counts, but for its own
  // collectives' costs, transfers' channels and chains.
  bool prepare_copy(std::uint32_t id, const BlockProgram::Template& t, std::vector<Duration>& transfer_time,
                    std::vector<std::int32_t>& stream_comm) {
    const BlockProgram::Template& from = p_.templates[static_cast<std::size_t>(t.copy_of)];
    BlockTemplate& ti = st_.templates[id];
    ti = st_.templates[static_cast<std::size_t>(t.copy_of)];
    ti.receive = {-1, -1};
    if (ti.peak_task >= 0) {
      const std::int32_t source_chain = g_.tasks[static_cast<std::size_t>(ti.peak_task)].chain;
      ti.peak_task += static_cast<std::int32_t>(t.task_begin) - static_cast<std::int32_t>(from.task_begin);
      if (ti.peak_step >= 0) {
        const std::int32_t chain = g_.tasks[static_cast<std::size_t>(ti.peak_task)].chain;
        ti.peak_step += static_cast<std::int32_t>(g_.chains[static_cast<std::size_t>(chain)].step_begin) -
                        static_cast<std::int32_t>(g_.chains[static_cast<std::size_t>(source_chain)].step_begin);
      }
    }
    for (std::uint32_t k = 0; k < t.task_count; ++k) {
      const Task& task = g_.tasks[t.task_begin + k];
      BlockTask& info = st_.tasks[t.task_begin + k];
      info = st_.tasks[from.task_begin + k];
      if (info.kind == BlockTaskKind::kChain) {
        info.index = task.chain;
        continue;
      }
      if (task.kind == TaskKind::kCompute) continue;
      info.duration = costs_.comm_time(task, costs_.comm_cost(task));
      if (task.kind == TaskKind::kCollective ? costs_.members(task.communicator) != 1
                                             : !prepare_transfer(task, info, t.device, ti, transfer_time, stream_comm)) {
        return false;
      }
    }
    return true;
  }

  // A transfer: its pair's channel, the stream carrying it, its cost alike on both sides.
  bool prepare_transfer(const Task& task, BlockTask& info, std::int32_t device, BlockTemplate& ti,
                        std::vector<Duration>& transfer_time, std::vector<std::int32_t>& stream_comm) {
    if (costs_.members(task.communicator) != 2) return false;
    const auto comm = static_cast<std::size_t>(task.communicator);
    if (st_.channel_of[comm] < 0) {
      // A fresh channel, in storage a previous plan may have left (its transfers' memory kept).
      st_.channel_of[comm] = static_cast<std::int32_t>(st_.channel_count);
      if (st_.channel_count == st_.channels.size()) st_.channels.emplace_back();
      BlockChannel& fresh = st_.channels[st_.channel_count++];
      fresh.sender = fresh.receiver = fresh.waiting = -1;
      fresh.sent = fresh.received = 0;
      fresh.stored.clear();
      fresh.jump_at = std::numeric_limits<std::uint32_t>::max();
      fresh.jump_by = 0;
    }
    info.index = st_.channel_of[comm];
    BlockChannel& channel = st_.channels[static_cast<std::size_t>(info.index)];
    std::int32_t& carried = stream_comm[static_cast<std::size_t>(device) * parallel::kNumStreams + info.stream];
    if (carried >= 0 && carried != task.communicator) return false;
    carried = task.communicator;
    if (transfer_time[comm] != Duration::max() && transfer_time[comm] != info.duration) return false;
    transfer_time[comm] = info.duration;
    std::int32_t& side = receives(task.stream) ? channel.receiver : channel.sender;
    if (side >= 0 && side != device) return false;
    side = device;
    if (receives(task.stream)) {
      if (task.dep_count != 0 || ti.receive[1] >= 0) return false;
      info.kind = BlockTaskKind::kReceive;
      ti.receive[ti.receive[0] >= 0 ? 1 : 0] = info.index;
    } else {
      if (!sends(task.stream)) return false;
      info.kind = BlockTaskKind::kSend;
    }
    return true;
  }

  // Advances every device as far as it can (to its limit, or until it waits for a transfer).
  void drain() {
    std::vector<std::int32_t>& work = st_.work;
    work.clear();
    for (std::size_t d = st_.devices.size(); d-- > 0;) work.push_back(static_cast<std::int32_t>(d));
    while (!work.empty()) {
      const std::int32_t d = work.back();
      work.pop_back();
      advance(d, work);
    }
  }

  // Each device's steady state (SteadyRun), with one period length for all; false if a device
  // has none of at least four periods. The templates around the middle of a device's program
  // give its period, the shortest shift that repeats them; the common period is the least
  // common multiple of the devices' (an interleaved schedule's middle may show one model chunk
  // only), and each run extends from the middle both ways as far as it holds.
  bool find_steady_runs() {
    constexpr std::size_t kLongestPeriod = 4096;
    const std::size_t n_devices = st_.devices.size();
    period_ = 1;
    for (std::size_t d = 0; d < n_devices; ++d) {
      const auto& blocks = p_.blocks[d];
      const std::size_t n = blocks.size(), mid = n / 2;
      std::size_t period = 0;
      for (std::size_t j = mid + 1; j - mid <= kLongestPeriod && mid + 2 * (j - mid) <= n; ++j) {
        if (blocks[mid].templ != blocks[j].templ) continue;
        std::size_t i = 1;
        while (i < j - mid && blocks[mid + i].templ == blocks[j + i].templ) ++i;
        if (i == j - mid) {
          period = j - mid;
          break;
        }
      }
      if (period == 0) return false;
      period_ = std::lcm(period_, period);
      if (period_ > kLongestPeriod) return false;
    }
    st_.runs.assign(n_devices, internal::SteadyRun{});
    st_.run_touched.assign(st_.registers.size(), 0);
    st_.run_registers.clear();
    st_.run_channels.assign(st_.channel_count, 0);
    for (std::size_t d = 0; d < n_devices; ++d) {
      const auto& blocks = p_.blocks[d];
      const std::size_t n = blocks.size(), mid = n / 2;
      auto repeats = [&blocks, this](std::size_t i) { return blocks[i].templ == blocks[i - period_].templ; };
      if (mid + period_ > n) return false;
      std::size_t begin = mid, end = mid + period_;
      while (begin > 0 && begin - 1 + period_ < n && repeats(begin - 1 + period_)) --begin;
      while (end < n && repeats(end)) ++end;
      internal::SteadyRun& run = st_.runs[d];
      run = {begin, (end - begin) / period_, 0};
      if (run.periods < 4) return false;
      std::uint8_t* touched = st_.run_touched.data() + st_.devices[d].registers;
      for (std::size_t i = begin; i < begin + period_; ++i) {
        const BlockMemo& m = st_.memos[blocks[i].templ];
        run.streams |= m.streams;
        for (std::uint32_t k = 0; k < m.reg_count; ++k) touched[st_.memo_regs[m.regs_begin + k]] = 1;
        for (const BlockProgram::Template::Write& w : p_.templates[blocks[i].templ].writes) touched[w.reg] = 1;
        for (const std::int32_t c : m.receives) {
          if (c >= 0) st_.run_channels[static_cast<std::size_t>(c)] = 1;
        }
        for (std::uint32_t k = 0; k < m.send_count; ++k) st_.run_channels[static_cast<std::size_t>(st_.memo_sends[m.sends_begin + k])] = 1;
      }
      run.registers_from = static_cast<std::uint32_t>(st_.run_registers.size());
      for (std::size_t r = 0; r < static_cast<std::size_t>(p_.registers); ++r) {
        if (touched[r] != 0) st_.run_registers.push_back(static_cast<std::uint32_t>(st_.devices[d].registers + r));
      }
      run.registers_to = static_cast<std::uint32_t>(st_.run_registers.size());
    }
    return true;
  }

  // What must be equal at two cuts for a skip (CutState::exact): every device's memory peak;
  // the transfers in flight on each channel of the runs, and whether its receiver waits.
  void cut_exact(internal::CutState& out) const {
    out.clear();
    for (const BlockDevice& dev : st_.devices) out.exact.push_back(dev.memory.peak_dynamic.count());
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      if (st_.run_channels[c] == 0) continue;
      out.exact.push_back(st_.channels[c].sent - st_.channels[c].received);
      out.exact.push_back(st_.channels[c].waiting);
    }
  }

  // The rest of the state at a cut (see CutState), after cut_exact: every device's stream free
  // times, registers and last end; the transfers in flight on each channel and the one each
  // sent last.
  void cut_state(internal::CutState& out) const {
    for (std::size_t d = 0; d < st_.devices.size(); ++d) {
      const BlockDevice& dev = st_.devices[d];
      const internal::SteadyRun& run = st_.runs[d];
      out.times.push_back(dev.last_end.ps());
      for (std::uint32_t bits = run.streams; bits != 0; bits &= bits - 1) {
        out.times.push_back(dev.free[static_cast<std::size_t>(std::countr_zero(bits))].ps());
      }
      for (std::uint32_t r = run.registers_from; r < run.registers_to; ++r) {
        out.times.push_back(st_.registers[st_.run_registers[r]].ps());
      }
      out.levels.push_back(dev.current.count());
      out.counts.push_back(dev.events);
      out.counts.push_back(static_cast<std::uint64_t>(dev.tasks));
    }
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      const BlockChannel& channel = st_.channels[c];
      out.counts.push_back(channel.sent);
      if (st_.run_channels[c] == 0) continue;
      for (std::uint32_t i = first_kept(channel); i < channel.sent; ++i) {
        out.times.push_back(channel.transfer(i).first.ps());
        out.times.push_back(channel.transfer(i).second.ps());
      }
    }
  }

  // Device d's block at cut k: the end of the k-th period of its steady run.
  std::size_t cut(std::int32_t d, std::size_t k) const { return st_.runs[static_cast<std::size_t>(d)].begin + k * period_; }

  // The first transfer of a channel that the state keeps: those in flight and the last sent.
  static std::uint32_t first_kept(const BlockChannel& c) {
    return c.sent == 0 ? 0 : std::min(c.received, c.sent - 1);
  }

  // Skips steady-state periods: when every device, at the end of a period of its steady run
  // (a cut), finds its state that of an earlier cut shifted by one time δ (every time that is
  // not 0 later by δ, a 0 still 0; memory levels and peaks, transfers in flight alike), the next
  // periods, made of the same templates, repeat the span between them: each is a function of
  // the state at its cut whose times are maxima and sums of those times and of durations (see
  // evaluate_memoized), and a time still 0 after a whole period was read by no task that ran (a
  // 0 decides no maximum of times). So the state after j more spans is this one shifted by j·δ,
  // exactly, as long as every device's run goes on: that many spans are skipped at once. The
  // devices advance in step, cut by cut (a device stops at its cut); where they cannot all reach
  // one, or no two cuts match, the replay goes on without a skip.
  //
  // A state may come back after one period or only after several: a small delay that travels
  // down the pipeline and back (a deep 1F1B pipeline's stages settle into a cycle as long as the
  // pipeline) comes back after as many periods as stages. So each cut's state is compared with
  // the cut before's, and hashed as it compares (times less device 0's last end, what must be
  // equal): a cut whose hash an earlier cut had, c ≥ 2 cuts before, proposes a cycle of c
  // periods, which the cut c periods later confirms by comparing whole states. A cut whose memory
  // peaks and transfers in flight no earlier cut had (a pipeline whose stages drift apart has
  // more in flight at every cut) repeats none: its times, which grow with the transfers in
  // flight, are left unread.
  void skip_periods() {
    skip_ = {};
    if (!find_steady_runs()) return;
    std::size_t shortest = std::numeric_limits<std::size_t>::max();
    for (const internal::SteadyRun& r : st_.runs) shortest = std::min(shortest, r.periods);
    internal::CutState* before = &st_.cuts[0];  // the cut before, whole (cut_state) if `whole`
    internal::CutState* now = &st_.cuts[1];
    internal::CutState& proposed = st_.cuts[2];  // the state at cut `from`, while a span is proposed
    auto& seen = st_.cut_hashes;  // a whole state's hash: the last cut with it
    auto& seen_exact = st_.cut_exact_hashes;
    seen.clear();
    seen_exact.clear();
    std::size_t from = 0, span = 0;
    bool whole = false;
    for (std::size_t k = 1; k + 1 < shortest; ++k) {
      for (std::size_t d = 0; d < st_.devices.size(); ++d) st_.devices[d].limit = cut(static_cast<std::int32_t>(d), k);
      drain();
      for (std::size_t d = 0; d < st_.devices.size(); ++d) {
        if (st_.devices[d].next_block != st_.devices[d].limit) return;
      }
      cut_exact(*now);
      const std::uint64_t exact_hash = internal::hash_values(now->exact);
      const bool confirm = span > 0 && k == from + span;
      const bool whole_before = whole;
      whole = !seen_exact.insert(exact_hash).second || k == 1 || confirm;
      if (whole) {
        cut_state(*now);
        if (whole_before && skip_from(*before, *now, k, 1, shortest - k)) return;
        if (confirm) {
          if (skip_from(proposed, *now, k, span, (shortest - k) / span)) return;
          span = 0;
        }
        const auto [at, fresh] = seen.try_emplace(now->shape_hash(exact_hash), k);
        // A cycle of one period is the comparison with the cut before; a longer one is proposed
        // only where it could be skipped once confirmed.
        if (!fresh && span == 0 && k - at->second >= 2 && k + 2 * (k - at->second) < shortest) {
          span = k - at->second;
          from = k;
          proposed = *now;
        }
        at->second = k;
      }
      std::swap(before, now);
    }
  }

  // Skips `spans` times `span` periods after cut k if state `b` there is state `a`, of cut
  // k − span, shifted (skip_periods).
  bool skip_from(const internal::CutState& a, const internal::CutState& b, std::size_t k, std::size_t span,
                 std::size_t spans) {
    if (spans == 0) return false;
    if (a.exact != b.exact || a.times.size() != b.times.size()) return false;
    // Memory may fall from period to period (a run of backwards): no peak comes later.
    for (std::size_t d = 0; d < a.levels.size(); ++d) {
      if (b.levels[d] > a.levels[d]) return false;
    }
    const std::int64_t delta = b.times[0] - a.times[0];  // device 0's last end
    if (delta <= 0) return false;
    for (std::size_t i = 0; i < a.times.size(); ++i) {
      if (b.times[i] != (a.times[i] == 0 && b.times[i] == 0 ? 0 : a.times[i] + delta)) return false;
    }
    // The skipped transfers are not stored: a channel's kept transfers move past them.
    const auto jump = static_cast<std::int64_t>(spans) * delta;
    if (jump >= (std::int64_t{1} << 61) - b.times[0]) return false;
    std::vector<std::uint32_t> per_span(st_.channel_count, 0);  // transfers over each channel
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      const BlockChannel& channel = st_.channels[c];
      per_span[c] = static_cast<std::uint32_t>(b.counts[2 * st_.devices.size() + c] - a.counts[2 * st_.devices.size() + c]);
      const std::uint64_t moved = static_cast<std::uint64_t>(per_span[c]) * spans;
      if (st_.run_channels[c] == 0) continue;  // no transfer in the periods
      if (moved > std::numeric_limits<std::uint32_t>::max() / 2 || moved < channel.sent - first_kept(channel)) return false;
    }
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      BlockChannel& channel = st_.channels[c];
      const auto moved = static_cast<std::uint32_t>(per_span[c] * spans);
      if (moved == 0) continue;
      const std::uint32_t kept = first_kept(channel);
      for (std::uint32_t i = kept; i < channel.sent; ++i) {
        const auto [start, end] = channel.transfer(i);
        channel.stored.emplace_back(start + Duration::from_ps(jump), end + Duration::from_ps(jump));
      }
      channel.jump_at = kept + moved;
      channel.jump_by = moved - (channel.sent - kept);
      channel.sent += moved;
      channel.received += moved;
    }
    for (std::size_t d = 0; d < st_.devices.size(); ++d) {
      BlockDevice& dev = st_.devices[d];
      shift(dev, st_.runs[d], jump);
      dev.next_block += spans * span * period_;
      dev.current += Bytes(static_cast<std::int64_t>(spans) * (b.levels[d] - a.levels[d]));
      dev.events += spans * (b.counts[2 * d] - a.counts[2 * d]);
      dev.tasks += static_cast<std::int64_t>(spans * (b.counts[2 * d + 1] - a.counts[2 * d + 1]));
    }
    skip_ = {true, k - span, k, spans, delta, std::move(per_span)};
    return true;
  }

  // A device's times that its run reads or writes and that are not 0 moved `jump` later (a skip).
  void shift(BlockDevice& dev, const internal::SteadyRun& run, std::int64_t jump) {
    auto move = [jump](SimTime& t) {
      if (t.ps() != 0) t = SimTime::from_ps(t.ps() + jump);
    };
    for (std::uint32_t bits = run.streams; bits != 0; bits &= bits - 1) {
      move(dev.free[static_cast<std::size_t>(std::countr_zero(bits))]);
    }
    for (std::uint32_t r = run.registers_from; r < run.registers_to; ++r) move(st_.registers[st_.run_registers[r]]);
    move(dev.last_end);
  }

  // Evaluates device d's blocks until it ends or waits for a transfer.
  void advance(std::int32_t d, std::vector<std::int32_t>& work) {
    BlockDevice& dev = st_.devices[static_cast<std::size_t>(d)];
    const auto& blocks = p_.blocks[static_cast<std::size_t>(d)];
    for (; dev.next_block < blocks.size() && dev.next_block < dev.limit; ++dev.next_block) {
      const BlockProgram::Block& b = blocks[dev.next_block];
      const BlockTemplate& ti = st_.templates[b.templ];
      for (const std::int32_t receive : ti.receive) {
        if (receive < 0) continue;
        BlockChannel& c = st_.channels[static_cast<std::size_t>(receive)];
        if (c.received >= c.sent) {
          c.waiting = d;
          return;
        }
      }
      evaluate_memoized<false>(dev, b, work, nullptr);
      dev.events += ti.events;
      dev.tasks += ti.tasks;
      if (ti.allocates && dev.current + ti.peak > dev.memory.peak_dynamic) {
        dev.memory.peak_dynamic = dev.current + ti.peak;
        dev.memory.peak_task = ti.peak_task;
        dev.memory.peak_step = ti.peak_step;
        // An overlapped block's backward tasks carry the backward's micro-batch.
        const Task& at = ti.peak_step >= 0 ? g_.chain_steps[static_cast<std::size_t>(ti.peak_step)]
                                           : g_.tasks[static_cast<std::size_t>(ti.peak_task)];
        dev.memory.peak_micro_batch =
            b.micro_batch2 >= 0 && at.pass != parallel::Pass::kForward ? b.micro_batch2 : b.micro_batch;
      }
      dev.current += ti.net;
    }
  }

  // Runs block b of a device as evaluate<false> does, at once when its template's last
  // evaluation (of an earlier block) found the same state shifted by a constant time: the block's
  // times are maxima and sums of its inputs (stream free times, registers, transfers received,
  // the previous transfer of each channel it sends on) and of durations, so shifting every input
  // by δ shifts every output by δ, exactly (integer picoseconds). Times start at 0 and only a
  // stream's free time (≥ 0) meets the 0 a task without dependencies is ready at, so that 0
  // never decides a maximum. A pipeline's steady state repeats its blocks' states this way, one
  // period later each time.
  //
  // kRecord: the recording pass of the breakdown (evaluate<true>), which also keeps the intervals
  // the evaluation recorded, and replays them shifted.
  template <bool kRecord>
  void evaluate_memoized(BlockDevice& dev, const BlockProgram::Block& b, std::vector<std::int32_t>& work,
                         Intervals* record) {
    BlockMemo& m = st_.memos[b.templ];
    if (!m.usable) {
      evaluate<kRecord>(dev, b, work, record);
      return;
    }
    // The first transfer of a channel waits for no previous one: its 0 is not shifted.
    for (std::uint32_t k = 0; k < m.first_send_count; ++k) {
      if (st_.channels[static_cast<std::size_t>(st_.memo_sends[m.first_sends_begin + k])].sent == 0) {
        evaluate<kRecord>(dev, b, work, record);
        return;
      }
    }
    SimTime* registers = st_.registers.data() + dev.registers;
    const std::int64_t base = dev.free[static_cast<std::size_t>(std::countr_zero(m.streams))].ps();  // the first input
    const BlockProgram::Template& t = p_.templates[b.templ];
    auto slot_values = [this, &m](std::size_t slot) { return st_.memo_values.data() + m.values + slot * (m.inputs + m.outputs); };
    // Far from the clock's saturation (simulate() rejects iterations beyond 2^62 ps), so that
    // the shifted times are those the evaluation would give.
    if (base < (std::int64_t{1} << 61)) {
      for (std::size_t k = 0; k < BlockMemo::kSlots; ++k) {
        const std::size_t slot = (m.newest + k) % BlockMemo::kSlots;
        std::int64_t* v = slot_values(slot);
        if (m.valid[slot] && inputs<false>(dev, m, registers, base, v)) {
          m.newest = static_cast<std::uint8_t>(slot);
          apply_memo<kRecord>(dev, m, slot, t, v + m.inputs, base, registers, work, record);
          return;
        }
      }
    }
    // Into the slot not used last (an empty one first).
    std::size_t slot = (m.newest + 1) % BlockMemo::kSlots;
    if (!m.valid[m.newest]) slot = m.newest;
    std::int64_t* v = slot_values(slot);
    inputs<true>(dev, m, registers, base, v);
    m.valid[slot] = false;
    std::array<std::size_t, parallel::kNumStreams> recorded{};
    if constexpr (kRecord) {
      for (std::size_t s = 0; s < parallel::kNumStreams; ++s) recorded[s] = (*record)[s].size();
    }
    const SimTime last = evaluate<kRecord>(dev, b, work, record);
    std::int64_t* out = v + m.inputs;
    if (last.ps() >= (std::int64_t{1} << 61)) return;
    for (std::uint32_t bits = m.streams; bits != 0; bits &= bits - 1) {
      *out++ = dev.free[static_cast<std::size_t>(std::countr_zero(bits))].ps() - base;
    }
    for (const BlockProgram::Template::Write& w : t.writes) *out++ = registers[w.reg].ps() - base;
    const std::int32_t* sends = st_.memo_sends.data() + m.sends_begin;
    for (std::uint32_t k = 0; k < m.send_count; ++k) {
      // The j-th of the block's n sends on its channel is the channel's transfer sent − n + j.
      std::uint32_t j = 0, n = 0;
      for (std::uint32_t i = 0; i < m.send_count; ++i) {
        if (sends[i] != sends[k]) continue;
        if (i < k) ++j;
        ++n;
      }
      const BlockChannel& c = st_.channels[static_cast<std::size_t>(sends[k])];
      const auto& transfer = c.transfer(c.sent - n + j);
      *out++ = transfer.first.ps() - base;
      *out++ = transfer.second.ps() - base;
    }
    *out = last.ps() - base;
    if constexpr (kRecord) {
      m.recorded_begin[slot] = static_cast<std::uint32_t>(st_.recorded.size());
      for (std::size_t s = 0; s < parallel::kNumStreams; ++s) {
        for (std::size_t i = recorded[s]; i < (*record)[s].size(); ++i) {
          const StreamInterval& r = (*record)[s][i];
          st_.recorded.push_back({r.start.ps() - base, r.end.ps() - base, static_cast<std::uint8_t>(s), r.category, r.split});
        }
      }
      m.recorded_count[slot] = static_cast<std::uint32_t>(st_.recorded.size()) - m.recorded_begin[slot];
    }
    m.valid[slot] = true;
    m.newest = static_cast<std::uint8_t>(slot);
  }

  // The inputs of a memoized template's block, less `base`, in order: the device's streams'
  // free times, the registers it reads, the transfers it receives, and the previous transfer of
  // each channel it sends on (each has sent one). kStore: written to `v`; else compared with
  // `v`, true when all equal.
  template <bool kStore>
  bool inputs(const BlockDevice& dev, const BlockMemo& m, const SimTime* registers, std::int64_t base,
              std::int64_t* v) const {
    auto next = [&v, base](std::int64_t x) {
      if constexpr (kStore) {
        *v++ = x - base;
        return true;
      } else {
        return *v++ == x - base;
      }
    };
    for (std::uint32_t bits = m.streams; bits != 0; bits &= bits - 1) {
      if (!next(dev.free[static_cast<std::size_t>(std::countr_zero(bits))].ps())) return false;
    }
    for (std::uint32_t k = 0; k < m.reg_count; ++k) {
      if (!next(registers[st_.memo_regs[m.regs_begin + k]].ps())) return false;
    }
    for (const std::int32_t r : m.receives) {
      if (r < 0) continue;
      const BlockChannel& c = st_.channels[static_cast<std::size_t>(r)];  // advance() saw it there
      if (!next(c.transfer(c.received).first.ps()) || !next(c.transfer(c.received).second.ps())) return false;
    }
    for (std::uint32_t k = 0; k < m.first_send_count; ++k) {
      const BlockChannel& c = st_.channels[static_cast<std::size_t>(st_.memo_sends[m.first_sends_begin + k])];
      if (!next(c.transfer(c.sent - 1).second.ps())) return false;
    }
    return true;
  }

  // The outputs of a memoized evaluation (evaluate_memoized), shifted to `base`; kRecord: its
  // intervals too, its transfers being in their channels already.
  template <bool kRecord>
  void apply_memo(BlockDevice& dev, const BlockMemo& m, std::size_t slot, const BlockProgram::Template& t, const std::int64_t* out,
                  std::int64_t base, SimTime* registers, std::vector<std::int32_t>& work, Intervals* record) {
    const auto at = [base](std::int64_t v) { return SimTime::from_ps(v + base); };
    for (std::uint32_t bits = m.streams; bits != 0; bits &= bits - 1) {
      dev.free[static_cast<std::size_t>(std::countr_zero(bits))] = at(*out++);
    }
    for (const BlockProgram::Template::Write& w : t.writes) registers[w.reg] = at(*out++);
    for (std::uint32_t k = 0; k < m.send_count; ++k) {
      BlockChannel& c = st_.channels[static_cast<std::size_t>(st_.memo_sends[m.sends_begin + k])];
      ++c.sent;
      if constexpr (!kRecord) {
        c.stored.emplace_back(at(out[0]), at(out[1]));
        if (c.waiting >= 0) {
          work.push_back(c.waiting);
          c.waiting = -1;
        }
      }
      out += 2;
    }
    for (const std::int32_t r : m.receives) {
      if (r >= 0) ++st_.channels[static_cast<std::size_t>(r)].received;
    }
    const SimTime last = at(*out);
    if (last > dev.last_end) dev.last_end = last;
    if constexpr (kRecord) {
      for (std::uint32_t i = m.recorded_begin[slot]; i < m.recorded_begin[slot] + m.recorded_count[slot]; ++i) {
        const internal::RecordedInterval& r = st_.recorded[i];
        (*record)[r.stream].push_back({at(r.start), at(r.end), r.category, r.split});
      }
    }
  }

  // Runs block b of a device: its template's tasks in program order. The first evaluation adds
  // the transfers it sends to their channels; the second (kRecord, for the breakdown: intervals
  // into `record`) finds them there. Returns the latest end of its tasks.
  template <bool kRecord>
  SimTime evaluate(BlockDevice& dev, const BlockProgram::Block& b, std::vector<std::int32_t>& work, Intervals* record) {
    const BlockProgram::Template& t = p_.templates[b.templ];  // st_.ends has room for its tasks
    auto note = [record](std::uint8_t stream, SimTime start, SimTime end, TimeCategory category, std::int32_t split) {
      if constexpr (kRecord) {
        (*record)[stream].push_back({start, end, category, split});
      } else {
        (void)record;  // only the recording pass writes intervals
      }
    };
    const BlockTask* infos = st_.tasks.data() + t.task_begin;
    SimTime* registers = st_.registers.data() + dev.registers;
    SimTime last;
    for (std::uint32_t k = 0; k < t.task_count; ++k) {
      const BlockTask& info = infos[k];
      SimTime ready;
      for (const BlockDep* dep = st_.deps.data() + info.deps_begin; dep != st_.deps.data() + info.deps_begin + info.dep_count; ++dep) {
        ready = std::max(ready, *dep >= 0 ? st_.ends[static_cast<std::size_t>(*dep)]
                                          : registers[-1 - *dep]);
      }
      SimTime& free = dev.free[info.stream];
      SimTime start, end;
      switch (info.kind) {
        case BlockTaskKind::kCompute:
          start = std::max(free, ready);
          end = start + info.duration;
          free = end;
          note(info.stream, start, end, info.category, info.index);
          break;
        case BlockTaskKind::kChain: {
          const auto chain = static_cast<std::uint32_t>(info.index);
          auto stream_free = [&dev](std::uint8_t s) -> SimTime& { return dev.free[s]; };
          if constexpr (kRecord) {
            end = st_.chains.run(g_, chain, ready, stream_free, note);
          } else {
            end = st_.chains.run(g_, chain, ready, stream_free, nullptr);
          }
          break;
        }
        case BlockTaskKind::kReceive: {
          BlockChannel& c = st_.channels[static_cast<std::size_t>(info.index)];
          std::tie(start, end) = c.transfer(c.received++);
          free = end;
          note(info.stream, start, end, info.category, -1);
          break;
        }
        case BlockTaskKind::kSend: {
          // The receiving call is ready when the pair's previous transfer ended.
          BlockChannel& c = st_.channels[static_cast<std::size_t>(info.index)];
          const SimTime previous = c.sent > 0 ? c.transfer(c.sent - 1).second : SimTime();
          start = std::max({free, ready, previous});
          end = start + info.duration;
          free = end;
          note(info.stream, start, end, info.category, -1);
          if constexpr (!kRecord) {
            c.stored.emplace_back(start, end);
            if (c.waiting >= 0) {
              work.push_back(c.waiting);
              c.waiting = -1;
            }
          }
          ++c.sent;
          break;
        }
      }
      st_.ends[k] = end;
      last = std::max(last, end);
    }
    if (last > dev.last_end) dev.last_end = last;
    // Registers copied from others take those's values from before the block.
    st_.written.clear();
    for (const BlockProgram::Template::Write& w : t.writes) {
      SimTime v;
      if (w.task >= 0) v = st_.ends[static_cast<std::size_t>(w.task)];
      if (w.from_register >= 0) v = registers[w.from_register];
      st_.written.push_back(v);
    }
    for (std::size_t k = 0; k < t.writes.size(); ++k) registers[t.writes[k].reg] = st_.written[k];
    return last;
  }

  // The time breakdown of device d, whose blocks run again with their intervals recorded.
  TimeBreakdown breakdown(std::int32_t d, SimTime end) {
    BlockDevice dev;
    dev.registers = st_.devices[static_cast<std::size_t>(d)].registers;
    std::fill_n(st_.registers.begin() + static_cast<std::ptrdiff_t>(dev.registers), p_.registers, SimTime());
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      BlockChannel& channel = st_.channels[c];
      if (channel.sender == d) channel.sent = 0;
      if (channel.receiver == d) channel.received = 0;
    }
    Intervals& intervals = st_.intervals;
    for (auto& stream : intervals) stream.clear();
    // The memos start afresh: a block's recorded intervals are those of the slot it reuses, shifted.
    for (BlockMemo& m : st_.memos) m.valid.fill(false);
    st_.recorded.clear();
    std::vector<std::int32_t> unused;
    const auto& blocks = p_.blocks[static_cast<std::size_t>(d)];
    // The skipped periods (skip_periods) repeat the intervals of the span before them.
    const std::size_t before = skip_.done ? cut(d, skip_.first) : blocks.size();
    const std::size_t after = skip_.done ? cut(d, skip_.last) : blocks.size();
    RepeatedIntervals repeated;
    for (std::size_t i = 0; i < blocks.size();) {
      if (i == before) {
        for (std::size_t s = 0; s < parallel::kNumStreams; ++s) repeated.from[s] = intervals[s].size();
      }
      if (i == after) {
        record_skipped(d, dev, repeated);
        i += skip_.spans * (after - before);
        continue;
      }
      evaluate_memoized<true>(dev, blocks[i], unused, &intervals);
      ++i;
    }
    std::array<StreamIntervals, parallel::kNumStreams> streams{};
    for (std::size_t s = 0; s < parallel::kNumStreams; ++s) {
      streams[s] = {intervals[s].data(), intervals[s].data() + intervals[s].size()};
    }
    return device_breakdown(streams, end, st_.chains.splits.data(), slowdown_, skip_.done ? &repeated : nullptr);
  }

  // The recording pass at the end of the span the skip repeated (its intervals recorded from
  // `repeated.from` on, by stream): the skipped spans' intervals, the device's times and its
  // channels' counts as the skip moved them; `repeated` says which intervals repeat.
  void record_skipped(std::int32_t d, BlockDevice& dev, RepeatedIntervals& repeated) {
    repeated.copies = skip_.spans + 1;
    repeated.delta = skip_.delta;
    for (std::size_t s = 0; s < parallel::kNumStreams; ++s) {
      std::vector<StreamInterval>& stream = st_.intervals[s];
      const std::size_t to = stream.size();
      const std::size_t from = repeated.from[s];
      repeated.count[s] = to - from;
      stream.reserve(to + skip_.spans * (to - from));
      for (std::size_t j = 1; j <= skip_.spans; ++j) {
        const Duration by = Duration::from_ps(static_cast<std::int64_t>(j) * skip_.delta);
        for (std::size_t k = from; k < to; ++k) {
          const StreamInterval& r = stream[k];
          stream.push_back({r.start + by, r.end + by, r.category, r.split});
        }
      }
    }
    shift(dev, st_.runs[static_cast<std::size_t>(d)], static_cast<std::int64_t>(skip_.spans) * skip_.delta);
    for (std::size_t c = 0; c < st_.channel_count; ++c) {
      BlockChannel& channel = st_.channels[c];
      const auto moved = static_cast<std::uint32_t>(skip_.transfers[c] * skip_.spans);
      if (channel.sender == d) channel.sent += moved;
      if (channel.receiver == d) channel.received += moved;
    }
  }

  const BlockProgram& p_;
  const parallel::TaskGraph& g_;
  internal::Costs costs_;
  bool applies_ = false;
  std::size_t period_ = 0;  // blocks per steady-state period (find_steady_runs)
  // The periods skipped (skip_periods): after cut `last`, `spans` times those from cut `first`
  // to `last`, δ = `delta` ps each, moving `transfers[c]` transfers each over channel c.
  struct Skip {
    bool done = false;
    std::size_t first = 0, last = 0, spans = 0;
    std::int64_t delta = 0;
    std::vector<std::uint32_t> transfers;
  } skip_;
  internal::BlockStorage& st_;
  double slowdown_;  // of compute under communication (ExecuteOptions::compute_slowdown_under_comm)
};

}  // namespace

std::optional<ReplaySummary> replay_blocks(const BlockProgram& program, const parallel::Layout& layout,
                                           const compute::ComputeModel& compute,
                                           const network::NetworkModel& network, ReplayBuffers& buffers,
                                           double slowdown) {
  return BlockReplay(program, layout, compute, network, buffers, slowdown).run();
}

}  // namespace ts::runtime
