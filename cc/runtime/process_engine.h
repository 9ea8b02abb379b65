// The process-wide entry points shared by every front door (the Python module and the TF op library
// link the same core library, so a process has exactly one engine).
#pragma once

#include "cc/common/config.h"
#include "cc/runtime/engine.h"

namespace bps {

// Reads DMLC_* / BYTEPS_* and joins the job as a worker over UCX. Error if already initialised.
Status InitProcessEngine();
// nullptr before init and after shutdown.
Engine* ProcessEngine();
// Leaves the job. OK if not initialised.
Status ShutdownProcessEngine();

// Checks the environment of this process without joining anything.
Status ValidateEnvironment();

// Runs this process as the scheduler or a server (per DMLC_ROLE) until the job ends.
Status RunServiceRole();

}  // namespace bps
