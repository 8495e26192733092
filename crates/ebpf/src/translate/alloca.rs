//! `alloca(n)` in translated code, and what reads and writes its memory: the loads and stores
//! of DIF (`ld*`, `st*`) through its pointers, `bcopy(src, dst, n)`, `copyinto(uaddr, n, dst)`,
//! `copyin(addr, n)` in a clause that allocates, its memory taken as a string
//! (`stringof(p)`, a `trace()` or `printf("%s")` of one), and objects recorded from it
//! (`trace(*p)` of a struct or an array, `tracemem(p, n)`), read as the interpreter's record
//! step reads its alloca area, with its checks.
//!
//! As the interpreter's (`dtrace_dif::vm::machine`), a clause's alloca area starts empty at
//! each clause; `alloca(n)` takes `n` zeroed bytes at the next 8-byte boundary, and faults "out
//! of scratch space" past `scratchsize`. The area lives in a per-CPU region the context provides
//! ([`ProbeContext::alloca_area`]), the bytes allocated so far in a stack slot the context zeroes
//! at each clause's start, so the pointers survive from one DIF object of the clause to the next
//! (the usual `this->p = alloca(n); bcopy(src, this->p, n); trace(stringof(this->p))`).
//!
//! `n` may be a constant or computed at run time (`alloca(arg2 & 0xff)`, `alloca(this->n)`).
//! The kernel's region is smaller than the interpreter's area (`scratchsize`, a megabyte by
//! default), and an allocation that fits `scratchsize` must never run past the region: so
//! either `scratchsize` is no larger than the region (each allocation's end checked against
//! it at run time keeps every one inside), or the clause's allocations fit the region whatever
//! their sizes ([`super::Fragment::alloca_bytes`], which the context sums over the clause): a
//! constant counts itself, a size computed at run time the most an `and` with a constant lets
//! it be. One the translator cannot bound keeps the clause in dtrace, its reason naming the two
//! ways out (a mask, a smaller `scratchsize`).
//!
//! In a clause that calls `alloca()` ([`super::ProbeContext::copyin_allocates`]) `copyin(addr, n)`
//! takes its copy from the same area, as the interpreter's does: its result is an alloca
//! pointer, later allocations come after it, and it faults as `alloca(n)` then a read into it
//! fault (out of scratch space; an invalid address at `addr`; for `n` of 0, an invalid address
//! at the empty allocation's own). The context may ask the same of a clause that does not
//! allocate (the Linux one does where the clause reads through its copies: `*(int
//! *)copyin(arg1, 4)`, a `this->` pointer to a copied structure). Elsewhere `copyin()` keeps
//! its copy in the string scratch (`copyin`).
//!
//! A DIF register holding an alloca pointer ([`Kind::Alloca`]) holds the value the interpreter
//! records for one (DTrace for Linux's: its offset in the scratch area, whose first
//! [`ALLOCA_RESERVED`] bytes are reserved, so never 0), so that value can be recorded, compared
//! and stored in a `this->` variable as it is. An access checks it as the interpreter checks its
//! own address (`ALLOCA_BASE` plus the offset): one that starts at or past what the clause
//! allocated faults with an invalid address (that address), one that runs past it with an
//! invalid size (the size); 0 (a `this->` variable not stored in this firing) faults at address
//! 0, as a NULL pointer does. `bcopy()` between two alloca pointers checks the destination,
//! then the source, and copies through the room the context gives past the region
//! ([`AllocaArea::room`]): the interpreter reads the whole source before it writes, so
//! overlapping ranges move as `memmove()` moves them. `bcopy()` whose source is the string a
//! `copyinstr()` of the same expression just made copies it, its NUL and the zeros after them
//! (the interpreter's copy is then the last scratch it allocated, zeroed past the string, and
//! scratch past it reads as zeros), as the kernel's zeroed string slot holds them.
//!
//! The size of a copy into alloca() memory (`copyinto()`'s, `bcopy()`'s from the kernel or
//! between alloca ranges) may be known only at the probe (`copyinto(arg1, arg2, p)`), or be a
//! constant the kernel's area does not hold: it is checked there as the interpreter checks it
//! ([`Access::CopySized`]: an invalid address at a destination, then a source, past what the
//! clause allocated, whatever the size; an invalid size, that size, for one that runs past it,
//! a negative one too, and for `bcopy()` first of all past its copy limit; 0 bytes copy
//! nothing), the verifier bounding the start and the size apart within the room past the area.
//! `bcopy()` from a string keeps a constant size (see `bcopystr`).
//!
//! A `self->` or global scalar may hold alloca pointers too: those a program's clauses store
//! one into ([`alloca_vars`], over every clause: the compiler keeps such a variable to them,
//! `D_ALLOCA_INCOMPAT`), which the context names ([`super::ProbeContext::var_holds_alloca`]). There a
//! pointer is kept as the interpreter keeps it, its own address of the memory (`ALLOCA_BASE`
//! plus the offset; NULL stays 0), so dtrace's interpreter reads the same value (a global
//! copied between the two, `BEGIN`'s); a load makes it an alloca pointer again, checked against
//! what the loading clause allocated as the interpreter checks the address: a pointer another
//! clause or an earlier firing kept faults with an invalid address (that address) past this
//! clause's allocations, and reads this clause's own memory below them, as in the interpreter.
//!
//! Which `this->` variables hold alloca pointers is decided per clause ([`alloca_locals`] of
//! its objects, asked back through [`ProbeContext::local_holds_alloca`]): such a variable
//! holds nothing else, and an alloca pointer goes in no other variable. Another clause of the
//! firing reads such a variable as an integer, which faults as the interpreter's read of a
//! pointer into alloca() memory it has not allocated faults (the address it reports is the
//! recorded value); one that allocates would read its own memory there in the interpreter, so
//! the context keeps a clause that allocates and reads a `this->` variable it never stores in
//! dtrace ([`foreign_local_in_allocating_clause`]). What the translator does not follow here
//! stays in dtrace with its reason: a size computed at run time it cannot bound (above), a
//! `bcopy()` from another string (a constant, `execname`, a string variable, the result of
//! another string function) of more bytes than both sides hold alike (its window, see
//! `bcopystr`: past it the interpreter reads whatever its scratch or string table holds next),
//! an alloca pointer used as a key or stored in an associative array.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3, R4, R5};
use dtrace_dif::instr::Instr;
use dtrace_dif::object::DifObject;
use dtrace_dif::opcode::Opcode;
use dtrace_dif::subr::Subr;
use dtrace_dif::vm::machine::ALLOCA_RESERVED;
use dtrace_dif::vm::subr::COPY_MAX;
use dtrace_dif::vm::{FaultKind, ALLOCA_BASE};

/// Where a clause's alloca area lives at a probe (see the module notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocaArea {
    /// The frame offset of the 8-byte word holding the bytes allocated so far in this clause,
    /// which the context zeroes at each clause's start.
    pub top_at: i16,
    /// Bytes of the region ([`ProbeContext::emit_alloca_base`]), a multiple of 8: the most a
    /// clause allocates here (the context refuses a clause whose fragments may take more, see
    /// [`super::Fragment::alloca_bytes`]).
    pub size: u32,
    /// D's `scratchsize`: the interpreter's limit, past which `alloca()` faults.
    pub limit: u64,
    /// Bytes from the region's start that the program may address, at least `size`: a
    /// `copyin()` sized at run time in a clause that allocates needs twice `size` (the
    /// verifier bounds its start and its size apart, see [`Translator::alloca_copyin`]).
    pub room: u32,
}

/// The size of an allocation (`alloca()`'s, `copyin()`'s), or another subroutine's size
/// argument (`memstr()`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Amount {
    /// A constant.
    Const(u64),
    /// Computed at the probe: at this frame offset, with the most it can be where known.
    Run(i16, Option<u64>),
}

/// How the interpreter checks an access through an alloca pointer (the order of its faults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// A kernel load (`ld*`) of this many bytes: alignment, then bounds.
    Load(u32),
    /// A store (`st*`) of this many bytes: bounds, then alignment.
    Store(u32),
    /// A copy into this many bytes (`bcopy()`, `copyinto()`): bounds.
    Copy(u32),
    /// A copy of as many bytes as the 8 at this frame offset say, known only at the probe
    /// (`bcopy()`, `copyinto()`): bounds, as [`Access::Copy`], a size past the allocation (a
    /// negative one too) faulting with an invalid size, that size; 0 bytes at an allocated
    /// address pass. Leaves R1 bounded for the verifier below the area's `size`, the size
    /// itself not (the caller bounds it, see [`Translator::alloca_sized_copy`]).
    CopySized(i16),
    /// A string read from the pointer: its start only.
    String,
}

/// The `this->` variables of `objs` (the DIF objects of a probe's clauses) that the translator
/// keeps alloca pointers in: those some object stores an alloca pointer into (the result of
/// `alloca()`, moved or offset). The translator refuses a clause that stores anything else in
/// one of them, or an alloca pointer anywhere else.
pub fn alloca_locals<'o>(objs: impl IntoIterator<Item = &'o DifObject>) -> Vec<u32> {
    let objs: Vec<&DifObject> = objs.into_iter().collect();
    // copyin() takes from the alloca area too where the clause calls alloca().
    let copyin_allocates = calls_alloca(&objs);
    alloca_locals_with(objs, copyin_allocates)
}

/// [`alloca_locals`] where `copyin()` takes from the alloca area when `copyin_allocates` (see
/// [`super::ProbeContext::copyin_allocates`]), whether or not the clause calls `alloca()`.
pub fn alloca_locals_with<'o>(
    objs: impl IntoIterator<Item = &'o DifObject>,
    copyin_allocates: bool,
) -> Vec<u32> {
    alloca_locals_in(objs, copyin_allocates, &[])
}

/// [`alloca_locals_with`] where the `self->` and global scalars `vars` (as [`alloca_vars`]
/// names them) hold alloca pointers: a `this->` variable stored from one holds them too.
pub fn alloca_locals_in<'o>(
    objs: impl IntoIterator<Item = &'o DifObject>,
    copyin_allocates: bool,
    vars: &[(bool, u32)],
) -> Vec<u32> {
    let objs: Vec<&DifObject> = objs.into_iter().collect();
    let mut locals = Vec::new();
    let mut vars = vars.to_vec();
    // Until nothing changes: an object may load a variable a later one stores.
    loop {
        let before = locals.len() + vars.len();
        scan_locals(&objs, copyin_allocates, &mut locals, &mut vars);
        if locals.len() + vars.len() == before {
            break;
        }
    }
    locals.sort_unstable();
    locals
}

/// The `self->` (`(true, id)`) and global (`(false, id)`) scalars that `objs` (the DIF objects
/// of one clause) store an alloca pointer into: the result of `alloca()` or of `copyin()`
/// (whose copy is alloca() memory wherever the clause keeps it in a variable), moved, offset,
/// or read back from a `this->` variable or from one of `known` (the variables other clauses
/// point into alloca() memory); `known` among them, sorted. A caller that has every clause of
/// a program calls it again with what it returned until nothing changes. The translator keeps
/// such a variable's pointers as the interpreter keeps them, refusing a clause that stores
/// anything else in it but 0 (see [`super::ProbeContext::var_holds_alloca`]).
pub fn alloca_vars<'o>(
    objs: impl IntoIterator<Item = &'o DifObject>,
    known: &[(bool, u32)],
) -> Vec<(bool, u32)> {
    let objs: Vec<&DifObject> = objs.into_iter().collect();
    let mut locals = Vec::new();
    let mut vars = known.to_vec();
    loop {
        let before = locals.len() + vars.len();
        scan_locals(&objs, true, &mut locals, &mut vars);
        if locals.len() + vars.len() == before {
            break;
        }
    }
    vars.sort_unstable();
    vars.dedup();
    vars
}

/// The first `this->` variable that `objs` (the DIF objects of one clause) read but never
/// store, when they call `alloca()`, by its D name: another clause of the firing may have
/// pointed it into that clause's alloca() memory, which the interpreter would read as this
/// clause's (a pointer it follows as an integer here, see [`alloca_locals`]). The context
/// keeps such a clause in dtrace.
pub fn foreign_local_in_allocating_clause<'o>(
    objs: impl IntoIterator<Item = &'o DifObject>,
) -> Option<String> {
    let objs: Vec<&DifObject> = objs.into_iter().collect();
    let allocates = calls_alloca(&objs);
    foreign_local_with(objs, allocates)
}

/// [`foreign_local_in_allocating_clause`] of a clause whose scratch is its alloca area when
/// `allocates` (it calls `alloca()`, or its `copyin()` calls take from the area).
pub fn foreign_local_with<'o>(
    objs: impl IntoIterator<Item = &'o DifObject>,
    allocates: bool,
) -> Option<String> {
    let objs: Vec<&DifObject> = objs.into_iter().collect();
    let code = || {
        objs.iter()
            .flat_map(|o| o.text.iter().map(move |w| (*o, Instr::decode(*w).ok())))
    };
    if !allocates {
        return None;
    }
    let stored: Vec<u16> = code()
        .filter_map(|(_, i)| match i {
            Some(Instr::StoreVar {
                op: Opcode::Stls,
                var,
                ..
            }) => Some(var),
            _ => None,
        })
        .collect();
    code().find_map(|(o, i)| match i {
        Some(Instr::LoadVar {
            op: Opcode::Ldls,
            var,
            ..
        }) if !stored.contains(&var) => Some(
            o.vartab
                .iter()
                .find(|v| v.id == u32::from(var))
                .and_then(|v| o.string_at(v.name as usize))
                .map(|n| format!("this->{}", String::from_utf8_lossy(n)))
                .unwrap_or_else(|| format!("this->#{var}")),
        ),
        _ => None,
    })
}

/// Whether one of `objs` calls `alloca()`.
fn calls_alloca(objs: &[&DifObject]) -> bool {
    objs.iter()
        .any(|o| o.subrs_called().any(|s| s == Subr::Alloca))
}

/// One pass of [`alloca_locals`] over `objs`, adding the `this->` variables to `locals` and
/// the `self->` and global scalars to `vars` (see [`alloca_vars`]); `copyin()` returns an
/// alloca pointer where `copyin_allocates`.
fn scan_locals(
    objs: &[&DifObject],
    copyin_allocates: bool,
    locals: &mut Vec<u32>,
    vars: &mut Vec<(bool, u32)>,
) {
    for obj in objs {
        let mut holds = [false; 8];
        let code = obj.text.iter().filter_map(|w| Instr::decode(*w).ok());
        for i in code {
            match i {
                Instr::Call { subr, rd } => {
                    holds[(rd & 7) as usize] = match Subr::from_u16(subr) {
                        Some(Subr::Alloca) => true,
                        Some(Subr::Copyin) => copyin_allocates,
                        _ => false,
                    };
                }
                Instr::Mov { r1, rd } => holds[(rd & 7) as usize] = holds[(r1 & 7) as usize],
                Instr::Alu { op, r1, r2, rd } => {
                    // A pointer offset by an integer (the difference of two is an integer).
                    let (x, y) = (holds[(r1 & 7) as usize], holds[(r2 & 7) as usize]);
                    holds[(rd & 7) as usize] = match op {
                        Opcode::Add => x || y,
                        Opcode::Sub => x && !y,
                        _ => false,
                    };
                }
                Instr::LoadVar {
                    op: Opcode::Ldls,
                    var,
                    rd,
                } => holds[(rd & 7) as usize] = locals.contains(&u32::from(var)),
                Instr::LoadVar {
                    op: op @ (Opcode::Ldts | Opcode::Ldgs),
                    var,
                    rd,
                } => {
                    holds[(rd & 7) as usize] = vars.contains(&(op == Opcode::Ldts, u32::from(var)));
                }
                Instr::StoreVar {
                    op: Opcode::Stls,
                    var,
                    rs,
                } if holds[(rs & 7) as usize] && !locals.contains(&u32::from(var)) => {
                    locals.push(u32::from(var));
                }
                Instr::StoreVar {
                    op: op @ (Opcode::Stts | Opcode::Stgs),
                    var,
                    rs,
                } if holds[(rs & 7) as usize]
                    && !vars.contains(&(op == Opcode::Stts, u32::from(var))) =>
                {
                    vars.push((op == Opcode::Stts, u32::from(var)));
                }
                other => {
                    if let Some(rd) = written(&other) {
                        holds[(rd & 7) as usize] = false;
                    }
                }
            }
        }
    }
}

/// The register an instruction writes, for [`alloca_locals`].
fn written(i: &Instr) -> Option<u8> {
    match *i {
        Instr::Not { rd, .. }
        | Instr::Setx { rd, .. }
        | Instr::Sets { rd, .. }
        | Instr::LoadVar { rd, .. }
        | Instr::LoadArray { rd, .. }
        | Instr::Load { rd, .. } => Some(rd),
        _ => None,
    }
}

impl Translator<'_> {
    /// The context's alloca area, or why there is none.
    fn area(&self, pc: usize, what: &str) -> Result<super::AllocaArea, Untranslatable> {
        self.ctx.alloca_area().map_err(|why| Untranslatable::Value {
            pc,
            what: format!("{what}: {why}"),
        })
    }

    /// The constant pushed at position `i` of the tuple stack (a subroutine's argument), if any.
    fn pushed_const(&self, s: &State, i: usize) -> Option<u64> {
        match s.tuple.as_ref()?.get(i)? {
            Pushed::Reg(r) => match s[(r & 7) as usize] {
                Kind::Int(v) => v,
                _ => None,
            },
            _ => None,
        }
    }

    /// The frame offset of the argument pushed at position `i` and its kind (a register's, or
    /// an integer kept in its tuple slot).
    pub(super) fn pushed_arg(
        &self,
        pc: usize,
        s: &State,
        i: usize,
    ) -> Result<(i16, Kind), Untranslatable> {
        match s.tuple.as_ref().and_then(|t| t.get(i)) {
            Some(Pushed::Reg(r)) => Ok((self.frame.reg(*r), s[(r & 7) as usize].clone())),
            Some(Pushed::Saved) => Ok((self.frame.tuple(i), Kind::Int(None))),
            // An alloca pointer whose register was written after it was pushed (see `put`).
            Some(Pushed::Str(Kind::Alloca)) => Ok((self.frame.tuple(i), Kind::Alloca)),
            // A copyin()'s copy, likewise (`memstr()`).
            Some(Pushed::Str(Kind::Buffer(n))) => Ok((self.frame.tuple(i), Kind::Buffer(*n))),
            _ => Err(Untranslatable::Value {
                pc,
                what: "subroutine arguments the translator does not follow".into(),
            }),
        }
    }

    /// The size pushed at position `i` of the tuple stack (`alloca()`'s, `copyin()`'s,
    /// `memstr()`'s).
    pub(super) fn pushed_amount(
        &self,
        pc: usize,
        s: &State,
        i: usize,
    ) -> Result<Amount, Untranslatable> {
        match s.tuple.as_ref().and_then(|t| t.get(i)) {
            Some(Pushed::Reg(r)) => match self.int(s, pc, *r)? {
                Some(n) => Ok(Amount::Const(n)),
                None => Ok(Amount::Run(self.frame.reg(*r), s.most_of((r & 7) as usize))),
            },
            Some(Pushed::Saved) => Ok(Amount::Run(self.frame.tuple(i), None)),
            _ => Err(Untranslatable::Value {
                pc,
                what: "subroutine arguments the translator does not follow".into(),
            }),
        }
    }

    /// `alloca(n)` into `rd` (see the module notes). Returns whether control falls through (a
    /// size past `scratchsize` always faults).
    pub(super) fn alloca(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<bool, Untranslatable> {
        if s.tuple.as_ref().map(Vec::len) != Some(1) {
            return Err(Untranslatable::Value {
                pc,
                what: "alloca(): arguments the translator does not follow".into(),
            });
        }
        let n = self.pushed_amount(pc, s, 0)?;
        if !self.take(pc, "alloca()", n, true)? {
            return Ok(false);
        }
        self.a.alu_imm(op::ADD, R1, ALLOCA_RESERVED as i32);
        self.put(s, rd, R1, Kind::Alloca);
        Ok(true)
    }

    /// `copyin(addr, size)` into `rd` in a clause that also calls `alloca()`
    /// ([`super::ProbeContext::copyin_allocates`]), as the interpreter's: `size` bytes of the
    /// alloca area taken as `alloca(size)` takes them ("out of scratch space" past `scratchsize`),
    /// then `size` bytes of the user memory of the thread that fired the probe read into them,
    /// a read that fails faulting with an invalid address at `addr`, and a size of 0 with an
    /// invalid address at the empty allocation's own (nothing was allocated there). Its value
    /// is an alloca pointer. Returns whether control falls through.
    pub(super) fn alloca_copyin(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<bool, Untranslatable> {
        let refused = super::refusal(pc, "copyin() in a clause that calls alloca()");
        self.ctx.reads_user_memory().map_err(refused)?;
        if s.tuple.as_ref().map(Vec::len) != Some(2) {
            return Err(Untranslatable::Invalid {
                pc,
                what: "copyin() without its two arguments".into(),
            });
        }
        let (src_at, src) = self.pushed_arg(pc, s, 0)?;
        if !matches!(src, Kind::Int(_)) {
            return Err(refused(
                "a source address the translator does not follow".into(),
            ));
        }
        let n = self.pushed_amount(pc, s, 1)?;
        let area = self.area(pc, "copyin()")?;
        if let Amount::Run(..) = n {
            if area.room < 2 * area.size {
                return Err(refused(format!(
                    "a size computed at run time: the kernel's area has no room past its {} \
                     bytes for the verifier",
                    area.size
                )));
            }
        }
        if !self.take(pc, "copyin()", n, false)? {
            return Ok(false);
        }
        // The start's offset, kept at the fault address's slot (the empty allocation's
        // address when the size is 0).
        let start = self.frame.fault_addr_at();
        let buf = self.frame.load_buf();
        self.a.store(Size::DW, R10, start, R1);
        let sized = match n {
            Amount::Const(0) => None,
            Amount::Const(n) => {
                self.a.mov_imm(R2, n as i32);
                Some(None)
            }
            Amount::Run(at, _) => Some(Some(at)),
        };
        let some = self.a.label();
        if let Some(Some(at)) = sized {
            self.a.load(Size::DW, R2, R10, at);
            self.a.jmp_imm(op::JNE, R2, 0, some);
        }
        if sized != Some(None) {
            let empty = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(start));
            let a = &mut self.a;
            a.ld_imm64(R2, ALLOCA_BASE).alu(op::ADD, R2, R1);
            a.store(Size::DW, R10, start, R2);
            a.ja(empty);
        }
        if sized.is_none() {
            return Ok(false);
        }
        self.a.bind(some);
        if let Some(Some(_)) = sized {
            // Never taken (`take` checked both): the verifier's bounds of the copy.
            let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
            let a = &mut self.a;
            a.jmp_imm(op::JGT, R2, area.size as i32, no_scratch);
            a.jmp_imm(op::JGT, R1, area.size as i32, no_scratch);
        }
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(src_at));
        let a = &mut self.a;
        a.load(Size::DW, R3, R10, buf).alu(op::ADD, R1, R3);
        a.load(Size::DW, R3, R10, src_at);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JNE, R0, 0, bad);
        a.load(Size::DW, R1, R10, start);
        a.alu_imm(op::ADD, R1, ALLOCA_RESERVED as i32);
        self.put(s, rd, R1, Kind::Alloca);
        Ok(true)
    }

    /// Emits the interpreter's allocation of `n` bytes of the alloca area for `what` (zeroed
    /// when `zero`): the start at the next 8-byte boundary, "out of scratch space" (at 0) when
    /// its end is past `scratchsize`; leaves the start's offset in the area in R1 and keeps the
    /// area's address in the load buffer. A clause's allocations stay within the kernel's area
    /// either because `scratchsize` is no larger, or because the bytes they may take, counted
    /// in [`super::Fragment::alloca_bytes`], fit it (the context refuses a clause whose
    /// fragments may take more): a size computed at run time counts the most it can be, so
    /// one that may be more than the area stays in dtrace. Returns whether control falls
    /// through.
    fn take(
        &mut self,
        pc: usize,
        what: &str,
        n: Amount,
        zero: bool,
    ) -> Result<bool, Untranslatable> {
        let area = self.area(pc, what)?;
        let size = u64::from(area.size);
        let counted = area.limit > size;
        let bound = area.limit.min(size);
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        match n {
            Amount::Const(n) => {
                if n > bound {
                    if n <= area.limit {
                        return Err(Untranslatable::Value {
                            pc,
                            what: format!("{what} of more than the kernel's {size} bytes"),
                        });
                    }
                    // Past scratchsize whatever was allocated before: the interpreter's fault.
                    self.a.ja(no_scratch);
                    return Ok(false);
                }
                let padded = n.next_multiple_of(8);
                if counted {
                    self.alloca_bytes += padded;
                }
                let buf = self.alloca_base(pc, what, no_scratch)?;
                let a = &mut self.a;
                // R1: where the bytes start (the top, rounded up to 8).
                a.load(Size::DW, R1, R10, area.top_at);
                a.alu_imm(op::ADD, R1, 7).alu_imm(op::AND, R1, -8);
                a.jmp_imm(op::JGT, R1, (bound - n) as i32, no_scratch);
                // Never taken (the start is a multiple of 8 within the region): the
                // verifier's bound for the zeroing below.
                a.jmp_imm(op::JGT, R1, (size - padded) as i32, no_scratch);
                a.mov(R2, R1).alu_imm(op::ADD, R2, n as i32);
                a.store(Size::DW, R10, area.top_at, R2);
                if zero {
                    a.load(Size::DW, R3, R10, buf).alu(op::ADD, R3, R1);
                    for w in (0..padded).step_by(8) {
                        a.store_imm(Size::DW, R3, w as i16, 0);
                    }
                } else if n % 8 != 0 {
                    // The bytes up to the next 8-byte boundary, which the caller does not write:
                    // zeros in the interpreter's area, as the next allocation's start skips them.
                    a.load(Size::DW, R3, R10, buf).alu(op::ADD, R3, R1);
                    a.store_imm(Size::DW, R3, (padded - 8) as i16, 0);
                }
            }
            Amount::Run(at, most) => {
                let limit = i32::try_from(area.limit).map_err(|_| Untranslatable::Value {
                    pc,
                    what: format!("{what} of a size computed at run time: scratchsize too large"),
                })?;
                if counted {
                    let most =
                        most.filter(|&m| m <= size)
                            .ok_or_else(|| Untranslatable::Value {
                                pc,
                                what: format!(
                            "{what} of a size computed at run time that may be more than the \
                             kernel's {size} bytes (scratchsize is {}: a size masked to at most \
                             {size}, or a scratchsize of at most {size}, runs at the probe)",
                            area.limit
                        ),
                            })?;
                    self.alloca_bytes += most.next_multiple_of(8);
                }
                let buf = self.alloca_base(pc, what, no_scratch)?;
                let a = &mut self.a;
                a.load(Size::DW, R2, R10, at);
                a.jmp_imm(op::JGT, R2, limit, no_scratch);
                a.load(Size::DW, R1, R10, area.top_at);
                a.alu_imm(op::ADD, R1, 7).alu_imm(op::AND, R1, -8);
                a.mov(R3, R1).alu(op::ADD, R3, R2);
                a.jmp_imm(op::JGT, R3, limit, no_scratch);
                // Never taken (see above): the verifier's bound for the zeroing below.
                a.jmp_imm(op::JGT, R3, area.size as i32, no_scratch);
                a.store(Size::DW, R10, area.top_at, R3);
                if zero {
                    // The words from the start up to the end (R4 the next), one at a time.
                    let (word, zeroed) = (a.label(), a.label());
                    a.mov(R4, R1);
                    a.bind(word);
                    a.jmp_reg(op::JGE, R4, R3, zeroed);
                    a.jmp_imm(op::JGT, R4, (size - 8) as i32, zeroed);
                    a.load(Size::DW, R5, R10, buf).alu(op::ADD, R5, R4);
                    a.store_imm(Size::DW, R5, 0, 0);
                    a.alu_imm(op::ADD, R4, 8).ja(word);
                    a.bind(zeroed);
                } else {
                    // The word the end falls in, when it is not on a boundary (see above): the
                    // caller writes the bytes before the end.
                    let aligned = a.label();
                    a.mov(R4, R3).alu_imm(op::AND, R4, 7);
                    a.jmp_imm(op::JEQ, R4, 0, aligned);
                    a.mov(R4, R3).alu_imm(op::AND, R4, -8);
                    // Never taken (the end is within the region): the verifier's bound.
                    a.jmp_imm(op::JGT, R4, (size - 8) as i32, aligned);
                    a.load(Size::DW, R5, R10, buf).alu(op::ADD, R5, R4);
                    a.store_imm(Size::DW, R5, 0, 0);
                    a.bind(aligned);
                }
            }
        }
        Ok(true)
    }

    /// Emits code that keeps the alloca region's address in the load buffer (whose frame
    /// offset it returns), jumping to `no_scratch` when the context could not have it; `what`
    /// names the use in a refusal.
    fn alloca_base(
        &mut self,
        pc: usize,
        what: &str,
        no_scratch: crate::insn::Label,
    ) -> Result<i16, Untranslatable> {
        self.ctx
            .emit_alloca_base(&mut self.a)
            .map_err(|why| Untranslatable::Value {
                pc,
                what: format!("{what}: {why}"),
            })?;
        let buf = self.frame.load_buf();
        self.a.jmp_imm(op::JEQ, R0, 0, no_scratch);
        self.a.store(Size::DW, R10, buf, R0);
        Ok(buf)
    }

    /// Emits the interpreter's checks of an access through the alloca pointer at `fp + ptr_at`
    /// (see [`Access`]), for DIF instruction `pc`; leaves the address of the bytes in the area
    /// in R1, and their offset there in R4. For [`Access::String`], R5 holds the bytes
    /// allocated after that offset.
    pub(super) fn alloca_access(
        &mut self,
        pc: usize,
        ptr_at: i16,
        access: Access,
    ) -> Result<(), Untranslatable> {
        let area = self.area(pc, "alloca() memory")?;
        let len = match access {
            Access::Load(n) | Access::Store(n) | Access::Copy(n) => n,
            Access::String | Access::CopySized(_) => 1,
        };
        if len == 0 || len > area.size {
            return Err(Untranslatable::Value {
                pc,
                what: format!(
                    "an access of {len} bytes of alloca() memory (the kernel's area holds {})",
                    area.size
                ),
            });
        }
        let buf = self.frame.load_buf();
        let at = self.frame.fault_addr_at();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let null = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero);
        // The address is computed into its slot before the jump (not `Stored`, which says a
        // user string is copied in).
        let computed = FaultAddr::Frame(self.frame.fault_addr_at());
        let bad_addr = self.fault_site(pc, FaultKind::BadAddr, computed);
        let bad_size = self.fault_site(pc, FaultKind::BadSize, computed);
        let aligned = matches!(access, Access::Load(n) | Access::Store(n) if n > 1);
        let bad_align = if aligned {
            Some(self.fault_site(pc, FaultKind::BadAlign, computed))
        } else {
            None
        };
        self.alloca_base(pc, "alloca() memory", no_scratch)?;
        let a = &mut self.a;
        // The interpreter's address of the pointer (R3, in its alloca region) at the fault
        // address's slot, for the faults that report it.
        let (addr_fault, size_fault, align_fault) = (a.label(), a.label(), a.label());
        a.load(Size::DW, R3, R10, ptr_at);
        if let (Access::Load(n), true) = (access, aligned) {
            a.jmp_imm(op::JSET, R3, n as i32 - 1, align_fault);
        }
        a.jmp_imm(op::JEQ, R3, 0, null);
        a.mov(R4, R3).alu_imm(op::SUB, R4, ALLOCA_RESERVED as i32);
        a.load(Size::DW, R5, R10, area.top_at);
        a.jmp_reg(op::JGE, R4, R5, addr_fault);
        if access == Access::String {
            a.alu(op::SUB, R5, R4);
        } else if let Access::CopySized(n_at) = access {
            // The bytes allocated from the start (above 0), against the size as unsigned: a
            // negative size runs past them too, with no sum to wrap.
            a.alu(op::SUB, R5, R4);
            a.load(Size::DW, R0, R10, n_at);
            a.jmp_reg(op::JGT, R0, R5, size_fault);
        } else {
            a.mov(R0, R4).alu_imm(op::ADD, R0, len as i32);
            a.jmp_reg(op::JGT, R0, R5, size_fault);
        }
        if let (Access::Store(n), true) = (access, aligned) {
            a.jmp_imm(op::JSET, R3, n as i32 - 1, align_fault);
        }
        // Never taken (the clause allocates within the region): the verifier's bound.
        a.jmp_imm(op::JGT, R4, (area.size - len) as i32, size_fault);
        a.load(Size::DW, R1, R10, buf).alu(op::ADD, R1, R4);
        let done = a.label();
        a.ja(done);
        a.bind(addr_fault);
        a.ld_imm64(R2, ALLOCA_BASE.wrapping_sub(ALLOCA_RESERVED));
        a.alu(op::ADD, R2, R3).store(Size::DW, R10, at, R2);
        a.ja(bad_addr);
        a.bind(size_fault);
        match access {
            Access::CopySized(n_at) => a.load(Size::DW, R2, R10, n_at),
            _ => a.mov_imm(R2, len as i32),
        };
        a.store(Size::DW, R10, at, R2);
        a.ja(bad_size);
        if let Some(bad_align) = bad_align {
            a.bind(align_fault);
            a.ld_imm64(R2, ALLOCA_BASE.wrapping_sub(ALLOCA_RESERVED));
            a.alu(op::ADD, R2, R3).store(Size::DW, R10, at, R2);
            a.ja(bad_align);
        }
        a.bind(done);
        Ok(())
    }

    /// A kernel load (`ld*`) through the alloca pointer in `r1`, its value in R1.
    pub(super) fn alloca_load(
        &mut self,
        pc: usize,
        dop: Opcode,
        r1: u8,
    ) -> Result<(), Untranslatable> {
        let (size, signed) = match super::LoadShape::of(dop) {
            Some(l) if !l.user => (u32::from(l.size), l.signed),
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: "a user-memory load through an alloca() pointer".into(),
                })
            }
        };
        self.alloca_access(pc, self.frame.reg(r1 & 7), Access::Load(size))?;
        let sz = Size::for_bytes(size as usize).unwrap_or(Size::DW);
        self.a.load(sz, R1, R1, 0);
        if signed {
            self.a.sign_extend(R1, size as usize);
        }
        Ok(())
    }

    /// A store (`st*`) of `r1` through the alloca pointer in `rd`.
    pub(super) fn alloca_store(
        &mut self,
        pc: usize,
        s: &State,
        dop: Opcode,
        r1: u8,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let size = super::store_size(dop);
        self.int(s, pc, r1)?;
        self.alloca_access(pc, self.frame.reg(rd & 7), Access::Store(size))?;
        let sz = Size::for_bytes(size as usize).unwrap_or(Size::DW);
        self.get(R2, r1);
        self.a.store(sz, R1, 0, R2);
        Ok(())
    }

    /// `bcopy(src, dst, n)`: `n` (a constant) bytes of kernel memory or alloca memory at `src`
    /// into the alloca memory at `dst`, as the interpreter's: `dst` checked first, then `src`
    /// (alloca memory as any access, a failed kernel read faulting at `src`). The interpreter
    /// reads the whole source before it writes, so overlapping alloca ranges copy as
    /// `memmove()` does: through the room past the area ([`AllocaArea::room`]).
    pub(super) fn bcopy(&mut self, pc: usize, s: &State) -> Result<(), Untranslatable> {
        let refused = |what: &str| Untranslatable::Value {
            pc,
            what: format!("bcopy(): {what}"),
        };
        if s.tuple.as_ref().map(Vec::len) != Some(3) {
            return Err(refused("arguments the translator does not follow"));
        }
        // A string (a constant, a copy in the scratch): the interpreter reads the bytes after
        // it as its string table or scratch holds them, which the kernel's copies do not.
        let string = "a string as its source (the interpreter reads what follows it in its own \
                      scratch or string table)";
        let first = s.tuple.as_ref().and_then(|t| t.first());
        if first == Some(&Pushed::Str(Kind::Scratch)) && self.fresh_copyinstr(pc) {
            let (dst_at, dst) = self
                .pushed_arg(pc, s, 1)
                .map_err(|_| refused("a destination other than alloca() memory"))?;
            let n = self
                .pushed_const(s, 2)
                .filter(|&n| n > 0)
                .ok_or_else(|| refused("a size other than a constant above 0"))?;
            if dst != Kind::Alloca {
                return Err(refused("a destination other than alloca() memory"));
            }
            // The string's address was kept in the tuple slot of its position.
            return self.string_copy(pc, self.frame.tuple(0), dst_at, n);
        }
        // Another string: the bytes of it both sides hold alike (see `bcopystr`).
        if let Some(Pushed::Str(k)) = first.filter(|p| **p != Pushed::Str(Kind::Alloca)) {
            return self.string_bcopy(pc, s, k.clone());
        }
        let (src_at, src) = self.pushed_arg(pc, s, 0).map_err(|_| refused(string))?;
        let (dst_at, dst) = self
            .pushed_arg(pc, s, 1)
            .map_err(|_| refused("a destination other than alloca() memory"))?;
        let (n_at, _) = self.pushed_arg(pc, s, 2)?;
        let amount = self.pushed_amount(pc, s, 2)?;
        let moved = src == Kind::Alloca;
        match (src, dst) {
            (Kind::Int(_) | Kind::Alloca, Kind::Alloca) => {}
            (_, Kind::Alloca) => return Err(refused(string)),
            _ => return Err(refused("a destination other than alloca() memory")),
        }
        let area = self.area(pc, "bcopy()")?;
        // A constant the kernel's area holds (with the room a move passes through) is checked
        // as such; any other size at the probe.
        let n = match amount {
            Amount::Const(n)
                if n > 0
                    && n <= u64::from(area.size)
                    && (!moved || u64::from(area.size) + n <= u64::from(area.room)) =>
            {
                n
            }
            _ => return self.bcopy_sized(pc, (src_at, moved), dst_at, n_at),
        };
        if moved {
            return self.alloca_move(pc, src_at, dst_at, n);
        }
        self.alloca_access(pc, dst_at, Access::Copy(n as u32))?;
        let fault = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(src_at));
        let a = &mut self.a;
        a.mov_imm(R2, n as i32).load(Size::DW, R3, R10, src_at);
        a.call(helper::PROBE_READ_KERNEL);
        a.jmp_imm(op::JNE, R0, 0, fault);
        Ok(())
    }

    /// Whether the string pushed first for the call at `pc` (`bcopy()`) is what a
    /// `copyinstr()` of this object returned, with nothing between that call and `pc` that takes scratch in the
    /// interpreter and no branch into that stretch: the interpreter's copy is then the last it
    /// allocated, so the bytes after the string read as zeros (its allocation's, zeroed, then
    /// scratch not allocated), as the kernel's zeroed string slot holds them.
    fn fresh_copyinstr(&self, pc: usize) -> bool {
        // What may come between: pushes, integers, alloca() pointers loaded (none takes
        // scratch in the interpreter).
        let harmless = |i: Instr, r: Option<u8>| match i {
            Instr::Nop | Instr::Pushtr { .. } | Instr::Pushtv { .. } | Instr::Popts => true,
            Instr::Setx { rd, .. }
            | Instr::Mov { rd, .. }
            | Instr::Alu { rd, .. }
            | Instr::Not { rd, .. } => Some(rd) != r,
            Instr::LoadVar {
                op: Opcode::Ldls,
                var,
                rd,
            } => Some(rd) != r && self.ctx.local_holds_alloca(u32::from(var)),
            _ => false,
        };
        // The call's pushes back to their `flushts`: the first one pushed the string.
        let mut at = pc;
        let mut first = None;
        loop {
            let Some(prev) = at.checked_sub(1) else {
                return false;
            };
            at = prev;
            match self.code[at] {
                Instr::Flushts => break,
                Instr::Pushtr { r2, rs, .. } => first = Some((r2, rs)),
                i if harmless(i, None) => {}
                _ => return false,
            }
        }
        let Some((0, r)) = first else {
            return false;
        };
        while let Some(prev) = at.checked_sub(1) {
            at = prev;
            match self.code[at] {
                Instr::Call { subr, rd } if rd == r => {
                    let into = self.code.iter().any(|i| {
                        matches!(i, Instr::Branch { label, .. }
                            if (at + 1..=pc).contains(&(*label as usize)))
                    });
                    return Subr::from_u16(subr) == Some(Subr::Copyinstr) && !into;
                }
                i if harmless(i, Some(r)) => {}
                _ => return false,
            }
        }
        false
    }

    /// `bcopy(src, dst, n)` of the string a `copyinstr()` just made (see
    /// [`Translator::fresh_copyinstr`]) at `fp + src_at` into the alloca memory at `fp +
    /// dst_at`: the string, its NUL and zeros after them, at most a string's storage.
    fn string_copy(
        &mut self,
        pc: usize,
        src_at: i16,
        dst_at: i16,
        n: u64,
    ) -> Result<(), Untranslatable> {
        let n = u32::try_from(n)
            .ok()
            .filter(|&n| n as usize <= self.strsize)
            .ok_or_else(|| Untranslatable::Value {
                pc,
                what: format!(
                    "bcopy(): {n} bytes of a string, more than a string's {} bytes",
                    self.strsize
                ),
            })?;
        self.alloca_access(pc, dst_at, Access::Copy(n))?;
        let a = &mut self.a;
        a.mov_imm(R2, n as i32).load(Size::DW, R3, R10, src_at);
        a.call(helper::PROBE_READ_KERNEL);
        Ok(())
    }

    /// `bcopy(src, dst, n)` of as many bytes as the 8 at `fp + n_at` say, known only at the
    /// probe, from the kernel memory or (`src.1`) the alloca memory at `fp + src.0` into the
    /// alloca memory at `fp + dst_at`, as the interpreter's: a size past its copy limit (a
    /// negative one too) faults with an invalid size (that size) before anything is checked,
    /// then the destination and the source are checked as [`Translator::alloca_sized_copy`]
    /// checks them, and a move between alloca ranges passes through the room past the area as
    /// [`Translator::alloca_move`]'s.
    fn bcopy_sized(
        &mut self,
        pc: usize,
        src: (i16, bool),
        dst_at: i16,
        n_at: i16,
    ) -> Result<(), Untranslatable> {
        let (src_at, moved) = src;
        let area = self.sized_area(pc, "bcopy()")?;
        let too_large = self.fault_site(pc, FaultKind::BadSize, FaultAddr::Frame(n_at));
        self.a.load(Size::DW, R0, R10, n_at);
        self.a.jmp_imm(op::JGT, R0, COPY_MAX as i32, too_large);
        if !moved {
            return self.alloca_sized_copy(
                pc,
                "bcopy()",
                (src_at, helper::PROBE_READ_KERNEL),
                dst_at,
                n_at,
            );
        }
        self.alloca_access(pc, dst_at, Access::CopySized(n_at))?;
        self.alloca_access(pc, src_at, Access::CopySized(n_at))?;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let a = &mut self.a;
        let size = area.size as i32;
        // The source (R1) past the area first, then from there to the destination; never
        // taken (checked above), the verifier's bounds of the sizes and the destination.
        a.mov(R3, R1).load(Size::DW, R2, R10, n_at);
        a.jmp_imm(op::JGT, R2, size, no_scratch);
        a.load(Size::DW, R1, R10, buf).alu_imm(op::ADD, R1, size);
        a.call(helper::PROBE_READ_KERNEL);
        a.load(Size::DW, R4, R10, dst_at);
        a.alu_imm(op::SUB, R4, ALLOCA_RESERVED as i32);
        a.jmp_imm(op::JGT, R4, size - 1, no_scratch);
        a.load(Size::DW, R1, R10, buf).alu(op::ADD, R1, R4);
        a.load(Size::DW, R3, R10, buf).alu_imm(op::ADD, R3, size);
        a.load(Size::DW, R2, R10, n_at);
        a.jmp_imm(op::JGT, R2, size, no_scratch);
        a.call(helper::PROBE_READ_KERNEL);
        Ok(())
    }

    /// The context's alloca area for a copy into it of a size known only at the probe (`what`
    /// names it): the verifier sees the start and the size bounded apart, each by the area's
    /// size, so the room past the area must hold a second area ([`AllocaArea::room`]).
    fn sized_area(&self, pc: usize, what: &str) -> Result<AllocaArea, Untranslatable> {
        let area = self.area(pc, what)?;
        if u64::from(area.room) < 2 * u64::from(area.size) {
            return Err(Untranslatable::Value {
                pc,
                what: format!(
                    "{what}: a size other than a constant the kernel's area holds: the area has \
                     no room past its {} bytes for the verifier",
                    area.size
                ),
            });
        }
        Ok(area)
    }

    /// `bcopy(src, dst, n)` between the alloca pointers at `fp + src_at` and `fp + dst_at` (see
    /// [`Translator::bcopy`]).
    fn alloca_move(
        &mut self,
        pc: usize,
        src_at: i16,
        dst_at: i16,
        n: u64,
    ) -> Result<(), Untranslatable> {
        let area = self.area(pc, "bcopy()")?;
        let n = u32::try_from(n)
            .ok()
            .filter(|&n| {
                n <= area.size && u64::from(area.size) + u64::from(n) <= u64::from(area.room)
            })
            .ok_or_else(|| Untranslatable::Value {
                pc,
                what: format!(
                    "bcopy(): a copy of {n} bytes of alloca() memory (the kernel's area holds {}, \
                     with room for {} more)",
                    area.size,
                    area.room.saturating_sub(area.size)
                ),
            })?;
        self.alloca_access(pc, dst_at, Access::Copy(n))?;
        self.alloca_access(pc, src_at, Access::Copy(n))?;
        let buf = self.frame.load_buf();
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let a = &mut self.a;
        // The source (R1) past the area first, then from there to the destination.
        let (size, n32) = (area.size as i32, n as i32);
        a.mov(R3, R1).mov_imm(R2, n32);
        a.load(Size::DW, R1, R10, buf).alu_imm(op::ADD, R1, size);
        a.call(helper::PROBE_READ_KERNEL);
        a.load(Size::DW, R4, R10, dst_at);
        a.alu_imm(op::SUB, R4, ALLOCA_RESERVED as i32);
        // Never taken (checked above): the verifier's bound.
        a.jmp_imm(op::JGT, R4, size - n32, no_scratch);
        a.load(Size::DW, R1, R10, buf).alu(op::ADD, R1, R4);
        a.load(Size::DW, R3, R10, buf).alu_imm(op::ADD, R3, size);
        a.mov_imm(R2, n32);
        a.call(helper::PROBE_READ_KERNEL);
        Ok(())
    }

    /// `copyinto(uaddr, n, dst)`: `n` bytes of the user memory of the thread that fired the
    /// probe at `uaddr` into the alloca memory at `dst`, as the interpreter's: `dst` checked
    /// first, a failed read faulting at `uaddr`. A constant `n` the kernel's area holds is
    /// checked as such; any other (0, negative, larger, or computed at run time) is checked at
    /// the probe ([`Translator::alloca_sized_copy`]).
    pub(super) fn copyinto(&mut self, pc: usize, s: &State) -> Result<(), Untranslatable> {
        let refused = |what: String| Untranslatable::Value {
            pc,
            what: format!("copyinto(): {what}"),
        };
        self.ctx.reads_user_memory().map_err(refused)?;
        if s.tuple.as_ref().map(Vec::len) != Some(3) {
            return Err(refused("arguments the translator does not follow".into()));
        }
        let (src_at, src) = self.pushed_arg(pc, s, 0)?;
        let (dst_at, dst) = self.pushed_arg(pc, s, 2)?;
        let (n_at, _) = self.pushed_arg(pc, s, 1)?;
        let n = self.pushed_amount(pc, s, 1)?;
        if !matches!((src, dst), (Kind::Int(_), Kind::Alloca)) {
            return Err(refused(
                "a destination other than alloca() memory, or a source address the \
                 translator does not follow"
                    .into(),
            ));
        }
        let area = self.area(pc, "copyinto()")?;
        let n = match n {
            Amount::Const(n) if n > 0 && n <= u64::from(area.size) => n as u32,
            _ => {
                return self.alloca_sized_copy(
                    pc,
                    "copyinto()",
                    (src_at, helper::PROBE_READ_USER),
                    dst_at,
                    n_at,
                )
            }
        };
        self.alloca_access(pc, dst_at, Access::Copy(n))?;
        let fault = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(src_at));
        let a = &mut self.a;
        a.mov_imm(R2, n as i32).load(Size::DW, R3, R10, src_at);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(op::JNE, R0, 0, fault);
        Ok(())
    }

    /// A copy (`copyinto()`'s, `bcopy()`'s, named by `what`) of as many bytes as the 8 at
    /// `fp + n_at` say, known only at the probe, from the address at `fp + src.0` (read with
    /// helper `src.1`: user or kernel memory) into the alloca memory at `fp + dst_at`, as the
    /// interpreter's: the destination checked first ([`Access::CopySized`]: past what the
    /// clause allocated, or negative, an invalid size, that size), then the bytes read, a
    /// failed read faulting with an invalid address at the source; 0 bytes read nothing (see
    /// [`Translator::sized_area`] for the room it needs).
    pub(super) fn alloca_sized_copy(
        &mut self,
        pc: usize,
        what: &str,
        src: (i16, i32),
        dst_at: i16,
        n_at: i16,
    ) -> Result<(), Untranslatable> {
        let area = self.sized_area(pc, what)?;
        let (src_at, read) = src;
        self.alloca_access(pc, dst_at, Access::CopySized(n_at))?;
        let no_scratch = self.fault_site(pc, FaultKind::NoScratch, FaultAddr::Zero);
        let fault = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(src_at));
        let a = &mut self.a;
        a.load(Size::DW, R2, R10, n_at);
        // Never taken (the size is within what the clause allocated): the verifier's bound.
        a.jmp_imm(op::JGT, R2, area.size as i32, no_scratch);
        a.load(Size::DW, R3, R10, src_at);
        a.call(read);
        a.jmp_imm(op::JNE, R0, 0, fault);
        Ok(())
    }

    /// The `n` bytes of an object recorded by reference (`trace(*this->p)`, `tracemem(this->p,
    /// n)`) at the alloca pointer in DIF register `r`, as the interpreter reads them when the
    /// action records them (its checks, faults at `pc`: the expression's last instruction): the
    /// bytes' address in the area replaces the pointer in `r`'s slot.
    pub(super) fn alloca_object(&mut self, pc: usize, r: u8, n: u32) -> Result<(), Untranslatable> {
        let reg = self.frame.reg(r & 7);
        self.alloca_access(pc, reg, Access::Copy(n))?;
        self.a.store(Size::DW, R10, reg, R1);
        Ok(())
    }

    /// The string at the alloca pointer in `r`, copied into a fresh string scratch slot (at
    /// most `strsize` characters, and no byte past what the clause allocated, as the
    /// interpreter reads it): its address in R1. Keeps the slot's address in the fault
    /// address's slot meanwhile.
    pub(super) fn alloca_string(&mut self, pc: usize, r: u8) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "a string in alloca() memory");
        let (_, most32) = self.string_bound().map_err(refused)?;
        let at = self.frame.fault_addr_at();
        // The slot first, then the checks (R1, R5).
        self.string_slot(pc, at, true).map_err(refused)?;
        self.alloca_access(pc, self.frame.reg(r & 7), Access::String)?;
        let a = &mut self.a;
        let short = a.label();
        a.jmp_imm(op::JLE, R5, most32, short);
        a.mov_imm(R5, most32);
        a.bind(short);
        a.mov(R3, R1).mov(R2, R5).alu_imm(op::ADD, R2, 1);
        a.load(Size::DW, R1, R10, at);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, at);
        Ok(())
    }
}

impl Translator<'_> {
    /// The kind of `r1 op r2` when an alloca pointer is among them: a pointer offset by an
    /// integer (`p + i`, `i + p`, `p - i`) is one, the difference of two is an integer; `None`
    /// when neither is a pointer (an integer operation) or for any other operation (which
    /// `int()` then refuses).
    pub(super) fn alloca_arith(&self, s: &State, dop: Opcode, r1: u8, r2: u8) -> Option<Kind> {
        let (x, y) = (&s[(r1 & 7) as usize], &s[(r2 & 7) as usize]);
        match (dop, x, y) {
            (Opcode::Add, Kind::Alloca, Kind::Int(_))
            | (Opcode::Add, Kind::Int(_), Kind::Alloca)
            | (Opcode::Sub, Kind::Alloca, Kind::Int(_)) => Some(Kind::Alloca),
            (Opcode::Sub, Kind::Alloca, Kind::Alloca) => Some(Kind::Int(None)),
            _ => None,
        }
    }

    /// Checks that `cmp r1, r2` compares what the kernel compares as the interpreter does:
    /// integers, two alloca pointers, or one and the constant 0 (NULL).
    pub(super) fn alloca_compare(
        &self,
        s: &State,
        pc: usize,
        r1: u8,
        r2: u8,
    ) -> Result<(), Untranslatable> {
        let (x, y) = (&s[(r1 & 7) as usize], &s[(r2 & 7) as usize]);
        match (x, y) {
            (Kind::Alloca, Kind::Alloca)
            | (Kind::Alloca, Kind::Int(Some(0)))
            | (Kind::Int(Some(0)), Kind::Alloca) => Ok(()),
            _ => {
                self.int(s, pc, r1)?;
                self.int(s, pc, r2).map(|_| ())
            }
        }
    }

    /// Checks a store of `rs` in clause-local `var` (`op` `stls`) or another scalar: an alloca
    /// pointer goes only in a `this->` variable that holds them, or a `self->` or global scalar
    /// that holds them ([`super::ProbeContext::var_holds_alloca`]); either holds nothing else
    /// but 0.
    pub(super) fn alloca_local_store(
        &self,
        pc: usize,
        s: &State,
        dop: Opcode,
        var: u32,
        rs: u8,
    ) -> Result<(), Untranslatable> {
        let name = || match dop {
            Opcode::Stts => self.var_name(var, "self->"),
            Opcode::Stls => self.var_name(var, "this->"),
            _ => self.var_name(var, ""),
        };
        let holds = match dop {
            Opcode::Stls => self.ctx.local_holds_alloca(var),
            Opcode::Stts => self.ctx.var_holds_alloca(true, var),
            Opcode::Stgs => self.ctx.var_holds_alloca(false, var),
            _ => false,
        };
        match (&s[(rs & 7) as usize], holds) {
            (Kind::Alloca, true) | (Kind::Int(Some(0)), true) => Ok(()),
            // A copy in the string scratch says so first (its copy in the alloca area serves).
            (_, true) => Err(self.int(s, pc, rs).err().unwrap_or(Untranslatable::Value {
                pc,
                what: format!("{} holds alloca() pointers and another value", name()),
            })),
            (Kind::Alloca, false) => Err(Untranslatable::Value {
                pc,
                what: format!(
                    "an alloca() pointer stored in {} (a this-> variable, or a self-> or global \
                     scalar kept in the kernel, keeps one at the probe)",
                    name()
                ),
            }),
            _ => self.int(s, pc, rs).map(|_| ()),
        }
    }

    /// The frame offset of the value a store of `rs` in the `self->` or global scalar `var`
    /// (`op` `stts` or `stgs`) stores: `rs`'s slot, or, for an alloca pointer, the load
    /// buffer, where it is made the interpreter's own address of the memory
    /// (`ALLOCA_BASE` plus its offset in the area; NULL stays 0), so another clause, a later
    /// firing or dtrace's interpreter (a global copied out of the kernel) reads it as the
    /// interpreter would (see [`Translator::alloca_var_load`]).
    pub(super) fn alloca_var_value(&mut self, s: &State, dop: Opcode, var: u32, rs: u8) -> i16 {
        let reg = self.frame.reg(rs & 7);
        let thread = dop == Opcode::Stts;
        if !matches!(dop, Opcode::Stts | Opcode::Stgs)
            || s[(rs & 7) as usize] != Kind::Alloca
            || !self.ctx.var_holds_alloca(thread, var)
        {
            return reg;
        }
        let buf = self.frame.load_buf();
        let a = &mut self.a;
        let null = a.label();
        a.load(Size::DW, R1, R10, reg);
        a.jmp_imm(op::JEQ, R1, 0, null);
        a.ld_imm64(R2, ALLOCA_BASE.wrapping_sub(ALLOCA_RESERVED));
        a.alu(op::ADD, R1, R2);
        a.bind(null);
        a.store(Size::DW, R10, buf, R1);
        buf
    }

    /// After a load of the `self->` or global scalar `var` (`thread`) into r0: when it holds
    /// alloca pointers, makes the interpreter's address the value it records (its offset past
    /// the area's reserved bytes; 0 stays NULL) and returns [`Kind::Alloca`]: an access through
    /// it is checked against what this clause allocated, as the interpreter checks an address
    /// another clause or firing left (a pointer into memory this clause has not allocated
    /// faults with an invalid address, that address).
    pub(super) fn alloca_var_load(&mut self, thread: bool, var: u32) -> Option<Kind> {
        if !self.ctx.var_holds_alloca(thread, var) {
            return None;
        }
        let a = &mut self.a;
        let null = a.label();
        a.jmp_imm(op::JEQ, R0, 0, null);
        a.ld_imm64(R1, ALLOCA_BASE.wrapping_sub(ALLOCA_RESERVED));
        a.alu(op::SUB, R0, R1);
        a.bind(null);
        Some(Kind::Alloca)
    }

    /// The frame offsets of the integers pushed on the tuple stack (a subroutine's arguments),
    /// as `int_args`, one of which may be an alloca pointer: its offset too, if one is.
    pub(super) fn args_with_alloca(
        &self,
        pc: usize,
        s: &State,
    ) -> Result<(Vec<i16>, Option<i16>), Untranslatable> {
        let n = s.tuple.as_ref().map_or(0, Vec::len);
        let mut pointer = None;
        let mut at = Vec::with_capacity(n);
        for i in 0..n {
            match self.pushed_arg(pc, s, i) {
                Ok((o, Kind::Alloca)) if pointer.is_none() => {
                    pointer = Some(o);
                    at.push(o);
                }
                Ok((o, Kind::Int(_))) => at.push(o),
                // Anything else: `int_args`' refusal.
                _ => return self.int_args(pc, s).map(|a| (a, None)),
            }
        }
        Ok((at, pointer))
    }

    /// Checks a read of `n` bytes through the alloca pointer at `fp + ptr_at` as the
    /// interpreter's reads check it (bounds only), leaving their address in R1.
    pub(super) fn alloca_bytes_at(
        &mut self,
        pc: usize,
        ptr_at: i16,
        n: u32,
    ) -> Result<(), Untranslatable> {
        self.alloca_access(pc, ptr_at, Access::Copy(n))
    }

    /// [`Translator::alloca_string`], its address kept at `fp + at` (a compare's operand, a
    /// tuple slot).
    pub(super) fn alloca_string_at(
        &mut self,
        pc: usize,
        r: u8,
        at: i16,
    ) -> Result<(), Untranslatable> {
        self.alloca_string(pc, r)?;
        self.a.store(Size::DW, R10, at, R1);
        Ok(())
    }

    /// Refuses a string compare whose right operand is in alloca() memory when its left one is
    /// read into the scratch too: reading the right one takes the load buffer, where the left
    /// one's address is kept.
    pub(super) fn alloca_compare_operands(
        &self,
        pc: usize,
        s: &State,
        r1: u8,
        r2: u8,
    ) -> Result<(), Untranslatable> {
        let (x, y) = (&s[(r1 & 7) as usize], &s[(r2 & 7) as usize]);
        match (x, y) {
            (Kind::Alloca, Kind::Alloca) | (Kind::Int(_), Kind::Alloca)
                if *x != Kind::Int(Some(0)) =>
            {
                Err(Untranslatable::Value {
                    pc,
                    what: "a string compare of two strings read at the probe, the right one in \
                           alloca() memory"
                        .into(),
                })
            }
            _ => Ok(()),
        }
    }
}
