#include <doctest/doctest.h>

#include <cocod/model/parameter_pack.hpp>
#include <cocod/model/function_model.hpp>

TEST_CASE_TEMPLATE("ParameterPack lays tensors out back to back and maps them without copies", T, float, double) {
  cocod::ParameterPack<T> pack{{"W", 3, 2}, {"b", 3}};
  CHECK(pack.size() == 9);
  CHECK(pack.tensor_count() == 2);
  auto W = pack.matrix("W");
  W(2, 1) = T(5);  // column-major: offset 1*3 + 2 = 5
  CHECK(pack.parameters()[5] == T(5));
  auto b = pack.matrix(1);
  b(0, 0) = T(7);
  CHECK(pack.parameters()[6] == T(7));
  CHECK(b.data() == pack.data() + 6);

  std::vector<T> gradient(pack.size(), T(0));
  pack.matrix("b", std::span<T>(gradient))(2, 0) = T(1);
  CHECK(gradient[8] == T(1));
}

TEST_CASE("ParameterPack reports bad shapes, names and buffers") {
  CHECK_THROWS_WITH_AS((cocod::ParameterPack<float>{{"W", 0, 2}}),
                       "cocod::ParameterPack: tensor 'W' must have positive rows and cols", std::invalid_argument);
  cocod::ParameterPack<float> pack{{"W", 2, 2}};
  CHECK_THROWS_WITH_AS((void)pack.matrix("V"), "cocod::ParameterPack: no tensor named 'V'", std::out_of_range);
  std::vector<float> small(3);
  CHECK_THROWS_WITH_AS((void)pack.matrix(0, std::span<float>(small)),
                       "cocod::ParameterPack: buffer has 3 elements, the pack has 4", std::invalid_argument);
}

TEST_CASE("make_model adapts a function object into a cocod::Model") {
  auto m = cocod::make_model(std::vector<float>{1.0f, 2.0f}, 10,
                             [](std::span<const std::size_t> batch, std::span<const float> x, std::span<float> g) {
                               g[0] = x[0];
                               g[1] = static_cast<float>(batch.size());
                               return 1.5;
                             });
  static_assert(cocod::Model<decltype(m)>);
  static_assert(std::is_same_v<cocod::scalar_of_t<decltype(m)>, float>);
  std::vector<float> g(2);
  std::vector<std::size_t> batch{1, 2, 3};
  CHECK(m.loss_and_gradient(batch, g) == 1.5);
  CHECK(g[0] == 1.0f);
  CHECK(g[1] == 3.0f);
  CHECK(m.num_samples() == 10);
}

namespace {
struct EigenModel {
  Eigen::VectorXd x = Eigen::VectorXd::Zero(3);
  Eigen::VectorXd& parameters() { return x; }
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
};
struct MapModel {
  std::vector<float> storage = std::vector<float>(3);
  Eigen::Map<Eigen::VectorXf> parameters() { return {storage.data(), 3}; }
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<float>) { return 0; }
};
struct Copies {
  std::vector<double> x;
  std::vector<double> parameters() { return x; }
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
};
}  // namespace

TEST_CASE("the Model concept accepts references and views, and rejects owning copies") {
  static_assert(cocod::Model<EigenModel>);
  static_assert(cocod::Model<MapModel>);
  static_assert(!cocod::Model<Copies>);
  static_assert(!cocod::Model<int>);
}
