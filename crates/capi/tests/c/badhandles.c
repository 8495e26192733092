/*
 * Calls every entry point of libdtrace with what a careless caller passes: NULL, a pointer that
 * is no handle, a closed handle, NULL arguments, another handle's program, and calls out of
 * order, and a callback that calls back into its handle and closes it. Each must fail with
 * DTrace's error (dtrace_errno/dtrace_errmsg), never crash.
 */
#include <dtrace.h>
#include <stdio.h>
#include <string.h>

#define SHOW(call) printf("%-58s -> %d\n", #call, (int)(call))
#define ERR(dtp) printf("    errmsg: %s\n", dtrace_errmsg(dtp, dtrace_errno(dtp)))

static int
noop_walk(const dtrace_aggdata_t *a, void *arg)
{
	(void)a;
	(void)arg;
	return (DTRACE_AGGWALK_NEXT);
}

static int
bad_rec(const dtrace_probedata_t *d, const dtrace_recdesc_t *r, void *arg)
{
	(void)d;
	(void)r;
	(void)arg;
	return (42);
}

/* Calls back into its own handle from the probe callback, then closes the handle. */
static int
reenter(const dtrace_probedata_t *d, void *arg)
{
	dtrace_optval_t v;

	(void)arg;
	SHOW(dtrace_getopt(d->dtpda_handle, "quiet", &v));
	ERR(d->dtpda_handle);
	dtrace_close(d->dtpda_handle);
	SHOW(dtrace_errno(d->dtpda_handle) != 0);
	return (DTRACE_CONSUME_THIS);
}

static void
every_call(dtrace_hdl_t *dtp)
{
	dtrace_optval_t v;
	dtrace_proginfo_t info;

	SHOW(dtrace_errno(dtp));
	SHOW(dtrace_setopt(dtp, "quiet", NULL));
	SHOW(dtrace_getopt(dtp, "quiet", &v));
	SHOW(dtrace_program_strcompile(dtp, "BEGIN {}", DTRACE_PROBESPEC_NAME, 0, 0, NULL) == NULL);
	SHOW(dtrace_program_fcompile(dtp, stdin, 0, 0, NULL) == NULL);
	SHOW(dtrace_program_exec(dtp, NULL, &info));
	dtrace_program_info(dtp, NULL, &info);
	SHOW(dtrace_go(dtp));
	dtrace_sleep(dtp);
	SHOW(dtrace_status(dtp));
	SHOW(dtrace_work(dtp, stdout, NULL, NULL, NULL));
	SHOW(dtrace_consume(dtp, stdout, NULL, NULL, NULL));
	SHOW(dtrace_aggregate_snap(dtp));
	SHOW(dtrace_aggregate_print(dtp, stdout, NULL));
	SHOW(dtrace_aggregate_walk(dtp, noop_walk, NULL));
	SHOW(dtrace_aggregate_walk_valsorted(dtp, noop_walk, NULL));
	dtrace_aggregate_clear(dtp);
	SHOW(dtrace_handle_err(dtp, NULL, NULL));
	SHOW(dtrace_handle_drop(dtp, NULL, NULL));
	SHOW(dtrace_handle_buffered(dtp, NULL, NULL));
	SHOW(dtrace_stop(dtp));
	dtrace_close(dtp);
	printf("    errmsg(dtp, EDT 1000): %s\n", dtrace_errmsg(dtp, 1000));
}

int
main(void)
{
	int err = 0, junk[64];
	dtrace_hdl_t *dtp, *other;
	dtrace_prog_t *prog, *foreign;
	dtrace_proginfo_t info;
	dtrace_optval_t v;

	memset(junk, 0x5a, sizeof(junk));
	printf("== NULL handle\n");
	every_call(NULL);
	printf("== not a handle\n");
	every_call((dtrace_hdl_t *)junk);

	printf("== dtrace_open\n");
	SHOW(dtrace_open(DTRACE_VERSION + 1, 0, &err) == NULL);
	printf("    errmsg: %s\n", dtrace_errmsg(NULL, err));
	SHOW(dtrace_open(DTRACE_VERSION - 1, 0, &err) == NULL);
	printf("    errmsg: %s\n", dtrace_errmsg(NULL, err));
	SHOW(dtrace_open(DTRACE_VERSION, 0x100, &err) == NULL);
	printf("    errmsg: %s\n", dtrace_errmsg(NULL, err));
	SHOW(dtrace_open(DTRACE_VERSION, 0x100, NULL) == NULL);

	printf("== NULL arguments and out of order\n");
	if ((dtp = dtrace_open(DTRACE_VERSION, 0, &err)) == NULL ||
	    (other = dtrace_open(DTRACE_VERSION, DTRACE_O_NODEV, &err)) == NULL) {
		printf("open: %s\n", dtrace_errmsg(NULL, err));
		return (1);
	}
	SHOW(dtrace_setopt(dtp, NULL, "1"));
	ERR(dtp);
	SHOW(dtrace_setopt(dtp, "bufsize", "lots"));
	ERR(dtp);
	SHOW(dtrace_getopt(dtp, "quiet", NULL));
	ERR(dtp);
	SHOW(dtrace_getopt(dtp, "nosuchoption", &v));
	ERR(dtp);
	SHOW(dtrace_program_strcompile(dtp, NULL, DTRACE_PROBESPEC_NAME, 0, 0, NULL) == NULL);
	ERR(dtp);
	SHOW(dtrace_program_strcompile(dtp, "BEGIN {}", 99, 0, 0, NULL) == NULL);
	ERR(dtp);
	SHOW(dtrace_program_strcompile(dtp, "BEGIN {}", DTRACE_PROBESPEC_NAME, 0x4000, 0, NULL) == NULL);
	ERR(dtp);
	SHOW(dtrace_program_strcompile(dtp, "BEGIN {}", DTRACE_PROBESPEC_NAME, 0, 2, NULL) == NULL);
	ERR(dtp);
	prog = dtrace_program_strcompile(dtp, "nosuch:::probe {}", DTRACE_PROBESPEC_NAME, 0, 0, NULL);
	SHOW(prog != NULL);
	SHOW(dtrace_program_exec(dtp, prog, &info));
	ERR(dtp);
	SHOW(dtrace_program_fcompile(dtp, NULL, 0, 0, NULL) == NULL);
	ERR(dtp);
	SHOW(dtrace_program_exec(dtp, NULL, &info));
	ERR(dtp);
	foreign = dtrace_program_strcompile(other, "BEGIN { exit(0); }", DTRACE_PROBESPEC_NAME, 0, 0, NULL);
	SHOW(foreign != NULL);
	SHOW(dtrace_program_exec(dtp, foreign, &info));
	ERR(dtp);
	SHOW(dtrace_program_exec(other, foreign, &info));
	ERR(other);
	SHOW(dtrace_go(other));
	ERR(other);
	SHOW(dtrace_work(dtp, stdout, NULL, NULL, NULL));
	ERR(dtp);
	SHOW(dtrace_consume(dtp, stdout, NULL, NULL, NULL));
	ERR(dtp);
	SHOW(dtrace_aggregate_snap(dtp));
	ERR(dtp);
	SHOW(dtrace_status(dtp));
	SHOW(dtrace_stop(dtp));
	SHOW(dtrace_aggregate_walk(dtp, NULL, NULL));
	ERR(dtp);
	prog = dtrace_program_strcompile(dtp, "BEGIN { trace(1); exit(0); }", DTRACE_PROBESPEC_NAME, 0, 0, NULL);
	SHOW(prog != NULL);
	SHOW(dtrace_program_exec(dtp, prog, NULL));
	SHOW(dtrace_go(dtp));
	SHOW(dtrace_go(dtp));
	ERR(dtp);
	SHOW(dtrace_program_exec(dtp, prog, &info));
	ERR(dtp);
	SHOW(dtrace_setopt(dtp, "bufsize", "1m"));
	ERR(dtp);
	SHOW(dtrace_handle_err(dtp, NULL, NULL));
	ERR(dtp);
	SHOW(dtrace_work(dtp, NULL, NULL, bad_rec, NULL));
	ERR(dtp);
	SHOW(dtrace_work(dtp, NULL, NULL, NULL, NULL));
	SHOW(dtrace_stop(dtp));
	SHOW(dtrace_stop(dtp));
	SHOW(dtrace_status(dtp));
	dtrace_close(dtp);
	dtrace_close(other);
	printf("== callbacks calling back\n");
	if ((dtp = dtrace_open(DTRACE_VERSION, 0, &err)) == NULL)
		return (1);
	prog = dtrace_program_strcompile(dtp, "BEGIN { exit(0); }", DTRACE_PROBESPEC_NAME, 0, 0, NULL);
	SHOW(dtrace_program_exec(dtp, prog, NULL));
	SHOW(dtrace_go(dtp));
	SHOW(dtrace_work(dtp, NULL, reenter, NULL, NULL));
	SHOW(dtrace_errno(dtp));
	printf("== closed handle\n");
	every_call(dtp);
	dtrace_close(NULL);
	printf("errmsg(NULL, EINVAL): %s\n", dtrace_errmsg(NULL, 22));
	printf("errmsg(NULL, 999999): %s\n", dtrace_errmsg(NULL, 999999));
	printf("done\n");
	return (0);
}
