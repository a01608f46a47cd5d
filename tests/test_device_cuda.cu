// The device-backend tests of test_device.cpp, compiled by nvcc for the GPU.
#include "test_device.cpp"
