#pragma once
// cocod's libtorch component (CMake: find_package(cocod COMPONENTS torch), target cocod::torch):
// a torch::nn::Module as a cocod::Model, with no copy per step. Include it beside <cocod.hpp>.
#include "cocod/torch/model.hpp"
