//! `inet_ntoa(addr)`, `inet_ntoa6(addr [, strict])` and `inet_ntop(af, addr)` in translated
//! code, as the interpreter's (`strfn::ntoa`, `strfn::ntoa6`): the 4 or 16 bytes at `addr`, read
//! as the interpreter reads a subroutine's argument bytes (kernel memory, no alignment asked,
//! `bpf_probe_read_kernel`; a read that fails faults `DTRACEFLT_BADADDR` at `addr`), as text:
//! a dotted quad for IPv4; for IPv6 lower-case hex groups without leading zeros, the longest
//! run of zero groups (the first of equal runs, one group long included) as `::`, and an
//! IPv4-mapped or -compatible address (five zero groups then `ffff`, or six zero groups then
//! anything but `::` and `::1`) ending in its dotted quad, alone unless `strict` (inet_ntop's
//! form, and inet_ntoa6's with a second argument that is not zero) keeps its IPv6 prefix.
//! `inet_ntop`'s family and `inet_ntoa6`'s second argument must be constants (`AF_INET`,
//! `AF_INET6`): another family faults in the interpreter, which then runs the clause.
//!
//! The bytes are read into a work area of the context's string scratch after the result's slot,
//! and the text is written left to right after them, unrolled (each number jumps into a chain
//! of digit writes at the digit it starts with: no loop for the verifier to bound, and the write
//! pointer moves by constants only); the analysis of the zero groups keeps its state in the work
//! area. The text is then copied with `bpf_probe_read_kernel_str` into a zeroed slot, cut as
//! `lltostr()`'s is.

use super::{FaultAddr, Kind, Pushed, State, Translator, Untranslatable};
use crate::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R5};
use dtrace_dif::subr::Subr;
use dtrace_dif::vm::FaultKind;

/// Linux `AF_INET`.
const AF_INET: u64 = 2;
/// Linux `AF_INET6`.
const AF_INET6: u64 = 10;

/// Work area offsets (from its start, R5): the address's bytes (up to 24: `link_ntop()`'s 20
/// too), the state of the analysis (one 8-byte word each), the text.
pub(super) const BYTES: i16 = 0;
/// Whether the address ends in an embedded IPv4 address.
const V4_TAIL: i16 = 24;
/// The first group of the longest run of zero groups (past the last group when none).
const BEST: i16 = 32;
/// The groups in that run.
const BEST_LEN: i16 = 40;
/// Whether the text is empty or ends with `:` (no `:` before the next group).
const AFTER_COLON: i16 = 48;
/// The text: at most 59 characters (`link_ntop()` of 20 bytes; IPv6 text is at most 45,
/// `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`) and a NUL.
const TEXT: i16 = 56;
/// Bytes of the work area.
const WORK: usize = TEXT as usize + 64;

/// The bytes a subroutine shows as text: the frame slot of its address argument, the slot of
/// the alloca() pointer it is where it is one, and how many.
#[derive(Clone, Copy, Debug)]
pub(super) struct ShownBytes {
    pub addr: i16,
    pub pointer: Option<i16>,
    pub n: i32,
}

/// What the address is shown as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// A dotted quad (4 bytes).
    V4,
    /// IPv6 text (16 bytes), strict or not about embedded IPv4 addresses.
    V6 { strict: bool },
}

impl Translator<'_> {
    /// `inet_ntoa()`, `inet_ntoa6()` or `inet_ntop()` (`which`) of the arguments on the tuple
    /// stack into `rd` (see the module notes).
    pub(super) fn inet(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let name = which.name();
        let named = format!("{name}()");
        let refused = super::refusal(pc, &named);
        // The address may be an alloca() pointer (see `alloca`).
        let (args, pointer) = self.args_with_alloca(pc, s)?;
        let constant = |i: usize| match s.tuple.as_deref().and_then(|t| t.get(i)) {
            Some(Pushed::Reg(r)) => match &s[(r & 7) as usize] {
                Kind::Int(v) => *v,
                _ => None,
            },
            _ => None,
        };
        let (form, addr) = match (which, args.len()) {
            (Subr::InetNtoa, 1) => (Form::V4, args[0]),
            (Subr::InetNtoa6, 1) => (Form::V6 { strict: false }, args[0]),
            (Subr::InetNtoa6, 2) => match constant(1) {
                Some(v) => (Form::V6 { strict: v != 0 }, args[0]),
                None => return Err(refused("a second argument other than a constant".into())),
            },
            (Subr::InetNtop, 2) => match constant(0) {
                Some(AF_INET) => (Form::V4, args[1]),
                Some(AF_INET6) => (Form::V6 { strict: true }, args[1]),
                _ => {
                    return Err(refused(
                        "an address family other than a constant AF_INET or AF_INET6".into(),
                    ))
                }
            },
            (_, n) => {
                return Err(Untranslatable::Invalid {
                    pc,
                    what: format!("{name}() with {n} arguments"),
                })
            }
        };
        let n = if form == Form::V4 { 4 } else { 16 };
        let shown = ShownBytes { addr, pointer, n };
        self.bytes_as_text((pc, s, rd), &named, shown, |a| match form {
            Form::V4 => emit_quad(a, BYTES),
            Form::V6 { strict } => emit_v6(a, strict),
        })
    }

    /// For subroutine `named`: the bytes `shown` names, read as the interpreter reads a
    /// subroutine's argument bytes, into the work area (see the module notes); `text` writes
    /// their text at R3 from the work area at R5 (moving R3 past it; R0-R2 free), and the text,
    /// cut to `strsize` characters, is the string in `rd`.
    pub(super) fn bytes_as_text(
        &mut self,
        (pc, s, rd): (usize, &mut State, u8),
        named: &str,
        shown: ShownBytes,
        text: impl FnOnce(&mut Asm),
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, named);
        let ShownBytes { addr, pointer, n } = shown;
        let (_, most32) = self.string_bound().map_err(refused)?;
        // Where the address to read is: its argument, or the checked address in alloca()
        // memory its pointer names (kept in the fault address's slot meanwhile).
        let src = match pointer {
            Some(at) if at == addr => {
                self.alloca_bytes_at(pc, addr, n as u32)?;
                let src = self.frame.fault_addr_at();
                self.a.store(Size::DW, R10, src, R1);
                src
            }
            Some(_) => return Err(refused("an alloca() pointer where an integer goes".into())),
            None => addr,
        };
        let width = super::string_scratch_width(self.strsize);
        let slots = 1 + WORK.div_ceil(width);
        let buf = self.frame.load_buf();
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(addr));
        let work = i32::try_from(width).map_err(|_| refused("strsize too large".into()))?;
        self.scratch_area(pc, slots, buf, width).map_err(refused)?;
        let a = &mut self.a;
        // The address's bytes into the work area.
        a.mov(R1, R0).alu_imm(op::ADD, R1, work + i32::from(BYTES));
        a.mov_imm(R2, n);
        a.load(Size::DW, R3, R10, src);
        a.call(helper::PROBE_READ_KERNEL);
        a.jmp_imm(op::JNE, R0, 0, bad);
        // R5: the work area; R3: the text's write pointer.
        a.load(Size::DW, R5, R10, buf);
        a.alu_imm(op::ADD, R5, work);
        a.mov(R3, R5).alu_imm(op::ADD, R3, i32::from(TEXT));
        text(a);
        a.store_imm(Size::B, R3, 0, 0);
        // Into the slot, cut to strsize characters.
        a.load(Size::DW, R1, R10, buf);
        a.mov(R3, R1).alu_imm(op::ADD, R3, work + i32::from(TEXT));
        a.mov_imm(R2, most32 + 2);
        a.call(helper::PROBE_READ_KERNEL_STR);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}

/// Writes `c` at R3 and moves R3 past it.
pub(super) fn put_byte(a: &mut Asm, c: u8) {
    a.store_imm(Size::B, R3, 0, i32::from(c));
    a.alu_imm(op::ADD, R3, 1);
}

/// Writes the character in R2 at R3 and moves R3 past it.
fn put_reg(a: &mut Asm) {
    a.store(Size::B, R3, 0, R2);
    a.alu_imm(op::ADD, R3, 1);
}

/// Writes the byte at work offset `at` in decimal (no leading zeros); uses R1, R2.
fn emit_decimal(a: &mut Asm, at: i16) {
    let (two, one) = (a.label(), a.label());
    a.load(Size::B, R1, R5, at);
    a.jmp_imm(op::JLT, R1, 10, one);
    a.jmp_imm(op::JLT, R1, 100, two);
    a.mov(R2, R1)
        .alu_imm(op::DIV, R2, 100)
        .alu_imm(op::ADD, R2, i32::from(b'0'));
    put_reg(a);
    a.bind(two);
    a.mov(R2, R1)
        .alu_imm(op::DIV, R2, 10)
        .alu_imm(op::MOD, R2, 10);
    a.alu_imm(op::ADD, R2, i32::from(b'0'));
    put_reg(a);
    a.bind(one);
    a.mov(R2, R1)
        .alu_imm(op::MOD, R2, 10)
        .alu_imm(op::ADD, R2, i32::from(b'0'));
    put_reg(a);
}

/// Writes the four bytes from work offset `at` as a dotted quad.
fn emit_quad(a: &mut Asm, at: i16) {
    for i in 0..4 {
        if i > 0 {
            put_byte(a, b'.');
        }
        emit_decimal(a, at + i);
    }
}

/// Loads group `g` (big-endian 16 bits) of the address into R1; uses R2.
fn load_group(a: &mut Asm, g: i16) {
    a.load(Size::B, R1, R5, BYTES + 2 * g);
    a.alu_imm(op::LSH, R1, 8);
    a.load(Size::B, R2, R5, BYTES + 2 * g + 1);
    a.alu(op::OR, R1, R2);
}

/// Writes the group in R1 in lower-case hex (no leading zeros); uses R2.
fn emit_hex(a: &mut Asm) {
    let digits: Vec<Label> = (0..4).map(|_| a.label()).collect();
    a.jmp_imm(op::JLT, R1, 0x10, digits[3]);
    a.jmp_imm(op::JLT, R1, 0x100, digits[2]);
    a.jmp_imm(op::JLT, R1, 0x1000, digits[1]);
    for (i, &l) in digits.iter().enumerate() {
        if i > 0 {
            a.bind(l);
        }
        let letter = a.label();
        let put = a.label();
        a.mov(R2, R1)
            .alu_imm(op::RSH, R2, 12 - 4 * i as i32)
            .alu_imm(op::AND, R2, 15);
        a.jmp_imm(op::JGT, R2, 9, letter);
        a.alu_imm(op::ADD, R2, i32::from(b'0')).ja(put);
        a.bind(letter);
        a.alu_imm(op::ADD, R2, i32::from(b'a') - 10);
        a.bind(put);
        put_reg(a);
    }
    a.bind(digits[0]);
}

/// Writes the 16 bytes of the work area as IPv6 text (see the module notes); uses R0-R2.
fn emit_v6(a: &mut Asm, strict: bool) {
    // Whether it ends in an IPv4 address: ten zero bytes, then ffff, or 0000 and more than 1.
    let (tail, no_tail, decided) = (a.label(), a.label(), a.label());
    a.load(Size::DW, R1, R5, BYTES);
    a.jmp_imm(op::JNE, R1, 0, no_tail);
    a.load(Size::H, R1, R5, BYTES + 8);
    a.jmp_imm(op::JNE, R1, 0, no_tail);
    a.load(Size::H, R1, R5, BYTES + 10);
    a.jmp_imm(op::JEQ, R1, 0xffff, tail);
    a.jmp_imm(op::JNE, R1, 0, no_tail);
    // The last four bytes as a big-endian number above 1: one of the first three not zero,
    // or the last above 1.
    a.load(Size::W, R1, R5, BYTES + 12);
    a.mov(R2, R1).alu_imm(op::AND, R2, 0x00ff_ffff);
    a.jmp_imm(op::JNE, R2, 0, tail);
    a.alu_imm(op::RSH, R1, 24);
    a.jmp_imm(op::JGT, R1, 1, tail);
    a.bind(no_tail);
    a.store_imm(Size::DW, R5, V4_TAIL, 0);
    a.ja(decided);
    a.bind(tail);
    a.store_imm(Size::DW, R5, V4_TAIL, 1);
    let done = a.label();
    if !strict {
        // The dotted quad is all.
        emit_quad(a, BYTES + 12);
        a.ja(done);
    }
    a.bind(decided);
    // The longest run of zero groups (six groups before an IPv4 tail): R0 the current run.
    let scanned = a.label();
    a.mov_imm(R0, 0);
    a.store_imm(Size::DW, R5, BEST, 8);
    a.store_imm(Size::DW, R5, BEST_LEN, 0);
    for g in 0..8i16 {
        if g == 6 {
            a.load(Size::DW, R1, R5, V4_TAIL);
            a.jmp_imm(op::JNE, R1, 0, scanned);
        }
        let (nonzero, next) = (a.label(), a.label());
        load_group(a, g);
        a.jmp_imm(op::JNE, R1, 0, nonzero);
        a.alu_imm(op::ADD, R0, 1);
        a.load(Size::DW, R2, R5, BEST_LEN);
        a.jmp_reg(op::JLE, R0, R2, next);
        a.store(Size::DW, R5, BEST_LEN, R0);
        a.mov_imm(R2, i32::from(g) + 1).alu(op::SUB, R2, R0);
        a.store(Size::DW, R5, BEST, R2);
        a.ja(next);
        a.bind(nonzero);
        a.mov_imm(R0, 0);
        a.bind(next);
    }
    a.bind(scanned);
    // The groups: the run's first as `::`, the rest of the run skipped, every other group in
    // hex after a `:` unless the text is empty or ends with one.
    let groups_done = a.label();
    a.store_imm(Size::DW, R5, AFTER_COLON, 1);
    for g in 0..8i16 {
        if g == 6 {
            a.load(Size::DW, R1, R5, V4_TAIL);
            a.jmp_imm(op::JNE, R1, 0, groups_done);
        }
        let (not_first, shown, colon_done, next) = (a.label(), a.label(), a.label(), a.label());
        a.load(Size::DW, R1, R5, BEST);
        a.jmp_imm(op::JNE, R1, i32::from(g), not_first);
        put_byte(a, b':');
        put_byte(a, b':');
        a.store_imm(Size::DW, R5, AFTER_COLON, 1);
        a.ja(next);
        a.bind(not_first);
        // Inside the run: after its first group and before its end.
        a.jmp_imm(op::JGE, R1, i32::from(g), shown);
        a.load(Size::DW, R2, R5, BEST_LEN);
        a.alu(op::ADD, R2, R1);
        a.jmp_imm(op::JGT, R2, i32::from(g), next);
        a.bind(shown);
        a.load(Size::DW, R1, R5, AFTER_COLON);
        a.jmp_imm(op::JNE, R1, 0, colon_done);
        put_byte(a, b':');
        a.bind(colon_done);
        load_group(a, g);
        emit_hex(a);
        a.store_imm(Size::DW, R5, AFTER_COLON, 0);
        a.bind(next);
    }
    a.bind(groups_done);
    // The IPv4 tail, after a `:` unless the text ends with one.
    a.load(Size::DW, R1, R5, V4_TAIL);
    a.jmp_imm(op::JEQ, R1, 0, done);
    let colon_done = a.label();
    a.load(Size::DW, R1, R5, AFTER_COLON);
    a.jmp_imm(op::JNE, R1, 0, colon_done);
    put_byte(a, b':');
    a.bind(colon_done);
    emit_quad(a, BYTES + 12);
    a.bind(done);
}
