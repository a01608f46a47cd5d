#pragma once
// cocod: computation/communication decoupled SGD (CoCoD-SGD) and its baselines.
// The umbrella header; every header below also compiles on its own. What needs the operating
// system is opt-in: checkpoints (<cocod/checkpoint.hpp>) and the terminal's progress bar
// (<cocod/callbacks/progress_bar.hpp>), so that this header includes no POSIX header.
#include "cocod/version.hpp"
#include "cocod/errors.hpp"
#include "cocod/options.hpp"
#include "cocod/stop.hpp"
#include "cocod/report.hpp"
#include "cocod/events.hpp"

#include "cocod/model/concepts.hpp"
#include "cocod/model/parameter_pack.hpp"
#include "cocod/model/function_model.hpp"
#include "cocod/model/digest.hpp"

#include "cocod/backend/backend.hpp"
#include "cocod/compress/format.hpp"
#include "cocod/compress/codec.hpp"
#include "cocod/data/sampler.hpp"
#include "cocod/update/sgd.hpp"
#include "cocod/update/adam.hpp"
#include "cocod/update/clip.hpp"
#include "cocod/schedule/learning_rate.hpp"
#include "cocod/schedule/fixed.hpp"
#include "cocod/schedule/measurement.hpp"
#include "cocod/schedule/adaptive.hpp"

#include "cocod/family/outer.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/fragments.hpp"
#include "cocod/family/overlap_depth.hpp"
#include "cocod/family/pull_back.hpp"
#include "cocod/family/merge.hpp"
#include "cocod/family/delay.hpp"

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/local.hpp"
#include "cocod/comm/threads.hpp"
#include "cocod/comm/throttled.hpp"

#include "cocod/callbacks/hooks.hpp"
#include "cocod/callbacks/csv_logger.hpp"
#include "cocod/callbacks/early_stop.hpp"

#include "cocod/trace/timeline.hpp"

#include "cocod/algorithm/reduced.hpp"
#include "cocod/algorithm/operations.hpp"
#include "cocod/algorithm/trainer.hpp"
#include "cocod/algorithm/cocod_sgd.hpp"
#include "cocod/algorithm/sync_sgd.hpp"
#include "cocod/algorithm/local_sgd.hpp"
#include "cocod/algorithm/pipe_sgd.hpp"
#include "cocod/algorithm/overlap_local_sgd.hpp"
#include "cocod/algorithm/delayed_diloco.hpp"
