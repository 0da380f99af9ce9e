// Tests of the discrete-event engine: order by (time, phase, insertion), cancellation, events
// that schedule events, run to empty, and determinism against a reference event list.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/engine/simulator.h"

using ts::Duration;
using ts::SimTime;
using ts::engine::EventHandle;
using ts::engine::Simulator;

namespace {
SimTime at_ps(std::int64_t ps) { return SimTime::from_ps(ps); }
}  // namespace

TEST_CASE("a new simulator is empty at time zero", "[engine]") {
  Simulator sim;
  CHECK(sim.empty());
  CHECK(sim.now() == SimTime::zero());
  CHECK_FALSE(sim.step());
  sim.run();
  CHECK(sim.events_processed() == 0);
}

TEST_CASE("events run in time order and advance the clock", "[engine]") {
  Simulator sim;
  std::vector<std::pair<int, std::int64_t>> ran;  // (event id, now() when it ran)
  for (const int t : {50, 10, 40, 20, 30}) {
    sim.schedule_at(at_ps(t), [&ran, &sim, t] { ran.emplace_back(t, sim.now().ps()); });
  }
  CHECK_FALSE(sim.empty());
  sim.run();
  const std::vector<std::pair<int, std::int64_t>> expected{{10, 10}, {20, 20}, {30, 30}, {40, 40}, {50, 50}};
  CHECK(ran == expected);
  CHECK(sim.now().ps() == 50);
  CHECK(sim.empty());
  CHECK(sim.events_processed() == 5);
}

TEST_CASE("events at the same time run by ascending phase, then in insertion order", "[engine]") {
  Simulator sim;
  std::vector<std::string> ran;
  auto rec = [&ran](std::string s) { return [&ran, s] { ran.push_back(s); }; };
  sim.schedule_at(at_ps(100), rec("p2-a"), 2);
  sim.schedule_at(at_ps(100), rec("p0-a"), 0);
  sim.schedule_at(at_ps(100), rec("p1-a"), 1);
  sim.schedule_at(at_ps(100), rec("p2-b"), 2);
  sim.schedule_at(at_ps(100), rec("p0-b"), 0);
  sim.schedule_at(at_ps(99), rec("early-p255"), 255);  // earlier time beats any phase
  sim.schedule_at(at_ps(100), rec("p255"), 255);
  sim.schedule_at(at_ps(100), rec("p0-c"), 0);
  sim.run();
  const std::vector<std::string> expected{"early-p255", "p0-a", "p0-b", "p0-c", "p1-a", "p2-a", "p2-b", "p255"};
  CHECK(ran == expected);
}

TEST_CASE("step runs exactly one event", "[engine]") {
  Simulator sim;
  int count = 0;
  sim.schedule_in(Duration::from_ps(5), [&count] { ++count; });
  sim.schedule_in(Duration::from_ps(7), [&count] { ++count; });
  REQUIRE(sim.step());
  CHECK(count == 1);
  CHECK(sim.now().ps() == 5);
  REQUIRE(sim.step());
  CHECK(count == 2);
  CHECK(sim.now().ps() == 7);
  CHECK_FALSE(sim.step());
  CHECK(sim.now().ps() == 7);  // the clock stays at the last event
}

TEST_CASE("events can schedule events, relative to the current time", "[engine]") {
  Simulator sim;
  std::vector<std::int64_t> times;
  std::function<void()> tick = [&] {
    times.push_back(sim.now().ps());
    if (times.size() < 5) sim.schedule_in(Duration::from_ps(10), tick);
  };
  sim.schedule_at(at_ps(3), tick);
  sim.run();
  CHECK(times == std::vector<std::int64_t>{3, 13, 23, 33, 43});
  CHECK(sim.events_processed() == 5);
}

TEST_CASE("an event scheduled at now() runs after the current event, even with a lower phase", "[engine]") {
  Simulator sim;
  std::vector<std::string> ran;
  sim.schedule_at(at_ps(10), [&] {
    ran.push_back("a");
    sim.schedule_in(Duration::zero(), [&] { ran.push_back("a-child-p0"); }, 0);
  }, 5);
  sim.schedule_at(at_ps(10), [&] { ran.push_back("b-p5"); }, 5);
  sim.schedule_at(at_ps(10), [&] { ran.push_back("c-p9"); }, 9);
  sim.run();
  // The child is queued at (10, phase 0): it precedes the pending phase-5 and phase-9 events.
  CHECK(ran == std::vector<std::string>{"a", "a-child-p0", "b-p5", "c-p9"});
}

TEST_CASE("scheduling in the past is an internal error", "[engine]") {
  Simulator sim;
  sim.schedule_at(at_ps(100), [] {});
  sim.run();
  CHECK_THROWS_AS(sim.schedule_at(at_ps(99), [] {}), ts::InternalError);
  CHECK_NOTHROW(sim.schedule_at(at_ps(100), [] {}));
}

TEST_CASE("cancel: pending, twice, after run, never scheduled", "[engine]") {
  Simulator sim;
  std::vector<int> ran;
  const EventHandle h1 = sim.schedule_at(at_ps(10), [&] { ran.push_back(1); });
  const EventHandle h2 = sim.schedule_at(at_ps(20), [&] { ran.push_back(2); });
  const EventHandle h3 = sim.schedule_at(at_ps(30), [&] { ran.push_back(3); });

  SECTION("cancel a pending event") {
    CHECK(sim.cancel(h2));
    sim.run();
    CHECK(ran == std::vector<int>{1, 3});
    CHECK(sim.events_processed() == 2);
    CHECK(sim.now().ps() == 30);
  }
  SECTION("cancel twice: the second call reports false") {
    CHECK(sim.cancel(h2));
    CHECK_FALSE(sim.cancel(h2));
    sim.run();
    CHECK(ran == std::vector<int>{1, 3});
  }
  SECTION("cancel after the event ran reports false") {
    REQUIRE(sim.step());
    CHECK_FALSE(sim.cancel(h1));
    sim.run();
    CHECK(ran == std::vector<int>{1, 2, 3});
  }
  SECTION("a default handle cancels nothing") {
    CHECK_FALSE(sim.cancel(EventHandle{}));
    sim.run();
    CHECK(ran == std::vector<int>{1, 2, 3});
  }
  SECTION("cancelling every event empties the simulator") {
    CHECK(sim.cancel(h3));
    CHECK(sim.cancel(h1));
    CHECK_FALSE(sim.empty());
    CHECK(sim.cancel(h2));
    CHECK(sim.empty());
    CHECK_FALSE(sim.step());
    CHECK(ran.empty());
    CHECK(sim.events_processed() == 0);
    CHECK(sim.now() == SimTime::zero());  // cancelled events do not move the clock
  }
}

TEST_CASE("a stale handle does not cancel the event that reused its slot", "[engine]") {
  Simulator sim;
  std::vector<int> ran;
  SECTION("slot reused after the event ran") {
    const EventHandle old = sim.schedule_at(at_ps(1), [&] { ran.push_back(1); });
    sim.run();
    // Schedule many events so that the old slot is certainly reused.
    for (int i = 0; i < 8; ++i) sim.schedule_at(at_ps(2 + i), [&ran, i] { ran.push_back(10 + i); });
    CHECK_FALSE(sim.cancel(old));
    sim.run();
    CHECK(ran.size() == 9);
  }
  SECTION("slot reused after the event was cancelled and popped") {
    const EventHandle old = sim.schedule_at(at_ps(1), [&] { ran.push_back(1); });
    sim.schedule_at(at_ps(2), [&] { ran.push_back(2); });
    REQUIRE(sim.cancel(old));
    sim.run();  // pops the cancelled entry, freeing its slot
    for (int i = 0; i < 8; ++i) sim.schedule_at(at_ps(3 + i), [&ran, i] { ran.push_back(10 + i); });
    CHECK_FALSE(sim.cancel(old));
    sim.run();
    CHECK(ran == std::vector<int>{2, 10, 11, 12, 13, 14, 15, 16, 17});
  }
}

TEST_CASE("an event can cancel another pending event", "[engine]") {
  Simulator sim;
  std::vector<int> ran;
  EventHandle timeout = sim.schedule_at(at_ps(100), [&] { ran.push_back(100); });
  sim.schedule_at(at_ps(50), [&] {
    ran.push_back(50);
    CHECK(sim.cancel(timeout));
  });
  sim.run();
  CHECK(ran == std::vector<int>{50});
  CHECK(sim.now().ps() == 50);
}

TEST_CASE("an event cannot cancel itself while it runs", "[engine]") {
  Simulator sim;
  EventHandle self;
  bool cancelled = true;
  self = sim.schedule_at(at_ps(5), [&] { cancelled = sim.cancel(self); });
  sim.run();
  CHECK_FALSE(cancelled);
  CHECK(sim.events_processed() == 1);
}

TEST_CASE("captured state is released when an event runs, is cancelled, or the simulator dies", "[engine]") {
  auto token = std::make_shared<int>(0);
  {
    Simulator sim;
    sim.schedule_at(at_ps(1), [token] { ++*token; });
    const EventHandle h = sim.schedule_at(at_ps(2), [token] { ++*token; });
    sim.schedule_at(at_ps(3), [token] { ++*token; });
    CHECK(token.use_count() == 4);
    REQUIRE(sim.step());
    CHECK(*token == 1);
    CHECK(token.use_count() == 3);
    REQUIRE(sim.cancel(h));
    CHECK(token.use_count() == 2);
  }
  CHECK(token.use_count() == 1);  // the pending event's capture was destroyed with the simulator
  CHECK(*token == 1);
}

TEST_CASE("large captures work", "[engine]") {
  Simulator sim;
  std::array<std::int64_t, 32> big{};
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::int64_t>(i);
  std::int64_t sum = 0;
  sim.schedule_at(at_ps(1), [big, &sum] {
    for (const std::int64_t v : big) sum += v;
  });
  sim.run();
  CHECK(sum == 31 * 32 / 2);
}

TEST_CASE("after every pending event is cancelled, earlier times can be scheduled again", "[engine]") {
  // The queue's internal floor must come back to now(): cancelled entries at t=1000 must not
  // forbid an event at t=5.
  Simulator sim;
  const EventHandle h = sim.schedule_at(at_ps(1000), [] {});
  REQUIRE(sim.cancel(h));
  CHECK_FALSE(sim.step());
  std::vector<std::int64_t> ran;
  sim.schedule_at(at_ps(5), [&] { ran.push_back(sim.now().ps()); });
  sim.schedule_at(at_ps(2000), [&] { ran.push_back(sim.now().ps()); });
  sim.run();
  CHECK(ran == std::vector<std::int64_t>{5, 2000});
}

TEST_CASE("times across the whole int64 range keep their order", "[engine]") {
  Simulator sim;
  std::vector<std::int64_t> times{1, 0, std::int64_t{1} << 62, 63, 64, 65, 4095, 4096, (std::int64_t{1} << 40) + 7,
                                  std::numeric_limits<std::int64_t>::max(), (std::int64_t{1} << 40) + 6};
  std::vector<std::int64_t> ran;
  for (const std::int64_t t : times) sim.schedule_at(at_ps(t), [&] { ran.push_back(sim.now().ps()); });
  sim.run();
  std::sort(times.begin(), times.end());
  CHECK(ran == times);
}

TEST_CASE("many events at one time run by phase, then insertion order", "[engine]") {
  Simulator sim;
  std::mt19937_64 rng(7);
  std::vector<std::pair<int, int>> expected;  // (phase, insertion index)
  std::vector<std::pair<int, int>> ran;
  sim.schedule_at(at_ps(10), [] {});  // the clock is at 10 when the batch is added below
  REQUIRE(sim.step());
  for (int i = 0; i < 2000; ++i) {
    const int phase = static_cast<int>(rng() % 5);
    expected.emplace_back(phase, i);
    sim.schedule_at(at_ps(10), [&ran, phase, i] { ran.emplace_back(phase, i); }, static_cast<ts::engine::Phase>(phase));
  }
  sim.run();
  std::sort(expected.begin(), expected.end());
  CHECK(ran == expected);
}

TEST_CASE("callbacks: move-only captures, function pointers, std::function, heap-stored", "[engine]") {
  Simulator sim;
  int hits = 0;
  auto owned = std::make_unique<int>(41);
  sim.schedule_at(at_ps(1), [p = std::move(owned), &hits] { hits += *p == 41 ? 1 : 0; });
  static int free_function_calls = 0;
  free_function_calls = 0;
  void (*fp)() = [] { ++free_function_calls; };
  sim.schedule_at(at_ps(2), fp);
  std::function<void()> f = [&hits] { hits += 10; };
  sim.schedule_at(at_ps(3), f);  // copied: f stays usable
  CHECK(static_cast<bool>(f));
  // A capture with a non-trivial move (std::string) and one too large for the inline storage.
  std::string text(100, 'x');
  sim.schedule_at(at_ps(4), [text, &hits] { hits += text.size() == 100 ? 100 : 0; });
  std::array<char, 2 * ts::engine::EventCallback::kInlineBytes> big{};
  big[0] = 'y';
  sim.schedule_at(at_ps(5), [big, &hits] { hits += big[0] == 'y' ? 1000 : 0; });
  // Grow the slot table while those callbacks wait, so that they are relocated.
  for (int i = 0; i < 1000; ++i) sim.schedule_at(at_ps(6), [] {});
  sim.run();
  CHECK(hits == 1111);
  CHECK(free_function_calls == 1);
}

TEST_CASE("empty callbacks are rejected", "[engine]") {
  Simulator sim;
  CHECK_THROWS_AS(sim.schedule_at(at_ps(1), std::function<void()>{}), ts::InternalError);
  void (*null_fp)() = nullptr;
  CHECK_THROWS_AS(sim.schedule_at(at_ps(1), null_fp), ts::InternalError);
  CHECK_THROWS_AS(sim.schedule_at(at_ps(1), nullptr), ts::InternalError);
  CHECK(sim.empty());
}

namespace {

// A reference event list: a std::map keyed by (time, phase, insertion sequence), the order the
// engine promises. Workloads run on both and must produce the same execution sequence.
class ReferenceSim {
 public:
  using Key = std::tuple<std::int64_t, int, std::uint64_t>;
  std::int64_t now = 0;
  std::map<Key, std::function<void()>> queue;
  std::uint64_t seq = 0;
  Key schedule(std::int64_t t, int phase, std::function<void()> cb) {
    Key k{t, phase, seq++};
    queue.emplace(k, std::move(cb));
    return k;
  }
  bool cancel(const Key& k) { return queue.erase(k) == 1; }
  void run() {
    while (!queue.empty()) {
      auto it = queue.begin();
      now = std::get<0>(it->first);
      auto cb = std::move(it->second);
      queue.erase(it);
      cb();
    }
  }
};

// A random workload: `initial` events; each event, when it runs, records its id, and may
// schedule up to two children (some at the same time, random phases) and cancel a random pending
// event. Identical seeds give identical decisions, so the recorded order depends only on the
// event-list semantics.
template <class Sim, class Handle, class ScheduleFn, class CancelFn>
struct Workload {
  Sim& sim;
  ScheduleFn schedule;  // (time, phase, callback) -> Handle
  CancelFn cancel;      // Handle -> bool
  std::mt19937_64 rng;
  std::vector<int> order;
  std::vector<Handle> handles;
  std::vector<int> cancel_results;
  int next_id = 0;
  int budget;

  Workload(Sim& s, ScheduleFn sf, CancelFn cf, std::uint64_t seed, int b)
      : sim(s), schedule(sf), cancel(cf), rng(seed), budget(b) {}

  void spawn(std::int64_t now) {
    const int id = next_id++;
    // Small delays and few phases make ties frequent.
    const std::int64_t delay = static_cast<std::int64_t>(rng() % 4) * 10;
    const int phase = static_cast<int>(rng() % 3);
    const std::int64_t t = now + delay;
    handles.push_back(schedule(t, phase, [this, id, t] { on_event(id, t); }));
  }

  void on_event(int id, std::int64_t now);
};

}  // namespace

TEST_CASE("random workloads run in the reference order, deterministically", "[engine]") {
  for (const std::uint64_t seed : {1u, 2u, 3u, 42u, 12345u}) {
    auto run_engine = [seed] {
      Simulator sim;
      auto sched = [&sim](std::int64_t t, int phase, std::function<void()> cb) {
        return sim.schedule_at(SimTime::from_ps(t), std::move(cb), static_cast<ts::engine::Phase>(phase));
      };
      auto canc = [&sim](EventHandle h) { return sim.cancel(h); };
      Workload<Simulator, EventHandle, decltype(sched), decltype(canc)> w(sim, sched, canc, seed, 20000);
      for (int i = 0; i < 50; ++i) w.spawn(0);
      sim.run();
      CHECK(sim.empty());
      CHECK(sim.events_processed() == w.order.size());
      // The workload exercises both outcomes of cancel().
      CHECK(std::count(w.cancel_results.begin(), w.cancel_results.end(), 1) > 10);
      CHECK(std::count(w.cancel_results.begin(), w.cancel_results.end(), 0) > 10);
      return std::make_pair(w.order, w.cancel_results);
    };
    auto run_reference = [seed] {
      ReferenceSim sim;
      auto sched = [&sim](std::int64_t t, int phase, std::function<void()> cb) {
        return sim.schedule(t, phase, std::move(cb));
      };
      auto canc = [&sim](const ReferenceSim::Key& k) { return sim.cancel(k); };
      Workload<ReferenceSim, ReferenceSim::Key, decltype(sched), decltype(canc)> w(sim, sched, canc, seed, 20000);
      for (int i = 0; i < 50; ++i) w.spawn(0);
      sim.run();
      return std::make_pair(w.order, w.cancel_results);
    };
    const auto a = run_engine();
    const auto b = run_engine();
    const auto ref = run_reference();
    INFO("seed " << seed);
    REQUIRE(a.first.size() > 1000);
    CHECK(a == b);    // determinism: identical workloads, identical execution order
    CHECK(a == ref);  // and that order is (time, phase, insertion)
  }
}

template <class Sim, class Handle, class ScheduleFn, class CancelFn>
void Workload<Sim, Handle, ScheduleFn, CancelFn>::on_event(int id, std::int64_t now) {
  order.push_back(id);
  if (budget <= 0) return;
  const std::uint64_t r = rng();
  const int children = 1 + static_cast<int>(r % 2);
  for (int i = 0; i < children && budget > 0; ++i, --budget) spawn(now);
  if ((r >> 8) % 4 == 0 && !handles.empty()) {
    // Cancel a random earlier handle: pending, already run, or already cancelled.
    const std::size_t k = static_cast<std::size_t>((r >> 16) % handles.size());
    cancel_results.push_back(cancel(handles[k]) ? 1 : 0);
  }
}
