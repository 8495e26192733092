/*
 * dtrace.h: the C interface of libdtrace, the DTrace consumer library, as the Oracle Solaris DTrace
 * Guide ("DTrace Consumer Functions") describes it: open a handle, compile D, enable it, set
 * options, run, consume the trace data through callbacks, print or walk the aggregations, close.
 *
 * Link with -ldtrace. Every function is safe to call with a NULL or closed handle, NULL pointers
 * and out-of-order calls: it fails with -1 (or NULL) and dtrace_errno()/dtrace_errmsg() say why.
 * A handle is used by one thread at a time. Functions DTrace has that this library does not
 * implement yet are absent from this header; the few present that cannot do all DTrace does fail
 * with an error whose message begins "not yet supported:".
 */

#ifndef _DTRACE_H
#define _DTRACE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DTRACE_VERSION 3 /* library ABI interface version */

/* Basic types */
typedef uint32_t dtrace_id_t;        /* probe identifier */
typedef uint32_t dtrace_epid_t;      /* enabled probe identifier */
typedef uint32_t dtrace_aggid_t;     /* aggregation identifier */
typedef int64_t dtrace_aggvarid_t;   /* aggregation variable identifier */
typedef int64_t dtrace_optval_t;     /* option value */
typedef uint16_t dtrace_actkind_t;   /* action kind */
typedef int processorid_t;           /* CPU number */
typedef uint8_t dtrace_stability_t;  /* stability level */
typedef uint8_t dtrace_class_t;      /* architectural dependency class */

typedef struct dtrace_attribute {
	dtrace_stability_t dtat_name; /* entity name stability */
	dtrace_stability_t dtat_data; /* entity data stability */
	dtrace_class_t dtat_class;    /* entity data dependency */
} dtrace_attribute_t;

#define DTRACEOPT_UNSET ((dtrace_optval_t)-2) /* value of an option that is not set */

/* Probe descriptions */
#define DTRACE_PROVNAMELEN 64
#define DTRACE_MODNAMELEN 64
#define DTRACE_FUNCNAMELEN 128
#define DTRACE_NAMELEN 64

typedef enum dtrace_probespec {
	DTRACE_PROBESPEC_NONE = -1,
	DTRACE_PROBESPEC_PROVIDER = 0,
	DTRACE_PROBESPEC_MOD,
	DTRACE_PROBESPEC_FUNC,
	DTRACE_PROBESPEC_NAME
} dtrace_probespec_t;

typedef struct dtrace_probedesc {
	dtrace_id_t dtpd_id;                      /* probe identifier */
	char dtpd_provider[DTRACE_PROVNAMELEN];   /* probe provider name */
	char dtpd_mod[DTRACE_MODNAMELEN];         /* probe module name */
	char dtpd_func[DTRACE_FUNCNAMELEN];       /* probe function name */
	char dtpd_name[DTRACE_NAMELEN];           /* probe name */
} dtrace_probedesc_t;

/* Actions (dtrd_action) */
#define DTRACEACT_NONE 0
#define DTRACEACT_DIFEXPR 1
#define DTRACEACT_EXIT 2
#define DTRACEACT_PRINTF 3
#define DTRACEACT_PRINTA 4
#define DTRACEACT_LIBACT 5
#define DTRACEACT_TRACEMEM 6
#define DTRACEACT_TRACEMEM_DYNSIZE 7
#define DTRACEACT_PROC 0x0100
#define DTRACEACT_USTACK (DTRACEACT_PROC + 1)
#define DTRACEACT_JSTACK (DTRACEACT_PROC + 2)
#define DTRACEACT_USYM (DTRACEACT_PROC + 3)
#define DTRACEACT_UMOD (DTRACEACT_PROC + 4)
#define DTRACEACT_UADDR (DTRACEACT_PROC + 5)
#define DTRACEACT_PROC_DESTRUCTIVE 0x0200
#define DTRACEACT_STOP (DTRACEACT_PROC_DESTRUCTIVE + 1)
#define DTRACEACT_RAISE (DTRACEACT_PROC_DESTRUCTIVE + 2)
#define DTRACEACT_SYSTEM (DTRACEACT_PROC_DESTRUCTIVE + 3)
#define DTRACEACT_FREOPEN (DTRACEACT_PROC_DESTRUCTIVE + 4)
#define DTRACEACT_KERNEL 0x0400
#define DTRACEACT_STACK (DTRACEACT_KERNEL + 1)
#define DTRACEACT_SYM (DTRACEACT_KERNEL + 2)
#define DTRACEACT_MOD (DTRACEACT_KERNEL + 3)
#define DTRACEACT_KERNEL_DESTRUCTIVE 0x0500
#define DTRACEACT_BREAKPOINT (DTRACEACT_KERNEL_DESTRUCTIVE + 1)
#define DTRACEACT_PANIC (DTRACEACT_KERNEL_DESTRUCTIVE + 2)
#define DTRACEACT_CHILL (DTRACEACT_KERNEL_DESTRUCTIVE + 3)
#define DTRACEACT_SPECULATIVE 0x0600
#define DTRACEACT_SPECULATE (DTRACEACT_SPECULATIVE + 1)
#define DTRACEACT_COMMIT (DTRACEACT_SPECULATIVE + 2)
#define DTRACEACT_DISCARD (DTRACEACT_SPECULATIVE + 3)
#define DTRACEACT_AGGREGATION 0x0700
#define DTRACEAGG_COUNT (DTRACEACT_AGGREGATION + 1)
#define DTRACEAGG_MIN (DTRACEACT_AGGREGATION + 2)
#define DTRACEAGG_MAX (DTRACEACT_AGGREGATION + 3)
#define DTRACEAGG_AVG (DTRACEACT_AGGREGATION + 4)
#define DTRACEAGG_SUM (DTRACEACT_AGGREGATION + 5)
#define DTRACEAGG_STDDEV (DTRACEACT_AGGREGATION + 6)
#define DTRACEAGG_QUANTIZE (DTRACEACT_AGGREGATION + 7)
#define DTRACEAGG_LQUANTIZE (DTRACEACT_AGGREGATION + 8)
#define DTRACEAGG_LLQUANTIZE (DTRACEACT_AGGREGATION + 9)
#define DTRACEACT_CLASS(x) ((x) & 0xff00)
#define DTRACEACT_ISAGG(x) (DTRACEACT_CLASS(x) == DTRACEACT_AGGREGATION)

/* Record, enabled probe and aggregation descriptions */
typedef struct dtrace_recdesc {
	dtrace_actkind_t dtrd_action; /* kind of action */
	uint32_t dtrd_size;           /* size of record */
	uint32_t dtrd_offset;         /* offset in ECB's data */
	uint16_t dtrd_alignment;      /* required alignment */
	uint16_t dtrd_format;         /* format, if any */
	uint64_t dtrd_arg;            /* action argument */
	uint64_t dtrd_uarg;           /* user argument */
} dtrace_recdesc_t;

typedef struct dtrace_eprobedesc {
	dtrace_epid_t dtepd_epid;      /* enabled probe ID */
	dtrace_id_t dtepd_probeid;     /* probe ID */
	uint64_t dtepd_uarg;           /* library argument */
	uint32_t dtepd_size;           /* total size */
	int dtepd_nrecs;               /* number of records */
	dtrace_recdesc_t dtepd_rec[1]; /* records themselves */
} dtrace_eprobedesc_t;

typedef struct dtrace_aggdesc {
	char *dtagd_name;              /* aggregation name, without the '@' */
	dtrace_aggvarid_t dtagd_varid; /* aggregation variable ID */
	int dtagd_flags;               /* DTRACE_AGD_* */
	dtrace_aggid_t dtagd_id;       /* aggregation ID */
	dtrace_epid_t dtagd_epid;      /* enabled probe ID */
	uint32_t dtagd_size;           /* size in bytes */
	int dtagd_nrecs;               /* number of records */
	uint32_t dtagd_pad;            /* explicit padding */
	dtrace_recdesc_t dtagd_rec[1]; /* record descriptions */
} dtrace_aggdesc_t;

#define DTRACE_AGD_PRINTED 0x1 /* aggregation printed in program */

/* Handles and programs */
typedef struct dtrace_hdl dtrace_hdl_t;
typedef struct dtrace_prog dtrace_prog_t;
typedef struct dtrace_aggdata dtrace_aggdata_t;

#define DTRACE_O_NODEV 0x01 /* do not open the tracing machinery (compile only) */
#define DTRACE_O_NOSYS 0x02 /* do not load system modules' symbols */
#define DTRACE_O_LP64 0x04  /* force the D compiler to be LP64 */
#define DTRACE_O_ILP32 0x08 /* force the D compiler to be ILP32 */
#define DTRACE_O_MASK 0x0f  /* mask of valid flags to dtrace_open */

extern dtrace_hdl_t *dtrace_open(int, int, int *);
extern int dtrace_go(dtrace_hdl_t *);
extern int dtrace_stop(dtrace_hdl_t *);
extern void dtrace_sleep(dtrace_hdl_t *);
extern void dtrace_close(dtrace_hdl_t *);

extern int dtrace_errno(dtrace_hdl_t *);
extern const char *dtrace_errmsg(dtrace_hdl_t *, int);

extern int dtrace_setopt(dtrace_hdl_t *, const char *, const char *);
extern int dtrace_getopt(dtrace_hdl_t *, const char *, dtrace_optval_t *);

typedef struct dtrace_proginfo {
	dtrace_attribute_t dpi_descattr; /* minimum probedesc attributes */
	dtrace_attribute_t dpi_stmtattr; /* minimum statement attributes */
	unsigned int dpi_aggregates;     /* number of aggregates specified in program */
	unsigned int dpi_recgens;        /* number of record generating probes in prog */
	unsigned int dpi_matches;        /* number of probes matched by program */
	unsigned int dpi_speculations;   /* number of speculations specified in prog */
} dtrace_proginfo_t;

#define DTRACE_C_DIFV 0x0001   /* DIF verbose mode: show each compiled DIFO */
#define DTRACE_C_EMPTY 0x0002  /* permit compilation of empty D source files */
#define DTRACE_C_ZDEFS 0x0004  /* permit probe defs that match zero probes */
#define DTRACE_C_EATTR 0x0008  /* error if program attributes less than min */
#define DTRACE_C_CPP 0x0010    /* preprocess input file with cpp(1) utility */
#define DTRACE_C_KNODEF 0x0020 /* permit unresolved kernel symbols in DIFO */
#define DTRACE_C_UNODEF 0x0040 /* permit unresolved user symbols in DIFO */
#define DTRACE_C_PSPEC 0x0080  /* interpret ambiguous specifiers as probes */
#define DTRACE_C_ETAGS 0x0100  /* prefix error messages with error tags */
#define DTRACE_C_ARGREF 0x0200 /* do not require all macro args to be used */
#define DTRACE_C_DEFARG 0x0800 /* use 0/"" as value for unspecified args */
#define DTRACE_C_NOLIBS 0x1000 /* do not process D system libraries */
#define DTRACE_C_CTL 0x2000    /* only process control directives */
#define DTRACE_C_MASK 0x3bff   /* mask of all valid flags to dtrace_*compile */

extern dtrace_prog_t *dtrace_program_strcompile(dtrace_hdl_t *, const char *,
    dtrace_probespec_t, unsigned int, int, char *const[]);
extern dtrace_prog_t *dtrace_program_fcompile(dtrace_hdl_t *, FILE *, unsigned int, int,
    char *const[]);
extern int dtrace_program_exec(dtrace_hdl_t *, dtrace_prog_t *, dtrace_proginfo_t *);
extern void dtrace_program_info(dtrace_hdl_t *, dtrace_prog_t *, dtrace_proginfo_t *);

/* Data consumption */
typedef enum {
	DTRACEFLOW_ENTRY,
	DTRACEFLOW_RETURN,
	DTRACEFLOW_NONE
} dtrace_flowkind_t;

#define DTRACE_CONSUME_ERROR -1 /* error while processing */
#define DTRACE_CONSUME_THIS 0   /* consume this probe/record */
#define DTRACE_CONSUME_NEXT 1   /* advance to next probe/rec */
#define DTRACE_CONSUME_ABORT 2  /* abort consumption */

typedef struct dtrace_probedata {
	dtrace_hdl_t *dtpda_handle;        /* handle to DTrace library */
	dtrace_eprobedesc_t *dtpda_edesc;  /* enabled probe description */
	dtrace_probedesc_t *dtpda_pdesc;   /* probe description */
	processorid_t dtpda_cpu;           /* CPU for data */
	char *dtpda_data;                  /* pointer to raw data (the record, header included) */
	dtrace_flowkind_t dtpda_flow;      /* flow kind */
	const char *dtpda_prefix;          /* recommended flow prefix */
	int dtpda_indent;                  /* recommended flow indent */
} dtrace_probedata_t;

typedef int dtrace_consume_probe_f(const dtrace_probedata_t *, void *);
typedef int dtrace_consume_rec_f(const dtrace_probedata_t *, const dtrace_recdesc_t *, void *);

extern int dtrace_consume(dtrace_hdl_t *, FILE *, dtrace_consume_probe_f *,
    dtrace_consume_rec_f *, void *);

#define DTRACE_STATUS_NONE 0    /* no status; not yet time */
#define DTRACE_STATUS_OKAY 1    /* status okay */
#define DTRACE_STATUS_EXITED 2  /* exit() was called; tracing stopped */
#define DTRACE_STATUS_FILLED 3  /* fill buffer filled; tracing stopped */
#define DTRACE_STATUS_STOPPED 4 /* tracing already stopped */

extern int dtrace_status(dtrace_hdl_t *);

typedef enum {
	DTRACE_WORKSTATUS_ERROR = -1,
	DTRACE_WORKSTATUS_OKAY,
	DTRACE_WORKSTATUS_DONE
} dtrace_workstatus_t;

extern dtrace_workstatus_t dtrace_work(dtrace_hdl_t *, FILE *, dtrace_consume_probe_f *,
    dtrace_consume_rec_f *, void *);

/* Handlers */
#define DTRACE_HANDLE_ABORT -1 /* abort current operation */
#define DTRACE_HANDLE_OK 0     /* handled okay; continue */

typedef struct dtrace_errdata {
	dtrace_hdl_t *dteda_handle;       /* handle to DTrace library */
	dtrace_eprobedesc_t *dteda_edesc; /* enabled probe inducing error */
	dtrace_probedesc_t *dteda_pdesc;  /* probe inducing error */
	processorid_t dteda_cpu;          /* CPU of error */
	int dteda_action;                 /* action inducing error */
	int dteda_offset;                 /* offset in DIFO of error */
	int dteda_fault;                  /* specific fault */
	uint64_t dteda_addr;              /* address of fault, if any */
	const char *dteda_msg;            /* preconstructed message */
} dtrace_errdata_t;

typedef int dtrace_handle_err_f(const dtrace_errdata_t *, void *);
extern int dtrace_handle_err(dtrace_hdl_t *, dtrace_handle_err_f *, void *);

typedef enum {
	DTRACEDROP_PRINCIPAL,      /* drop to principal buffer */
	DTRACEDROP_AGGREGATION,    /* drop to aggregation buffer */
	DTRACEDROP_DYNAMIC,        /* dynamic drop */
	DTRACEDROP_DYNRINSE,       /* dyn drop due to rinsing */
	DTRACEDROP_DYNDIRTY,       /* dyn drop due to dirty */
	DTRACEDROP_SPEC,           /* speculative drop */
	DTRACEDROP_SPECBUSY,       /* spec drop due to busy */
	DTRACEDROP_SPECUNAVAIL,    /* spec drop due to unavail */
	DTRACEDROP_STKSTROVERFLOW, /* stack string tab overflow */
	DTRACEDROP_DBLERROR        /* error in ERROR probe */
} dtrace_dropkind_t;

typedef struct dtrace_dropdata {
	dtrace_hdl_t *dtdda_handle;    /* handle to DTrace library */
	processorid_t dtdda_cpu;       /* CPU, if any (DTRACE_CPUALL otherwise) */
	dtrace_dropkind_t dtdda_kind;  /* kind of drop */
	uint64_t dtdda_drops;          /* number of drops */
	uint64_t dtdda_total;          /* total drops */
	const char *dtdda_msg;         /* preconstructed message */
} dtrace_dropdata_t;

#define DTRACE_CPUALL -1 /* all CPUs */

typedef int dtrace_handle_drop_f(const dtrace_dropdata_t *, void *);
extern int dtrace_handle_drop(dtrace_hdl_t *, dtrace_handle_drop_f *, void *);

#define DTRACE_BUFDATA_AGGKEY 0x0001    /* aggregation key */
#define DTRACE_BUFDATA_AGGVAL 0x0002    /* aggregation value */
#define DTRACE_BUFDATA_AGGFORMAT 0x0004 /* aggregation format data */
#define DTRACE_BUFDATA_AGGLAST 0x0008   /* last for this key/val */

typedef struct dtrace_bufdata {
	dtrace_hdl_t *dtbda_handle;            /* handle to DTrace library */
	const char *dtbda_buffered;            /* buffered output */
	dtrace_probedata_t *dtbda_probe;       /* probe data */
	const dtrace_recdesc_t *dtbda_recdesc; /* record description */
	const dtrace_aggdata_t *dtbda_aggdata; /* aggregation data, if agg. */
	uint32_t dtbda_flags;                  /* flags; see above */
} dtrace_bufdata_t;

typedef int dtrace_handle_buffered_f(const dtrace_bufdata_t *, void *);
extern int dtrace_handle_buffered(dtrace_hdl_t *, dtrace_handle_buffered_f *, void *);

/* Aggregations */
#define DTRACE_AGGWALK_ERROR -1      /* error while processing */
#define DTRACE_AGGWALK_NEXT 0        /* proceed to next element */
#define DTRACE_AGGWALK_ABORT 1       /* abort aggregation walk */
#define DTRACE_AGGWALK_CLEAR 2       /* clear this element */
#define DTRACE_AGGWALK_NORMALIZE 3   /* normalize this element */
#define DTRACE_AGGWALK_DENORMALIZE 4 /* denormalize this element */
#define DTRACE_AGGWALK_REMOVE 5      /* remove this element */

struct dtrace_aggdata {
	dtrace_hdl_t *dtada_handle;       /* handle to DTrace library */
	dtrace_aggdesc_t *dtada_desc;     /* aggregation description */
	dtrace_eprobedesc_t *dtada_edesc; /* enabled probe description */
	dtrace_probedesc_t *dtada_pdesc;  /* probe description */
	char *dtada_data;                 /* pointer to raw data */
	uint64_t dtada_normal;            /* the normal -- 1 for denorm */
	size_t dtada_size;                /* total size of the data */
	char *dtada_delta;                /* delta data, if available */
	char **dtada_percpu;              /* per CPU data, if avail */
	char **dtada_percpu_delta;        /* per CPU delta, if avail */
	int64_t dtada_total;              /* per agg total, if avail */
	uint16_t dtada_minbin;            /* minimum bin, if avail */
	uint16_t dtada_maxbin;            /* maximum bin, if avail */
};

typedef int dtrace_aggregate_f(const dtrace_aggdata_t *, void *);
typedef int dtrace_aggregate_walk_f(dtrace_hdl_t *, dtrace_aggregate_f *, void *);

extern int dtrace_aggregate_snap(dtrace_hdl_t *);
extern int dtrace_aggregate_print(dtrace_hdl_t *, FILE *, dtrace_aggregate_walk_f *);
extern void dtrace_aggregate_clear(dtrace_hdl_t *);

extern int dtrace_aggregate_walk(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_sorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_keysorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_valsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_keyvarsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_valvarsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_keyrevsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_valrevsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_keyvarrevsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);
extern int dtrace_aggregate_walk_valvarrevsorted(dtrace_hdl_t *, dtrace_aggregate_f *, void *);

#ifdef __cplusplus
}
#endif

#endif /* _DTRACE_H */
