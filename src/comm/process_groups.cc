#include "comm/process_groups.h"

namespace ferry::comm {

Status CheckLayout(int n, int rank, int tensor_parallel, int pipeline_parallel) {
  if (tensor_parallel < 1 || pipeline_parallel < 1)
    return InvalidArgumentError(
        "--tensor-parallel and --pipeline-parallel must be at least 1 (got {} and {})", tensor_parallel,
        pipeline_parallel);
  if (tensor_parallel * pipeline_parallel != n)
    return InvalidArgumentError(
        "rank {} of {}: --tensor-parallel {} x --pipeline-parallel {} = {} ranks, but the job has {}: start "
        "it with mpirun -np {} or change the flags",
        rank, n, tensor_parallel, pipeline_parallel, tensor_parallel * pipeline_parallel, n,
        tensor_parallel * pipeline_parallel);
  return Status::Ok();
}

StatusOr<ProcessGroups> MakeProcessGroups(std::unique_ptr<Communicator> world, int tensor_parallel,
                                          int pipeline_parallel) {
  const int rank = world->rank();
  FERRY_RETURN_IF_ERROR(CheckLayout(world->size(), rank, tensor_parallel, pipeline_parallel));
  ProcessGroups g;
  const int stage = rank / tensor_parallel, tp_rank = rank % tensor_parallel;
  FERRY_ASSIGN_OR_RETURN(g.tp, world->Split(stage, tp_rank));
  FERRY_ASSIGN_OR_RETURN(g.pp, world->Split(tp_rank, stage));
  g.world = std::move(world);
  return g;
}

}  // namespace ferry::comm
