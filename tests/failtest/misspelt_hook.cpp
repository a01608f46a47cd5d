// Must not compile: an algorithm whose round end is misspelt (end_rond). Every hook is
// required, so the misspelling is one error naming the hook, not a silent default.
#include <cocod.hpp>

#include <vector>

struct Tiny {
  std::vector<double> x = std::vector<double>(2);
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double> g) {
    g[0] = g[1] = 0;
    return 0;
  }
};

template <class Ops>
struct Rule {
  using Span = typename Ops::span_type;
  static constexpr const char* name = "rule";
  void begin(Ops& ops, Span x) { ops.prepare(send, {.name = "send", .size = x.size()}); }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, typename Ops::scalar_type lr) {
    ops.gradient(batch, send.model());
    ops.update(x, send.model(), lr);
  }
#ifdef COCOD_FAILTEST_OK
  void end_round(Ops& ops, Span x) { ops.average(x, send); }
#else
  void end_rond(Ops& ops, Span x) { ops.average(x, send); }
#endif
  void finish(Ops& ops, Span x) { ops.average(x, send); }
  template <class Archive>
  void serialize(Archive&) {}
  typename Ops::exchange_type send;
};

int main() {
  Tiny model;
  cocod::Trainer<Rule, Tiny, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  (void)opt.optimize(model, cocod::Steps{3});
}
