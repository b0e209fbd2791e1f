// MpiCommunicator (only built with MPI): the Communicator over Open MPI. Every call is a
// non-blocking MPI operation polled against a deadline, so a dead or stopped peer turns into
// an error after `timeout_s` instead of a hang; MPI errors come back as codes (MPI_ERRORS_RETURN).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace ferry::comm {

// Initializes MPI (once per process) and returns MPI_COMM_WORLD; MPI is finalized when it dies.
StatusOr<std::unique_ptr<Communicator>> OpenMpiWorld(double timeout_s);
// MPI_Abort on the world when MPI is initialized and not yet finalized.
void AbortMpi(int code);

}  // namespace ferry::comm
