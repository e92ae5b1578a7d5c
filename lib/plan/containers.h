// SPDX-License-Identifier: Apache-2.0
// The step's program in a container: pyxis/enroot (srun --container-image)
// and Apptainer or Singularity (srun ... apptainer exec IMAGE cmd). Each
// brings environment variables of its own that would replace the plugin's
// (an image's ENV, enroot's pytorch hook: MASTER_ADDR from the node list,
// MASTER_PORT from the job id), or drops the host's (apptainer --cleanenv).
// The rules here keep the plugin's values, and say where they cannot.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mn {

// Every name task_environment may set that a container could also set, in
// a stable order: the launch variables and NCCL's network. The GPU list
// (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) is
// Slurm's and the GPU runtime's, not a container's, and is left out.
const std::vector<std::string>& plugin_variable_names();
bool is_plugin_variable(const std::string& name);

// pyxis takes PYXIS_CONTAINER_ENV as --container-env's default: the names
// whose host value the container keeps (enroot writes them into the
// container's environment before its hooks, which then leave them alone,
// and pyxis does not overwrite them on import). The user's own list, with
// the plugin's names added that it lacks.
std::string pyxis_container_env(const std::optional<std::string>& users);

// The plugin's names that a --container-env list leaves out: with pyxis
// after mn_nccl in plugstack and that option given, the container's values
// of these (if it has any) replace the plugin's.
std::vector<std::string> left_out_of(const std::string& container_env);

// A variable is the user's when it was in the step's environment before any
// task_init (slurmstepd's user_init): kept, unless forced. One that appears
// later came from another plugin's task_init (pyxis importing the
// container's environment): replaced.
bool keeps_existing(const std::string& name, const std::set<std::string>& users, bool force, bool replace);

// apptainer|singularity exec|run [OPTIONS] IMAGE COMMAND...: where COMMAND
// starts (nullopt when argv is not such a command line).
struct ContainerCommand {
    std::string runtime;  // "apptainer" or "singularity"
    std::string image;
    std::size_t command = 0;  // index in argv
};
std::optional<ContainerCommand> apptainer_command(const std::vector<std::string>& argv);

// Whether an enroot mounts.d file (fstab(5) lines: SOURCE TARGET TYPE
// OPTIONS; # comments) mounts something at `path` in every container:
// with pyxis after mn_nccl the plugin cannot look into the container, but
// it can see whether the site mounts mn-preflight there.
bool enroot_mounts(const std::string& fstab, const std::string& path);

// The prefix that passes a variable into an Apptainer or Singularity
// container even under --cleanenv, over the image's own: APPTAINERENV_ or
// SINGULARITYENV_.
std::string apptainer_env_prefix(const std::string& runtime);

}  // namespace mn
