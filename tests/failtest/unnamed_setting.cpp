// Must not compile: an algorithm whose settings type has no name. Checkpoints write and compare
// settings field by field under their type's name, so a nameless one is an error naming the rule.
#include <cocod.hpp>

#include <tuple>
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

struct Damping {
#ifdef COCOD_FAILTEST_OK
  static constexpr const char* name = "Damping";
#endif
  double factor = 0.5;
  template <class Archive>
  void serialize(Archive& a) {
    a("factor", factor);
  }
};

template <class Ops>
struct Rule {
  using Span = typename Ops::span_type;
  using settings = std::tuple<Damping>;
  explicit Rule(const settings& s) : damping(std::get<0>(s)) {}
  static constexpr const char* name = "rule";
  void begin(Ops& ops, Span x) { ops.prepare(send, {.name = "send", .size = x.size()}); }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, typename Ops::scalar_type lr) {
    ops.gradient(batch, send.model());
    ops.update(x, send.model(), lr);
  }
  void end_round(Ops& ops, Span x) { ops.average(x, send); }
  void finish(Ops& ops, Span x) { ops.average(x, send); }
  template <class Archive>
  void serialize(Archive&) {}
  Damping damping;
  typename Ops::exchange_type send;
};

int main() {
  Tiny model;
  cocod::Trainer<Rule, Tiny, cocod::comm::Local> opt{cocod::comm::Local{}, {}, Damping{0.25}};
  (void)opt.optimize(model, cocod::Steps{3});
}
