//! What a compiled D program is, as the framework executes it: ECB descriptions (a probe description, an
//! optional predicate and a list of actions, each action with an optional DIF object), plus the
//! program-wide tables the consumer needs to print records (format strings, aggregation names) and the
//! options set by pragmas. This is the in-memory form of the DOF ECB, probe, action and option sections
//! (spec ch.5-6); action kinds use DTrace's `DTRACEACT_*`/`DTRACEAGG_*` numbers.
//!
//! Conventions between the compiler (producer), the framework (executes, lays out records) and the consumer
//! (decodes and prints), following DTrace:
//! - Each record-producing action yields one record; the framework computes each record's size, offset and
//!   alignment from the action's DIF return type (by-reference values copy `rtype.size` bytes, strings up to
//!   `strsize`) and publishes them as [`RecDesc`]s per EPID.
//! - `printf(fmt, a, b)` is one `Printf` action whose `arg` is the index of `fmt` in [`Program::formats`] and
//!   whose DIF object computes `a` (no object when there are no arguments), followed by one `DifExpr` action
//!   per further argument. `printa`, `system` and `freopen` use the same scheme.
//! - `@name[k1, k2] = func(v)`: one `DifExpr` action per key, then the aggregating action (`kind` an
//!   `Agg*`) with `ntuple` = number of keys, `uarg` = the aggregation's id in [`Program::aggregations`],
//!   its DIF object computing the value (none for `count()`), and `arg` carrying the quantization
//!   parameters for `lquantize`/`llquantize` as DTrace encodes them (see [`lquantize_arg`]).
//! - `trace(x)` is a `DifExpr` action; `tracemem(a, n)` a `Tracemem` action with `arg` = n.
//! - `stack(n)`/`ustack(n, strsize)`: `arg` = frames (`ustack`: `frames | strsize << 32`), no object.
//! - `print(p)` (`p` a pointer, as in DTrace for Linux) is two `LibAct` actions: the first computes
//!   `p`, with `arg` = [`print_arg`]`(i)` ([`LibAction::Print`] in the low 32 bits and, in the high
//!   32 bits, the index `i` of the pointed-to type in [`Program::print_types`]); the second (absent
//!   for `void *`) copies the object `*p` (`rtype.size` bytes), with `arg` =
//!   [`print_object_arg`]`(i)` ([`LibAction::PrintObject`]). The type index is
//!   into [`Program::print_types`]. That table plays the part of the CTF type
//!   reference DTrace keeps in its string table for `print()`: each [`PrintType`] has the name DTrace
//!   prints (typedef names kept, `"struct foo"`, `"int [3]"`, `"char *"`, `"string"`) and the resolved
//!   shape the consumer walks; members and array elements refer to other entries by index, so one
//!   program's print types form a self-contained, acyclic graph. A bit-field member refers to an
//!   integer entry `bits` wide (CTF's convention), and D's `string` is a `char [strsize]` array
//!   named `"string"`.

use crate::object::DifObject;

/// `DTRACEACT_*` and `DTRACEAGG_*` action kinds, with DTrace's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ActionKind {
    /// No action.
    None = 0,
    /// Trace the value of a D expression (`trace()`, keys, extra printf arguments).
    DifExpr = 1,
    /// `exit(status)`.
    Exit = 2,
    /// `printf()`.
    Printf = 3,
    /// `printa()`.
    Printa = 4,
    /// A library (consumer-side) action; `arg` is a [`LibAction`] number.
    LibAct = 5,
    /// `tracemem(addr, size)`.
    Tracemem = 6,
    /// `tracemem(addr, size, dynsize)`.
    TracememDynsize = 7,
    /// `ustack()`.
    Ustack = 0x0101,
    /// `jstack()`.
    Jstack = 0x0102,
    /// `usym()`.
    Usym = 0x0103,
    /// `umod()`.
    Umod = 0x0104,
    /// `uaddr()`.
    Uaddr = 0x0105,
    /// `stop()` (destructive).
    Stop = 0x0201,
    /// `raise(sig)` (destructive).
    Raise = 0x0202,
    /// `system(fmt, ...)` (destructive).
    System = 0x0203,
    /// `freopen(fmt, ...)` (destructive).
    Freopen = 0x0204,
    /// `stack()`.
    Stack = 0x0401,
    /// `sym()`.
    Sym = 0x0402,
    /// `mod()`.
    Mod = 0x0403,
    /// `breakpoint()` (destructive).
    Breakpoint = 0x0501,
    /// `panic()` (destructive).
    Panic = 0x0502,
    /// `chill(ns)` (destructive).
    Chill = 0x0503,
    /// `speculate(id)`.
    Speculate = 0x0601,
    /// `commit(id)`.
    Commit = 0x0602,
    /// `discard(id)`.
    Discard = 0x0603,
    /// `count()`.
    AggCount = 0x0701,
    /// `min()`.
    AggMin = 0x0702,
    /// `max()`.
    AggMax = 0x0703,
    /// `avg()`.
    AggAvg = 0x0704,
    /// `sum()`.
    AggSum = 0x0705,
    /// `stddev()`.
    AggStddev = 0x0706,
    /// `quantize()`.
    AggQuantize = 0x0707,
    /// `lquantize()`.
    AggLquantize = 0x0708,
    /// `llquantize()`.
    AggLlquantize = 0x0709,
}

impl ActionKind {
    /// Whether this is an aggregating function.
    pub fn is_aggregation(self) -> bool {
        (self as u16) & 0xff00 == 0x0700
    }

    /// Whether this action is destructive (needs `-w`).
    pub fn is_destructive(self) -> bool {
        matches!((self as u16) & 0xff00, 0x0200 | 0x0500)
    }
}

/// The `arg` of a `trace()` record (`ActionKind::DifExpr`) whose value is a signed integer: DTrace for
/// Linux prints it signed, and an unsigned one (arg 0) unsigned (`trace((uint32_t)-1)` is 4294967295).
pub const TRACE_SIGNED: u64 = 1;

/// The `arg` of a `trace()` record (`ActionKind::DifExpr`) whose value is a struct, union or
/// array (by reference, not a string): DTrace for Linux dumps its bytes whatever its size
/// (`trace(st)` of a one-byte struct is a one-byte dump, not a number, and a `char` array is not
/// printed as a string).
pub const TRACE_BYREF: u64 = 4;

/// The `arg` of a `trace()` record (`ActionKind::DifExpr`) whose value is a string: DTrace for Linux
/// prints it as a string whatever its size (`trace(x)` of a string under `strsize=7` is an eight-byte
/// record, printed as the string, not as a 64-bit number).
pub const TRACE_STRING: u64 = 8;

/// The `arg` of a `printf()` argument record (`ActionKind::DifExpr`) whose value is an unsigned
/// integer: DTrace for Linux's `%d` and `%i` print it unsigned (`printf("%s %d", s, (uint8_t)-1)`
/// prints 255). The first argument is recorded by the printf action itself, whose `arg` is the
/// format's index (and DOF's the format string's offset): its mark is [`PRINTF_FIRST_UNSIGNED`].
pub const PRINTF_UNSIGNED: u64 = 2;

/// The mark of a printf-like action (`printf`, `system`, `freopen`) whose first argument is an
/// unsigned integer: the action's `uarg`, and the high bit of its record's `arg` (whose low bits are
/// the format's index). The first argument is recorded by the action itself, so it cannot carry
/// [`PRINTF_UNSIGNED`] in its `arg`; `printf("%d", (uint8_t)-1)` prints 255 as DTrace for Linux does.
pub const PRINTF_FIRST_UNSIGNED: u64 = 1 << 63;

/// Consumer-side actions carried as `ActionKind::LibAct` with this number in `arg`; their DIF object (if
/// any) yields the aggregation id or option value the consumer acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum LibAction {
    /// `clear(@a)`.
    Clear = 1,
    /// `normalize(@a, n)`.
    Normalize = 2,
    /// `denormalize(@a)`.
    Denormalize = 3,
    /// `trunc(@a [, n])`.
    Trunc = 4,
    /// `setopt(name [, value])`.
    Setopt = 5,
    /// `ftruncate()`.
    Ftruncate = 6,
    /// `print(p)` (typed print): the pointer `p`.
    Print = 7,
    /// `print(p)`: the object `p` points to, the record after [`LibAction::Print`]'s (none for a
    /// pointer to void).
    PrintObject = 8,
}

/// A probe description pattern `provider:module:function:name`; an empty field matches anything, and
/// fields may hold the glob characters `*`, `?`, `[...]` and `\`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ProbeDesc {
    /// Provider.
    pub provider: String,
    /// Module.
    pub module: String,
    /// Function.
    pub function: String,
    /// Name.
    pub name: String,
}

/// One action of an ECB (`dtrace_actdesc_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDesc {
    /// What the action does.
    pub kind: ActionKind,
    /// The expression it evaluates, if any.
    pub difo: Option<DifObject>,
    /// Kind-specific argument (see the module documentation).
    pub arg: u64,
    /// Kind-specific user argument (aggregation id for aggregating actions).
    pub uarg: u64,
    /// Number of key records that precede an aggregating action.
    pub ntuple: u32,
}

/// An enabling control block description: which probes, when, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcbDesc {
    /// Probes this clause enables.
    pub probe: ProbeDesc,
    /// Predicate, if any: the actions run when it returns non-zero.
    pub predicate: Option<DifObject>,
    /// Actions in order.
    pub actions: Vec<ActionDesc>,
    /// Source line of the probe description (0 when unknown, as for a program read from DOF); errors
    /// about the description, such as one that matches no probes, name it.
    pub line: u32,
}

/// An aggregation of the program: its id (as in `ActionDesc::uarg`) and its name without the `@`
/// (empty for the anonymous `@`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregationDesc {
    /// Aggregation variable id.
    pub id: u32,
    /// Name without `@`.
    pub name: String,
}

/// A whole compiled program.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Program {
    /// Clauses in source order; one clause with several probe descriptions yields one ECB per description.
    pub ecbs: Vec<EcbDesc>,
    /// Format strings of printf-like actions, referenced by index: bytes as the source wrote them
    /// (`"\xc0"` is that byte, not UTF-8).
    pub formats: Vec<Vec<u8>>,
    /// Aggregations referenced by aggregating actions and printa/clear/trunc/normalize.
    pub aggregations: Vec<AggregationDesc>,
    /// Options set in the program (`#pragma D option name=value`); value `None` for boolean options.
    pub options: Vec<(String, Option<String>)>,
    /// The stability attributes of each ECB's statements, in the order of `ecbs` (empty when not
    /// computed, as for a program read from DOF, which does not carry them).
    pub attrs: Vec<crate::attr::EcbAttrs>,
    /// Types of `print()` values and of what they contain, referenced by index (see the module
    /// documentation).
    pub print_types: Vec<PrintType>,
    /// The program's `provider` declarations (USDT providers, for `dtrace -h` and `-G`).
    pub providers: Vec<ProviderDecl>,
    /// Bytes of its largest tuple (an associative array's or an aggregation's keys, laid out by
    /// [`crate::vm::dynvar::tuple_size`]) and of its largest dynamic variable (a thread-local or an
    /// associative array element): together, what each dynamic variable costs in `dynvarsize`
    /// (DTrace for Linux's `dt_maxtuplesize` and `dt_maxdvarsize`). 0 when not known (a program
    /// read from DOF).
    pub max_tuple_size: u32,
    /// See [`Program::max_tuple_size`].
    pub max_dvar_size: u32,
}

/// A `provider` declaration: a USDT provider's name and probes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProviderDecl {
    /// Provider name.
    pub name: String,
    /// Probes in declaration order.
    pub probes: Vec<ProbeDecl>,
    /// The stability of its provider, module, function, name and arguments set by
    /// `#pragma D attributes`: name and data stability and dependency class as DTrace numbers them
    /// (`dtrace_stability_t`, `dtrace_class_t`); `None` where not set.
    pub attrs: [Option<[u8; 3]>; 5],
}

/// One probe of a [`ProviderDecl`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeDecl {
    /// The probe's D name (`query-start` for a declared `query__start`).
    pub name: String,
    /// Native (C) argument types, as the probe's call site passes them (`char *` for a declared
    /// `string`).
    pub native: Vec<String>,
    /// Argument types as D sees them (`args[]`): the translated types after `:`, else the declared
    /// types.
    pub xlated: Vec<String>,
    /// For each of `xlated`, the index of the native argument it comes from.
    pub mapping: Vec<u8>,
}

/// One type of a `print()` value: its printed name, size and resolved shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintType {
    /// The name as DTrace prints it (`ctf_type_name`): `"int"`, `"foo_t"`, `"struct foo"`,
    /// `"struct "` for an anonymous struct, `"int [3]"`, `"void *"`.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// What it is, typedefs resolved.
    pub kind: PrintKind,
}

/// The resolved shape of a [`PrintType`] (the CTF kinds `print()` distinguishes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrintKind {
    /// An integer `bits` wide (a bit-field's width, or 8 times the size); `char` marks C's
    /// character types (`CTF_INT_CHAR`).
    Integer {
        /// Width in bits.
        bits: u16,
        /// Signed.
        signed: bool,
        /// A character type.
        char: bool,
    },
    /// A floating-point number (`float`, `double`, `long double` by size).
    Float,
    /// A pointer; `function` when it points to a function.
    Pointer {
        /// Points to a function.
        function: bool,
    },
    /// An array of `count` elements of type `element` (an index into [`Program::print_types`]).
    Array {
        /// Element type index.
        element: u32,
        /// Number of elements.
        count: u32,
    },
    /// A struct.
    Struct(Vec<PrintMember>),
    /// A union.
    Union(Vec<PrintMember>),
    /// An enum with its enumerators.
    Enum(Vec<(String, i64)>),
    /// A function (shown as a pointer of size 0, as DTrace does).
    Function,
    /// A struct or union known only by name.
    Forward,
}

/// A member of a struct or union [`PrintKind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintMember {
    /// Name; empty for an anonymous member.
    pub name: String,
    /// Type index into [`Program::print_types`].
    pub ty: u32,
    /// Offset from the start of the aggregate, in bits.
    pub offset_bits: u64,
}

/// The `arg` of a `print()` action whose value has type `index` in [`Program::print_types`].
pub fn print_arg(index: u32) -> u64 {
    LibAction::Print as u64 | (u64::from(index) << 32)
}

/// The `arg` of the record of a `print()` that holds the object of type `index` its pointer points to.
pub fn print_object_arg(index: u32) -> u64 {
    LibAction::PrintObject as u64 | (u64::from(index) << 32)
}

/// Splits a `LibAct` action's `arg` into the library action number (low 32 bits) and its operand
/// (high 32 bits: the type index of a `print()`).
pub fn split_libact_arg(arg: u64) -> (u32, u32) {
    (arg as u32, (arg >> 32) as u32)
}

/// One record of an enabled probe's trace data or of an aggregation (`dtrace_recdesc_t`), laid out by the
/// framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecDesc {
    /// The action that produced it.
    pub action: ActionKind,
    /// Size in bytes.
    pub size: u32,
    /// Offset from the start of the whole record, its 12-byte header (`dtrace_rechdr_t`: EPID, then the
    /// timestamp as high and low 32-bit halves) included, so the first data record is at offset 12 or more.
    pub offset: u32,
    /// Alignment in bytes.
    pub alignment: u16,
    /// Index into `Program::formats` plus one, or 0 when the record has no format.
    pub format: u16,
    /// The action's `arg`.
    pub arg: u64,
}

/// Encodes `lquantize(value, base, limit, step)` parameters into an action `arg` as DTrace does:
/// step in bits 63-48, number of levels in bits 47-32, base (as i32) in bits 31-0.
pub fn lquantize_arg(base: i32, levels: u16, step: u16) -> u64 {
    ((step as u64) << 48) | ((levels as u64) << 32) | (base as u32 as u64)
}

/// Encodes `llquantize(value, factor, low, high, nsteps)` parameters into an action `arg` as DTrace does:
/// factor in bits 63-48, low magnitude in 47-32, high magnitude in 31-16, steps in 15-0.
pub fn llquantize_arg(factor: u16, low: u16, high: u16, nsteps: u16) -> u64 {
    ((factor as u64) << 48) | ((low as u64) << 32) | ((high as u64) << 16) | nsteps as u64
}
