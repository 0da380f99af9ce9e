// trainsim-bench: benchmarks of the simulator core, printed as one table of (name, value, unit).
//
// Each benchmark is a function returning rows; add a new one to kBenchmarks below. Timings are
// thread CPU time on the machine that runs the program, best of --repeat runs, and are only
// reported, never asserted.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <time.h>
#include <vector>

#include "sim/engine/simulator.h"

namespace {

struct Row {
  std::string name;
  double value = 0;
  std::string unit;
};

struct Options {
  std::int64_t events = 10'000'000;  // events per run of a hold benchmark
  int repeat = 3;                    // runs per benchmark; the best rate is reported
  std::string filter;                // run only benchmarks whose name contains this
};

// CPU time of the calling thread, in seconds. Rates are per CPU-second of the benchmark's own
// thread, so that other processes sharing the machine disturb them less than wall-clock time.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The classic hold model (Vaucher & Duval 1975; Jones 1986, "An empirical comparison of
// priority-queue and event-set implementations"): the queue starts with `queue_size` pending
// events; each event, when it runs, schedules one new event at now + delay, so the queue size
// stays constant. Delays are uniform integers in [0, 2^20) ps drawn from a fixed-seed
// mt19937_64, so every run executes the same sequence of events.
//
// `Payload` is extra data carried by each callback, to measure the cost of callbacks whose
// captures are larger than one pointer (as the runtime's are: object, task id, stream, ...).
template <std::size_t PayloadBytes>
struct HoldModel {
  ts::engine::Simulator sim;
  std::mt19937_64 rng{20240601};
  std::int64_t remaining = 0;
  std::uint64_t checksum = 0;

  ts::Duration next_delay() { return ts::Duration::from_ps(static_cast<std::int64_t>(rng() >> 44)); }

  void schedule_one() {
    if constexpr (PayloadBytes == 0) {
      sim.schedule_in(next_delay(), [this] { on_event(0); });
    } else {
      std::array<std::uint64_t, PayloadBytes / 8> payload{};
      payload[0] = static_cast<std::uint64_t>(remaining);
      sim.schedule_in(next_delay(), [this, payload] { on_event(payload[0]); });
    }
  }

  void on_event(std::uint64_t tag) {
    checksum += tag ^ static_cast<std::uint64_t>(sim.now().ps());
    if (remaining > 0) {
      --remaining;
      schedule_one();
    }
  }

  // Returns events per second of the timed part (the queue is filled before timing starts).
  double run(std::int64_t queue_size, std::int64_t events) {
    for (std::int64_t i = 0; i < queue_size; ++i) schedule_one();
    remaining = events - queue_size;
    const double t0 = thread_cpu_seconds();
    sim.run();
    const double s = thread_cpu_seconds() - t0;
    return static_cast<double>(sim.events_processed()) / s;
  }
};

template <std::size_t PayloadBytes>
std::vector<Row> hold(const Options& o, std::int64_t queue_size, const std::string& name) {
  double best = 0;
  std::uint64_t checksum = 0;
  std::int64_t final_ps = 0;
  for (int r = 0; r < o.repeat; ++r) {
    HoldModel<PayloadBytes> m;
    best = std::max(best, m.run(queue_size, o.events));
    checksum = m.checksum;
    final_ps = m.sim.now().ps();
  }
  // The final time identifies the executed sequence: it must not change when the engine is
  // optimized (same seed, same event order).
  (void)checksum;
  return {{name, best / 1e6, "Mevents/s"}, {name + ".final_time", static_cast<double>(final_ps), "ps"}};
}

// Schedule-and-cancel churn: each event schedules two successors and cancels one of them (as a
// timeout that is disarmed when the awaited event arrives first).
std::vector<Row> hold_cancel(const Options& o, std::int64_t queue_size, const std::string& name) {
  double best = 0;
  for (int r = 0; r < o.repeat; ++r) {
    ts::engine::Simulator sim;
    std::mt19937_64 rng{20240601};
    std::int64_t remaining = o.events - queue_size;
    std::function<void()> on_event;
    auto delay = [&rng] { return ts::Duration::from_ps(static_cast<std::int64_t>(rng() >> 44)); };
    on_event = [&] {
      if (remaining <= 0) return;
      --remaining;
      sim.schedule_in(delay(), [&on_event] { on_event(); });
      const ts::engine::EventHandle timeout = sim.schedule_in(delay(), [] {});
      sim.cancel(timeout);
    };
    for (std::int64_t i = 0; i < queue_size; ++i) sim.schedule_in(delay(), [&on_event] { on_event(); });
    const double t0 = thread_cpu_seconds();
    sim.run();
    best = std::max(best, static_cast<double>(sim.events_processed()) / (thread_cpu_seconds() - t0));
  }
  return {{name, best / 1e6, "Mevents/s"}};
}

// The same hold model on a bare std::priority_queue of int64 times: no callbacks, no phases, no
// cancellation. Not an engine figure: it shows how fast the machine running the benchmark is, so
// that the engine rows can be compared across machines.
std::vector<Row> baseline_priority_queue(const Options& o, std::int64_t queue_size, const std::string& name) {
  double best = 0;
  std::int64_t final_ps = 0;
  for (int r = 0; r < o.repeat; ++r) {
    std::priority_queue<std::int64_t, std::vector<std::int64_t>, std::greater<>> q;
    std::mt19937_64 rng{20240601};
    auto delay = [&rng] { return static_cast<std::int64_t>(rng() >> 44); };
    for (std::int64_t i = 0; i < queue_size; ++i) q.push(delay());
    const double t0 = thread_cpu_seconds();
    std::int64_t now = 0;
    for (std::int64_t i = 0; i < o.events; ++i) {
      now = q.top();
      q.pop();
      if (i < o.events - queue_size) q.push(now + delay());
    }
    best = std::max(best, static_cast<double>(o.events) / (thread_cpu_seconds() - t0));
    final_ps = now;
  }
  return {{name, best / 1e6, "Mevents/s"}, {name + ".final_time", static_cast<double>(final_ps), "ps"}};
}

struct Benchmark {
  const char* name;
  std::vector<Row> (*fn)(const Options&);
};

const Benchmark kBenchmarks[] = {
    {"engine.hold.n1k", [](const Options& o) { return hold<0>(o, 1000, "engine.hold.n1k"); }},
    {"engine.hold.n100k", [](const Options& o) { return hold<0>(o, 100000, "engine.hold.n100k"); }},
    {"engine.hold.n1k.capture32B",
     [](const Options& o) { return hold<32>(o, 1000, "engine.hold.n1k.capture32B"); }},
    {"engine.hold.n100k.capture32B",
     [](const Options& o) { return hold<32>(o, 100000, "engine.hold.n100k.capture32B"); }},
    {"engine.hold_cancel.n1k",
     [](const Options& o) { return hold_cancel(o, 1000, "engine.hold_cancel.n1k"); }},
    {"baseline.priority_queue.n1k",
     [](const Options& o) { return baseline_priority_queue(o, 1000, "baseline.priority_queue.n1k"); }},
    {"baseline.priority_queue.n100k",
     [](const Options& o) { return baseline_priority_queue(o, 100000, "baseline.priority_queue.n100k"); }},
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: trainsim-bench [--events N] [--repeat R] [--filter SUBSTRING] [--list]\n"
               "Runs the benchmarks and prints one table: name, value, unit.\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "trainsim-bench: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--events") {
      o.events = std::atoll(value());
    } else if (a == "--repeat") {
      o.repeat = std::atoi(value());
    } else if (a == "--filter") {
      o.filter = value();
    } else if (a == "--list") {
      list = true;
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "trainsim-bench: unknown argument %s\n", argv[i]);
      usage(2);
    }
  }
  if (o.events < 100001 || o.repeat < 1) {
    std::fprintf(stderr, "trainsim-bench: --events must be > 100000 and --repeat >= 1\n");
    return 2;
  }
  if (list) {
    for (const Benchmark& b : kBenchmarks) std::printf("%s\n", b.name);
    return 0;
  }
  std::printf("%-40s %14s  %s\n", "name", "value", "unit");
  for (const Benchmark& b : kBenchmarks) {
    if (!o.filter.empty() && std::string_view(b.name).find(o.filter) == std::string_view::npos) continue;
    for (const Row& r : b.fn(o)) {
      if (r.value == static_cast<double>(static_cast<std::int64_t>(r.value))) {
        std::printf("%-40s %14lld  %s\n", r.name.c_str(), static_cast<long long>(r.value), r.unit.c_str());
      } else {
        std::printf("%-40s %14.3f  %s\n", r.name.c_str(), r.value, r.unit.c_str());
      }
    }
    std::fflush(stdout);
  }
  return 0;
}
