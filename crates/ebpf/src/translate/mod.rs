//! The translator from verified DIF to eBPF, with DTrace's semantics rather than eBPF's: integer
//! division and remainder by zero fault instead of giving 0, signed division and remainder wrap as the
//! interpreter's do, kernel loads go through `bpf_probe_read_kernel` and user loads through
//! `bpf_probe_read_user` with a failed read a fault, compares and branches keep DIF's condition
//! codes (the signed branches test the sign of the difference, as the interpreter does), strings
//! compare bytewise up to `strsize`. As the interpreter's (`VmOptions::strsize`), the `strsize` a
//! translation is given is a string's storage, its NUL included: one more than D's `strsize`
//! option; built-in strings (`execname`, `probefunc`...) keep `strsize - 1` characters.
//!
//! A translated object is a self-contained fragment of instructions ([`Fragment`]): it starts with the
//! probe's context in r6, leaves its result in r0 and falls off its end (every jump inside it is
//! relative, so the fragment is spliced into a larger program as it is). A fault does not end the
//! fragment silently: it leaves [`FAULTED`] in r0, and what the interpreter's fault would carry in
//! the frame ([`Frame::fault_at`]: the kind and the DIF instruction, [`Frame::fault_addr_at`]: the
//! address), so the caller either hands the firing to the interpreter, which reports the fault
//! exactly as it always has, or reports that fault itself (a clause run whole in the kernel).
//!
//! What the fragment reads of the probe (its arguments, `pid`, `execname`...) and the D variables
//! it loads and stores (an associative array's key is the DIF tuple stack, which the translator
//! follows: the registers pushed since `flushts`) it asks of a [`ProbeContext`], which each
//! attachment implements; what the translator cannot (yet) express comes
//! back as an [`Untranslatable`] reason, and the clause stays on the interpreter's path.
//!
//! DIF registers live in stack slots below [`Frame::base`]: eBPF helper calls clobber r1-r5 and the
//! context's emitters may use r8, so nothing is kept in registers between two DIF instructions.
//!
//! `copyinstr()` builds its string in a per-CPU scratch the context provides
//! ([`ProbeContext::emit_string_scratch`], one [`string_scratch_width`] slot per call site of the
//! object); the DIF register holds the string's address there, which only string uses (compares,
//! a returned value) read (see `copyin`).
//!
//! String-valued D variables (`self->s`, `s`, `a[k]` of strings) are asked of the context too
//! ([`ProbeContext::emit_string_load`], [`ProbeContext::emit_string_store`], see `strvars`): a
//! load copies the variable's string into a scratch slot and the register holds its address, or
//! 0 (NULL) when the variable holds none, as the interpreter's loads give; compares take NULL as
//! the empty string, a record or key of NULL faults, a store of NULL frees the variable.
//!
//! Struct, union and array variables (stored by reference) are asked of the context as the
//! address of their storage ([`ProbeContext::emit_ref_var`], see `structvars`): a pointer into
//! a map value that members are loaded, stored and copied through, at offsets known at
//! translation.
//!
//! Where paths holding different strings meet (`x ? "big" : "small"`, a string and NULL), the
//! edges into the join make them one string in the scratch, read as a string variable's copy
//! is (see `cond`).
//!
//! A string indexed as characters (`s[i]`: an `add` of the string and an integer, then a
//! one-byte load) reads the string's byte where it is at the probe, when the index lies within
//! the bytes the interpreter's storage of the string holds as the kernel's does (see
//! `strindex`).

mod alloca;
mod bcopystr;
mod byteorder;
mod cleanpath;
mod cond;
mod copyin;
mod copyout;
mod d_path;
mod devnum;
mod inet;
mod link_ntop;
mod lltostr;
mod locks;
mod memstr;
mod paths;
mod progeny;
mod rand;
mod random;
mod strarg;
mod strcase;
mod strindex;
mod stringof;
mod strings;
mod strjoin;
mod strlen;
mod strsearch;
mod strtok;
mod strtoll;
mod structvars;
mod strvars;
mod substr;
#[cfg(test)]
mod tests;

pub use alloca::{
    alloca_locals, alloca_locals_in, alloca_locals_with, alloca_vars,
    foreign_local_in_allocating_clause, foreign_local_with, AllocaArea,
};
pub use progeny::TaskLinks;

use crate::insn::{helper, op, Asm, Insn, Label, Size, R0, R1, R10, R2, R3};
use dtrace_dif::instr::Instr;
use dtrace_dif::object::DifObject;
use dtrace_dif::opcode::Opcode;
use dtrace_dif::subr::Subr;
use dtrace_dif::vars;
use dtrace_dif::vm::FaultKind;

/// Bytes of string scratch a `copyinstr()` call site takes: a string's storage (`strsize`, its
/// NUL included), rounded up to 8. The string is NUL-terminated and zero-padded there, so it can
/// be copied word by word (an aggregation key compares every byte).
pub fn string_scratch_width(strsize: usize) -> usize {
    strsize.max(1).next_multiple_of(8)
}

/// The value a fragment leaves in r0 when it faulted (the fault itself is in the frame,
/// [`Frame::fault_at`]): the interpreter then runs the clause and reports the fault, or the
/// caller reports it. Any other non-zero value is a true predicate.
pub const FAULTED: i32 = 2;

/// Number of DIF registers.
const NREGS: usize = 8;
/// Bytes of `execname` (the kernel's `comm`, NUL-terminated).
pub const COMM_LEN: usize = 16;
/// Probe arguments a record carries; `args[8]` and `args[9]` read 0 as in the interpreter's context,
/// a higher index faults.
pub const CONTEXT_ARGS: u64 = 10;

/// A value a probe provides, which the translator asks the [`ProbeContext`] to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `argN` / `args[N]`.
    Arg(u8),
    /// `pid`.
    Pid,
    /// `tid`.
    Tid,
    /// `uid`.
    Uid,
    /// `gid`.
    Gid,
    /// `cpu`.
    Cpu,
    /// `ppid`.
    Ppid,
    /// `curthread` (the running thread's `struct task_struct *`).
    Curthread,
    /// `timestamp` (the firing's time on the framework's clock, the same for every clause of
    /// the firing).
    Timestamp,
    /// `walltimestamp` (nanoseconds since the epoch when the probe fired: the firing's time on
    /// the kernel's clock plus the offset dtrace measured between that clock and the wall clock).
    Walltimestamp,
    /// `vtimestamp` (the current thread's on-CPU nanoseconds when the probe fired).
    Vtimestamp,
    /// `epid`: the enabled probe's id of the clause being translated at this probe. The
    /// context leaves 0 when it does not know it at this firing (the framework assigns EPIDs
    /// after the probe's program is built, see the attachment); the fragment then faults as
    /// the interpreter faults on a built-in it has no value for (`DTRACEFLT_ILLOP`), which
    /// hands a predicate's firing to the interpreter.
    Epid,
    /// `caller`: the function that called the probe site, from the kernel stack as dtrace's
    /// capture cuts it.
    Caller,
    /// `stackdepth`: the kernel stack's frames, as dtrace's capture cuts it.
    Stackdepth,
    /// `ucaller`: the user stack's second frame, as dtrace walks the stack.
    Ucaller,
    /// `ustackdepth`: the user stack's frames, as dtrace walks the stack.
    Ustackdepth,
}

impl Builtin {
    /// The D name of the value.
    pub fn name(self) -> String {
        match self {
            Builtin::Arg(n) => format!("arg{n}"),
            Builtin::Pid => "pid".into(),
            Builtin::Tid => "tid".into(),
            Builtin::Uid => "uid".into(),
            Builtin::Gid => "gid".into(),
            Builtin::Cpu => "cpu".into(),
            Builtin::Ppid => "ppid".into(),
            Builtin::Curthread => "curthread".into(),
            Builtin::Timestamp => "timestamp".into(),
            Builtin::Walltimestamp => "walltimestamp".into(),
            Builtin::Vtimestamp => "vtimestamp".into(),
            Builtin::Epid => "epid".into(),
            Builtin::Caller => "caller".into(),
            Builtin::Stackdepth => "stackdepth".into(),
            Builtin::Ucaller => "ucaller".into(),
            Builtin::Ustackdepth => "ustackdepth".into(),
        }
    }
}

/// The probe's id (`id`) as the code of a probe knows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProbeId {
    /// Not assigned yet: a translation made while planning, which only checks that a clause
    /// translates (the probe's program, built when it is enabled, has its id).
    #[default]
    Planned,
    /// The probe's id, a constant of its program.
    Is(u32),
    /// One program serves several probes (a probe placed for every process, each process's
    /// probe with its own id): `id` is not a constant of it.
    Shared,
}

/// The names of the probe a fragment is generated for (`probeprov`... are constants there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeNames {
    /// `probeprov`.
    pub provider: String,
    /// `probemod`.
    pub module: String,
    /// `probefunc`.
    pub function: String,
    /// `probename`.
    pub name: String,
    /// The probe is a system call's return, whose `errno` comes from its `arg0` (the call's
    /// result: its negation when it is from -4095 to -1, else 0); elsewhere `errno` is 0.
    pub syscall_return: bool,
    /// `id`.
    pub id: ProbeId,
}

/// What a probe's attachment knows how to read at the probe.
pub trait ProbeContext {
    /// Emits code that leaves `b`'s value in r0, with the context in r6 (which it keeps). It may use
    /// r0-r5, r8, r9 and the stack slots the caller reserved for it above [`Frame::base`]. `Err` says
    /// why the value cannot be read at this probe.
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String>;
    /// Emits code that writes the current thread's `execname` ([`COMM_LEN`] bytes, NUL-terminated)
    /// at `fp + at`. `Err` says why it cannot (a record that speaks for another thread).
    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String>;
    /// The probe's names.
    fn names(&self) -> &ProbeNames;
    /// Whether the probe's arguments are kernel values (`fbt`'s: the traced function's own), so a
    /// string at an argument's value (`stringof(arg0)`) is kernel memory, which the interpreter
    /// reads from the probe's copy (see `stringof`).
    fn args_are_kernel(&self) -> bool {
        self.names().provider == "fbt"
    }
    /// Emits code that leaves in r0 the address of `len` bytes at offset `offset` of a per-CPU
    /// string scratch (0 when the scratch could not be had), for a string a fragment builds
    /// (`copyinstr()`). Uses r0-r5. `Err` says why strings cannot be built at this probe (by
    /// default: strings are built in dtrace).
    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        let _ = (a, offset, len);
        Err("strings are built in dtrace".into())
    }
    /// `Ok` when the code may loop with `bpf_loop` (helper `insn::helper::LOOP`) calling back a
    /// subprogram of the program's own (`Asm::ld_callback`), whose frame holds nothing: the
    /// verifier then walks the callback once however many times it runs (see `strsearch`).
    /// `Err` says why not (by default: no loop is run at this probe).
    fn loops(&self) -> Result<(), String> {
        Err("bpf_loop is not used at this probe".into())
    }
    /// Whether the probe's program reads the user string at probe argument `n` at each firing
    /// before the clauses run, as `copyinstr(argN)` reads it (by default it does not): a
    /// `copyinstr(argN)` then takes that copy ([`ProbeContext::emit_pre_read_string`]).
    fn pre_reads_string(&self, n: u8) -> bool {
        let _ = n;
        false
    }
    /// Emits code that leaves in r0 the address of the copy [`ProbeContext::pre_reads_string`]
    /// speaks of (`strsize` bytes at most, the NUL among them, zero-padded, in the string
    /// scratch), or 0 when the scratch could not be had. Uses r0-r5.
    fn emit_pre_read_string(&self, a: &mut Asm, n: u8) -> Result<(), String> {
        let _ = (a, n);
        Err("no string is read before the clauses run".into())
    }
    /// The most bytes (its NUL included) of the string the probe copies from kernel memory for
    /// probe argument `n`, where the interpreter's `argN` is the address of that copy (a
    /// tracepoint's `__data_loc` or `char[]` field): the code reads the string itself, from
    /// where the probe copies it ([`ProbeContext::emit_copied_string_address`]), and `argN` is
    /// then a string only. `None` (the default): no such argument.
    fn copied_string_arg(&self, n: u8) -> Option<u32> {
        let _ = n;
        None
    }
    /// The most bytes (its NUL included) of the user string the probe copies for probe argument
    /// `n`, where the interpreter reads `argN` used as a string from that copy (`proc:::exec`'s
    /// path, a USDT argument of D type `string`): `argN` is the string's user address, and the
    /// code reads the string there, as `copyinstr(argN)` does (taking the copy
    /// [`ProbeContext::pre_reads_string`] speaks of where there is one). `None` (the default):
    /// no such argument.
    fn user_string_arg(&self, n: u8) -> Option<u32> {
        let _ = n;
        None
    }
    /// Emits code that leaves in r0 the kernel address the probe copies the string of argument
    /// `n` from ([`ProbeContext::copied_string_arg`]). Uses r0-r5.
    fn emit_copied_string_address(&self, a: &mut Asm, n: u8) -> Result<(), String> {
        let _ = (a, n);
        Err("no string is copied for this argument".into())
    }
    /// Whether the user memory of the thread that fired the probe can be read here (`copyinstr()`
    /// at a probe whose record speaks for another thread cannot). `Err` says why not.
    fn reads_user_memory(&self) -> Result<(), String> {
        Ok(())
    }
    /// The most bytes a `copyin()` whose size is known only at the probe may take: the
    /// interpreter's alloca area (`scratchsize`), of which such a copy is the clause's only
    /// allocation; a larger size faults `DTRACEFLT_NOSCRATCH` (see `copyin`). `Err` says why
    /// such a copy is made in dtrace (by default it is).
    fn copy_scratch(&self) -> Result<u64, String> {
        Err("copies sized at run time are made in dtrace".into())
    }
    /// Whether the user memory of the thread that fired the probe can be written here
    /// (`copyout()`: the kernel's `bpf_probe_write_user`, which a locked-down kernel refuses).
    /// `Err` says why not (by default: nothing is written at the probe).
    fn writes_user_memory(&self) -> Result<(), String> {
        Err("user memory is not written at this probe".into())
    }
    /// Emits code that leaves the value of thread-local `self->` variable `var` (an integer) for
    /// the current thread in r0: 0 when it holds none. Same registers and stack as
    /// [`ProbeContext::emit_builtin`]. `Err` says why the variable cannot be read here (by
    /// default: D variables live in dtrace).
    fn emit_thread_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        let _ = (a, var);
        Err("thread-locals live in dtrace".into())
    }
    /// Emits code that stores the integer at `fp + value_at` in thread-local `var` for the current
    /// thread, a zero freeing the variable (DTrace's rule). As [`ProbeContext::emit_thread_load`].
    fn emit_thread_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        let _ = (a, var, value_at);
        Err("thread-locals live in dtrace".into())
    }
    /// Emits code that leaves the value of clause-local `this->` variable `var` (an integer) in
    /// r0: 0 when not stored during this firing. As [`ProbeContext::emit_thread_load`].
    fn emit_local_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        let _ = (a, var);
        Err("clause-locals live in dtrace".into())
    }
    /// Emits code that stores the integer at `fp + value_at` in clause-local `var`. As
    /// [`ProbeContext::emit_thread_load`].
    fn emit_local_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        let _ = (a, var, value_at);
        Err("clause-locals live in dtrace".into())
    }
    /// Emits code that leaves the value of global scalar `var` (an integer) in r0: 0 when never
    /// stored. As [`ProbeContext::emit_thread_load`].
    fn emit_global_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        let _ = (a, var);
        Err("global variables live in dtrace".into())
    }
    /// Emits code that stores the integer at `fp + value_at` in global scalar `var`. As
    /// [`ProbeContext::emit_thread_load`].
    fn emit_global_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        let _ = (a, var, value_at);
        Err("global variables live in dtrace".into())
    }
    /// Emits code that leaves element `key` of associative array `array` (an integer) in r0: 0
    /// when the element does not exist. As [`ProbeContext::emit_thread_load`].
    fn emit_array_load(&self, a: &mut Asm, array: Array, key: &[KeyPart]) -> Result<(), String> {
        let _ = (a, array, key);
        Err("associative arrays live in dtrace".into())
    }
    /// Emits code that stores the integer at `fp + value_at` in element `key` of `array`, a zero
    /// deleting the element (DTrace's rule). As [`ProbeContext::emit_thread_load`].
    fn emit_array_store(
        &self,
        a: &mut Asm,
        array: Array,
        key: &[KeyPart],
        value_at: i16,
    ) -> Result<(), String> {
        let _ = (a, array, key, value_at);
        Err("associative arrays live in dtrace".into())
    }
    /// Emits code that copies string variable `var` (its whole [`string_scratch_width`] bytes,
    /// NUL-terminated within `strsize` and zero-padded) to the scratch slot whose address is at
    /// `fp + dst_at`, and leaves 1 in r0; or leaves 0 in r0 when the variable holds no string
    /// (a dynamic variable never stored or freed, a global set to NULL: the interpreter's NULL),
    /// the slot untouched. A global never stored holds the empty string. Same registers and
    /// stack as [`ProbeContext::emit_builtin`]. `Err` says why the variable cannot be read here
    /// (by default: string variables live in dtrace).
    fn emit_string_load(&self, a: &mut Asm, var: StringVar<'_>, dst_at: i16) -> Result<(), String> {
        let _ = (a, var, dst_at);
        Err("string variables live in dtrace".into())
    }
    /// Emits code that stores in string variable `var` the string whose scratch slot's address
    /// is at `fp + src_at` ([`string_scratch_width`] bytes, NUL-terminated within `strsize`,
    /// zero-padded), or NULL when that address is 0: a dynamic variable is then freed (DTrace's
    /// rule), a global reads NULL. A dynamic variable's store may be dropped (see
    /// [`ProbeContext::emit_dropped`]). As [`ProbeContext::emit_string_load`].
    fn emit_string_store(
        &self,
        a: &mut Asm,
        var: StringVar<'_>,
        src_at: i16,
    ) -> Result<(), String> {
        let _ = (a, var, src_at);
        Err("string variables live in dtrace".into())
    }
    /// Emits code that leaves in r0 the address of the `size` bytes of storage of by-reference
    /// variable `var` (a struct, a union or an array: not a string), a pointer into a map value
    /// the verifier bounds, the same storage at every probe and clause that uses the variable
    /// (see `structvars`). A dynamic variable (a thread-local, an array element) that does not
    /// exist is created zero-filled, as the interpreter's loads create it; when the space is
    /// full the creation is dropped as a store is ([`ProbeContext::emit_dropped`] then says so)
    /// and r0 is 0. A global or a clause-local is zero until stored (a clause-local for each
    /// firing). Same registers and stack as [`ProbeContext::emit_builtin`]. `Err` says why the
    /// variable cannot be had here (by default: struct variables live in dtrace).
    fn emit_ref_var(&self, a: &mut Asm, var: StringVar<'_>, size: u32) -> Result<(), String> {
        let _ = (a, var, size);
        Err("struct variables live in dtrace".into())
    }
    /// Emits, after a store to a dynamic variable (a thread-local or an array element), code that
    /// jumps to `abandon` when the store was dropped (the space was full): as in the
    /// interpreter, a dropped store ends the clause. Returns whether it emitted anything (by
    /// default no store can be dropped).
    fn emit_dropped(&self, a: &mut Asm, abandon: Label) -> bool {
        let _ = (a, abandon);
        false
    }
    /// Emits code that leaves in r0 a new speculation's id (`speculation()`), or 0 when none is
    /// free (counted as DTrace counts failed speculations). Uses r0-r5. `Err` says why not here
    /// (by default: speculations live in dtrace).
    fn emit_speculation(&self, a: &mut Asm) -> Result<(), String> {
        let _ = a;
        Err("speculations live in dtrace".into())
    }
    /// Emits code that leaves in r0 the address of the firing's `strtok()` copy (one
    /// [`string_scratch_width`] slot, per CPU; 0 when it could not be had), and returns the frame
    /// offset of the firing's `strtok()` position word (8 bytes, zero when the firing starts), as
    /// `strtok` keeps them. Uses r0-r5. `Err` says why not here (by default: `strtok()`'s state
    /// lives in dtrace).
    fn emit_strtok_state(&self, a: &mut Asm) -> Result<i16, String> {
        let _ = a;
        Err("strtok()'s state lives in dtrace".into())
    }
    /// Where `progenyof()` finds the current task's ancestors (see `progeny`). `Err` says why
    /// not here (by default: `progenyof()` runs in dtrace).
    fn task_links(&self) -> Result<TaskLinks, String> {
        Err("progenyof() runs in dtrace".into())
    }
    /// The kernel offsets `d_path()`'s walk reads (see `d_path`). `Err` says why not here (by
    /// default: `d_path()` runs in dtrace).
    fn path_offsets(&self) -> Result<crate::dpath::PathOffsets, String> {
        Err("d_path() runs in dtrace".into())
    }
    /// Where a clause's `alloca()` memory lives at this probe (see `alloca`). `Err` says why
    /// not here (by default: `alloca()` runs in dtrace).
    fn alloca_area(&self) -> Result<AllocaArea, String> {
        Err("alloca() runs in dtrace".into())
    }
    /// Emits code that leaves in r0 the current thread's saved user register `i` (`uregs[i]`,
    /// as the session records the registers for the interpreter), with the context in r6 (which
    /// it keeps); jumps to `none` where the interpreter faults: an `i` past the registers, a
    /// thread without user registers (a kernel thread), registers that cannot be read (so it
    /// always emits a jump there: the verifier refuses dead code). May use r0-r5, r8, r9. `Err`
    /// says why they are not read at this probe.
    fn emit_ureg(&self, a: &mut Asm, i: u64, none: Label) -> Result<(), String> {
        let _ = (a, i, none);
        Err("uregs[] is read in dtrace at this probe".into())
    }
    /// Emits code that leaves in r0 the address of the [`AllocaArea::size`] bytes of the
    /// per-CPU alloca region (0 when it could not be had). Uses r0-r5.
    fn emit_alloca_base(&self, a: &mut Asm) -> Result<(), String> {
        let _ = a;
        Err("alloca() runs in dtrace".into())
    }
    /// Whether clause-local `var` holds alloca pointers (see [`alloca_locals`]).
    fn local_holds_alloca(&self, var: u32) -> bool {
        let _ = var;
        false
    }
    /// Whether thread-local (`thread`) or global scalar `var` holds alloca pointers (see
    /// [`alloca_vars`]): it then holds nothing else but 0 in the program's clauses, keeps each
    /// as the interpreter's own address, and is read back as one (see `alloca`).
    fn var_holds_alloca(&self, thread: bool, var: u32) -> bool {
        let _ = (thread, var);
        false
    }
    /// Whether `copyin()` takes its copy from the clause's alloca area, as the interpreter's
    /// does, because the clause also calls `alloca()` (see `alloca`): its result is then an
    /// alloca pointer. By default it is not (a clause that only copies in keeps its copy in the
    /// string scratch, see `copyin`).
    fn copyin_allocates(&self) -> bool {
        false
    }
}

/// An associative array: `self->name[...]` (`thread`) or `name[...]`, and its variable id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Array {
    /// A thread-local array (one per thread).
    pub thread: bool,
    /// The variable's id in its scope.
    pub var: u32,
}

/// A string-valued D variable, as the translator hands it to the [`ProbeContext`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringVar<'k> {
    /// Thread-local `self->name`, by its id.
    Thread(u32),
    /// Global scalar `name`, by its id.
    Global(u32),
    /// Clause-local `this->name`, by its id: it lives for one firing, shared by the probe's
    /// clauses, and reads as the empty string until stored in that firing, as in the interpreter.
    Local(u32),
    /// An element of an associative array of strings, and its key.
    Array(Array, &'k [KeyPart]),
}

/// One element of the key of an associative array (the DIF tuple), as the translator hands it
/// to the [`ProbeContext`]. A string element is compared by its bytes up to the NUL, as DTrace
/// compares it: a key gives it [`string_key_width`] bytes, zero-padded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPart {
    /// An integer: 8 bytes at this frame offset.
    Int(i16),
    /// A string constant, its bytes before the NUL.
    Str(Vec<u8>),
    /// The current thread's `execname`, [`COMM_LEN`] NUL-terminated bytes at this frame offset
    /// (a key keeps its first `strsize`, as the interpreter's).
    Execname(i16),
    /// A string in the context's string scratch (`copyinstr()`, a string variable's copy), its
    /// address at this frame offset: [`string_scratch_width`] bytes, NUL-terminated within
    /// `strsize` and zero-padded. Never NULL (the translator faults on NULL first).
    Scratch(i16),
}

/// Bytes a key gives a string element: `strsize`, rounded up to 8.
pub fn string_key_width(strsize: usize) -> usize {
    strsize.max(1).next_multiple_of(8)
}

/// Most elements in a DIF tuple (the interpreter's tuple registers).
pub const MAX_TUPLE: usize = 8;

/// The most bytes of the tuple that keys associative array `id` of scope `thread` in `obj`: the
/// pushes since the last `flushts` at each `ldgaa`/`stgaa` (`ldtaa`/`sttaa`) naming it, 8 bytes
/// for a value, [`string_key_width`] for a reference. Sizes the kernel's keys (the translator
/// refuses what it cannot follow).
pub fn array_key_bytes(obj: &DifObject, thread: bool, id: u32, strsize: usize) -> usize {
    let (load, store) = if thread {
        (Opcode::Ldtaa, Opcode::Sttaa)
    } else {
        (Opcode::Ldgaa, Opcode::Stgaa)
    };
    let mut widths: Vec<usize> = Vec::new();
    let mut most = 0;
    for w in &obj.text {
        match Instr::decode(*w) {
            Ok(Instr::Flushts) => widths.clear(),
            Ok(Instr::Pushtv { .. }) => widths.push(8),
            Ok(Instr::Pushtr { .. }) => widths.push(string_key_width(strsize)),
            Ok(Instr::Popts) => {
                widths.pop();
            }
            Ok(Instr::LoadVar { op, var, .. } | Instr::StoreVar { op, var, .. })
                if (op == load || op == store) && u32::from(var) == id =>
            {
                most = most.max(widths.iter().take(MAX_TUPLE).sum());
            }
            _ => {}
        }
    }
    most
}

/// The shape of the tuple that keys associative array `id` of scope `thread` in `obj`: per
/// element, whether it is a string (a reference, `pushtr`) rather than an integer, as the
/// pushes since the last `flushts` give it at the first `ldgaa`/`stgaa` (`ldtaa`/`sttaa`)
/// naming it (D gives every use of an array the same key types); `None` when `obj` does not
/// use it. Decodes the kernel's keys ([`array_key_bytes`] sizes them).
pub fn array_key_strings(obj: &DifObject, thread: bool, id: u32) -> Option<Vec<bool>> {
    let (load, store) = if thread {
        (Opcode::Ldtaa, Opcode::Sttaa)
    } else {
        (Opcode::Ldgaa, Opcode::Stgaa)
    };
    let mut shape: Vec<bool> = Vec::new();
    for w in &obj.text {
        match Instr::decode(*w) {
            Ok(Instr::Flushts) => shape.clear(),
            Ok(Instr::Pushtv { .. }) => shape.push(false),
            Ok(Instr::Pushtr { .. }) => shape.push(true),
            Ok(Instr::Popts) => {
                shape.pop();
            }
            Ok(Instr::LoadVar { op, var, .. } | Instr::StoreVar { op, var, .. })
                if (op == load || op == store) && u32::from(var) == id =>
            {
                shape.truncate(MAX_TUPLE);
                return Some(shape);
            }
            _ => {}
        }
    }
    None
}

/// Where a fragment keeps its state on the eBPF stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The fragment uses the [`Frame::SIZE`] bytes below this (negative, 8-aligned) frame offset.
    pub base: i16,
}

impl Frame {
    /// Bytes of stack a fragment uses: the DIF registers, a load buffer, `execname`, the fault,
    /// the tuple slots.
    pub const SIZE: i16 = 8 * NREGS as i16 + 8 + COMM_LEN as i16 + 16 + 8 * MAX_TUPLE as i16;

    fn reg(self, r: u8) -> i16 {
        self.base - 8 * (i16::from(r) + 1)
    }

    fn load_buf(self) -> i16 {
        self.base - 8 * NREGS as i16 - 8
    }

    fn comm(self) -> i16 {
        self.load_buf() - COMM_LEN as i16
    }

    /// The slot keeping the integer pushed at position `i` of the tuple stack once its register
    /// is written (see [`Pushed::Saved`]).
    fn tuple(self, i: usize) -> i16 {
        self.fault_addr_at() - 8 * (i.min(MAX_TUPLE - 1) as i16 + 1)
    }

    /// Where a fragment of this frame keeps `execname` (the frame offset of its
    /// [`COMM_LEN`] bytes), e.g. to copy a [`ValueKind::Execname`] result from.
    pub fn execname_at(self) -> i16 {
        self.comm()
    }

    /// The frame offset of the 8-byte word that says whether and where the fragment faulted:
    /// zero when it did not, else the fault's `DTRACEFLT_*` kind in the low 32 bits and the
    /// index of the faulting DIF instruction in the object in the high 32 ([`FaultWord`]).
    pub fn fault_at(self) -> i16 {
        self.comm() - 8
    }

    /// The frame offset of the faulting address (the interpreter's `illval`; 0 when the kind
    /// has none), valid when [`Frame::fault_at`] is not zero.
    pub fn fault_addr_at(self) -> i16 {
        self.comm() - 16
    }
}

/// The fault word a fragment leaves at [`Frame::fault_at`], decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultWord {
    /// The `DTRACEFLT_*` kind (`dtrace_dif::vm::FaultKind::code`).
    pub kind: u32,
    /// The index of the faulting instruction in its DIF object.
    pub pc: u32,
}

impl FaultWord {
    /// The word's value.
    pub fn encode(self) -> u64 {
        u64::from(self.kind) | u64::from(self.pc) << 32
    }

    /// The word `w`, `None` when zero (no fault).
    pub fn decode(w: u64) -> Option<FaultWord> {
        (w != 0).then_some(FaultWord {
            kind: w as u32,
            pc: (w >> 32) as u32,
        })
    }
}

/// A place the translated code can fault, as [`Fragment::fault_sites`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultSite {
    /// The index of the DIF instruction in its object.
    pub pc: u32,
    /// The fault's `DTRACEFLT_*` kind.
    pub kind: FaultKind,
    /// Where the faulting address comes from.
    pub addr: FaultAddr,
}

/// Where a fault's address (the interpreter's `illval`) comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAddr {
    /// None: 0.
    Zero,
    /// The value of this DIF register (the address loaded from).
    Reg(u8),
    /// Computed by the faulting code, which stores it at [`Frame::fault_addr_at`] before it
    /// jumps to the site (the first unreadable byte of a string).
    Stored,
    /// The 8 bytes at this frame offset (a subroutine's argument kept in a tuple slot or a
    /// register's slot: `copyout()`'s destination).
    Frame(i16),
}

/// A refusal at DIF instruction `pc` whose text is `"{what}: {why}"` (`what` names the
/// subroutine or value refused, as `"strtok()"`), for `map_err` at each reason the caller finds.
fn refusal(pc: usize, what: &str) -> impl Fn(String) -> Untranslatable + Copy + '_ {
    move |why| Untranslatable::Value {
        pc,
        what: format!("{what}: {why}"),
    }
}

/// Why a DIF object cannot run in the kernel (yet): the clause keeps running in the interpreter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Untranslatable {
    /// The object is not valid DIF (the verifier should have refused it).
    #[error("instruction {pc}: {what}")]
    Invalid {
        /// Instruction index.
        pc: usize,
        /// What is wrong.
        what: String,
    },
    /// An instruction the translator does not handle yet.
    #[error("instruction {pc}: {what} not yet translated to eBPF")]
    Instruction {
        /// Instruction index.
        pc: usize,
        /// The instruction's kind.
        what: String,
    },
    /// A variable kept by the consumer (globals, thread-locals, clause-locals, associative arrays)
    /// or a built-in the kernel does not know at this probe.
    #[error("instruction {pc}: variable {name} is not available in the kernel: {why}")]
    Variable {
        /// Instruction index.
        pc: usize,
        /// The variable's D name.
        name: String,
        /// Why.
        why: String,
    },
    /// A subroutine call.
    #[error("instruction {pc}: subroutine {name}() not yet translated to eBPF")]
    Subroutine {
        /// Instruction index.
        pc: usize,
        /// The subroutine's name.
        name: String,
    },
    /// A use of `copyin()`'s copy that its copy in the string scratch cannot serve (used as an
    /// integer: read through, kept as a pointer; an object recorded past its end): a context may
    /// translate the clause again with its copies in its alloca area
    /// ([`ProbeContext::copyin_allocates`]), where the interpreter makes them.
    #[error("instruction {pc}: {what}")]
    CopyUse {
        /// Instruction index.
        pc: usize,
        /// What is wrong.
        what: String,
    },
    /// A value of a kind the translator does not follow here (a string where an integer is
    /// used, an argument index computed at run time, a string whose origin differs by path).
    #[error("instruction {pc}: {what}")]
    Value {
        /// Instruction index.
        pc: usize,
        /// What.
        what: String,
    },
    /// The generated code could not be assembled.
    #[error("eBPF assembly: {0}")]
    Asm(String),
    /// The clause translates, but where it runs is decided by the other clauses of the probe
    /// (a clause that builds records at the probe does so only when every clause there runs
    /// there, so the records keep the clauses' order).
    #[error("{0}")]
    Placement(String),
    /// The kernel refused the program the translated code is part of (a verifier limit); the
    /// probe records every firing instead.
    #[error("the kernel refused the translated code ({0})")]
    Refused(String),
}

impl From<crate::insn::AsmError> for Untranslatable {
    fn from(e: crate::insn::AsmError) -> Self {
        Untranslatable::Asm(e.0)
    }
}

/// Translated code: a sequence that starts with the probe context in r6, ends with the object's
/// value in r0 (or [`FAULTED`]) and falls off its end. Jumps stay inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// The instructions.
    pub insns: Vec<Insn>,
    /// Some path of the code faults (leaves [`FAULTED`] in r0): a division, a load, an index
    /// past the context's arguments, or running off the end.
    pub can_fault: bool,
    /// A store to a dynamic variable may be dropped, which ends the fragment early (see
    /// [`ProbeContext::emit_dropped`]): the caller asks the context whether it was.
    pub can_drop: bool,
    /// Every place the code faults, in code order (empty when it cannot fault).
    pub fault_sites: Vec<FaultSite>,
    /// The most bytes its `alloca()` calls (and `copyin()` calls, in a clause that allocates)
    /// take, padding included, where `scratchsize` is larger than the context's
    /// [`AllocaArea::size`] (0 otherwise: each allocation is checked against `scratchsize`
    /// then); the context refuses a clause whose fragments may take more than that size.
    pub alloca_bytes: u64,
    /// Its value may be an `alloca()` pointer, as the interpreter records one (see `alloca`):
    /// right where the value is recorded or keys an aggregation, not where the interpreter
    /// takes it as it is (an aggregated value, `tracemem()`'s address, a speculation's id).
    pub alloca_value: bool,
}

/// What a translated value is (see [`translate_value`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// An integer, in r0.
    Int,
    /// The current thread's `execname`: [`COMM_LEN`] NUL-terminated bytes at
    /// [`Frame::execname_at`] of the fragment's frame (r0 holds nothing of use).
    Execname,
    /// A string constant (a `sets`, or one of the probe's names), known at translation.
    Str(Vec<u8>),
    /// A string the fragment built (`copyinstr()`): its address in r0, in the context's string
    /// scratch, NUL-terminated within `strsize` bytes and zero-padded to
    /// [`string_scratch_width`] bytes.
    Scratch,
    /// Memory `copyin()` copied into the context's scratch, this many bytes: its address in r0
    /// (the interpreter's value is an address of its own scratch, which only a recording of the
    /// memory, `tracemem()`, can follow); or the bytes of an object recorded by reference (or
    /// of `tracemem()`) in the clause's alloca() memory, checked as the interpreter checks its
    /// read of them (see `alloca`).
    Buffer(u32),
    /// A `copyin()` whose size is known only at the probe, recorded as memory
    /// (`tracemem(copyin(arg1, arg2), 32)`): its first bytes, this many of them at most, at r0
    /// (zeros past the copy's end), and the copy's size, a 64-bit word at r0 plus this many. The
    /// interpreter's copy is in its alloca area, whose reads past what was allocated fault: a
    /// recording of more bytes than the size is `DTRACEFLT_BADSIZE` with that many bytes as
    /// the address, placed as the interpreter places a fault of the record's read.
    SizedCopy(u32),
}

/// A translated value: its code and what it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// The code (its r0 is the value when [`ValueKind::Int`]).
    pub fragment: Fragment,
    /// What the code leaves.
    pub kind: ValueKind,
}

impl Fragment {
    /// Appends the fragment to `a`. Its subprograms (the callbacks its code hands `bpf_loop`,
    /// laid out after its code, see `Asm::ld_callback`) become `a`'s, laid out after `a`'s
    /// program, each once however many fragments hold it.
    pub fn emit(&self, a: &mut Asm) {
        let subs = crate::insn::subprograms(&self.insns);
        let code = self.code_len();
        let mut at = 0;
        while let Some(i) = self.insns.get(at).filter(|_| at < code) {
            if i.code == (crate::insn::op::LD | crate::insn::op::DW | crate::insn::op::IMM)
                && i.src == crate::insn::PSEUDO_FUNC
            {
                let start = (at as i64 + 1 + i64::from(i.imm)) as usize;
                let end = subs
                    .iter()
                    .copied()
                    .find(|&s| s > start)
                    .unwrap_or(self.insns.len());
                let body = self.insns.get(start..end).unwrap_or_default().to_vec();
                let name = format!("dt_fragment_sub_{:016x}", insns_hash(&body));
                a.ld_callback(crate::insn::Reg(i.dst), name, move |a| {
                    for i in &body {
                        a.raw(*i);
                    }
                });
                at += 2;
            } else {
                a.raw(*i);
                at += 1;
            }
        }
    }

    /// The instructions of the fragment's own code, before its subprograms.
    pub fn code_len(&self) -> usize {
        crate::insn::subprograms(&self.insns)
            .first()
            .copied()
            .unwrap_or(self.insns.len())
    }
}

/// A hash of instructions, naming a subprogram by its code.
fn insns_hash(insns: &[Insn]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for i in insns {
        (i.code, i.dst, i.src, i.off, i.imm).hash(&mut h);
    }
    h.finish()
}

/// What the translator knows a DIF register holds.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// An integer, with its value when it is a constant.
    Int(Option<u64>),
    /// A string constant (`sets`, `probefunc`...).
    StrConst(Vec<u8>),
    /// The current thread's `execname`, read into the frame.
    Execname,
    /// A string built in the context's string scratch (`copyinstr()`); the register holds its
    /// address there.
    Scratch,
    /// A string variable's value, copied into the context's string scratch: the register holds
    /// its address there, or 0 (NULL) when the variable held none.
    VarStr,
    /// Bytes `copyin()` copied into the context's scratch, this many: the register holds their
    /// address there (which only `tracemem()` reads: see [`ValueKind::Buffer`]).
    Buffer(u32),
    /// A pointer into the clause's `alloca()` memory, as the interpreter records one (see
    /// `alloca`).
    Alloca,
    /// The address of a by-reference variable's storage (a struct, a union, an array), `off`
    /// bytes into its `size`: the register holds a pointer into the context's map value (see
    /// `structvars`).
    Ref {
        /// Bytes of the variable.
        size: u32,
        /// The offset of the address in it.
        off: u32,
    },
    /// The address of a string in kernel memory, where strings meet the address of a kernel
    /// string at a join (`F == 0 ? "<none>" : stringof(F->...->name)`, see `cond`): each
    /// string was copied into scratch on its edge, and the register holds an address on every
    /// path, read as a kernel string where the value is used (see `stringof`).
    KernelStr,
    /// Different kinds on different paths, these: usable by nothing, unless they are strings
    /// (NULL among them) that the edges into the join make one kind (see `cond`).
    Mixed(cond::Mix),
}

fn join(a: &Kind, b: &Kind) -> Kind {
    match (a, b) {
        (Kind::Int(x), Kind::Int(y)) => Kind::Int(if x == y { *x } else { None }),
        (x, y) if x == y => x.clone(),
        (x, y) => Kind::Mixed(cond::Mix::of(x).union(cond::Mix::of(y))),
    }
}

/// What the translator knows at an instruction: the registers, and the tuple stack.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [Kind; NREGS],
    /// What was pushed on the tuple stack since the last `flushts`, in order; `None` when not
    /// followed (paths that push differently).
    tuple: Option<Vec<Pushed>>,
    /// The registers holding a probe argument (`argN`) as loaded, with its number: a
    /// `copyinstr(argN)` may take the copy the probe's program made before the clauses ran
    /// ([`ProbeContext::emit_pre_read_string`]).
    args: [Option<u8>; NREGS],
    /// The most each register's value can be, as an unsigned integer, where an `and`, a
    /// logical shift right, an unsigned remainder or quotient by a constant bounds it (an
    /// `alloca()` size computed at run time, see `alloca`).
    most: [Option<u64>; NREGS],
    /// The registers holding a `copyin()` sized at the probe (a string, [`Kind::Scratch`]),
    /// with the bytes of the copy that a recording of the memory reads
    /// ([`ValueKind::SizedCopy`], this many) and its size kept in the slot before the string's
    /// (see `copyin`).
    sized: [Option<u32>; NREGS],
    /// The bytes from the start of the string in each register that the interpreter's storage
    /// of it holds as the kernel's does, whatever the string (see `strindex`); `None`: one, its
    /// first.
    window: [Option<u64>; NREGS],
    /// The window of each string pushed on the tuple stack, by position (see `bcopystr`);
    /// `None`: one byte.
    pushed_window: [Option<u64>; MAX_TUPLE],
}

/// One element of the tuple stack as the translator follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pushed {
    /// The integer in DIF register `r`, not written since it was pushed.
    Reg(u8),
    /// An integer whose register was written after it was pushed (the compiler reuses one
    /// register to push values it reloads from spill slots): its value was copied to the frame's
    /// tuple slot of its position first.
    Saved,
    /// A string the translator follows (a constant, `execname`).
    Str(Kind),
}

impl State {
    /// The most register `r`'s value can be, as an unsigned integer, when known: a constant's
    /// value, or the bound an `and` gave it.
    fn most_of(&self, r: usize) -> Option<u64> {
        match self.regs[r] {
            Kind::Int(Some(v)) => Some(v),
            Kind::Int(None) => self.most[r],
            _ => None,
        }
    }
}

impl std::ops::Index<usize> for State {
    type Output = Kind;
    fn index(&self, i: usize) -> &Kind {
        &self.regs[i]
    }
}

fn start_state() -> State {
    State {
        regs: std::array::from_fn(|_| Kind::Int(Some(0))),
        tuple: Some(Vec::new()),
        args: [None; NREGS],
        most: [None; NREGS],
        sized: [None; NREGS],
        window: [None; NREGS],
        pushed_window: [None; MAX_TUPLE],
    }
}

/// The most `r1 op r2` can be, as an unsigned integer, from the most `r1` can be and `r2`'s
/// value when it is a constant (see [`State::most`]): `None` where not known.
fn most_after(op: Opcode, x: Option<u64>, y: Option<u64>) -> Option<u64> {
    match (op, x, y) {
        (Opcode::And, Some(x), _) => Some(x),
        (Opcode::And, None, Some(m)) => Some(m),
        (Opcode::Srl, x, Some(k)) if k < 64 => Some(x.unwrap_or(u64::MAX) >> k),
        (Opcode::Urem, x, Some(m)) if m > 0 => Some(x.map_or(m - 1, |x| x.min(m - 1))),
        (Opcode::Udiv, Some(x), Some(m)) if m > 0 => Some(x / m),
        _ => None,
    }
}

fn join_states(s: &State, t: &State) -> State {
    State {
        regs: std::array::from_fn(|i| join(&s.regs[i], &t.regs[i])),
        tuple: if s.tuple == t.tuple {
            s.tuple.clone()
        } else {
            None
        },
        args: std::array::from_fn(|i| s.args[i].filter(|_| s.args[i] == t.args[i])),
        most: std::array::from_fn(|i| s.most_of(i).zip(t.most_of(i)).map(|(x, y)| x.max(y))),
        sized: std::array::from_fn(|i| s.sized[i].filter(|_| s.sized[i] == t.sized[i])),
        window: std::array::from_fn(|i| match (s.window[i], t.window[i]) {
            (Some(x), Some(y)) => Some(x.min(y)),
            _ => None,
        }),
        pushed_window: std::array::from_fn(|i| match (s.pushed_window[i], t.pushed_window[i]) {
            (Some(x), Some(y)) => Some(x.min(y)),
            _ => None,
        }),
    }
}

/// Translates a predicate (or any DIF object whose value is an integer) to a [`Fragment`] for the
/// probe `ctx` describes, comparing strings up to `strsize` bytes (a string's storage: D's
/// `strsize` plus its NUL, see the module notes). Its stack use is `frame`.
pub fn translate(
    obj: &DifObject,
    ctx: &dyn ProbeContext,
    strsize: usize,
    frame: Frame,
) -> Result<Fragment, Untranslatable> {
    translate_object(obj, ctx, strsize, frame, false).map(|(f, _)| f)
}

/// Translates a DIF object whose value may be a string (an aggregation key such as `execname` or
/// `probefunc`): as [`translate`], but a `ret` of `execname` or of a string constant is allowed,
/// and the result says which (every `ret` of the object must return the same kind).
pub fn translate_value(
    obj: &DifObject,
    ctx: &dyn ProbeContext,
    strsize: usize,
    frame: Frame,
) -> Result<Value, Untranslatable> {
    let (fragment, kind) = translate_object(obj, ctx, strsize, frame, true)?;
    Ok(Value {
        fragment,
        kind: kind.unwrap_or(ValueKind::Int),
    })
}

/// A translated object: its fragment, and what its `ret`s return (`None`: an integer).
type Translated = (Fragment, Option<ValueKind>);

/// Translates `obj` (`strings_ok`: its `ret` may return a string, see [`translate_value`]),
/// again while a pass finds joins of strings its edges are to convert (see `cond`): the plan
/// grows each time, so this ends.
fn translate_object(
    obj: &DifObject,
    ctx: &dyn ProbeContext,
    strsize: usize,
    frame: Frame,
    strings_ok: bool,
) -> Result<Translated, Untranslatable> {
    let mut plan = cond::Plan::new();
    loop {
        let mut t = Translator::new(obj, ctx, strsize, frame, plan.clone())?;
        t.strings_ok = strings_ok;
        let (out, found) = t.run()?;
        if found.is_empty() {
            return Ok(out);
        }
        plan.extend(found);
    }
}

struct Translator<'a> {
    obj: &'a DifObject,
    code: Vec<Instr>,
    ctx: &'a dyn ProbeContext,
    strsize: usize,
    frame: Frame,
    a: Asm,
    /// One label per instruction (branch targets bind there).
    labels: Vec<Label>,
    /// The state flowing into each instruction from branches (joined).
    incoming: Vec<Option<State>>,
    /// Instructions some branch jumps to.
    targets: Vec<bool>,
    end: Label,
    fault: Label,
    /// Some jump goes to `fault` (the verifier refuses unreachable code).
    faults: bool,
    /// `ret` may return a string (`execname` or a constant), see [`translate_value`].
    strings_ok: bool,
    /// What the `ret`s seen so far return.
    result: Option<ValueKind>,
    /// A dynamic-variable store may be dropped (see [`Fragment::can_drop`]).
    can_drop: bool,
    /// The fault sites met so far, each with the label of its out-of-line stub.
    sites: Vec<(Label, FaultSite)>,
    /// String scratch slots taken so far (one per `copyinstr()` call site).
    scratch_slots: usize,
    /// What the data-flow knows the registers hold before each instruction (where a string
    /// at an integer address comes from, see `stringof`).
    flow: stringof::FlowRegs,
    /// Bytes the allocations translated so far take (see [`Fragment::alloca_bytes`]).
    alloca_bytes: u64,
    /// A `ret` returns an alloca pointer (see [`Fragment::alloca_value`]).
    alloca_value: bool,
    /// The joins of strings the edges convert, and those this pass finds (see `cond`).
    joins: cond::Joins,
    /// The instruction just translated took the next one with it (a string index and its
    /// load, see `strindex`).
    fused_load: bool,
}

impl<'a> Translator<'a> {
    fn new(
        obj: &'a DifObject,
        ctx: &'a dyn ProbeContext,
        strsize: usize,
        frame: Frame,
        plan: cond::Plan,
    ) -> Result<Self, Untranslatable> {
        let code = obj
            .text
            .iter()
            .enumerate()
            .map(|(pc, w)| {
                Instr::decode(*w).map_err(|e| Untranslatable::Invalid {
                    pc,
                    what: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A subroutine call is the reason to give, not the tuple pushes before it.
        for (pc, i) in code.iter().enumerate() {
            if let Instr::Call { subr, .. } = *i {
                if matches!(
                    Subr::from_u16(subr),
                    Some(
                        Subr::Copyin
                            | Subr::Copyinstr
                            | Subr::Copyout
                            | Subr::Copyoutstr
                            | Subr::Speculation
                            | Subr::Htons
                            | Subr::Htonl
                            | Subr::Htonll
                            | Subr::Ntohs
                            | Subr::Ntohl
                            | Subr::Ntohll
                            | Subr::Rand
                            | Subr::Progenyof
                            | Subr::Strlen
                            | Subr::Strjoin
                            | Subr::Lltostr
                            | Subr::Substr
                            | Subr::Toupper
                            | Subr::Tolower
                            | Subr::Basename
                            | Subr::Dirname
                            | Subr::Cleanpath
                            | Subr::Index
                            | Subr::Rindex
                            | Subr::Strstr
                            | Subr::Strchr
                            | Subr::Strrchr
                            | Subr::Random
                            | Subr::InetNtoa
                            | Subr::InetNtoa6
                            | Subr::InetNtop
                            | Subr::Alloca
                            | Subr::Bcopy
                            | Subr::Copyinto
                            | Subr::Strtok
                            | Subr::Getmajor
                            | Subr::Getminor
                            | Subr::Strtoll
                            | Subr::Memstr
                            | Subr::LinkNtop
                            | Subr::DPath
                    )
                ) || Subr::from_u16(subr)
                    .and_then(dtrace_dif::vm::subr::locks::word_bytes)
                    .is_some()
                {
                    continue;
                }
                let name = Subr::from_u16(subr)
                    .map(|s| s.name().to_string())
                    .unwrap_or_else(|| format!("#{subr}"));
                return Err(Untranslatable::Subroutine { pc, name });
            }
        }
        let mut a = Asm::new();
        let labels = (0..=code.len()).map(|_| a.label()).collect();
        let mut targets = vec![false; code.len() + 1];
        for (pc, i) in code.iter().enumerate() {
            if let Instr::Branch { label, .. } = *i {
                let t = label as usize;
                // DIF has no loops: the verifier only accepts forward branches.
                if t <= pc || t > code.len() {
                    return Err(Untranslatable::Invalid {
                        pc,
                        what: format!("branch to {t} is not forward"),
                    });
                }
                targets[t] = true;
            }
        }
        let (end, fault) = (a.label(), a.label());
        let joins = cond::Joins::new(&code, plan);
        Ok(Translator {
            obj,
            incoming: vec![None; code.len() + 1],
            code,
            ctx,
            strsize: strsize.max(1),
            frame,
            a,
            labels,
            targets,
            end,
            fault,
            faults: false,
            strings_ok: false,
            result: None,
            can_drop: false,
            sites: Vec::new(),
            scratch_slots: 0,
            flow: stringof::flow_regs(obj),
            alloca_bytes: 0,
            alloca_value: false,
            joins,
            fused_load: false,
        })
    }

    /// Translates the object: the fragment and what it returns, and the joins of strings this
    /// pass found that its plan lacked (the fragment is of use only when there are none).
    fn run(mut self) -> Result<(Translated, cond::Plan), Untranslatable> {
        // Registers start at zero, as the interpreter's do (and the verifier wants every stack slot
        // written before it is read).
        for r in 0..NREGS as u8 {
            self.a.store_imm(Size::DW, R10, self.frame.reg(r), 0);
        }
        self.a.store_imm(Size::DW, R10, self.frame.fault_at(), 0);
        if self.reads_execname() {
            self.ctx
                .emit_execname(&mut self.a, self.frame.comm())
                .map_err(|why| Untranslatable::Variable {
                    pc: 0,
                    name: "execname".into(),
                    why,
                })?;
        }
        let mut state = Some(start_state());
        let mut pc = 0;
        while pc < self.code.len() {
            let label = self.labels[pc];
            if let (true, Some(s)) = (self.targets[pc], state.as_mut()) {
                self.fall_into(pc, s)?;
            }
            self.a.bind(label);
            state = match (state, self.incoming[pc].take()) {
                (Some(s), Some(t)) => Some(join_states(&s, &t)),
                (s, t) => s.or(t),
            };
            if let (true, Some(s)) = (self.targets[pc], state.as_mut()) {
                self.settle_join(pc, s);
            }
            let Some(mut s) = state.take() else {
                // Nothing reaches this instruction.
                pc += 1;
                continue;
            };
            let next = self.step(pc, &mut s)?;
            state = next.then_some(s);
            let fused = self.fused_branch(pc) || std::mem::take(&mut self.fused_load);
            pc += if next && fused { 2 } else { 1 };
        }
        // Off the end without `ret`: the interpreter faults.
        let end_label = self.labels[self.code.len()];
        self.a.bind(end_label);
        if state.is_some() || self.incoming[self.code.len()].is_some() {
            let last = self.code.len().saturating_sub(1);
            let f = self.fault_site(last, FaultKind::IllOp, FaultAddr::Zero);
            self.a.ja(f);
        }
        let end = self.end;
        if self.faults {
            // Nothing falls through to here (the last instruction jumps). Each site's stub records the fault (as the interpreter's would carry it) and joins
            // the shared exit.
            let sites = std::mem::take(&mut self.sites);
            for (label, site) in &sites {
                self.a.bind(*label);
                let word = FaultWord {
                    kind: site.kind.code(),
                    pc: site.pc,
                };
                self.a.ld_imm64(R1, word.encode());
                self.a.store(Size::DW, R10, self.frame.fault_at(), R1);
                match site.addr {
                    FaultAddr::Zero => {
                        self.a
                            .store_imm(Size::DW, R10, self.frame.fault_addr_at(), 0);
                    }
                    FaultAddr::Reg(r) => {
                        self.get(R1, r);
                        self.a.store(Size::DW, R10, self.frame.fault_addr_at(), R1);
                    }
                    FaultAddr::Frame(at) => {
                        self.a.load(Size::DW, R1, R10, at);
                        self.a.store(Size::DW, R10, self.frame.fault_addr_at(), R1);
                    }
                    FaultAddr::Stored => {}
                }
                self.a.ja(self.fault);
            }
            self.a.bind(self.fault).mov_imm(R0, FAULTED);
            self.sites = sites;
        }
        self.a.bind(end);
        let can_fault = self.faults;
        let result = self.result.take();
        let found = self.joins.found().clone();
        Ok((
            (
                Fragment {
                    insns: self.a.finish()?,
                    can_fault,
                    can_drop: self.can_drop,
                    fault_sites: self.sites.iter().map(|(_, s)| *s).collect(),
                    alloca_bytes: self.alloca_bytes,
                    alloca_value: self.alloca_value,
                },
                result,
            ),
            found,
        ))
    }

    /// The D name of user variable `id` (from the object's variable table), with `prefix`.
    fn var_name(&self, id: u32, prefix: &str) -> String {
        self.obj
            .vartab
            .iter()
            .find(|v| v.id == id)
            .and_then(|v| self.obj.string_at(v.name as usize))
            .map(|n| format!("{prefix}{}", String::from_utf8_lossy(n)))
            .unwrap_or_else(|| format!("{prefix}#{id}"))
    }

    /// The label of a new fault site: DIF instruction `pc` faults with `kind` at the address
    /// `addr` says.
    fn fault_site(&mut self, pc: usize, kind: FaultKind, addr: FaultAddr) -> Label {
        self.faults = true;
        let label = self.a.label();
        let site = FaultSite {
            pc: u32::try_from(pc).unwrap_or(u32::MAX),
            kind,
            addr,
        };
        self.sites.push((label, site));
        label
    }

    /// D's `strsize` as the most characters a string built here holds (its NUL aside), and that
    /// as an immediate; the reason no string can be built when it is none or too many.
    fn string_bound(&self) -> Result<(usize, i32), String> {
        let most = self.strsize.wrapping_sub(1);
        let most32 = i32::try_from(most).map_err(|_| "strsize too large".to_string())?;
        if most == 0 {
            return Err("strsize 0".into());
        }
        Ok((most, most32))
    }

    /// A fresh slot of the context's string scratch (one string's storage,
    /// [`string_scratch_width`]): leaves its address in r0 and at the stack slot `at`, zeroed when
    /// `zeroed`; a `NoScratch` fault at `pc` when the scratch could not be had. The error is the
    /// context's reason for having no scratch.
    fn string_slot(&mut self, pc: usize, at: i16, zeroed: bool) -> Result<(), String> {
        let width = string_scratch_width(self.strsize);
        let offset = self.scratch_slots * width;
        self.scratch_slots += 1;
        self.string_slot_at(pc, offset, at, zeroed)
    }

    /// [`Self::string_slot`], the slot at `offset` of the scratch (taken before).
    fn string_slot_at(
        &mut self,
        pc: usize,
        offset: usize,
        at: i16,
        zeroed: bool,
    ) -> Result<(), String> {
        let width = string_scratch_width(self.strsize);
        self.scratch_at(pc, offset, width, at, if zeroed { width } else { 0 })
    }

    /// `slots` fresh slots of the context's string scratch, one area (a subroutine's result and
    /// its work): as [`Self::string_slot`], its first `zero` bytes zeroed.
    fn scratch_area(
        &mut self,
        pc: usize,
        slots: usize,
        at: i16,
        zero: usize,
    ) -> Result<(), String> {
        let width = string_scratch_width(self.strsize);
        let offset = self.scratch_slots * width;
        self.scratch_slots += slots;
        self.scratch_at(pc, offset, slots * width, at, zero)
    }

    /// The `len` bytes at `offset` of the scratch (taken before): their address in r0 and at
    /// the stack slot `at`, the first `zero` of them zeroed; a `NoScratch` fault at `pc` when
    /// the scratch could not be had.
    fn scratch_at(
        &mut self,
        pc: usize,
        offset: usize,
        len: usize,
        at: i16,
        zero: usize,
    ) -> Result<(), String> {
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        self.ctx.emit_string_scratch(&mut self.a, offset, len)?;
        let a = &mut self.a;
        a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        a.store(Size::DW, R10, at, R0);
        for w in (0..zero).step_by(8) {
            a.store_imm(Size::DW, R0, w as i16, 0);
        }
        Ok(())
    }

    /// Whether the subroutine the pushes at `pc` are arguments of is `strtok()`: the next
    /// call, with only pushes and the sizes they push (constants) between.
    fn calls_strtok_after(&self, pc: usize) -> bool {
        self.code
            .iter()
            .skip(pc + 1)
            .find(|i| {
                !matches!(
                    i,
                    Instr::Pushtr { .. } | Instr::Pushtv { .. } | Instr::Setx { .. }
                )
            })
            .is_some_and(|i| matches!(*i, Instr::Call { subr, .. } if subr == Subr::Strtok as u16))
    }

    /// Whether the object stores a variable (a store action, whose value nothing reads).
    fn stores(&self) -> bool {
        self.code
            .iter()
            .any(|i| matches!(i, Instr::StoreVar { .. }))
    }

    /// Whether the object stores through an address (a member of a struct variable assigned) or
    /// a struct variable whole.
    fn stores_members(&self) -> bool {
        self.code.iter().any(|i| match *i {
            Instr::Store { .. } | Instr::Copys { .. } => true,
            // A struct variable assigned whole.
            Instr::StoreVar { op, var, .. } => self.ref_var_size(op, var).is_some(),
            _ => false,
        })
    }

    fn reads_execname(&self) -> bool {
        self.code.iter().any(|i| {
            matches!(*i, Instr::LoadVar { op: Opcode::Ldgs, var, .. }
                if u32::from(var) == vars::DIF_VAR_EXECNAME)
        })
    }

    /// Whether the instruction at `pc` sets condition codes that the branch after it uses (the two
    /// are translated together).
    fn fused_branch(&self, pc: usize) -> bool {
        matches!(
            self.code[pc],
            Instr::Cmp { .. } | Instr::Tst { .. } | Instr::Scmp { .. }
        ) && matches!(self.code.get(pc + 1), Some(Instr::Branch { .. }))
    }

    fn flow_to(&mut self, target: usize, s: &State) {
        let slot = &mut self.incoming[target];
        *slot = Some(match slot.take() {
            Some(t) => join_states(s, &t),
            None => s.clone(),
        });
    }

    fn get(&mut self, dst: crate::insn::Reg, r: u8) {
        self.a.load(Size::DW, dst, R10, self.frame.reg(r & 7));
    }

    fn put(&mut self, s: &mut State, rd: u8, src: crate::insn::Reg, k: Kind) {
        let rd = rd & 7;
        if rd == 0 {
            return;
        }
        if let Some(t) = &mut s.tuple {
            // A pushed integer about to be overwritten is kept in its tuple slot.
            let tmp = if src == R2 { R3 } else { R2 };
            for (i, p) in t.iter_mut().enumerate() {
                if *p == Pushed::Reg(rd) {
                    self.a.load(Size::DW, tmp, R10, self.frame.reg(rd));
                    self.a.store(Size::DW, R10, self.frame.tuple(i), tmp);
                    // An alloca pointer keeps its kind (only `bcopy()` and `copyinto()`
                    // take one; see `alloca`), and so does a copyin()'s copy (`memstr()`).
                    *p = match s.regs[rd as usize] {
                        Kind::Alloca => Pushed::Str(Kind::Alloca),
                        Kind::Buffer(n) => Pushed::Str(Kind::Buffer(n)),
                        _ => Pushed::Saved,
                    };
                }
            }
        }
        self.a.store(Size::DW, R10, self.frame.reg(rd), src);
        s.regs[rd as usize] = k;
        s.args[rd as usize] = None;
        s.most[rd as usize] = None;
        s.sized[rd as usize] = None;
        s.window[rd as usize] = None;
    }

    fn int(&self, s: &State, pc: usize, r: u8) -> Result<Option<u64>, Untranslatable> {
        match &s[(r & 7) as usize] {
            Kind::Int(v) => Ok(*v),
            Kind::KernelStr => Err(Untranslatable::Value {
                pc,
                what: format!(
                    "%r{r} holds a string's address (strings and a kernel string's address \
                     joined) used as an integer"
                ),
            }),
            Kind::Mixed(m) => Err(Untranslatable::Value {
                pc,
                what: format!(
                    "%r{r} holds values of different kinds on different paths ({})",
                    m.describe()
                ),
            }),
            Kind::Alloca => Err(Untranslatable::Value {
                pc,
                what: format!(
                    "the alloca() pointer in %r{r} used where the translator follows only \
                     integers"
                ),
            }),
            Kind::Buffer(_) => Err(Untranslatable::CopyUse {
                pc,
                what: format!(
                    "copyin()'s copy in %r{r} used as an integer (only tracemem() records it at \
                     the probe)"
                ),
            }),
            Kind::Ref { .. } => Err(Untranslatable::Value {
                pc,
                what: format!(
                    "the address of a struct variable in %r{r} used where the translator follows \
                     only integers"
                ),
            }),
            Kind::Scratch if s.sized[(r & 7) as usize].is_some() => Err(Untranslatable::CopyUse {
                pc,
                what: format!(
                    "the copyin() sized at the probe in %r{r} used as an integer (a string of \
                     it, or a record of its memory right where it is made, is taken at the probe)"
                ),
            }),
            _ => Err(Untranslatable::Value {
                pc,
                what: format!("string in %r{r} used as an integer"),
            }),
        }
    }

    /// Translates the instruction at `pc`; returns whether control falls through to the next.
    fn step(&mut self, pc: usize, s: &mut State) -> Result<bool, Untranslatable> {
        let ins = self.code[pc];
        match ins {
            Instr::Nop => {}
            Instr::Alu { op, r1, r2, rd }
                if matches!(s[(r1 & 7) as usize], Kind::Ref { .. })
                    || matches!(s[(r2 & 7) as usize], Kind::Ref { .. }) =>
            {
                if let Some(r) = self.ref_arith(pc, s, op, r1, r2, rd) {
                    r?;
                }
            }
            Instr::Alu { op, r1, r2, rd } if self.alloca_arith(s, op, r1, r2).is_some() => {
                let k = self.alloca_arith(s, op, r1, r2).unwrap_or(Kind::Int(None));
                self.get(R1, r1);
                self.get(R2, r2);
                self.alu(pc, op, false);
                self.put(s, rd, R1, k);
            }
            Instr::Alu {
                op: Opcode::Add,
                r1,
                r2,
                rd,
            } if strindex::indexes(s, r1, r2) => {
                self.string_index(pc, s, r1, r2, rd)?;
                self.fused_load = true;
            }
            Instr::Alu { op, r1, r2, rd } => {
                let (x, y) = (self.int(s, pc, r1)?, self.int(s, pc, r2)?);
                self.get(R1, r1);
                self.get(R2, r2);
                self.alu(pc, op, y.is_some_and(|v| v != 0));
                let k = match (x, y) {
                    (Some(x), Some(y)) => Kind::Int(fold(op, x, y)),
                    _ => Kind::Int(None),
                };
                let most = most_after(op, s.most_of((r1 & 7) as usize), y);
                let most = match (op, s.most_of((r2 & 7) as usize)) {
                    (Opcode::And, Some(m)) => Some(most.map_or(m, |x| x.min(m))),
                    _ => most,
                };
                self.put(s, rd, R1, k);
                s.most[(rd & 7) as usize] = most;
            }
            Instr::Not { r1, rd } => {
                let x = self.int(s, pc, r1)?;
                self.get(R1, r1);
                self.a.alu_imm(op::XOR, R1, -1);
                self.put(s, rd, R1, Kind::Int(x.map(|v| !v)));
            }
            Instr::Mov { r1, rd } => {
                let k = s[(r1 & 7) as usize].clone();
                let most = s.most[(r1 & 7) as usize];
                let window = s.window[(r1 & 7) as usize];
                self.get(R1, r1);
                self.put(s, rd, R1, k);
                s.most[(rd & 7) as usize] = most;
                s.window[(rd & 7) as usize] = window;
            }
            Instr::Setx { idx, rd } => {
                let v =
                    *self
                        .obj
                        .inttab
                        .get(idx as usize)
                        .ok_or_else(|| Untranslatable::Invalid {
                            pc,
                            what: format!("integer table index {idx}"),
                        })?;
                self.a.ld_imm64(R1, v);
                self.put(s, rd, R1, Kind::Int(Some(v)));
            }
            Instr::Sets { idx, rd } => {
                let st = self
                    .obj
                    .string_at(idx as usize)
                    .ok_or_else(|| Untranslatable::Invalid {
                        pc,
                        what: format!("string table offset {idx}"),
                    })?
                    .to_vec();
                // The string's address is never read as a number (see `int`): 0 keeps the slot
                // defined.
                self.a.mov_imm(R1, 0);
                self.put(s, rd, R1, Kind::StrConst(st));
            }
            Instr::Cmp { .. } | Instr::Tst { .. } | Instr::Scmp { .. } => {
                match self.code.get(pc + 1).copied() {
                    Some(Instr::Branch { op, label }) if !self.targets[pc + 1] => {
                        return self.compare_and_branch(pc, s, ins, op, label as usize);
                    }
                    // Condition codes nobody reads.
                    Some(i) if !matches!(i, Instr::Branch { .. }) => {}
                    _ => {
                        return Err(Untranslatable::Value {
                            pc,
                            what: "condition codes reach a branch from several places".into(),
                        })
                    }
                }
            }
            Instr::Branch { op, label } => {
                if op != Opcode::Ba {
                    return Err(Untranslatable::Value {
                        pc,
                        what: "branch on condition codes set before a join".into(),
                    });
                }
                self.branch_edge(pc, label as usize, s, true, |a, l| {
                    a.ja(l);
                })?;
                return Ok(false);
            }
            Instr::Ret { rd } => {
                let kind = match &s[(rd & 7) as usize] {
                    // A copy sized at the probe taken as memory, not as a string: its bytes,
                    // in the slot before its string's (see `copyin_sized`).
                    Kind::Scratch
                        if self.strings_ok
                            && !self.obj.rtype.is_string()
                            && s.sized[(rd & 7) as usize].is_some() =>
                    {
                        let n = s.sized[(rd & 7) as usize].unwrap_or(0);
                        let width = string_scratch_width(self.strsize) as i32;
                        let reg = self.frame.reg(rd & 7);
                        self.a
                            .load(Size::DW, R1, R10, reg)
                            .alu_imm(op::SUB, R1, width)
                            .store(Size::DW, R10, reg, R1);
                        ValueKind::SizedCopy(n)
                    }
                    // A string member recorded (`printf("%s", g.name)`).
                    Kind::Ref { .. } if self.strings_ok && self.obj.rtype.is_string() => {
                        let last = self.code.len().saturating_sub(1);
                        self.ref_string_at(last, s, rd, self.frame.load_buf())?;
                        self.a.load(Size::DW, R1, R10, self.frame.load_buf());
                        self.put(s, rd, R1, Kind::Scratch);
                        ValueKind::Scratch
                    }
                    // A store action's value (a member assigned), which nothing reads.
                    Kind::Ref { .. } if !self.strings_ok && self.stores_members() => ValueKind::Int,
                    Kind::Execname if self.strings_ok => ValueKind::Execname,
                    Kind::StrConst(b) if self.strings_ok => ValueKind::Str(b.clone()),
                    Kind::Scratch if self.strings_ok => ValueKind::Scratch,
                    // An address returned as a string (`stringof(p)`, `(string)p`), or strings
                    // joined with one.
                    Kind::Int(_) | Kind::KernelStr
                        if self.strings_ok && self.obj.rtype.is_string() =>
                    {
                        self.kernel_string(pc, s, rd, self.frame.reg(rd & 7))?;
                        ValueKind::Scratch
                    }
                    // A copy read as a string (`stringof(copyin(addr, 10))`).
                    Kind::Buffer(n) if self.strings_ok && self.obj.rtype.is_string() => {
                        self.buffer_string(pc, rd, *n)?;
                        ValueKind::Scratch
                    }
                    Kind::Buffer(n) if self.strings_ok => ValueKind::Buffer(*n),
                    // `stringof(p)`: the string in alloca() memory.
                    Kind::Alloca if self.strings_ok && self.obj.rtype.is_string() => {
                        // Read when the action records it: a fault is the expression's last
                        // instruction's, as the interpreter's.
                        let last = self.code.len().saturating_sub(1);
                        self.alloca_string(last, rd)?;
                        self.put(s, rd, R1, Kind::Scratch);
                        ValueKind::Scratch
                    }
                    // An object by reference (`trace(*this->p)`, `tracemem(this->p, 16)`) in
                    // alloca() memory: checked and read when the action records it, its bytes'
                    // address in the area in r0.
                    Kind::Alloca
                        if self.strings_ok
                            && self.obj.rtype.is_by_ref()
                            && !self.obj.rtype.is_string()
                            && self.obj.rtype.flags & dtrace_dif::object::DIF_TF_BYUREF == 0 =>
                    {
                        let last = self.code.len().saturating_sub(1);
                        let n = self.obj.rtype.size;
                        self.alloca_object(last, rd, n)?;
                        ValueKind::Buffer(n)
                    }
                    // The pointer as the interpreter records it.
                    Kind::Alloca => {
                        self.alloca_value = true;
                        ValueKind::Int
                    }
                    Kind::VarStr if self.strings_ok => {
                        // Recording NULL (a key, a trace() or printf() value) faults in the
                        // interpreter when the action stores it: at the expression's last
                        // instruction.
                        let last = self.code.len().saturating_sub(1);
                        let null = self.fault_site(last, FaultKind::BadAddr, FaultAddr::Zero);
                        self.get(R1, rd);
                        self.a.jmp_imm(op::JEQ, R1, 0, null);
                        ValueKind::Scratch
                    }
                    // A store action's value (the string stored), which nothing reads: the
                    // compiler gives predicates and aggregated values scalar types only.
                    Kind::StrConst(_) | Kind::Execname | Kind::Scratch | Kind::VarStr
                        if !self.strings_ok && self.stores() =>
                    {
                        ValueKind::Int
                    }
                    _ => {
                        self.int(s, pc, rd)?;
                        ValueKind::Int
                    }
                };
                match &self.result {
                    Some(k) if *k != kind => {
                        return Err(Untranslatable::Value {
                            pc,
                            what: "the value differs in kind by path".into(),
                        })
                    }
                    _ => self.result = Some(kind),
                }
                self.get(R0, rd);
                let end = self.end;
                self.a.ja(end);
                return Ok(false);
            }
            Instr::LoadVar { op, var, rd } if !matches!(op, Opcode::Ldgaa | Opcode::Ldtaa) => {
                self.load_var(pc, s, op, var, rd)?
            }
            Instr::StoreVar {
                op: op @ (Opcode::Stts | Opcode::Stgs | Opcode::Stls),
                var,
                rs,
            } if self.ref_var_size(op, var).is_some() => {
                let id = u32::from(var);
                let size = self.ref_var_size(op, var).unwrap_or_default();
                let (v, prefix) = match op {
                    Opcode::Stts => (StringVar::Thread(id), "self->"),
                    Opcode::Stls => (StringVar::Local(id), "this->"),
                    _ => (StringVar::Global(id), ""),
                };
                let name = self.var_name(id, prefix);
                self.store_ref_whole(pc, s, v, size, rs, name)?;
            }
            Instr::StoreVar {
                op: op @ (Opcode::Stgaa | Opcode::Sttaa),
                var,
                rs,
            } if self.ref_var_size(op, var).is_some() => {
                let size = self.ref_var_size(op, var).unwrap_or_default();
                let (array, key) = self.array(pc, s, op == Opcode::Sttaa, var)?;
                let name = self.array_name(array);
                self.store_ref_whole(pc, s, StringVar::Array(array, &key), size, rs, name)?;
            }
            Instr::StoreVar {
                op: op @ (Opcode::Stts | Opcode::Stgs | Opcode::Stls),
                var,
                rs,
            } if self.is_string_var(op, var) => {
                let id = u32::from(var);
                let (v, prefix) = match op {
                    Opcode::Stts => (StringVar::Thread(id), "self->"),
                    Opcode::Stls => (StringVar::Local(id), "this->"),
                    _ => (StringVar::Global(id), ""),
                };
                let name = self.var_name(id, prefix);
                self.store_string(pc, s, v, rs, name)?;
            }
            Instr::StoreVar {
                op: op @ (Opcode::Stts | Opcode::Stgs | Opcode::Stls),
                var,
                rs,
            } => {
                let id = u32::from(var);
                self.alloca_local_store(pc, s, op, id, rs)?;
                let at = self.alloca_var_value(s, op, id, rs);
                let (stored, prefix) = match op {
                    Opcode::Stts => (self.ctx.emit_thread_store(&mut self.a, id, at), "self->"),
                    Opcode::Stls => (self.ctx.emit_local_store(&mut self.a, id, at), "this->"),
                    _ => (self.ctx.emit_global_store(&mut self.a, id, at), ""),
                };
                stored.map_err(|why| Untranslatable::Variable {
                    pc,
                    name: self.var_name(id, prefix),
                    why,
                })?;
                if op == Opcode::Stts {
                    self.dropped();
                }
            }
            Instr::StoreVar {
                op: op @ (Opcode::Stgaa | Opcode::Sttaa),
                var,
                rs,
            } if self.is_string_var(op, var) => {
                let (array, key) = self.array(pc, s, op == Opcode::Sttaa, var)?;
                let name = self.array_name(array);
                self.store_string(pc, s, StringVar::Array(array, &key), rs, name)?;
            }
            Instr::StoreVar {
                op: op @ (Opcode::Stgaa | Opcode::Sttaa),
                var,
                rs,
            } => {
                self.int(s, pc, rs)?;
                let (array, key) = self.array(pc, s, op == Opcode::Sttaa, var)?;
                let at = self.frame.reg(rs & 7);
                self.ctx
                    .emit_array_store(&mut self.a, array, &key, at)
                    .map_err(|why| self.array_refused(pc, array, why))?;
                self.dropped();
            }
            Instr::LoadVar {
                op: op @ (Opcode::Ldgaa | Opcode::Ldtaa),
                var,
                rd,
            } => {
                let (array, key) = self.array(pc, s, op == Opcode::Ldtaa, var)?;
                if let Some(size) = self.ref_var_size(op, var) {
                    let name = self.array_name(array);
                    self.load_ref(pc, s, StringVar::Array(array, &key), size, rd, name)?;
                    return Ok(true);
                }
                if self.is_string_var(op, var) {
                    let name = self.array_name(array);
                    self.load_string(pc, s, StringVar::Array(array, &key), rd, name)?;
                    return Ok(true);
                }
                self.ctx
                    .emit_array_load(&mut self.a, array, &key)
                    .map_err(|why| self.array_refused(pc, array, why))?;
                self.put(s, rd, R0, Kind::Int(None));
            }
            Instr::Call { subr, rd } => {
                let window = self.call_window(s, subr);
                if !self.call(pc, s, subr, rd)? {
                    return Ok(false);
                }
                if let (Some(w), true) = (window, rd & 7 != 0) {
                    s.window[(rd & 7) as usize] = Some(w);
                }
            }
            Instr::Flushts => s.tuple = Some(Vec::new()),
            Instr::Pushtv { rs, .. } => {
                // An alloca pointer is pushed as itself: only `bcopy()` and `copyinto()` take
                // one (the others, and keys, refuse it); so is a copyin()'s copy, which only
                // `memstr()` takes.
                if !matches!(s[(rs & 7) as usize], Kind::Alloca | Kind::Buffer(_)) {
                    self.int(s, pc, rs)?;
                }
                match &mut s.tuple {
                    Some(t) if t.len() < MAX_TUPLE => t.push(Pushed::Reg(rs & 7)),
                    _ => {
                        return Err(Untranslatable::Value {
                            pc,
                            what: "a tuple the translator does not follow".into(),
                        })
                    }
                }
            }
            Instr::Pushtr { ty, r2, rs } => {
                // A string the translator follows (a constant, `execname`, a string built in
                // the scratch or a string variable's copy there, whose address (0: NULL) is kept
                // in the tuple slot of its position: string registers are not followed into tuple
                // slots otherwise), its size strsize.
                let string = ty == dtrace_dif::instr::DIF_TYPE_STRING
                    && matches!(s[(r2 & 7) as usize], Kind::Int(Some(0)));
                // No byte of a string read here (from an address, from alloca() memory) is
                // known alike: its pushed window is none, unless it is a string followed below.
                if let Some(n) = s.tuple.as_ref().map(Vec::len).filter(|&n| n < MAX_TUPLE) {
                    s.pushed_window[n] = Some(0);
                }
                // An address pushed as a string (`a[stringof(p)]`, `strlen((string)p)`): the
                // string read into the scratch, its address in the tuple slot.
                if let (true, Kind::Int(_) | Kind::KernelStr, Some(t)) =
                    (string, &s[(rs & 7) as usize], s.tuple.as_ref())
                {
                    if s[(rs & 7) as usize] != Kind::Int(Some(0)) && t.len() < MAX_TUPLE {
                        let at = self.frame.tuple(t.len());
                        self.kernel_string(pc, s, rs, at)?;
                        if let Some(t) = &mut s.tuple {
                            t.push(Pushed::Str(Kind::Scratch));
                        }
                        return Ok(true);
                    }
                }
                // A string member of a struct variable: read into the scratch likewise.
                if let (true, Kind::Ref { .. }, Some(t)) =
                    (string, &s[(rs & 7) as usize], s.tuple.as_ref())
                {
                    if t.len() < MAX_TUPLE {
                        let at = self.frame.tuple(t.len());
                        self.ref_string_at(pc, s, rs, at)?;
                        if let Some(t) = &mut s.tuple {
                            t.push(Pushed::Str(Kind::Scratch));
                        }
                        return Ok(true);
                    }
                }
                // A string in alloca() memory: read into the scratch likewise.
                if let (true, Kind::Alloca, Some(t)) =
                    (string, &s[(rs & 7) as usize], s.tuple.as_ref())
                {
                    if t.len() < MAX_TUPLE {
                        let at = self.frame.tuple(t.len());
                        self.alloca_string_at(pc, rs, at)?;
                        if let Some(t) = &mut s.tuple {
                            t.push(Pushed::Str(Kind::Scratch));
                        }
                        return Ok(true);
                    }
                }
                // A char array pushed by reference as strtok()'s string (`curthread->comm`): its
                // address, which strtok() reads the string at (as the interpreter does).
                let array = ty != dtrace_dif::instr::DIF_TYPE_STRING
                    && matches!(s[(rs & 7) as usize], Kind::Int(v) if v != Some(0))
                    && s.tuple.as_ref().is_some_and(Vec::is_empty)
                    && self.calls_strtok_after(pc);
                if array {
                    self.int(s, pc, rs)?;
                    if let Some(t) = &mut s.tuple {
                        t.push(Pushed::Reg(rs & 7));
                    }
                    return Ok(true);
                }
                let string = string
                    && matches!(
                        s[(rs & 7) as usize],
                        Kind::StrConst(_) | Kind::Execname | Kind::Scratch | Kind::VarStr
                    );
                match &mut s.tuple {
                    Some(t) if string && t.len() < MAX_TUPLE => {
                        if matches!(s.regs[(rs & 7) as usize], Kind::Scratch | Kind::VarStr) {
                            self.a.load(Size::DW, R1, R10, self.frame.reg(rs & 7));
                            self.a.store(Size::DW, R10, self.frame.tuple(t.len()), R1);
                        }
                        // A copy sized at the probe holds its bytes elsewhere (see `copyin`).
                        s.pushed_window[t.len()] = match s.sized[(rs & 7) as usize] {
                            Some(_) => Some(0),
                            None => s.window[(rs & 7) as usize],
                        };
                        t.push(Pushed::Str(s.regs[(rs & 7) as usize].clone()))
                    }
                    _ => {
                        return Err(Untranslatable::Value {
                            pc,
                            what: "a tuple the translator does not follow".into(),
                        })
                    }
                }
            }
            Instr::Popts => {
                if let Some(t) = &mut s.tuple {
                    t.pop();
                }
            }
            Instr::LoadArray { op, var, r2, rd }
                if op == Opcode::Ldga && u32::from(var) == vars::DIF_VAR_UREGS =>
            {
                let Some(i) = self.int(s, pc, r2)? else {
                    return Err(Untranslatable::Value {
                        pc,
                        what: "uregs[] index computed at run time".into(),
                    });
                };
                self.ureg(pc, s, i, rd)?;
            }
            Instr::LoadArray { op, var, r2, rd } => {
                if op != Opcode::Ldga || u32::from(var) != vars::DIF_VAR_ARGS {
                    let name = vars::builtin_name(u32::from(var)).unwrap_or("array");
                    return Err(Untranslatable::Variable {
                        pc,
                        name: format!("{name}[]"),
                        why: "only args[] and uregs[] are read at the probe".into(),
                    });
                }
                let Some(i) = self.int(s, pc, r2)? else {
                    return Err(Untranslatable::Value {
                        pc,
                        what: "args[] index computed at run time".into(),
                    });
                };
                self.arg(pc, s, i, rd)?;
            }
            Instr::Load { op, r1, rd } if matches!(s[(r1 & 7) as usize], Kind::Ref { .. }) => {
                self.ref_load(pc, s, op, r1, rd)?;
            }
            Instr::Store { op, r1, rd } if matches!(s[(rd & 7) as usize], Kind::Ref { .. }) => {
                self.ref_store(pc, s, op, r1, rd)?;
            }
            Instr::Copys { r1, r2, rd } if matches!(s[(rd & 7) as usize], Kind::Ref { .. }) => {
                self.ref_copys(pc, s, r1, r2, rd)?;
            }
            Instr::Load { op, r1, rd } if s[(r1 & 7) as usize] == Kind::Alloca => {
                self.alloca_load(pc, op, r1)?;
                self.put(s, rd, R1, Kind::Int(None));
            }
            Instr::Store { op, r1, rd } if s[(rd & 7) as usize] == Kind::Alloca => {
                self.alloca_store(pc, s, op, r1, rd)?;
            }
            Instr::Load { op, r1, rd } => {
                self.int(s, pc, r1)?;
                self.load(pc, op, r1)?;
                self.put(s, rd, R1, Kind::Int(None));
            }
            other => {
                return Err(Untranslatable::Instruction {
                    pc,
                    what: format!("{:?}", other.opcode()).to_lowercase(),
                })
            }
        }
        Ok(true)
    }

    /// Subroutine call `subr` into `rd`; false when nothing follows it (it always faults).
    fn call(
        &mut self,
        pc: usize,
        s: &mut State,
        subr: u16,
        rd: u8,
    ) -> Result<bool, Untranslatable> {
        match Subr::from_u16(subr) {
            Some(Subr::Copyin) if self.ctx.copyin_allocates() => {
                if !self.alloca_copyin(pc, s, rd)? {
                    return Ok(false);
                }
            }
            Some(Subr::Copyin) => self.copyin(pc, s, rd)?,
            Some(Subr::Alloca) => {
                if !self.alloca(pc, s, rd)? {
                    return Ok(false);
                }
            }
            Some(w @ (Subr::Bcopy | Subr::Copyinto)) => {
                if w == Subr::Bcopy {
                    self.bcopy(pc, s)?;
                } else {
                    self.copyinto(pc, s)?;
                }
                // Both return nothing: the interpreter's 0.
                self.a.mov_imm(R1, 0);
                self.put(s, rd, R1, Kind::Int(Some(0)));
            }
            Some(Subr::Speculation) => {
                self.ctx
                    .emit_speculation(&mut self.a)
                    .map_err(|why| Untranslatable::Value {
                        pc,
                        what: format!("speculation(): {why}"),
                    })?;
                self.put(s, rd, R0, Kind::Int(None));
            }
            Some(Subr::Copyinstr) => self.copyinstr(pc, s, rd)?,
            Some(Subr::Strlen) => self.strlen(pc, s, rd)?,
            Some(w @ (Subr::Htons | Subr::Htonl | Subr::Htonll)) => self.byteorder(pc, s, w, rd)?,
            Some(w @ (Subr::Ntohs | Subr::Ntohl | Subr::Ntohll)) => self.byteorder(pc, s, w, rd)?,
            Some(Subr::Rand) => self.rand(s, rd),
            Some(Subr::Progenyof) => self.progenyof(pc, s, rd)?,
            Some(Subr::Strjoin) => self.strjoin(pc, s, rd)?,
            Some(Subr::Lltostr) => self.lltostr(pc, s, rd)?,
            Some(Subr::Substr) => self.substr(pc, s, rd)?,
            Some(w @ (Subr::Toupper | Subr::Tolower)) => self.strcase(pc, s, w, rd)?,
            Some(w @ (Subr::Basename | Subr::Dirname)) => self.base_or_dir(pc, s, w, rd)?,
            Some(Subr::Cleanpath) => self.cleanpath(pc, s, rd)?,
            Some(w @ (Subr::Index | Subr::Rindex | Subr::Strstr)) => {
                self.strsearch(pc, s, w, rd)?
            }
            Some(w @ (Subr::Strchr | Subr::Strrchr)) => self.strchr(pc, s, w, rd)?,
            Some(Subr::Random) => self.random(s, rd),
            Some(Subr::InetNtoa) => self.inet(pc, s, Subr::InetNtoa, rd)?,
            Some(Subr::InetNtoa6) => self.inet(pc, s, Subr::InetNtoa6, rd)?,
            Some(Subr::InetNtop) => self.inet(pc, s, Subr::InetNtop, rd)?,
            Some(w @ (Subr::Copyout | Subr::Copyoutstr)) => self.copyout(pc, s, w, rd)?,
            Some(Subr::Strtok) => self.strtok(pc, s, rd)?,
            Some(w @ (Subr::Getmajor | Subr::Getminor)) => self.devnum(pc, s, w, rd)?,
            Some(Subr::Strtoll) => self.strtoll(pc, s, rd)?,
            Some(Subr::Memstr) => self.memstr(pc, s, rd)?,
            Some(Subr::LinkNtop) => self.link_ntop(pc, s, rd)?,
            Some(Subr::DPath) => self.d_path(pc, s, rd)?,
            Some(w) if dtrace_dif::vm::subr::locks::word_bytes(w).is_some() => {
                self.lock_query(pc, s, w, rd)?
            }
            other => {
                return Err(Untranslatable::Subroutine {
                    pc,
                    name: other
                        .map(|s| s.name().to_string())
                        .unwrap_or_else(|| format!("#{subr}")),
                })
            }
        }
        Ok(true)
    }

    /// After a store to a dynamic variable: the fragment ends when the context says the store
    /// was dropped.
    fn dropped(&mut self) {
        let end = self.end;
        if self.ctx.emit_dropped(&mut self.a, end) {
            self.can_drop = true;
        }
    }

    /// Associative array `var` (thread-local when `thread`) and the key the tuple stack holds.
    fn array(
        &mut self,
        pc: usize,
        s: &State,
        thread: bool,
        var: u16,
    ) -> Result<(Array, Vec<KeyPart>), Untranslatable> {
        let array = Array {
            thread,
            var: u32::from(var),
        };
        let pushed = s.tuple.as_ref().ok_or_else(|| Untranslatable::Value {
            pc,
            what: "a tuple the translator does not follow".into(),
        })?;
        let key = pushed
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Pushed::Reg(r) => {
                    self.int(s, pc, *r)?;
                    Ok(KeyPart::Int(self.frame.reg(*r)))
                }
                Pushed::Saved => Ok(KeyPart::Int(self.frame.tuple(i))),
                Pushed::Str(Kind::StrConst(b)) => {
                    let b = b.split(|&c| c == 0).next().unwrap_or_default();
                    // A key keeps `strsize` characters of a string in the interpreter (this
                    // strsize counts the NUL, as the records' storage does).
                    if b.len() >= self.strsize {
                        return Err(Untranslatable::Value {
                            pc,
                            what: "a string key longer than strsize".into(),
                        });
                    }
                    Ok(KeyPart::Str(b.to_vec()))
                }
                Pushed::Str(Kind::Execname) => Ok(KeyPart::Execname(self.frame.comm())),
                // Its address was kept in the tuple slot when it was pushed.
                Pushed::Str(Kind::Scratch | Kind::VarStr) => {
                    Ok(KeyPart::Scratch(self.frame.tuple(i)))
                }
                Pushed::Str(_) => Err(Untranslatable::Value {
                    pc,
                    what: "a tuple the translator does not follow".into(),
                }),
            })
            .collect::<Result<Vec<_>, Untranslatable>>()?;
        // A NULL string variable as a key faults where the interpreter reads the key: at the
        // array's load or store.
        for (i, p) in pushed.iter().enumerate() {
            if matches!(p, Pushed::Str(Kind::VarStr)) {
                let null = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero);
                self.a.load(Size::DW, R1, R10, self.frame.tuple(i));
                self.a.jmp_imm(op::JEQ, R1, 0, null);
            }
        }
        Ok((array, key))
    }

    fn array_refused(&self, pc: usize, array: Array, why: String) -> Untranslatable {
        Untranslatable::Variable {
            pc,
            name: self.array_name(array),
            why,
        }
    }

    /// `self->name[]` or `name[]`.
    fn array_name(&self, array: Array) -> String {
        let prefix = if array.thread { "self->" } else { "" };
        format!("{}[]", self.var_name(array.var, prefix))
    }

    /// `R1 = R1 op R2` with DTrace's semantics (`nonzero`: R2 is a constant other than zero, so
    /// a division needs no check), for DIF instruction `pc`.
    fn alu(&mut self, pc: usize, dop: Opcode, nonzero: bool) {
        let divides = matches!(
            dop,
            Opcode::Udiv | Opcode::Urem | Opcode::Sdiv | Opcode::Srem
        );
        let fault = if divides && !nonzero {
            self.fault_site(pc, FaultKind::DivZero, FaultAddr::Zero)
        } else {
            self.fault
        };
        let a = &mut self.a;
        let bop = match dop {
            Opcode::Or => op::OR,
            Opcode::Xor => op::XOR,
            Opcode::And => op::AND,
            Opcode::Sll => op::LSH,
            Opcode::Srl => op::RSH,
            Opcode::Sra => op::ARSH,
            Opcode::Sub => op::SUB,
            Opcode::Add => op::ADD,
            Opcode::Mul => op::MUL,
            Opcode::Udiv | Opcode::Urem | Opcode::Sdiv | Opcode::Srem => {
                if !nonzero {
                    a.jmp_imm(op::JEQ, R2, 0, fault);
                }
                emit_division(a, dop);
                return;
            }
            _ => op::ADD,
        };
        a.alu(bop, R1, R2);
    }

    fn load_var(
        &mut self,
        pc: usize,
        s: &mut State,
        dop: Opcode,
        var: u16,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let id = u32::from(var);
        let name =
            || vars::builtin_name(id).map_or_else(|| format!("variable #{id}"), String::from);
        if let Some(size) = self.ref_var_size(dop, var) {
            let (v, prefix) = match dop {
                Opcode::Ldts => (StringVar::Thread(id), "self->"),
                Opcode::Ldls => (StringVar::Local(id), "this->"),
                _ => (StringVar::Global(id), ""),
            };
            let name = self.var_name(id, prefix);
            return self.load_ref(pc, s, v, size, rd, name);
        }
        if (dop == Opcode::Ldts
            || dop == Opcode::Ldls
            || (dop == Opcode::Ldgs && id >= vars::DIF_VAR_OTHER_UBASE))
            && self.is_string_var(dop, var)
        {
            let (v, prefix) = match dop {
                Opcode::Ldts => (StringVar::Thread(id), "self->"),
                Opcode::Ldls => (StringVar::Local(id), "this->"),
                _ => (StringVar::Global(id), ""),
            };
            let name = self.var_name(id, prefix);
            return self.load_string(pc, s, v, rd, name);
        }
        if dop == Opcode::Ldts || dop == Opcode::Ldls {
            let (loaded, prefix) = if dop == Opcode::Ldts {
                (self.ctx.emit_thread_load(&mut self.a, id), "self->")
            } else {
                (self.ctx.emit_local_load(&mut self.a, id), "this->")
            };
            loaded.map_err(|why| Untranslatable::Variable {
                pc,
                name: self.var_name(id, prefix),
                why,
            })?;
            let k = if dop == Opcode::Ldls && self.ctx.local_holds_alloca(id) {
                Kind::Alloca
            } else if dop == Opcode::Ldts {
                self.alloca_var_load(true, id).unwrap_or(Kind::Int(None))
            } else {
                Kind::Int(None)
            };
            self.put(s, rd, R0, k);
            return Ok(());
        }
        if dop == Opcode::Ldgs && id >= vars::DIF_VAR_OTHER_UBASE {
            self.ctx
                .emit_global_load(&mut self.a, id)
                .map_err(|why| Untranslatable::Variable {
                    pc,
                    name: self.var_name(id, ""),
                    why,
                })?;
            let k = self.alloca_var_load(false, id).unwrap_or(Kind::Int(None));
            self.put(s, rd, R0, k);
            return Ok(());
        }
        if dop != Opcode::Ldgs || id >= vars::DIF_VAR_OTHER_UBASE {
            let scope = match dop {
                Opcode::Ldts | Opcode::Ldtaa => "thread-local",
                Opcode::Ldls => "clause-local",
                Opcode::Ldgaa => "associative array",
                _ => "global",
            };
            return Err(Untranslatable::Variable {
                pc,
                name: format!("{scope} #{id}"),
                why: "D variables live in the consumer".into(),
            });
        }
        if (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG9).contains(&id) {
            return self.arg(pc, s, u64::from(id - vars::DIF_VAR_ARG0), rd);
        }
        let names = self.ctx.names();
        let constant = match id {
            vars::DIF_VAR_PROBEPROV => Some(names.provider.clone()),
            vars::DIF_VAR_PROBEMOD => Some(names.module.clone()),
            vars::DIF_VAR_PROBEFUNC => Some(names.function.clone()),
            vars::DIF_VAR_PROBENAME => Some(names.name.clone()),
            vars::DIF_VAR_ZONENAME => Some("global".into()),
            _ => None,
        };
        if let Some(c) = constant {
            // The interpreter keeps `strsize - 1` bytes of a built-in string (this strsize
            // counts the NUL), as `execname`'s compares do.
            let mut b = c.into_bytes();
            b.truncate(self.strsize - 1);
            self.a.mov_imm(R1, 0);
            self.put(s, rd, R1, Kind::StrConst(b));
            return Ok(());
        }
        if id == vars::DIF_VAR_EXECNAME {
            self.a.mov_imm(R1, 0);
            self.put(s, rd, R1, Kind::Execname);
            return Ok(());
        }
        if id == vars::DIF_VAR_ERRNO {
            return self.errno(pc, s, rd);
        }
        if id == vars::DIF_VAR_ID {
            return self.probe_id(pc, s, rd);
        }
        if id == vars::DIF_VAR_EPID {
            return self.epid(pc, s, rd);
        }
        let b = match id {
            vars::DIF_VAR_PID => Builtin::Pid,
            vars::DIF_VAR_TID => Builtin::Tid,
            vars::DIF_VAR_UID => Builtin::Uid,
            vars::DIF_VAR_GID => Builtin::Gid,
            vars::DIF_VAR_CPU => Builtin::Cpu,
            vars::DIF_VAR_PPID => Builtin::Ppid,
            vars::DIF_VAR_CURTHREAD => Builtin::Curthread,
            vars::DIF_VAR_TIMESTAMP => Builtin::Timestamp,
            vars::DIF_VAR_WALLTIMESTAMP => Builtin::Walltimestamp,
            vars::DIF_VAR_VTIMESTAMP => Builtin::Vtimestamp,
            vars::DIF_VAR_CALLER => Builtin::Caller,
            vars::DIF_VAR_STACKDEPTH => Builtin::Stackdepth,
            vars::DIF_VAR_UCALLER => Builtin::Ucaller,
            vars::DIF_VAR_USTACKDEPTH => Builtin::Ustackdepth,
            _ => {
                return Err(Untranslatable::Variable {
                    pc,
                    name: name(),
                    why: "not yet read at the probe".into(),
                })
            }
        };
        self.builtin(pc, s, b, rd)
    }

    fn builtin(
        &mut self,
        pc: usize,
        s: &mut State,
        b: Builtin,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        if let Builtin::Arg(n) = b {
            if let Some(size) = self.ctx.copied_string_arg(n) {
                return self.copied_string_arg(pc, s, n, size, rd);
            }
        }
        self.ctx
            .emit_builtin(&mut self.a, b)
            .map_err(|why| Untranslatable::Variable {
                pc,
                name: b.name(),
                why,
            })?;
        self.put(s, rd, R0, Kind::Int(None));
        if let (Builtin::Arg(n), Some(a)) = (b, s.args.get_mut((rd & 7) as usize)) {
            *a = (rd & 7 != 0).then_some(n);
        }
        Ok(())
    }

    /// `id` into `rd`: the probe's id, a constant of its program.
    fn probe_id(&mut self, pc: usize, s: &mut State, rd: u8) -> Result<(), Untranslatable> {
        let (v, known) = match self.ctx.names().id {
            ProbeId::Is(v) => (v, true),
            // Checked only: the program built at enable has the id.
            ProbeId::Planned => (0, false),
            ProbeId::Shared => {
                return Err(Untranslatable::Variable {
                    pc,
                    name: "id".into(),
                    why: "one program serves the probe of every process, each with its own id"
                        .into(),
                })
            }
        };
        self.a.ld_imm64(R1, u64::from(v));
        self.put(s, rd, R1, Kind::Int(known.then_some(u64::from(v))));
        Ok(())
    }

    /// `epid` into `rd`: the context's value, a fault (`DTRACEFLT_ILLOP`, as the interpreter's
    /// for a built-in without a value) when it leaves 0 (see [`Builtin::Epid`]).
    fn epid(&mut self, pc: usize, s: &mut State, rd: u8) -> Result<(), Untranslatable> {
        self.ctx
            .emit_builtin(&mut self.a, Builtin::Epid)
            .map_err(|why| Untranslatable::Variable {
                pc,
                name: "epid".into(),
                why,
            })?;
        let unknown = self.fault_site(pc, FaultKind::IllOp, FaultAddr::Zero);
        self.a.jmp_imm(op::JEQ, R0, 0, unknown);
        self.put(s, rd, R0, Kind::Int(None));
        Ok(())
    }

    /// `errno` into `rd`, as the interpreter's firing context has it: at a system call's return
    /// the negation of a result from -4095 to -1 (else 0), read from `arg0`; 0 at other probes.
    fn errno(&mut self, pc: usize, s: &mut State, rd: u8) -> Result<(), Untranslatable> {
        if !self.ctx.names().syscall_return {
            self.a.mov_imm(R1, 0);
            self.put(s, rd, R1, Kind::Int(Some(0)));
            return Ok(());
        }
        self.ctx
            .emit_builtin(&mut self.a, Builtin::Arg(0))
            .map_err(|why| Untranslatable::Variable {
                pc,
                name: "errno".into(),
                why,
            })?;
        let a = &mut self.a;
        let done = a.label();
        // r1 = -arg0; kept when r1 - 1 < 4095 (unsigned), that is r1 from 1 to 4095.
        a.mov_imm(R1, 0).alu(op::SUB, R1, R0);
        a.mov(R2, R1).alu_imm(op::ADD, R2, -1);
        a.jmp_imm(op::JLT, R2, 4095, done);
        a.mov_imm(R1, 0);
        a.bind(done);
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }

    /// `args[i]` into `rd`.
    fn arg(&mut self, pc: usize, s: &mut State, i: u64, rd: u8) -> Result<(), Untranslatable> {
        match u8::try_from(i) {
            Ok(n) if u64::from(n) < CONTEXT_ARGS => self.builtin(pc, s, Builtin::Arg(n), rd),
            // The interpreter faults on an index past the context's arguments.
            _ => {
                let f = self.fault_site(pc, FaultKind::IllOp, FaultAddr::Zero);
                self.a.ja(f);
                Ok(())
            }
        }
    }

    /// `uregs[i]` into `rd`; where the interpreter has no such register, an illegal-operation
    /// fault, as for an `args[]` index past the arguments.
    fn ureg(&mut self, pc: usize, s: &mut State, i: u64, rd: u8) -> Result<(), Untranslatable> {
        let f = self.fault_site(pc, FaultKind::IllOp, FaultAddr::Zero);
        self.ctx
            .emit_ureg(&mut self.a, i, f)
            .map_err(|why| Untranslatable::Variable {
                pc,
                name: "uregs[]".into(),
                why,
            })?;
        self.put(s, rd, R0, Kind::Int(None));
        Ok(())
    }

    /// A load from the address in DIF register `r1` into R1: kernel memory for `ld*`, user memory
    /// for `uld*`; a failed read is a fault.
    fn load(&mut self, pc: usize, dop: Opcode, r1: u8) -> Result<(), Untranslatable> {
        let Some(LoadShape { size, signed, user }) = LoadShape::of(dop) else {
            return Err(Untranslatable::Instruction {
                pc,
                what: format!("{dop:?}").to_lowercase(),
            });
        };
        let size = i32::from(size);
        let buf = self.frame.load_buf();
        let misaligned = if !user && size > 1 {
            Some(self.fault_site(pc, FaultKind::BadAlign, FaultAddr::Reg(r1 & 7)))
        } else {
            None
        };
        let fault = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Reg(r1 & 7));
        let a = &mut self.a;
        a.load(Size::DW, R3, R10, self.frame.reg(r1 & 7));
        if let Some(misaligned) = misaligned {
            // The interpreter faults on a misaligned kernel load (DTrace's bad alignment).
            a.jmp_imm(op::JSET, R3, size - 1, misaligned);
        }
        a.frame_addr(R1, i32::from(buf))
            .mov_imm(R2, size)
            .call(if user {
                helper::PROBE_READ_USER
            } else {
                helper::PROBE_READ_KERNEL
            });
        a.jmp_imm(op::JNE, R0, 0, fault);
        let sz = Size::for_bytes(size as usize).unwrap_or(Size::DW);
        a.load(sz, R1, R10, buf);
        if signed {
            a.sign_extend(R1, size as usize);
        }
        Ok(())
    }

    /// A `cmp`, `tst` or `scmp` and the branch after it, as one eBPF jump (the interpreter's
    /// condition codes: `cmp` sets N from the sign of the 64-bit difference, C from the unsigned
    /// compare, V never; `tst` sets only Z; `scmp` sets N and Z from the string compare).
    fn compare_and_branch(
        &mut self,
        pc: usize,
        s: &mut State,
        setter: Instr,
        bop: Opcode,
        target: usize,
    ) -> Result<bool, Untranslatable> {
        /// How a branch is taken: never, always, or on a jump.
        enum Take {
            Never,
            Always,
            Reg(u8),
            Zero(u8),
        }
        use Opcode::*;
        let take = match setter {
            Instr::Cmp { r1, r2 } => {
                self.alloca_compare(s, pc, r1, r2)?;
                self.get(R1, r1);
                self.get(R2, r2);
                match bop {
                    Ba => Take::Always,
                    Be => Take::Reg(op::JEQ),
                    Bne => Take::Reg(op::JNE),
                    Bgu => Take::Reg(op::JGT),
                    Bgeu => Take::Reg(op::JGE),
                    Blu => Take::Reg(op::JLT),
                    Bleu => Take::Reg(op::JLE),
                    signed => {
                        self.a.alu(op::SUB, R1, R2);
                        Take::Zero(match signed {
                            Bg => op::JSGT,
                            Bge => op::JSGE,
                            Bl => op::JSLT,
                            _ => op::JSLE,
                        })
                    }
                }
            }
            // A variable's address is never NULL (see `structvars`): the compiler's test
            // before it creates a dynamic variable.
            Instr::Tst { r1 } if matches!(s[(r1 & 7) as usize], Kind::Ref { .. }) => match bop {
                Be => Take::Never,
                Bne => Take::Always,
                _ => {
                    return Err(Untranslatable::Value {
                        pc,
                        what: "a struct variable's address compared".into(),
                    })
                }
            },
            Instr::Tst { r1 } => {
                if s[(r1 & 7) as usize] != Kind::Alloca {
                    self.int(s, pc, r1)?;
                }
                self.get(R1, r1);
                match bop {
                    Ba | Bge | Bgeu => Take::Always,
                    Bl | Blu => Take::Never,
                    Be | Ble | Bleu => Take::Zero(op::JEQ),
                    _ => Take::Zero(op::JNE),
                }
            }
            Instr::Scmp { r1, r2 } => {
                // An address compared as a string (`stringof(p) == "x"`) is read into the
                // scratch first, its address kept in the load buffer (left) or the fault
                // address's slot (right: no fault site of the compare stores there).
                // A string in alloca() memory likewise (see `alloca`).
                let operand = |t: &mut Self, r: u8, at: i16| match s[(r & 7) as usize] {
                    Kind::Int(v) if v != Some(0) => {
                        t.kernel_string(pc, s, r, at).map(|_| (Kind::Scratch, at))
                    }
                    Kind::KernelStr => t.kernel_string(pc, s, r, at).map(|_| (Kind::Scratch, at)),
                    Kind::Alloca => t.alloca_string_at(pc, r, at).map(|_| (Kind::Scratch, at)),
                    Kind::Ref { .. } => t.ref_string_at(pc, s, r, at).map(|_| (Kind::Scratch, at)),
                    ref k => Ok((k.clone(), t.frame.reg(r & 7))),
                };
                self.alloca_compare_operands(pc, s, r1, r2)?;
                let (x, y) = (
                    operand(self, r1, self.frame.load_buf())?,
                    operand(self, r2, self.frame.fault_addr_at())?,
                );
                strings::compare(
                    &mut self.a,
                    pc,
                    (&x.0, x.1),
                    (&y.0, y.1),
                    self.strsize,
                    self.frame.comm(),
                )?;
                match bop {
                    Ba | Bgeu => Take::Always,
                    Blu => Take::Never,
                    Be | Bleu => Take::Zero(op::JEQ),
                    Bne | Bgu => Take::Zero(op::JNE),
                    Bg => Take::Zero(op::JSGT),
                    Bge => Take::Zero(op::JSGE),
                    Bl => Take::Zero(op::JSLT),
                    _ => Take::Zero(op::JSLE),
                }
            }
            _ => unreachable_setter(pc)?,
        };
        let always = matches!(take, Take::Always);
        match take {
            Take::Never => {}
            Take::Always => self.branch_edge(pc, target, s, always, |a, l| {
                a.ja(l);
            })?,
            Take::Reg(j) => self.branch_edge(pc, target, s, always, |a, l| {
                a.jmp_reg(j, R1, R2, l);
            })?,
            Take::Zero(j) => self.branch_edge(pc, target, s, always, |a, l| {
                a.jmp_imm(j, R1, 0, l);
            })?,
        }
        Ok(!always)
    }
}

fn unreachable_setter<T>(pc: usize) -> Result<T, Untranslatable> {
    Err(Untranslatable::Invalid {
        pc,
        what: "not a condition-code setter".into(),
    })
}

/// `R1 = R1 / R2` or `R1 % R2` (R2 non-zero), signed ones as the interpreter's `wrapping_div` and
/// `wrapping_rem`: on magnitudes, the quotient negated when the signs differ, the remainder taking
/// the dividend's sign (no eBPF signed division needed, so older kernels run it too). Uses R3.
fn emit_division(a: &mut Asm, dop: Opcode) {
    match dop {
        Opcode::Udiv => {
            a.alu(op::DIV, R1, R2);
        }
        Opcode::Urem => {
            a.alu(op::MOD, R1, R2);
        }
        _ => {
            // R3: bit 0 = dividend negative, bit 1 = divisor negative.
            let (pos1, pos2) = (a.label(), a.label());
            a.mov_imm(R3, 0);
            a.jmp_imm(op::JSGE, R1, 0, pos1);
            a.alu_imm(op::NEG, R1, 0).alu_imm(op::OR, R3, 1);
            a.bind(pos1);
            a.jmp_imm(op::JSGE, R2, 0, pos2);
            a.alu_imm(op::NEG, R2, 0).alu_imm(op::OR, R3, 2);
            a.bind(pos2);
            let done = a.label();
            if dop == Opcode::Sdiv {
                a.alu(op::DIV, R1, R2);
                // Negate when exactly one sign was negative.
                a.jmp_imm(op::JEQ, R3, 0, done)
                    .jmp_imm(op::JEQ, R3, 3, done);
            } else {
                // The remainder takes the dividend's sign.
                a.alu(op::MOD, R1, R2);
                let neg = a.label();
                a.jmp_imm(op::JSET, R3, 1, neg).ja(done);
                a.bind(neg);
            }
            a.alu_imm(op::NEG, R1, 0);
            a.bind(done);
        }
    }
}

/// Constant folding, for `args[]` indices (`None` where the result is not computed here: a division
/// by zero faults at run time).
fn fold(dop: Opcode, x: u64, y: u64) -> Option<u64> {
    Some(match dop {
        Opcode::Or => x | y,
        Opcode::Xor => x ^ y,
        Opcode::And => x & y,
        Opcode::Sll => x.wrapping_shl(y as u32),
        Opcode::Srl => x.wrapping_shr(y as u32),
        Opcode::Sra => (x as i64).wrapping_shr(y as u32) as u64,
        Opcode::Sub => x.wrapping_sub(y),
        Opcode::Add => x.wrapping_add(y),
        Opcode::Mul => x.wrapping_mul(y),
        _ => return None,
    })
}

/// Bytes a DIF store instruction (`stb`, `sth`, `stw`, `stx`) writes.
pub(crate) fn store_size(dop: Opcode) -> u32 {
    match dop {
        Opcode::Stb => 1,
        Opcode::Sth => 2,
        Opcode::Stw => 4,
        _ => 8,
    }
}

/// What a DIF load instruction reads: its width in bytes, whether it sign-extends, and whether
/// from user memory (`uld*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoadShape {
    pub(crate) size: u8,
    pub(crate) signed: bool,
    pub(crate) user: bool,
}

impl LoadShape {
    /// The shape of `dop`, when it is a load.
    pub(crate) fn of(dop: Opcode) -> Option<LoadShape> {
        use Opcode::*;
        let (size, signed, user) = match dop {
            Ldsb => (1, true, false),
            Ldsh => (2, true, false),
            Ldsw => (4, true, false),
            Ldub => (1, false, false),
            Lduh => (2, false, false),
            Lduw => (4, false, false),
            Ldx => (8, false, false),
            Uldsb => (1, true, true),
            Uldsh => (2, true, true),
            Uldsw => (4, true, true),
            Uldub => (1, false, true),
            Ulduh => (2, false, true),
            Ulduw => (4, false, true),
            Uldx => (8, false, true),
            _ => return None,
        };
        Some(LoadShape { size, signed, user })
    }
}
