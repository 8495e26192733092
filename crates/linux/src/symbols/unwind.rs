//! User stacks of code built without frame pointers: unwinding with the call frame information of
//! the `.eh_frame` section (through `gimli`), from the registers and the bytes of the stack copied
//! at the probe. Every compiler and every C library leave `.eh_frame` in the binaries they build
//! (exceptions and `backtrace(3)` need it), so this works where the kernel's frame-pointer walk
//! stops after the first frame.
//!
//! An [`UnwindTable`] indexes the frame description entries of one ELF file once; [`unwind`] walks
//! a stack from `(pc, sp, fp)` with a lookup of the table and load bias for each PC. The walk stops at
//! the first frame whose return address is undefined (the outermost frame, `_start`), whose rules
//! need a DWARF expression, whose saved values lie outside the copied bytes, or that does not move
//! the stack pointer up: it never follows garbage. Where a PC has no entry, one frame-pointer step
//! is tried (code with frame pointers but no CFI).

use crate::symbols::elfimage::{self, Source};
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EndianArcSlice, LittleEndian, RegisterRule, UnwindContext,
    UnwindSection, X86_64,
};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Reader = EndianArcSlice<LittleEndian>;
type Fde = gimli::FrameDescriptionEntry<Reader>;

/// The call frame information of one ELF file, indexed by address.
pub struct UnwindTable {
    eh_frame: EhFrame<Reader>,
    bases: BaseAddresses,
    /// `(start, end, entry)`, sorted by start.
    fdes: Vec<(u64, u64, Fde)>,
    /// Rules already evaluated, by address.
    memo: Mutex<HashMap<u64, Option<Step>>>,
}

impl std::fmt::Debug for UnwindTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UnwindTable({} entries)", self.fdes.len())
    }
}

/// The most frame description entries indexed for one file.
const MAX_FDES: usize = 1 << 22;

impl UnwindTable {
    /// Indexes the `.eh_frame` of an ELF image (a whole file, or an image with at least the
    /// section headers, the section names and `.eh_frame` filled in). `None` without one.
    pub fn parse(data: &[u8]) -> Option<UnwindTable> {
        let file = object::File::parse(data).ok()?;
        let sec = file.section_by_name(".eh_frame")?;
        let addr = |name: &str| file.section_by_name(name).map(|s| s.address());
        Some(Self::from_eh_frame(
            sec.data().ok()?,
            sec.address(),
            addr(".text"),
            addr(".eh_frame_hdr"),
        ))
    }

    /// Indexes the bytes of an `.eh_frame` section loaded at `addr` (with the addresses of
    /// `.text` and `.eh_frame_hdr`, which some pointer encodings are relative to).
    pub fn from_eh_frame(
        data: &[u8],
        addr: u64,
        text: Option<u64>,
        hdr: Option<u64>,
    ) -> UnwindTable {
        let bytes: Arc<[u8]> = Arc::from(data);
        let mut bases = BaseAddresses::default().set_eh_frame(addr);
        if let Some(t) = text {
            bases = bases.set_text(t);
        }
        if let Some(h) = hdr {
            bases = bases.set_eh_frame_hdr(h);
        }
        let eh_frame = EhFrame::from(Reader::new(bytes, LittleEndian));
        let mut fdes = Vec::new();
        let mut entries = eh_frame.entries(&bases);
        while let Ok(Some(e)) = entries.next() {
            if let gimli::CieOrFde::Fde(partial) = e {
                if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                    fdes.push((fde.initial_address(), fde.end_address(), fde));
                    if fdes.len() >= MAX_FDES {
                        break;
                    }
                }
            }
        }
        fdes.sort_by_key(|f| f.0);
        UnwindTable {
            eh_frame,
            bases,
            fdes,
            memo: Mutex::new(HashMap::new()),
        }
    }

    /// Reads the parts of the file at `path` unwinding needs and indexes them.
    pub fn load(path: &str) -> Option<UnwindTable> {
        let f = std::fs::File::open(path).ok()?;
        let len = f.metadata().ok()?.len();
        if len > super::elf::MAX_ELF {
            return None;
        }
        let img = image_with_eh_frame(&f, len).ok()?;
        Self::parse(&img)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.fdes.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.fdes.is_empty()
    }

    /// The step at `addr` (in the file's addresses): `None` when no entry covers it. Evaluating
    /// a row runs the entry's instructions from its start, so results are remembered per
    /// address.
    pub fn rule_at(&self, addr: u64) -> Option<Step> {
        if let Ok(memo) = self.memo.lock() {
            if let Some(r) = memo.get(&addr) {
                return *r;
            }
        }
        let r = self.fde_for(addr).map(|fde| {
            let mut ctx = UnwindContext::<usize>::new();
            fde.unwind_info_for_address(&self.eh_frame, &self.bases, &mut ctx, addr)
                .map_or(Step::Stop, Step::of_row)
        });
        if let Ok(mut memo) = self.memo.lock() {
            if memo.len() >= MAX_MEMO {
                memo.clear();
            }
            memo.insert(addr, r);
        }
        r
    }

    /// Every address range an entry of the table covers, in address order, with the step
    /// [`UnwindTable::rule_at`] gives at each of its addresses ([`Step::Stop`] where the entry's
    /// instructions do not reach the address). An address in no range has no entry. Entries are
    /// taken as `rule_at` takes them: the one with the greatest start at or below the address,
    /// which ends where the next one starts.
    pub fn ranges(&self) -> Vec<(u64, u64, Step)> {
        let mut out = Vec::new();
        let mut ctx = UnwindContext::<usize>::new();
        for (i, (start, end, fde)) in self.fdes.iter().enumerate() {
            let next = self.fdes.get(i + 1).map_or(u64::MAX, |f| f.0);
            let end = (*end).min(next);
            if *start >= end {
                continue;
            }
            // The first row holding an address gives its rule: rows are walked in order, each
            // taking what earlier ones left; what no row reaches (or a row after an error) has none.
            let mut at = *start;
            if let Ok(mut rows) = fde.rows(&self.eh_frame, &self.bases, &mut ctx) {
                while let Ok(Some(row)) = rows.next_row() {
                    let (lo, hi) = (row.start_address().max(at), row.end_address().min(end));
                    if lo >= hi {
                        continue;
                    }
                    if lo > at {
                        out.push((at, lo, Step::Stop));
                    }
                    out.push((lo, hi, Step::of_row(row)));
                    at = hi;
                    if at >= end {
                        break;
                    }
                }
            }
            if at < end {
                out.push((at, end, Step::Stop));
            }
        }
        out
    }

    fn fde_for(&self, addr: u64) -> Option<&Fde> {
        let i = self.fdes.partition_point(|f| f.0 <= addr);
        let (start, end, fde) = self.fdes.get(i.checked_sub(1)?)?;
        (addr >= *start && addr < *end).then_some(fde)
    }
}

/// An image of the file with the section headers, the section name table and `.eh_frame`,
/// `.eh_frame_hdr` and `.text`'s headers filled in (small files are read whole).
fn image_with_eh_frame(file: &(impl Source + ?Sized), len: u64) -> std::io::Result<Vec<u8>> {
    let mut img = elfimage::read_image(file, len)?;
    if len < elfimage::READ_WHOLE_BELOW {
        return Ok(img);
    }
    // The sparse image has the section headers; fill the name table, then .eh_frame.
    let h = img.get(..64).unwrap_or(&[]).to_vec();
    let (Some(shoff), Some(shentsize), Some(shnum), Some(shstrndx)) = (
        elfimage::u64_at(&h, 0x28),
        elfimage::u16_at(&h, 0x3a),
        elfimage::u16_at(&h, 0x3c),
        elfimage::u16_at(&h, 0x3e),
    ) else {
        return Ok(img);
    };
    let sh = |img: &[u8], i: u64| -> Option<(u32, u64, u64)> {
        let at = usize::try_from(shoff.checked_add(i.checked_mul(shentsize)?)?).ok()?;
        let s = img.get(at..at.checked_add(usize::try_from(shentsize).ok()?)?)?;
        Some((
            elfimage::u32_at(s, 0)?,
            elfimage::u64_at(s, 0x18)?,
            elfimage::u64_at(s, 0x20)?,
        ))
    };
    let Some((_, stroff, strsize)) = sh(&img, shstrndx) else {
        return Ok(img);
    };
    elfimage::fill(file, &mut img, stroff, strsize)?;
    for i in 0..shnum {
        let Some((name, off, size)) = sh(&img, i) else {
            continue;
        };
        let at = stroff.saturating_add(u64::from(name));
        let Some(name) = usize::try_from(at)
            .ok()
            .and_then(|a| img.get(a..))
            .and_then(|b| b.split(|c| *c == 0).next())
        else {
            continue;
        };
        if name == b".eh_frame" || name == b".eh_frame_hdr" {
            elfimage::fill(file, &mut img, off, size)?;
        }
    }
    Ok(img)
}

/// What the unwind row at one address says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// How to find the caller's frame.
    Caller(Rule),
    /// The outermost frame: the return address is undefined (`_start`, a thread's first
    /// function), so the stack has no frame further out.
    Outermost,
    /// Rules beyond what we follow (expressions, other registers): the walk stops here.
    Stop,
}

impl Step {
    fn of_row(row: &gimli::UnwindTableRow<usize>) -> Step {
        match row.register(X86_64::RA) {
            RegisterRule::Undefined => Step::Outermost,
            _ => Rule::of_row(row).map_or(Step::Stop, Step::Caller),
        }
    }
}

/// How to find the caller's frame at one address, from the unwind row there: the canonical
/// frame address (CFA) is a register plus an offset; the return address is saved at the CFA plus
/// an offset; the frame pointer is kept, saved at the CFA plus an offset, or undefined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Whether the CFA is `rbp` plus the offset (else `rsp` plus it).
    pub(crate) cfa_from_fp: bool,
    pub(crate) cfa_offset: i64,
    /// The return address is saved at the CFA plus this.
    pub(crate) ra_offset: i64,
    pub(crate) fp: FpRule,
}

/// Where the caller's frame pointer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FpRule {
    /// Unchanged.
    Same,
    /// Saved at the CFA plus the offset.
    Saved(i64),
}

impl Rule {
    fn of_row(row: &gimli::UnwindTableRow<usize>) -> Option<Rule> {
        let (cfa_from_fp, cfa_offset) = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => match *register {
                X86_64::RSP => (false, *offset),
                X86_64::RBP => (true, *offset),
                _ => return None,
            },
            CfaRule::Expression(_) => return None,
        };
        let ra_offset = match row.register(X86_64::RA) {
            RegisterRule::Offset(o) => o,
            _ => return None,
        };
        // rbp is callee-saved: a row that says nothing of it (gimli's Undefined) leaves it as it
        // was, as every unwinder takes it (only an explicit save moves it).
        let fp = match row.register(X86_64::RBP) {
            RegisterRule::SameValue | RegisterRule::Undefined => FpRule::Same,
            RegisterRule::Offset(o) => FpRule::Saved(o),
            _ => return None,
        };
        Some(Rule {
            cfa_from_fp,
            cfa_offset,
            ra_offset,
            fp,
        })
    }

    /// The caller's `(pc, sp, fp)`, reading saved values from `stack`.
    fn apply(self, sp: u64, fp: u64, stack: &StackBytes<'_>) -> Option<(u64, u64, u64)> {
        let base = if self.cfa_from_fp { fp } else { sp };
        let cfa = base.wrapping_add(self.cfa_offset as u64);
        let ra = stack.u64_at(cfa.wrapping_add(self.ra_offset as u64))?;
        let new_fp = match self.fp {
            FpRule::Same => fp,
            FpRule::Saved(o) => stack.u64_at(cfa.wrapping_add(o as u64))?,
        };
        Some((ra, cfa, new_fp))
    }
}

/// The most rules remembered per file (the memo starts over when full).
const MAX_MEMO: usize = 1 << 16;

/// The user registers an unwind starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRegs {
    /// Program counter.
    pub pc: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (`rbp`).
    pub fp: u64,
}

/// Bytes of a user stack copied at the probe, starting at address `base` (the stack pointer then).
#[derive(Clone, Copy, Debug)]
pub struct StackBytes<'a> {
    /// Address of `bytes[0]`.
    pub base: u64,
    /// The bytes.
    pub bytes: &'a [u8],
}

impl StackBytes<'_> {
    fn u64_at(&self, addr: u64) -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let b = self.bytes.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// The frames of a walk, and whether it ended at the outermost frame ([`Step::Outermost`]): a
/// stack walked whole, which no other walk (the kernel's by frame pointers) rightly goes past.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unwound {
    /// The PCs, the first the probe's.
    pub frames: Vec<u64>,
    /// Whether the last frame is the outermost.
    pub outermost: bool,
}

/// Walks the stack: the PCs of up to `max` frames, the first being `regs.pc`. `table_of(pc)`
/// gives the unwind table of the file mapped at `pc` and the load bias (`pc - bias` is the
/// address in the file's terms).
pub fn unwind(
    regs: UserRegs,
    stack: StackBytes<'_>,
    max: usize,
    mut table_of: impl FnMut(u64) -> Option<(Arc<UnwindTable>, u64)>,
) -> Unwound {
    unwind_with(regs, stack, max, |pc| {
        table_of(pc).and_then(|(t, bias)| t.rule_at(pc.wrapping_sub(bias)))
    })
}

/// The walk of [`unwind`] with the step at each PC given by `rule_of(pc)`, as
/// [`UnwindTable::rule_at`] gives it (`None`: no entry, one frame-pointer step). The compiled
/// rows of `unwind_rows` walk through here too.
pub fn unwind_with(
    regs: UserRegs,
    stack: StackBytes<'_>,
    max: usize,
    mut rule_of: impl FnMut(u64) -> Option<Step>,
) -> Unwound {
    let mut out = Unwound::default();
    let (mut pc, mut sp, mut fp) = (regs.pc, regs.sp, regs.fp);
    while pc != 0 && out.frames.len() < max {
        out.frames.push(pc);
        // A return address points after the call: look up the call itself.
        let lookup = if out.frames.len() == 1 { pc } else { pc - 1 };
        let next = match rule_of(lookup) {
            Some(Step::Caller(r)) => r.apply(sp, fp, &stack),
            Some(Step::Stop) => None,
            Some(Step::Outermost) => {
                out.outermost = true;
                None
            }
            // No unwind information for this PC: one frame-pointer step.
            None => {
                let ra = fp.checked_add(8).and_then(|a| stack.u64_at(a));
                let up = stack.u64_at(fp);
                match (ra, up) {
                    (Some(ra), Some(up)) => fp.checked_add(16).map(|s| (ra, s, up)),
                    _ => None,
                }
            }
        };
        let Some((ra, new_sp, new_fp)) = next else {
            break;
        };
        if new_sp <= sp {
            break;
        }
        (pc, sp, fp) = (ra, new_sp, new_fp);
    }
    out
}

/// The fuzz entry point (the cargo-fuzz target and the test smoke): `data`'s first half is an
/// `.eh_frame` section at 0x1000, the rest the stack, whose first three words are pc, sp and fp.
pub fn fuzz_unwind(data: &[u8]) -> Vec<u64> {
    let (eh, stack) = data.split_at(data.len() / 2);
    let table = Arc::new(UnwindTable::from_eh_frame(eh, 0x1000, Some(0x2000), None));
    let word = |i: usize| {
        stack
            .get(8 * i..8 * i + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let base = word(1) & !7;
    let regs = UserRegs {
        pc: word(0) % 0x10000,
        sp: base,
        fp: word(2),
    };
    unwind(regs, StackBytes { base, bytes: stack }, 64, |_| {
        Some((table.clone(), 0))
    })
    .frames
}
