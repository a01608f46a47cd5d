// Groups of ranks over MPI (comm::Mpi::split into a group's members and the same member of every
// group, joined by comm::Grouped), run by ctest under mpiexec with 4 ranks (2 groups x 2) and 6
// (3 x 2): every rank ends with the model of the same grouped run over comm::Threads, bit for
// bit, with unequal batches, the family's options and AdamW.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/grouped.hpp>
#include <cocod/comm/mpi.hpp>
#include <cocod/model/group_model.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using cocod::comm::Mpi;
using Member = cocod_test::LeastSquares<double>;
Mpi* world = nullptr;
constexpr int members = 2;

Member member_of(int group, int member) {
  return Member(60, 9, 800 + 10 * static_cast<std::uint64_t>(group) + static_cast<std::uint64_t>(member));
}

template <template <class...> class A, class Inner, class Outer>
std::vector<double> run(Inner inner, Outer outer, const cocod_test::Setup& s) {
  cocod::GroupModel model{member_of(outer.rank(), inner.rank()), inner};
  using Comm = cocod::comm::Grouped<Inner, Outer>;
  auto opt = cocod_test::make<A<decltype(model), Comm>>(Comm{inner, outer}, s);
  opt.optimize(model, cocod::Steps{22});
  return model.inner().x;
}

template <template <class...> class A>
void check(const char* name, const cocod_test::Setup& s) {
  CAPTURE(name);
  const int groups = world->size() / members, g = world->rank() / members, m = world->rank() % members;
  std::vector<double> threads;
  cocod::comm::Threads::run_groups(groups, members, [&](cocod::comm::Threads inner, cocod::comm::Threads outer) {
    auto x = run<A>(inner, outer, s);
    if (outer.rank() == g && inner.rank() == m) threads = std::move(x);
  });
  const Mpi inner = world->split(g, m), outer = world->split(m, g);
  REQUIRE(inner.rank() == m);
  REQUIRE(outer.rank() == g);
  const std::vector<double> mpi = run<A>(inner, outer, s);
  CHECK((mpi.size() == threads.size() && std::memcmp(mpi.data(), threads.data(), mpi.size() * sizeof(double)) == 0));
}

template <class M, class C>
using LocalAdamW = cocod::LocalSGD<M, C, cocod::schedule::Fixed<>, cocod::update::AdamW>;

cocod_test::Setup base() {
  cocod_test::Setup s{.options = {.learning_rate = 0.05, .period = 3, .batch_size = 4, .seed = 9}, .sgd = {.momentum = 0.9}};
  s.options.speeds.assign(static_cast<std::size_t>(world->size() / members), 1.0);
  s.options.speeds[0] = 2.0;  // unequal batches
  return s;
}
}  // namespace

TEST_CASE("groups over MPI equal groups over comm::Threads, bit for bit") {
  check<cocod::CoCoDSGD>("cocod", base());
  check<cocod::SyncSGD>("ssgd", base());
  auto s = base();
  s.outer = cocod::Outer::diloco();
  s.compress = {cocod::Compression::int8, 8};
  s.fragments.count = 2;
  check<cocod::CoCoDSGD>("cocod + outer + int8 + 2 fragments", s);
  check<cocod::DelayedDiLoCo>("delayed diloco + int8 + 2 fragments", s);
  s = base();
  s.adamw.weight_decay = 0.1;
  check<LocalAdamW>("local + AdamW", s);
}

TEST_CASE("split_by_node joins the ranks of one node, ordered by key") {
  // Every rank of this test runs on this machine: the node's group is the whole world, in the
  // order of the keys given (here the reverse of the world's).
  Mpi node = world->split_by_node(world->size() - 1 - world->rank());
  CHECK(node.size() == world->size());
  CHECK(node.rank() == world->size() - 1 - world->rank());
  std::vector<double> ranks(static_cast<std::size_t>(node.size()), 0.0);
  ranks[static_cast<std::size_t>(node.rank())] = world->rank();
  node.all_reduce(std::span<double>(ranks));
  for (int j = 0; j < node.size(); ++j) CHECK(ranks[static_cast<std::size_t>(j)] == world->size() - 1 - j);
}

int main(int argc, char** argv) {
  Mpi comm(argc, argv);
  world = &comm;
  if (comm.size() % members != 0) {
    if (comm.rank() == 0) std::printf("test_mpi_groups: %d ranks are no groups of %d\n", comm.size(), members);
    return 1;
  }
  doctest::Context context(argc, argv);
  const int failed = context.run();
  std::vector<double> failures{failed ? 1.0 : 0.0};
  comm.all_reduce(std::span<double>(failures));
  if (comm.rank() == 0) std::printf("test_mpi_groups: %d rank(s), %g with failures\n", comm.size(), failures[0]);
  return failures[0] > 0 ? 1 : 0;
}
