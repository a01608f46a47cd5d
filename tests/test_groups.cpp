// Groups of ranks as the workers of an algorithm (comm::Grouped, GroupModel): with one member per
// group the run is the flat one bit for bit; with G members it equals the algorithm over groups
// whose gradient is the members' weighted mean, recomputed plainly, to the bit; every member of a
// group holds the same model; a failing member ends every rank with its error.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/grouped.hpp>
#include <cocod/model/group_model.hpp>

#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using T = double;
using Member = cocod_test::LeastSquares<T>;
using Models = std::vector<std::vector<T>>;  // per rank (group-major), after finish

Member member_of(int group, int member) { return Member(60, 7, 700 + 10 * static_cast<std::uint64_t>(group) + static_cast<std::uint64_t>(member)); }

/// The group's model written plainly, in one thread: its members' shards, the same batch
/// indices on each, and the gradient (sum_m b g_m) / (sum_m b) with the sums in member order.
struct PlainGroup {
  std::vector<Member> members;
  std::vector<T> x;
  std::span<T> parameters() { return x; }
  [[nodiscard]] std::size_t num_samples() const { return members[0].num_samples(); }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<T> g) {
    const auto b = static_cast<T>(batch.size());
    std::vector<T> sum(g.size() + 2, T(0)), own(g.size());
    for (std::size_t m = 0; m < members.size(); ++m) {
      members[m].x = x;
      const double loss = members[m].loss_and_gradient(batch, own);
      for (std::size_t i = 0; i < g.size(); ++i) sum[i] = m == 0 ? b * own[i] : sum[i] + b * own[i];
      sum[g.size()] = m == 0 ? b * static_cast<T>(loss) : sum[g.size()] + b * static_cast<T>(loss);
      sum[g.size() + 1] = m == 0 ? b : sum[g.size() + 1] + b;
    }
    const T total = sum[g.size() + 1];
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = sum[i] / total;
    return static_cast<double>(sum[g.size()] / total);
  }
};

/// Algorithm A over `groups` groups of `members` ranks (Threads), each rank's final model.
template <template <class...> class A>
Models grouped(int groups, int members, const cocod_test::Setup& s, std::size_t steps) {
  Models out(static_cast<std::size_t>(groups * members));
  std::mutex m;
  cocod::comm::Threads::run_groups(groups, members, [&](cocod::comm::Threads inner, cocod::comm::Threads outer) {
    cocod::GroupModel model{member_of(outer.rank(), inner.rank()), inner};
    using Comm = cocod::comm::Grouped<cocod::comm::Threads>;
    auto opt = cocod_test::make<A<decltype(model), Comm>>(Comm{inner, outer}, s);
    opt.optimize(model, cocod::Steps{steps});
    std::lock_guard lock(m);
    out[static_cast<std::size_t>(outer.rank() * members + inner.rank())] = model.inner().x;
  });
  return out;
}

/// The same algorithm over `groups` flat workers whose models are PlainGroups of `members`.
template <template <class...> class A>
Models reference(int groups, int members, const cocod_test::Setup& s, std::size_t steps) {
  Models out(static_cast<std::size_t>(groups * members));
  cocod::comm::Threads::run(groups, [&](cocod::comm::Threads comm) {
    PlainGroup model;
    for (int q = 0; q < members; ++q) model.members.push_back(member_of(comm.rank(), q));
    model.x = model.members[0].x;
    auto opt = cocod_test::make<A<PlainGroup, cocod::comm::Threads>>(comm, s);
    opt.optimize(model, cocod::Steps{steps});
    for (int q = 0; q < members; ++q) out[static_cast<std::size_t>(comm.rank() * members + q)] = model.x;
  });
  return out;
}

/// The flat run of algorithm A on `groups` workers, one member each.
template <template <class...> class A>
Models flat(int groups, const cocod_test::Setup& s, std::size_t steps) {
  Models out(static_cast<std::size_t>(groups));
  cocod::comm::Threads::run(groups, [&](cocod::comm::Threads comm) {
    Member model = member_of(comm.rank(), 0);
    auto opt = cocod_test::make<A<Member, cocod::comm::Threads>>(comm, s);
    opt.optimize(model, cocod::Steps{steps});
    out[static_cast<std::size_t>(comm.rank())] = model.x;
  });
  return out;
}

template <class M, class C>
using LocalAdamW = cocod::LocalSGD<M, C, cocod::schedule::Fixed<>, cocod::update::AdamW>;

cocod_test::Setup setup(std::vector<double> speeds) {
  return {{.learning_rate = 0.03, .period = 3, .batch_size = 5, .speeds = std::move(speeds), .seed = 31}, {.momentum = 0.9}};
}
}  // namespace

TEST_CASE("one member per group is the flat algorithm, bit for bit") {
  const auto s = setup({1.0, 1.0, 1.0});
  CHECK(grouped<cocod::CoCoDSGD>(3, 1, s, 20) == flat<cocod::CoCoDSGD>(3, s, 20));
  CHECK(grouped<cocod::LocalSGD>(3, 1, s, 20) == flat<cocod::LocalSGD>(3, s, 20));
  CHECK(grouped<cocod::SyncSGD>(3, 1, s, 7) == flat<cocod::SyncSGD>(3, s, 7));
}

TEST_CASE("G members per group equal the algorithm over groups with the members' weighted mean gradient, to the bit") {
  for (const auto& [groups, members] : {std::pair{2, 2}, std::pair{3, 2}}) {
    CAPTURE(groups);
    CAPTURE(members);
    auto s = setup(groups == 2 ? std::vector<double>{1.0, 2.0} : std::vector<double>{1.0, 2.0, 1.5});  // unequal batches
    const Models got = grouped<cocod::CoCoDSGD>(groups, members, s, 20);
    CHECK(got == reference<cocod::CoCoDSGD>(groups, members, s, 20));
    CHECK(got[0] != flat<cocod::CoCoDSGD>(groups, s, 20)[0]);  // the members' data took part
    CHECK(grouped<cocod::LocalSGD>(groups, members, s, 20) == reference<cocod::LocalSGD>(groups, members, s, 20));
    CHECK(grouped<cocod::SyncSGD>(groups, members, s, 8) == reference<cocod::SyncSGD>(groups, members, s, 8));
    CHECK(grouped<cocod::DelayedDiLoCo>(groups, members, s, 20) == reference<cocod::DelayedDiLoCo>(groups, members, s, 20));
    // the family over the sharded exchange: the outer step, int8 with error feedback, fragments
    s.outer = cocod::Outer::diloco();
    s.compress = {cocod::Compression::int8, 8};
    s.fragments.count = 2;
    CHECK(grouped<cocod::CoCoDSGD>(groups, members, s, 20) == reference<cocod::CoCoDSGD>(groups, members, s, 20));
  }
}

TEST_CASE("a rank of a group reports its share of the bytes: 1/G of what a flat worker sends") {
  // the same algorithm over 2 workers: flat, and as 2 groups of 2 ranks; per round, plain and
  // compressed (int8), each rank's bytes_sent is half of the flat worker's
  for (const bool int8 : {false, true}) {
    CAPTURE(int8);
    auto s = setup({1.0, 1.0});
    if (int8) s.compress = {cocod::Compression::int8, 8};
    std::vector<double> flat_bytes, group_bytes;
    std::mutex m;
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      Member model = member_of(comm.rank(), 0);
      auto opt = cocod_test::make<cocod::CoCoDSGD<Member, cocod::comm::Threads>>(comm, s);
      const auto report = opt.optimize(model, cocod::Steps{12});
      if (comm.rank() == 0)
        for (const auto& r : report.rounds) flat_bytes.push_back(r.bytes_sent);
    });
    cocod::comm::Threads::run_groups(2, 2, [&](cocod::comm::Threads inner, cocod::comm::Threads outer) {
      cocod::GroupModel model{member_of(outer.rank(), inner.rank()), inner};
      using Comm = cocod::comm::Grouped<cocod::comm::Threads>;
      auto opt = cocod_test::make<cocod::CoCoDSGD<decltype(model), Comm>>(Comm{inner, outer}, s);
      const auto report = opt.optimize(model, cocod::Steps{12});
      std::lock_guard lock(m);
      if (outer.rank() == 0 && inner.rank() == 1)
        for (const auto& r : report.rounds) group_bytes.push_back(r.bytes_sent);
    });
    REQUIRE(flat_bytes.size() == group_bytes.size());
    REQUIRE(flat_bytes.size() >= 3);
    for (std::size_t r = 0; r < flat_bytes.size(); ++r) {
      CHECK(flat_bytes[r] > 0.0);
      CHECK(group_bytes[r] == flat_bytes[r] / 2);
    }
  }
}

TEST_CASE("AdamW inside groups: the members' moments stay equal") {
  auto s = setup({1.0, 1.0});
  s.adamw.weight_decay = 0.05;
  const Models got = grouped<LocalAdamW>(2, 3, s, 12);
  CHECK(got[0] == got[1]);
  CHECK(got[1] == got[2]);
  CHECK(got[3] == got[5]);
}

TEST_CASE("a member that fails ends every rank of every group with its error") {
  std::string error;
  try {
    cocod::comm::Threads::run_groups(2, 2, [&](cocod::comm::Threads inner, cocod::comm::Threads outer) {
      cocod::GroupModel model{member_of(outer.rank(), inner.rank()), inner};
      using Comm = cocod::comm::Grouped<cocod::comm::Threads>;
      cocod::CoCoDSGD<decltype(model), Comm> opt{Comm{inner, outer}, {.learning_rate = 0.03, .period = 3, .batch_size = 5}};
      opt.begin(model);
      for (int step = 0; step < 10; ++step) {
        if (step == 4 && outer.rank() == 1 && inner.rank() == 1) throw std::runtime_error("member 1 of group 1 lost its disk");
        opt.step(model, opt.next_batch());
      }
      opt.finish(model);
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK(error == "member 1 of group 1 lost its disk");
}

TEST_CASE("the sharded byte collectives move what the flat ones move") {
  static_assert(cocod::comm::ByteCollectives<cocod::comm::Grouped<cocod::comm::Threads>>);
  cocod::comm::Threads::run_groups(3, 2, [&](cocod::comm::Threads inner, cocod::comm::Threads outer) {
    cocod::comm::Grouped<cocod::comm::Threads> comm{inner, outer};
    const int g = comm.rank();
    std::vector<std::byte> send(3 * 5), recv(3 * 5);
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = std::byte(static_cast<unsigned char>(16 * g + i));
    comm.all_to_all(send, recv);
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 5; ++i) CHECK(recv[static_cast<std::size_t>(5 * q + i)] == std::byte(static_cast<unsigned char>(16 * q + 5 * g + i)));
    std::vector<std::byte> mine(7), all(3 * 7);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::byte(static_cast<unsigned char>(32 * g + i));
    comm.all_gather(mine, all);
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 7; ++i) CHECK(all[static_cast<std::size_t>(7 * q + i)] == std::byte(static_cast<unsigned char>(32 * q + i)));
    std::vector<double> x{1.0 * g, 2.0, 3.0 + g};  // fewer elements than some shares: empty slices
    comm.all_reduce(std::span<double>(x));
    CHECK(x == std::vector<double>{3.0, 6.0, 12.0});
    for (int root = 0; root < 3; ++root) {  // a broadcast of bytes: group root's, sharded over its members
      std::vector<std::byte> b(11, std::byte{0xee});
      if (g == root)
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::byte(static_cast<unsigned char>(64 * root + i));
      comm.broadcast(std::span<std::byte>(b), root);
      for (std::size_t i = 0; i < b.size(); ++i) CHECK(b[i] == std::byte(static_cast<unsigned char>(64 * root + i)));
    }
  });
}
