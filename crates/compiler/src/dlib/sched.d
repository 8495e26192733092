/*
 * The CPU model of DTrace's D library: cpuinfo_t for the CPU a probe fires on, as DTrace for Linux
 * fills it: cpu_id is the CPU's number, cpu_chip its physical package and cpu_lgrp its NUMA node
 * (the built-in variables cpu, chip and lgrp, read from the system's topology), cpu_pset 0 (Linux
 * has no processor sets) and cpu_info NULL (no processor_info_t).
 */

typedef int processorid_t;
typedef id_t psetid_t;
typedef int chipid_t;
typedef id_t lgrp_id_t;

typedef struct cpuinfo {
	processorid_t cpu_id;		/* CPU identifier */
	psetid_t cpu_pset;		/* processor set identifier: 0 */
	chipid_t cpu_chip;		/* chip (physical package) identifier */
	lgrp_id_t cpu_lgrp;		/* locality group (NUMA node) identifier */
	void *cpu_info;			/* CPU information: NULL */
} cpuinfo_t;

/* The CPU the probe fired on, by its number (only that CPU's chip and node are known). */
translator cpuinfo_t < processorid_t C > {
	cpu_id = C;
	cpu_pset = 0;
	cpu_chip = chip;
	cpu_lgrp = lgrp;
	cpu_info = NULL;
};

/*
 * The CPU whose run queue R is (sched:::enqueue and dequeue's args[2]); its chip and node are known
 * only when it is the CPU the probe fires on, -1 otherwise.
 */
translator cpuinfo_t < struct rq *R > {
	cpu_id = R->cpu;
	cpu_pset = 0;
	cpu_chip = R->cpu == cpu ? chip : -1;
	cpu_lgrp = R->cpu == cpu ? lgrp : -1;
	cpu_info = NULL;
};

inline cpuinfo_t *curcpu = xlate <cpuinfo_t *> (cpu);
inline psetid_t pset = curcpu->cpu_pset;
