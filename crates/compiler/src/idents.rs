//! The identifiers D predefines: built-in variables (spec ch.9) with their types and DIF ids, and the
//! subroutines (spec ch.10) with their prototypes. Actions and aggregating functions are in
//! [`crate::check_action`].

use dtrace_dif::subr::Subr;
use dtrace_dif::vars::*;

/// `cpu` (numbered as in FreeBSD/OpenDTrace, type `int`).
pub use dtrace_dif::vars::DIF_VAR_CPU;

/// A built-in variable.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinVar {
    pub name: &'static str,
    pub id: u32,
    /// Type name (element type for arrays).
    pub ty: &'static str,
    /// Indexed with `[]` (`args`, `regs`, `uregs`).
    pub array: bool,
}

const fn bv(name: &'static str, id: u32, ty: &'static str) -> BuiltinVar {
    BuiltinVar {
        name,
        id,
        ty,
        array: false,
    }
}

/// Every built-in variable.
pub const BUILTIN_VARS: &[BuiltinVar] = &[
    BuiltinVar {
        name: "args",
        id: DIF_VAR_ARGS,
        ty: "int64_t",
        array: true,
    },
    BuiltinVar {
        name: "regs",
        id: DIF_VAR_REGS,
        ty: "uint64_t",
        array: true,
    },
    BuiltinVar {
        name: "uregs",
        id: DIF_VAR_UREGS,
        ty: "uint64_t",
        array: true,
    },
    bv("curthread", DIF_VAR_CURTHREAD, "void *"),
    bv("timestamp", DIF_VAR_TIMESTAMP, "uint64_t"),
    bv("vtimestamp", DIF_VAR_VTIMESTAMP, "uint64_t"),
    bv("ipl", DIF_VAR_IPL, "uint_t"),
    bv("epid", DIF_VAR_EPID, "uint_t"),
    bv("id", DIF_VAR_ID, "uint_t"),
    bv("arg0", DIF_VAR_ARG0, "int64_t"),
    bv("arg1", DIF_VAR_ARG0 + 1, "int64_t"),
    bv("arg2", DIF_VAR_ARG0 + 2, "int64_t"),
    bv("arg3", DIF_VAR_ARG0 + 3, "int64_t"),
    bv("arg4", DIF_VAR_ARG0 + 4, "int64_t"),
    bv("arg5", DIF_VAR_ARG0 + 5, "int64_t"),
    bv("arg6", DIF_VAR_ARG0 + 6, "int64_t"),
    bv("arg7", DIF_VAR_ARG0 + 7, "int64_t"),
    bv("arg8", DIF_VAR_ARG0 + 8, "int64_t"),
    bv("arg9", DIF_VAR_ARG9, "int64_t"),
    bv("stackdepth", DIF_VAR_STACKDEPTH, "uint_t"),
    bv("caller", DIF_VAR_CALLER, "uintptr_t"),
    bv("probeprov", DIF_VAR_PROBEPROV, "string"),
    bv("probemod", DIF_VAR_PROBEMOD, "string"),
    bv("probefunc", DIF_VAR_PROBEFUNC, "string"),
    bv("probename", DIF_VAR_PROBENAME, "string"),
    bv("pid", DIF_VAR_PID, "pid_t"),
    bv("tid", DIF_VAR_TID, "id_t"),
    bv("execname", DIF_VAR_EXECNAME, "string"),
    bv("zonename", DIF_VAR_ZONENAME, "string"),
    bv("walltimestamp", DIF_VAR_WALLTIMESTAMP, "int64_t"),
    bv("ustackdepth", DIF_VAR_USTACKDEPTH, "uint_t"),
    bv("ucaller", DIF_VAR_UCALLER, "uint64_t"),
    bv("ppid", DIF_VAR_PPID, "pid_t"),
    bv("uid", DIF_VAR_UID, "uid_t"),
    bv("gid", DIF_VAR_GID, "gid_t"),
    bv("errno", DIF_VAR_ERRNO, "int"),
    bv("execargs", DIF_VAR_EXECARGS, "string"),
    bv("cpu", DIF_VAR_CPU, "int"),
    // The D library's cpuinfo_t (sched.d) is built from these and `cpu`.
    bv("chip", DIF_VAR_CHIP, "int"),
    bv("lgrp", DIF_VAR_LGRP, "int"),
];

/// DTrace built-in variables this implementation does not provide, with the reason, so that a
/// script using one is told so rather than that the name is unknown.
pub fn unsupported_builtin(name: &str) -> Option<&'static str> {
    Some(match name {
        // With the kernel's types the D library defines them (io.d, d_path of curthread->fs).
        "cwd" => "the current directory's path needs the kernel's types (BTF)",
        "root" => "the root directory's path needs the kernel's types (BTF)",
        _ => return None,
    })
}

/// Looks up a built-in variable.
pub fn builtin_var(name: &str) -> Option<&'static BuiltinVar> {
    BUILTIN_VARS.iter().find(|v| v.name == name)
}

/// A subroutine prototype: parameter type names, how many are required, the return type name.
#[derive(Debug, Clone, Copy)]
pub struct SubrProto {
    pub subr: Subr,
    pub ret: &'static str,
    pub params: &'static [&'static str],
    pub required: usize,
    pub destructive: bool,
}

const fn sp(subr: Subr, ret: &'static str, params: &'static [&'static str]) -> SubrProto {
    SubrProto {
        subr,
        ret,
        params,
        required: params.len(),
        destructive: false,
    }
}

const fn spo(
    subr: Subr,
    ret: &'static str,
    params: &'static [&'static str],
    required: usize,
) -> SubrProto {
    SubrProto {
        subr,
        ret,
        params,
        required,
        destructive: false,
    }
}

const fn spd(subr: Subr, ret: &'static str, params: &'static [&'static str]) -> SubrProto {
    SubrProto {
        subr,
        ret,
        params,
        required: params.len(),
        destructive: true,
    }
}

/// Every subroutine D scripts may call.
pub const SUBR_PROTOS: &[SubrProto] = &[
    sp(Subr::Rand, "int", &[]),
    // DTrace for Linux's prototypes name the kernel's lock types
    sp(Subr::MutexOwned, "int", &["struct mutex *"]),
    sp(
        Subr::MutexOwner,
        "struct task_struct *",
        &["struct mutex *"],
    ),
    sp(Subr::MutexTypeAdaptive, "int", &["struct mutex *"]),
    sp(Subr::MutexTypeSpin, "int", &["struct mutex *"]),
    sp(Subr::RwReadHeld, "int", &["rwlock_t *"]),
    sp(Subr::RwWriteHeld, "int", &["rwlock_t *"]),
    sp(Subr::RwIswriter, "int", &["rwlock_t *"]),
    sp(Subr::Copyin, "void *", &["uintptr_t", "size_t"]),
    spo(Subr::Copyinstr, "string", &["uintptr_t", "size_t"], 1),
    sp(Subr::Speculation, "int", &[]),
    sp(Subr::Progenyof, "int", &["pid_t"]),
    sp(Subr::Strlen, "size_t", &["string"]),
    spd(Subr::Copyout, "void", &["void *", "uintptr_t", "size_t"]),
    spd(Subr::Copyoutstr, "void", &["string", "uintptr_t", "size_t"]),
    sp(Subr::Alloca, "void *", &["size_t"]),
    sp(Subr::Bcopy, "void", &["void *", "void *", "size_t"]),
    sp(Subr::Copyinto, "void", &["uintptr_t", "size_t", "void *"]),
    sp(Subr::Msgdsize, "size_t", &["void *"]),
    sp(Subr::Msgsize, "size_t", &["void *"]),
    sp(Subr::Getmajor, "major_t", &["dev_t"]),
    sp(Subr::Getminor, "minor_t", &["dev_t"]),
    sp(Subr::DdiPathname, "string", &["void *", "int"]),
    sp(Subr::Strjoin, "string", &["string", "string"]),
    spo(Subr::Lltostr, "string", &["int64_t", "int"], 1),
    sp(Subr::Basename, "string", &["string"]),
    sp(Subr::Dirname, "string", &["string"]),
    sp(Subr::Cleanpath, "string", &["string"]),
    sp(Subr::Strchr, "string", &["string", "char"]),
    sp(Subr::Strrchr, "string", &["string", "char"]),
    sp(Subr::Strstr, "string", &["string", "string"]),
    // DTrace for Linux declares these with `char *` (what its prototype errors print)
    sp(Subr::Strtok, "string", &["char *", "char *"]),
    spo(Subr::Substr, "string", &["char *", "int", "int"], 2),
    spo(Subr::Index, "int", &["string", "string", "int"], 2),
    spo(Subr::Rindex, "int", &["string", "string", "int"], 2),
    sp(Subr::Htons, "uint16_t", &["uint16_t"]),
    sp(Subr::Htonl, "uint32_t", &["uint32_t"]),
    sp(Subr::Htonll, "uint64_t", &["uint64_t"]),
    sp(Subr::Ntohs, "uint16_t", &["uint16_t"]),
    sp(Subr::Ntohl, "uint32_t", &["uint32_t"]),
    sp(Subr::Ntohll, "uint64_t", &["uint64_t"]),
    sp(Subr::InetNtop, "string", &["int", "void *"]),
    sp(Subr::InetNtoa, "string", &["ipaddr_t *"]),
    // DTrace for Linux's optional second argument, an integer constant, asks for the strict form
    // of embedded IPv4 addresses
    spo(Subr::InetNtoa6, "string", &["struct in6_addr *", "int"], 1),
    sp(Subr::Toupper, "string", &["string"]),
    sp(Subr::Tolower, "string", &["string"]),
    sp(Subr::Memref, "uintptr_t *", &["uintptr_t", "size_t"]),
    sp(Subr::SxSharedHeld, "int", &["void *"]),
    sp(Subr::SxExclusiveHeld, "int", &["void *"]),
    sp(Subr::SxIsexclusive, "int", &["void *"]),
    sp(Subr::Memstr, "string", &["void *", "char", "size_t"]),
    // expanded by the D library where the kernel's types allow (check_expr::GETF_INLINE)
    sp(Subr::Getf, "struct file *", &["int"]),
    sp(Subr::Json, "string", &["string", "string"]),
    spo(Subr::Strtoll, "int64_t", &["string", "int"], 1),
    sp(Subr::Random, "uint64_t", &[]),
    sp(Subr::DPath, "string", &["struct path *"]),
    sp(Subr::LinkNtop, "string", &["int", "void *"]),
];

/// The `void *` parameters (subroutine, 0-based position) that only read bytes from the address:
/// a D string, an array of char to DTrace, passes for them as an array passes for a pointer to its
/// first element (`bcopy(probename, dst, 5)`). Destinations (`bcopy`'s second, `copyinto`'s third)
/// must be scratch memory and the lock subroutines take kernel lock structures, so a string does
/// not pass there.
pub const BYTE_SOURCES: &[(Subr, usize)] = &[
    (Subr::Bcopy, 0),
    (Subr::Copyout, 0),
    (Subr::Memstr, 0),
    (Subr::LinkNtop, 1),
];

/// Looks up a subroutine prototype by D name.
pub fn subr_proto(name: &str) -> Option<&'static SubrProto> {
    let s = Subr::from_name(name)?;
    SUBR_PROTOS.iter().find(|p| p.subr == s)
}

/// The D functions DTrace added in version 1.1: before it, a program (`#pragma D option
/// version=1.0`) may take their names for its own variables.
const FUNCTIONS_1_1: &[&str] = &[
    "freopen", "index", "rindex", "strchr", "strrchr", "strstr", "strtok", "substr",
];

/// The D language version that made `name` a D function, as (major, minor); 1.0 for the others.
pub fn function_version(name: &str) -> (u32, u32) {
    if FUNCTIONS_1_1.contains(&name) {
        (1, 1)
    } else {
        (1, 0)
    }
}

/// Parses a D language version (`1.1`, `1.6.3`, `2`) as (major, minor).
pub fn parse_version(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = match parts.next() {
        Some(m) => m.parse().ok()?,
        None => 0,
    };
    if let Some(micro) = parts.next() {
        micro.parse::<u32>().ok()?;
    }
    parts.next().is_none().then_some((major, minor))
}
