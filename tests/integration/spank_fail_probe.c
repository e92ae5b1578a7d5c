// SPDX-License-Identifier: Apache-2.0
/* A SPANK plugin that fails one hook on purpose, so the tests can record
 * what each Slurm release does with a failing required plugin (srun's exit
 * code, whether the tasks ran, whether the node is drained) and hold
 * mn_nccl(8)'s per-release table to it. Test-only; never installed.
 *   plugstack.conf:  required spank_fail_probe.so HOOK CONTEXT [job|node]
 * HOOK is init, user_init or task_init; CONTEXT is remote or local. */
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(spank_fail_probe, 1);

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
int slurm_spank_init_failure_mode = ESPANK_NODE_FAILURE;
#endif

static int fails_here(const char *hook, int ac, char **av)
{
	int remote = spank_context() == S_CTX_REMOTE;
	if (ac < 2 || strcmp(av[0], hook) != 0)
		return 0;
	return strcmp(av[1], remote ? "remote" : "local") == 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)sp;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	if (ac >= 3)
		slurm_spank_init_failure_mode = strcmp(av[2], "job") == 0 ? ESPANK_JOB_FAILURE : ESPANK_NODE_FAILURE;
#endif
	return fails_here("init", ac, av) ? -1 : 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	return fails_here("user_init", ac, av) ? -1 : 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	return fails_here("task_init", ac, av) ? -1 : 0;
}
