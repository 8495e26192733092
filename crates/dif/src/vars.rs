//! Built-in variable identifiers (spec ch.9; `DIF_VAR_*` in DTrace's `sys/dtrace.h`).
//!
//! Ids below [`DIF_VAR_OTHER_UBASE`] are built-ins; the compiler numbers user variables from it upward.

/// `args[]` (array, typed arguments).
pub const DIF_VAR_ARGS: u32 = 0x0000;
/// `regs[]` (array).
pub const DIF_VAR_REGS: u32 = 0x0001;
/// `uregs[]` (array).
pub const DIF_VAR_UREGS: u32 = 0x0002;
/// First id of the built-in scalars.
pub const DIF_VAR_OTHER_MIN: u32 = 0x0100;
/// `curthread`.
pub const DIF_VAR_CURTHREAD: u32 = 0x0100;
/// `timestamp`.
pub const DIF_VAR_TIMESTAMP: u32 = 0x0101;
/// `vtimestamp`.
pub const DIF_VAR_VTIMESTAMP: u32 = 0x0102;
/// `ipl`.
pub const DIF_VAR_IPL: u32 = 0x0103;
/// `epid`.
pub const DIF_VAR_EPID: u32 = 0x0104;
/// `id`.
pub const DIF_VAR_ID: u32 = 0x0105;
/// `arg0`; `arg1`..`arg9` follow consecutively.
pub const DIF_VAR_ARG0: u32 = 0x0106;
/// `arg9`.
pub const DIF_VAR_ARG9: u32 = 0x010f;
/// `stackdepth`.
pub const DIF_VAR_STACKDEPTH: u32 = 0x0110;
/// `caller`.
pub const DIF_VAR_CALLER: u32 = 0x0111;
/// `probeprov`.
pub const DIF_VAR_PROBEPROV: u32 = 0x0112;
/// `probemod`.
pub const DIF_VAR_PROBEMOD: u32 = 0x0113;
/// `probefunc`.
pub const DIF_VAR_PROBEFUNC: u32 = 0x0114;
/// `probename`.
pub const DIF_VAR_PROBENAME: u32 = 0x0115;
/// `pid`.
pub const DIF_VAR_PID: u32 = 0x0116;
/// `tid`.
pub const DIF_VAR_TID: u32 = 0x0117;
/// `execname`.
pub const DIF_VAR_EXECNAME: u32 = 0x0118;
/// `zonename`.
pub const DIF_VAR_ZONENAME: u32 = 0x0119;
/// `walltimestamp`.
pub const DIF_VAR_WALLTIMESTAMP: u32 = 0x011a;
/// `ustackdepth`.
pub const DIF_VAR_USTACKDEPTH: u32 = 0x011b;
/// `ucaller`.
pub const DIF_VAR_UCALLER: u32 = 0x011c;
/// `ppid`.
pub const DIF_VAR_PPID: u32 = 0x011d;
/// `uid`.
pub const DIF_VAR_UID: u32 = 0x011e;
/// `gid`.
pub const DIF_VAR_GID: u32 = 0x011f;
/// `errno`.
pub const DIF_VAR_ERRNO: u32 = 0x0120;
/// `execargs`.
pub const DIF_VAR_EXECARGS: u32 = 0x0121;
/// `cpu` (FreeBSD/OpenDTrace number; illumos derives `cpu` from `curcpu` in its D library instead).
pub const DIF_VAR_CPU: u32 = 0x0200;
/// `chip`: the physical package (socket) of the CPU the probe fired on (DTrace's
/// `curcpu->cpu_chip`; DTrace for Linux reads it from the CPU's topology as we do).
pub const DIF_VAR_CHIP: u32 = 0x0201;
/// `lgrp`: the locality group, on Linux the NUMA node, of the CPU the probe fired on
/// (`curcpu->cpu_lgrp`).
pub const DIF_VAR_LGRP: u32 = 0x0202;
/// Last id reserved for built-ins.
pub const DIF_VAR_OTHER_MAX: u32 = 0x04ff;
/// First id of user-defined variables.
pub const DIF_VAR_OTHER_UBASE: u32 = 0x0500;

/// D names of the built-in variables, by id.
const BUILTIN_NAMES: &[(u32, &str)] = &[
    (DIF_VAR_ARGS, "args"),
    (DIF_VAR_REGS, "regs"),
    (DIF_VAR_UREGS, "uregs"),
    (DIF_VAR_CURTHREAD, "curthread"),
    (DIF_VAR_TIMESTAMP, "timestamp"),
    (DIF_VAR_VTIMESTAMP, "vtimestamp"),
    (DIF_VAR_IPL, "ipl"),
    (DIF_VAR_EPID, "epid"),
    (DIF_VAR_ID, "id"),
    (DIF_VAR_ARG0, "arg0"),
    (DIF_VAR_ARG0 + 1, "arg1"),
    (DIF_VAR_ARG0 + 2, "arg2"),
    (DIF_VAR_ARG0 + 3, "arg3"),
    (DIF_VAR_ARG0 + 4, "arg4"),
    (DIF_VAR_ARG0 + 5, "arg5"),
    (DIF_VAR_ARG0 + 6, "arg6"),
    (DIF_VAR_ARG0 + 7, "arg7"),
    (DIF_VAR_ARG0 + 8, "arg8"),
    (DIF_VAR_ARG9, "arg9"),
    (DIF_VAR_STACKDEPTH, "stackdepth"),
    (DIF_VAR_CALLER, "caller"),
    (DIF_VAR_PROBEPROV, "probeprov"),
    (DIF_VAR_PROBEMOD, "probemod"),
    (DIF_VAR_PROBEFUNC, "probefunc"),
    (DIF_VAR_PROBENAME, "probename"),
    (DIF_VAR_PID, "pid"),
    (DIF_VAR_TID, "tid"),
    (DIF_VAR_EXECNAME, "execname"),
    (DIF_VAR_ZONENAME, "zonename"),
    (DIF_VAR_WALLTIMESTAMP, "walltimestamp"),
    (DIF_VAR_USTACKDEPTH, "ustackdepth"),
    (DIF_VAR_UCALLER, "ucaller"),
    (DIF_VAR_PPID, "ppid"),
    (DIF_VAR_UID, "uid"),
    (DIF_VAR_GID, "gid"),
    (DIF_VAR_ERRNO, "errno"),
    (DIF_VAR_EXECARGS, "execargs"),
    (DIF_VAR_CPU, "cpu"),
    (DIF_VAR_CHIP, "chip"),
    (DIF_VAR_LGRP, "lgrp"),
];

/// The D name of a built-in variable id.
pub fn builtin_name(id: u32) -> Option<&'static str> {
    BUILTIN_NAMES.iter().find(|b| b.0 == id).map(|b| b.1)
}

/// The id of a built-in variable by D name.
pub fn builtin_id(name: &str) -> Option<u32> {
    BUILTIN_NAMES.iter().find(|b| b.1 == name).map(|b| b.0)
}
