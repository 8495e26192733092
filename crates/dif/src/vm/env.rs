//! What the interpreter is handed by its caller: the probe context (built-in variables of spec ch.9,
//! speculation allocation, process ancestry, random numbers) and memory (kernel and user reads, user
//! writes). The VM itself has no OS code; the framework implements these over real Linux probe data and
//! tests implement them with fakes ([`crate::vm::fake`]).

use crate::vars;
use crate::vm::fault::FaultKind;

/// The probe firing the VM runs in: where built-in variables come from.
///
/// Variable ids are the `DIF_VAR_*` numbers of [`crate::vars`]. The interpreter asks [`int_var`] for
/// every integer built-in (including `arg0`..`arg9`, `pid`, `tid`, `timestamp`, `epid`, `id`, `errno`,
/// `curthread`, `uid`, ...) and [`str_var`] for the string ones ([`is_string_var`]: `probeprov`,
/// `probemod`, `probefunc`, `probename`, `execname`, `zonename`, `execargs`). A built-in that makes no
/// sense in this context returns a fault (DTrace uses `IllOp` for those).
///
/// [`int_var`]: ProbeContext::int_var
/// [`str_var`]: ProbeContext::str_var
pub trait ProbeContext {
    /// The value of an integer built-in scalar variable.
    fn int_var(&mut self, id: u32) -> Result<u64, FaultKind>;

    /// Appends the bytes (without NUL) of a string built-in to `out`; the VM truncates to `strsize - 1`.
    fn str_var(&mut self, id: u32, out: &mut Vec<u8>) -> Result<(), FaultKind>;

    /// Element `index` of a built-in array: `args[]` ([`vars::DIF_VAR_ARGS`]), `regs[]`, `uregs[]`.
    fn array_var(&mut self, id: u32, index: u64) -> Result<u64, FaultKind>;

    /// The key that makes thread-local variables private to the current thread (DTrace's
    /// `DTRACE_TLS_THRKEY`); usually derived from the thread id. Must not be 0 for a real thread.
    fn thread_key(&mut self) -> u64;

    /// `speculation()`: a new speculation id, or 0 when none is free.
    fn speculation(&mut self) -> u64;

    /// `progenyof(pid)`: whether the current process is `pid` or one of its descendants.
    fn progenyof(&mut self, pid: u64) -> bool;

    /// A pseudo-random 64-bit number for `rand()` and `random()`.
    fn random(&mut self) -> u64;
}

/// Whether a built-in scalar is a string (its value is a reference to a NUL-terminated string).
pub fn is_string_var(id: u32) -> bool {
    matches!(
        id,
        vars::DIF_VAR_PROBEPROV
            | vars::DIF_VAR_PROBEMOD
            | vars::DIF_VAR_PROBEFUNC
            | vars::DIF_VAR_PROBENAME
            | vars::DIF_VAR_EXECNAME
            | vars::DIF_VAR_ZONENAME
            | vars::DIF_VAR_EXECARGS
    )
}

/// Memory outside the VM: kernel and user address spaces of the traced system.
///
/// Reads fill the whole buffer or fail; a failure is the fault DTrace would raise (`BadAddr` for an
/// unmapped address, `KPriv`/`UPriv` when the caller lacks the privilege). Writes to user memory are for
/// `copyout`/`copyoutstr`; the caller decides whether destructive actions are allowed and fails with
/// `IllOp` or `UPriv` when they are not.
pub trait Memory {
    /// Reads kernel memory at `addr` into `buf`.
    fn read_kernel(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind>;

    /// Reads user memory of the current process at `addr` into `buf`.
    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind>;

    /// Writes `data` into user memory of the current process at `addr`.
    fn write_user(&mut self, addr: u64, data: &[u8]) -> Result<(), FaultKind>;

    /// The path, as Linux's `d_path()` prints it, of the `struct path` at kernel address `path`
    /// (`d_path()`, `cwd`, `root`, `fi_pathname`), without a NUL. Memory that cannot tell faults
    /// (`BadAddr`), as a `struct path` DTrace cannot read does.
    fn d_path(&mut self, path: u64) -> Result<Vec<u8>, FaultKind> {
        let _ = path;
        Err(FaultKind::BadAddr)
    }
}

/// Memory with nothing in it: every read and write faults with `BadAddr`. Useful for predicates that
/// touch no memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMemory;

impl Memory for NoMemory {
    fn read_kernel(&mut self, _addr: u64, _buf: &mut [u8]) -> Result<(), FaultKind> {
        Err(FaultKind::BadAddr)
    }
    fn read_user(&mut self, _addr: u64, _buf: &mut [u8]) -> Result<(), FaultKind> {
        Err(FaultKind::BadAddr)
    }
    fn write_user(&mut self, _addr: u64, _data: &[u8]) -> Result<(), FaultKind> {
        Err(FaultKind::BadAddr)
    }
}
