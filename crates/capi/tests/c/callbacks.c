/*
 * Drives the consumer callbacks of libdtrace: a probe and a record callback over dtrace_work, the
 * library's output through dtrace_handle_buffered, a fault through dtrace_handle_err, a compile
 * error and a bad option through dtrace_errmsg, exit() read by the record callback, a script
 * read from a FILE with a #! line and a macro argument, and the aggregations printed, walked
 * sorted, pruned by a walk (remove, clear) and printed again in reverse key order. Needs no
 * kernel probes (BEGIN, tick, END).
 */
#include <dtrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dtrace_hdl_t *g_dtp;
static int g_exit = -1;

static const char *g_prog =
    "BEGIN { printf(\"hello %d\\n\", 42); trace(\"str\"); }\n"
    "BEGIN { trace(*(int *)0); }\n"
    "tick-10ms /i++ == 2/ { @calls[\"k\"] = count(); @total[1, 2] = sum(5); @total[3, 4] = sum(9); exit(3); }\n"
    "END { printf(\"end %s\\n\", probename); }\n";

static int
chew(const dtrace_probedata_t *data, void *arg)
{
	dtrace_probedesc_t *pd = data->dtpda_pdesc;
	(void)arg;
	printf("probe %s:%s:%s:%s nrecs=%d cpu_ok=%d handle_ok=%d\n", pd->dtpd_provider, pd->dtpd_mod,
	    pd->dtpd_func, pd->dtpd_name, data->dtpda_edesc->dtepd_nrecs, data->dtpda_cpu >= 0,
	    data->dtpda_handle == g_dtp);
	return (DTRACE_CONSUME_THIS);
}

static int
chewrec(const dtrace_probedata_t *data, const dtrace_recdesc_t *rec, void *arg)
{
	(void)arg;
	if (rec == NULL) {
		printf("end of %s\n", data->dtpda_pdesc->dtpd_name);
		return (DTRACE_CONSUME_NEXT);
	}
	if (rec->dtrd_action == DTRACEACT_EXIT) {
		g_exit = *(int *)(data->dtpda_data + rec->dtrd_offset);
		printf("exit record: %d\n", g_exit);
		return (DTRACE_CONSUME_NEXT);
	}
	printf("record action=%d size_ok=%d\n", rec->dtrd_action, rec->dtrd_size > 0);
	return (DTRACE_CONSUME_THIS);
}

static int
buffered(const dtrace_bufdata_t *bufdata, void *arg)
{
	(void)arg;
	printf("buffered action=%d [%s]\n",
	    bufdata->dtbda_recdesc != NULL ? bufdata->dtbda_recdesc->dtrd_action : -1,
	    bufdata->dtbda_buffered);
	return (DTRACE_HANDLE_OK);
}

static int
errhandler(const dtrace_errdata_t *data, void *arg)
{
	(void)arg;
	printf("error handler: fault=%d probe=%s [%s]\n", data->dteda_fault,
	    data->dteda_pdesc != NULL ? data->dteda_pdesc->dtpd_name : "?", data->dteda_msg);
	return (DTRACE_HANDLE_OK);
}

static int
drophandler(const dtrace_dropdata_t *data, void *arg)
{
	(void)arg;
	printf("drop: %s", data->dtdda_msg);
	return (DTRACE_HANDLE_OK);
}

/* Removes @calls' entries and clears the others. */
static int
prune(const dtrace_aggdata_t *agg, void *arg)
{
	(void)arg;
	return (strcmp(agg->dtada_desc->dtagd_name, "calls") == 0 ? DTRACE_AGGWALK_REMOVE :
	    DTRACE_AGGWALK_CLEAR);
}

static int
walk(const dtrace_aggdata_t *agg, void *arg)
{
	const dtrace_aggdesc_t *d = agg->dtada_desc;
	const dtrace_recdesc_t *v = &d->dtagd_rec[d->dtagd_nrecs - 1];
	(void)arg;
	printf("walk @%s nrecs=%d first_key_action=%d value=%lld\n", d->dtagd_name, d->dtagd_nrecs,
	    d->dtagd_rec[1].dtrd_action, (long long)*(int64_t *)(agg->dtada_data + v->dtrd_offset));
	return (DTRACE_AGGWALK_NEXT);
}

int
main(void)
{
	int err;
	dtrace_prog_t *prog, *script;
	FILE *f;
	dtrace_proginfo_t info;
	dtrace_optval_t val;

	printf("sizes %zu %zu %zu\n", sizeof(dtrace_recdesc_t), sizeof(dtrace_probedata_t),
	    sizeof(dtrace_probedesc_t));
	if ((g_dtp = dtrace_open(DTRACE_VERSION, 0, &err)) == NULL) {
		printf("open: %s\n", dtrace_errmsg(NULL, err));
		return (1);
	}
	if (dtrace_program_strcompile(g_dtp, "BEGIN { trace(", DTRACE_PROBESPEC_NAME, 0, 0, NULL) == NULL)
		printf("compile error: errno_is_compiler=%d [%s]\n", dtrace_errno(g_dtp) != 0,
		    dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	if (dtrace_setopt(g_dtp, "nosuchoption", "1") == -1)
		printf("setopt: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	if (dtrace_setopt(g_dtp, "quiet", NULL) == 0 && dtrace_getopt(g_dtp, "quiet", &val) == 0)
		printf("quiet is set: %d\n", val != DTRACEOPT_UNSET);
	if (dtrace_getopt(g_dtp, "bufpolicy", &val) == 0)
		printf("getopt bufpolicy ok\n");
	if (dtrace_handle_err(g_dtp, errhandler, NULL) == -1 ||
	    dtrace_handle_drop(g_dtp, drophandler, NULL) == -1 ||
	    dtrace_handle_buffered(g_dtp, buffered, NULL) == -1) {
		printf("handlers: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
		return (1);
	}
	if ((prog = dtrace_program_strcompile(g_dtp, g_prog, DTRACE_PROBESPEC_NAME, 0, 0, NULL)) == NULL) {
		printf("compile: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
		return (1);
	}
	if (dtrace_program_exec(g_dtp, prog, &info) == -1) {
		printf("exec: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
		return (1);
	}
	printf("matches=%u aggregates=%u\n", info.dpi_matches, info.dpi_aggregates);
	if ((f = tmpfile()) == NULL)
		return (1);
	fputs("#!/usr/sbin/dtrace -s\nBEGIN { printf(\"from a file, %s\\n\", $$1); }\n", f);
	rewind(f);
	{
		char *const argv[] = { "script.d", "argument" };
		if ((script = dtrace_program_fcompile(g_dtp, f, 0, 2, argv)) == NULL ||
		    dtrace_program_exec(g_dtp, script, NULL) == -1) {
			printf("script: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
			return (1);
		}
	}
	fclose(f);
	if (dtrace_go(g_dtp) != 0) {
		printf("go: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
		return (1);
	}
	for (;;) {
		dtrace_workstatus_t st;
		dtrace_sleep(g_dtp);
		st = dtrace_work(g_dtp, NULL, chew, chewrec, NULL);
		if (st == DTRACE_WORKSTATUS_DONE)
			break;
		if (st != DTRACE_WORKSTATUS_OKAY) {
			printf("work: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
			return (1);
		}
	}
	printf("status after done: %d\n", dtrace_status(g_dtp));
	if (dtrace_aggregate_print(g_dtp, NULL, NULL) == -1)
		printf("print: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	if (dtrace_aggregate_walk_keysorted(g_dtp, walk, NULL) == -1)
		printf("walk: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	if (dtrace_aggregate_walk_valrevsorted(g_dtp, walk, NULL) == -1)
		printf("walk: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	if (dtrace_aggregate_walk(g_dtp, prune, NULL) == -1)
		printf("prune: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	if (dtrace_aggregate_print(g_dtp, NULL, dtrace_aggregate_walk_keyrevsorted) == -1)
		printf("print: %s\n", dtrace_errmsg(g_dtp, dtrace_errno(g_dtp)));
	dtrace_close(g_dtp);
	printf("exit status seen: %d\n", g_exit);
	return (0);
}
