// The device backend's header first, then <cocod.hpp>.
#include <cocod/backend/cuda.hpp>
#include <cocod.hpp>

#include "include_order_device_model.hpp"

std::vector<float> cocod_test::train_device_cuda_first() { return train_centres<CentresOnDevice>(); }
