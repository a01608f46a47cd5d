#pragma once
// Checkpoints, opt-in: the store (a directory of checkpoints, written atomically with POSIX
// calls), the checkpoint session that saves and resumes a run (Trainer::save, Trainer::resume,
// Trainer::resume_from), and callbacks::Checkpoint. <cocod.hpp> pulls in none of it.
#include "cocod.hpp"

#include "cocod/checkpoint/format.hpp"
#include "cocod/checkpoint/header.hpp"
#include "cocod/checkpoint/files.hpp"
#include "cocod/checkpoint/manifest.hpp"
#include "cocod/checkpoint/store.hpp"
#include "cocod/checkpoint/session.hpp"
#include "cocod/checkpoint/callback.hpp"
