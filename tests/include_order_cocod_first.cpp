// <cocod.hpp> first, then the device backend's header: the kernels are found all the same.
#include <cocod.hpp>
#include <cocod/backend/cuda.hpp>

#include "include_order_device_model.hpp"

std::vector<float> cocod_test::train_device_cocod_first() { return train_centres<CentresOnDevice>(); }
