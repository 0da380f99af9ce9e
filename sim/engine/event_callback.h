// EventCallback: the move-only action of an event, with inline storage for small captures.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace ts::engine {

// The action of an event: a move-only `void()` callable, like std::function but without a heap
// allocation for captures up to kInlineBytes (a simulation schedules tens of millions of events,
// each capturing a few pointers and ids; tools/bench/README.md has the measured effect). Larger or
// over-aligned callables are stored on the heap. Accepts lambdas, function pointers and
// std::function; an empty std::function or a null function pointer gives an empty callback.
class EventCallback {
 public:
  static constexpr std::size_t kInlineBytes = 40;

  EventCallback() noexcept = default;
  EventCallback(std::nullptr_t) noexcept {}  // NOLINT: implicit, as std::function's
  template <class F, class D = std::decay_t<F>>
    requires(!std::is_same_v<D, EventCallback> && std::is_invocable_r_v<void, D&>)
  EventCallback(F&& f) {  // NOLINT: implicit, as std::function's
    if constexpr (std::is_pointer_v<D>) {
      if (f == nullptr) return;
    } else if constexpr (is_std_function<D>::value) {
      if (!f) return;
    }
    if constexpr (fits_inline<D>()) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      if constexpr (sizeof(D) < kInlineBytes) {
        // The unused tail is relocated by memcpy with the rest: give it a value.
        std::memset(storage_ + sizeof(D), 0, kInlineBytes - sizeof(D));
      }
      invoke_ = &invoke_inline<D>;
      if constexpr (!(std::is_trivially_copyable_v<D> && std::is_trivially_destructible_v<D>)) {
        ops_ = &kInlineOps<D>;
      }
    } else {
      D* p = new D(std::forward<F>(f));
      std::memset(storage_, 0, kInlineBytes);
      std::memcpy(storage_, &p, sizeof p);
      invoke_ = &invoke_heap<D>;
      ops_ = &kHeapOps<D>;
    }
  }
  EventCallback(EventCallback&& o) noexcept { take(o); }
  EventCallback& operator=(EventCallback&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  EventCallback(const EventCallback&) = delete;
  EventCallback& operator=(const EventCallback&) = delete;
  ~EventCallback() { reset(); }

  explicit operator bool() const noexcept { return invoke_ != nullptr; }
  void operator()() { invoke_(storage_); }
  void reset() noexcept {
    if (ops_ != nullptr) ops_->destroy(storage_);
    invoke_ = nullptr;
    ops_ = nullptr;
  }

 private:
  // How to relocate (move-construct into dst and destroy src) and destroy a stored callable;
  // absent (ops_ == nullptr) for trivially copyable inline callables, relocated by memcpy.
  struct Ops {
    void (*relocate)(void* dst, void* src) noexcept;  // null: memcpy the storage
    void (*destroy)(void* p) noexcept;
  };
  template <class T>
  struct is_std_function : std::false_type {};
  template <class R, class... A>
  struct is_std_function<std::function<R(A...)>> : std::true_type {};

  template <class D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= kInlineBytes && alignof(D) <= alignof(void*) &&
           std::is_nothrow_move_constructible_v<D>;
  }
  template <class D>
  static void invoke_inline(void* p) {
    (*std::launder(static_cast<D*>(p)))();
  }
  template <class D>
  static D* heap_ptr(void* p) {
    D* d;
    std::memcpy(&d, p, sizeof d);
    return d;
  }
  template <class D>
  static void invoke_heap(void* p) {
    (*heap_ptr<D>(p))();
  }
  template <class D>
  static void relocate_inline(void* dst, void* src) noexcept {
    D* s = std::launder(static_cast<D*>(src));
    ::new (dst) D(std::move(*s));
    s->~D();
  }
  template <class D>
  static void destroy_inline(void* p) noexcept {
    std::launder(static_cast<D*>(p))->~D();
  }
  template <class D>
  static void destroy_heap(void* p) noexcept {
    delete heap_ptr<D>(p);
  }
  template <class D>
  static constexpr Ops kInlineOps{&relocate_inline<D>, &destroy_inline<D>};
  template <class D>
  static constexpr Ops kHeapOps{nullptr, &destroy_heap<D>};

  void take(EventCallback& o) noexcept {
    invoke_ = o.invoke_;
    ops_ = o.ops_;
    if (invoke_ == nullptr) return;  // empty: the storage holds nothing
    if (ops_ != nullptr && ops_->relocate != nullptr) {
      ops_->relocate(storage_, o.storage_);
    } else {
      std::memcpy(storage_, o.storage_, kInlineBytes);
    }
    o.invoke_ = nullptr;
    o.ops_ = nullptr;
  }

  alignas(void*) unsigned char storage_[kInlineBytes];  // not zeroed when empty: on the hot path
  void (*invoke_)(void*) = nullptr;
  const Ops* ops_ = nullptr;
};

}  // namespace ts::engine
