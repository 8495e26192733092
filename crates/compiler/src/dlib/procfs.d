/*
 * The process model of DTrace's D library (Solaris proc(4) psinfo_t and lwpsinfo_t) over the
 * Linux task_struct, for kernels 5.14 and later (task_struct.__state, thread_info.cpu on x86-64
 * and arm64). Every conversion below is a chain of plain loads off the task, so that it can be
 * captured at the probe like any other curthread->... expression.
 *
 * What a Linux kernel cannot supply is 0 (or all-zero bytes) rather than a made-up value:
 *   psinfo_t:   pr_flag, pr_size, pr_rssize, pr_pctcpu, pr_pctmem, pr_start, pr_time, pr_ctime
 *               (not converted: zero in a whole-struct translation), pr_wstat, pr_argc, pr_taskid, pr_projid,
 *               pr_nzomb, pr_poolid, pr_zoneid, pr_contract (no tasks, projects, pools, zones or
 *               contracts), pr_lwp (no representative thread is chosen).
 *   lwpsinfo_t: pr_wchan, pr_stype, pr_nice, pr_oldpri, pr_cpu, pr_pctcpu, pr_start, pr_time,
 *               pr_clname, pr_bindpro, pr_bindpset, pr_lgrp.
 */

typedef struct timestruc {
	time_t tv_sec;
	long tv_nsec;
} timestruc_t;

typedef id_t psetid_t;
typedef id_t taskid_t;
typedef id_t projid_t;
typedef id_t poolid_t;

typedef struct lwpsinfo {
	int pr_flag;			/* thread flags (PR_STOPPED) */
	int pr_lwpid;			/* thread id */
	uintptr_t pr_addr;		/* address of the task_struct */
	uintptr_t pr_wchan;		/* wait address: 0 */
	char pr_stype;			/* synchronization event type: 0 */
	char pr_state;			/* SSLEEP, SRUN, SZOMB, SSTOP, SWAIT */
	char pr_sname;			/* pr_state as a letter */
	char pr_nice;
	short pr_syscall;
	char pr_oldpri;
	char pr_cpu;
	int pr_pri;			/* kernel priority (task_struct.prio) */
	ushort_t pr_pctcpu;
	ushort_t pr_pad;
	timestruc_t pr_start;
	timestruc_t pr_time;
	char pr_clname[8];
	char pr_name[16];		/* thread name (comm) */
	processorid_t pr_onpro;		/* CPU the thread last ran on */
	processorid_t pr_bindpro;
	psetid_t pr_bindpset;
	int pr_lgrp;
	int pr_filler[4];
} lwpsinfo_t;

typedef struct psinfo {
	int pr_flag;
	int pr_nlwp;			/* threads in the thread group */
	pid_t pr_pid;			/* process id (thread group id) */
	pid_t pr_ppid;			/* process id of the real parent */
	pid_t pr_pgid;			/* process group id */
	pid_t pr_sid;			/* session id */
	uid_t pr_uid;			/* real user id */
	uid_t pr_euid;			/* effective user id */
	uid_t pr_gid;			/* real group id */
	uid_t pr_egid;			/* effective group id */
	uintptr_t pr_addr;		/* address of the task_struct */
	size_t pr_size;
	size_t pr_rssize;
	size_t pr_pad1;
	struct tty_struct *pr_ttydev;	/* controlling tty, or -1 */
	ushort_t pr_pctcpu;
	ushort_t pr_pctmem;
	timestruc_t pr_start;
	timestruc_t pr_time;
	timestruc_t pr_ctime;
	char pr_fname[16];		/* name of the executable (comm) */
	char pr_psargs[80];
	int pr_wstat;
	int pr_argc;
	uintptr_t pr_argv;		/* user address of the argument strings */
	uintptr_t pr_envp;		/* user address of the environment strings */
	char pr_dmodel;			/* PR_MODEL_LP64 */
	char pr_pad2[3];
	taskid_t pr_taskid;
	projid_t pr_projid;
	int pr_nzomb;
	poolid_t pr_poolid;
	zoneid_t pr_zoneid;
	id_t pr_contract;
	int pr_filler[1];
	lwpsinfo_t pr_lwp;
} psinfo_t;

inline char PR_MODEL_ILP32 = 1;
inline char PR_MODEL_LP64 = 2;

inline int PR_STOPPED = 0x00000001;
inline int PR_ISTOP = 0x00000002;
inline int PR_DSTOP = 0x00000004;
inline int PR_IDLE = 0x10000000;

inline char SSLEEP = 1;
inline char SRUN = 2;
inline char SZOMB = 3;
inline char SSTOP = 4;
inline char SIDL = 5;
inline char SONPROC = 6;
inline char SWAIT = 7;

/* include/linux/sched.h task states (__state) and exit states (exit_state) */
inline int TASK_RUNNING = 0x0000;
inline int TASK_INTERRUPTIBLE = 0x0001;
inline int TASK_UNINTERRUPTIBLE = 0x0002;
inline int __TASK_STOPPED = 0x0004;
inline int __TASK_TRACED = 0x0008;
inline int EXIT_DEAD = 0x0010;
inline int EXIT_ZOMBIE = 0x0020;
inline int TASK_PARKED = 0x0040;
inline int TASK_DEAD = 0x0080;
inline int TASK_WAKEKILL = 0x0100;
inline int TASK_WAKING = 0x0200;

/* enum pid_type */
inline int PIDTYPE_PID = 0;
inline int PIDTYPE_TGID = 1;
inline int PIDTYPE_PGID = 2;
inline int PIDTYPE_SID = 3;

translator psinfo_t < struct task_struct *T > {
	pr_nlwp = T->signal->nr_threads;
	pr_pid = T->tgid;
	pr_ppid = T->real_parent->tgid;
	pr_pgid = T->signal->pids[PIDTYPE_PGID]->numbers[0].nr;
	pr_sid = T->signal->pids[PIDTYPE_SID]->numbers[0].nr;
	pr_uid = T->cred->uid.val;
	pr_euid = T->cred->euid.val;
	pr_gid = T->cred->gid.val;
	pr_egid = T->cred->egid.val;
	pr_addr = (uintptr_t)T;
	pr_ttydev = T->signal->tty ? T->signal->tty : (struct tty_struct *)-1;
	pr_fname = T->comm;
	/*
	 * The first PRARGSZ - 1 bytes of the argument strings (in the process's memory, between
	 * mm->arg_start and mm->arg_end), the NULs between them made spaces. The copy is of a fixed
	 * size so that it can be made at the probe (it faults where fewer than 80 readable bytes
	 * follow arg_start); substr() cuts it at arg_end and returns it in a strsize-byte string, so
	 * that the whole 80-byte member can be read from it (strsize of at least 80). Kernel threads
	 * (no mm) have none.
	 */
	pr_psargs = T->mm ? substr(memstr(copyin(T->mm->arg_start, 80), ' ', 80), 0,
	    T->mm->arg_end - T->mm->arg_start - 1) : substr("", 0);
	pr_wstat = 0;
	pr_argc = 0;
	pr_argv = T->mm ? T->mm->arg_start : 0;
	pr_envp = T->mm ? T->mm->env_start : 0;
	pr_dmodel = PR_MODEL_LP64;
	pr_taskid = 0;
	pr_projid = 0;
	pr_nzomb = 0;
	pr_poolid = 0;
	pr_zoneid = 0;
	pr_contract = 0;
};

translator lwpsinfo_t < struct task_struct *T > {
	pr_flag = (T->__state & __TASK_STOPPED) ? PR_STOPPED : 0;
	pr_lwpid = T->pid;
	pr_addr = (uintptr_t)T;
	pr_wchan = 0;
	pr_stype = 0;
	pr_state = (T->exit_state & (EXIT_ZOMBIE | EXIT_DEAD)) ? SZOMB :
	    (T->__state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)) ? SSLEEP :
	    (T->__state & (__TASK_STOPPED | __TASK_TRACED)) ? SSTOP :
	    (T->__state & TASK_DEAD) ? SZOMB :
	    (T->__state & (TASK_WAKEKILL | TASK_WAKING)) ? SWAIT : SRUN;
	pr_sname = (T->exit_state & (EXIT_ZOMBIE | EXIT_DEAD)) ? 'Z' :
	    (T->__state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)) ? 'S' :
	    (T->__state & (__TASK_STOPPED | __TASK_TRACED)) ? 'T' :
	    (T->__state & TASK_DEAD) ? 'Z' :
	    (T->__state & (TASK_WAKEKILL | TASK_WAKING)) ? 'W' : 'R';
	pr_pri = T->prio;
	pr_name = T->comm;
	pr_onpro = T->thread_info.cpu;
};

inline psinfo_t *curpsinfo = xlate <psinfo_t *> (curthread);
inline lwpsinfo_t *curlwpsinfo = xlate <lwpsinfo_t *> (curthread);
