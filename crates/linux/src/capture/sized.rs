//! Copies sized at the probe and user pointer hops: `copyin(arg1, arg2)` takes as many bytes as a
//! probe argument says (at most the copy's size, the program's `scratchsize`, so the verifier sees
//! a bounded size), and `copyinstr(this->argv[1])` after `this->argv = (uint64_t *)copyin(arg1,
//! 32)` reads its address from user memory at the probe. This module checks such requests, emits
//! the eBPF shared by the capture program and the return-time retry program (the bounded length;
//! the hops are evaluated by [`super::address`]), and tells the decoder how many bytes a sized copy
//! holds.
//!
//! Where the kernel has ring-buffer dynptrs ([`SizedCopies::AtProbe`](super::layout::SizedCopies)) the probe sizes each
//! record: before reserving it, the program computes each sized copy's length and where its bytes
//! go after the record's fixed part ([`emit_tail_plan`]), reserves that much
//! (`bpf_ringbuf_reserve_dynptr`) and reads each copy whole into its place ([`emit_tail_copy`]),
//! so the bytes are those of the instant the probe fired however long the copy. The verifier only
//! lets a helper write a region of constant size: a copy of `n` bytes is read into a region of
//! the least power of two at least `n` (8 at least), which may run past the copy's own bytes into
//! those of the copies after it (read later) or past them (the record reserves that much more at
//! its end): one helper call per copy, and no record longer than twice its bytes. Records whose
//! probe has no such copy are reserved and written as before, at their constant size.
//! Elsewhere (`SizedCopies::Capped`) a sized copy holds at most
//! [`SIZED_COPY_CAP`](super::spec::SIZED_COPY_CAP) bytes in its slot, and a longer read is
//! served from the process's memory at delivery (`provider::deliver`).

use super::layout::{hdr, CopySlot, RecordLayout, NARGS, TAIL_AT, TAIL_LEN};
use super::spec::{CopyRequest, MAX_COPIES, MAX_USER_DEREFS};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R5, R7};

/// The stack slot of the record's dynptr (16 bytes), from its reservation to its submission.
/// Below the stack the record's body uses ([`super::codegen::BODY_STACK_END`]), in the kernel
/// clauses' frame, dead once the record is reserved (`capture::kagg`).
pub(super) const DYNPTR: i16 = super::codegen::BODY_STACK_END - 16;
/// The user address of the copy being read.
const TAIL_SRC: i16 = DYNPTR - 8;
/// The length copy `i` takes (bounded by its size).
const fn tail_len(i: usize) -> i16 {
    TAIL_SRC - 8 - 16 * i as i16
}
/// The offset in the record of copy `i`'s bytes.
const fn tail_at(i: usize) -> i16 {
    tail_len(i) - 8
}
/// The lowest stack slot of a record's body and its copies: the kernel clauses' handover flag,
/// read after the record is reserved, is below it (`kagg::HANDOVER`).
pub(super) const LOWEST_SLOT: i16 = tail_at(MAX_COPIES - 1);
const _: () = assert!(DYNPTR % 8 == 0);

/// The least region a copy of up to `size` bytes is read into: powers of two from 8.
fn classes(size: usize) -> impl Iterator<Item = i32> {
    let top = size.max(8).next_power_of_two();
    (3..=top.trailing_zeros()).map(|b| 1i32 << b)
}

/// Before the record is reserved: for each tail slot of `layout` (in order, `i` its copy's
/// index), `length` leaves the length the firing asks for in r0 (it may use r0-r5 and r8, and
/// call helpers); it is bounded by the copy's size and kept, and each copy's place after the
/// fixed part (of `fixed` bytes) is laid out. Leaves the record's whole size in r2 (the fixed
/// part, the copies' bytes rounded to 8 each, and room for the last region read past them).
pub(super) fn emit_tail_plan(
    a: &mut Asm,
    layout: &RecordLayout,
    fixed: usize,
    mut length: impl FnMut(&mut Asm, usize, &CopySlot) -> crate::error::Result<()>,
) -> crate::error::Result<()> {
    let tails = || layout.copies.iter().enumerate().filter(|(_, s)| s.tail);
    for (i, slot) in tails() {
        length(a, i, slot)?;
        let fits = a.label();
        a.jmp_imm(op::JLE, R0, slot.size as i32, fits)
            .mov_imm(R0, slot.size as i32);
        a.bind(fits).store(Size::DW, R10, tail_len(i), R0);
    }
    // r1: where the next copy's bytes go; r4: the end of the regions read so far.
    a.mov_imm(R1, fixed as i32).mov(R4, R1);
    for (i, _) in tails() {
        a.store(Size::DW, R10, tail_at(i), R1);
        // r3: the region, the least power of two (8 at least) holding the length in r2.
        a.load(Size::DW, R2, R10, tail_len(i));
        a.mov(R3, R2).alu_imm(op::SUB, R3, 1);
        for sh in [1, 2, 4, 8, 16] {
            a.mov(R5, R3).alu_imm(op::RSH, R5, sh).alu(op::OR, R3, R5);
        }
        a.alu_imm(op::ADD, R3, 1);
        let (big, far) = (a.label(), a.label());
        a.jmp_imm(op::JGE, R3, 8, big).mov_imm(R3, 8);
        a.bind(big).alu(op::ADD, R3, R1);
        a.jmp_reg(op::JLE, R3, R4, far).mov(R4, R3);
        a.bind(far);
        // The copy's bytes, rounded up to 8.
        a.alu_imm(op::ADD, R2, 7).alu_imm(op::AND, R2, -8);
        a.alu(op::ADD, R1, R2);
    }
    let done = a.label();
    a.mov(R2, R1);
    a.jmp_reg(op::JGE, R2, R4, done).mov(R2, R4);
    a.bind(done);
    Ok(())
}

/// Reserves a record of the size in r2 through the record's dynptr (ring `ring`), its fixed part
/// of `fixed` bytes in r7; to `failed` when the ring has no room (the dynptr released there).
pub(super) fn emit_tail_reserve(a: &mut Asm, ring: i32, fixed: usize, failed: Label) {
    let have = a.label();
    a.ld_map_fd(R1, ring)
        .mov_imm(R3, 0)
        .frame_addr(R4, i32::from(DYNPTR))
        .call(helper::RINGBUF_RESERVE_DYNPTR);
    emit_dynptr(a);
    a.mov_imm(R2, 0)
        .mov_imm(R3, fixed as i32)
        .call(helper::DYNPTR_DATA);
    a.jmp_imm(op::JNE, R0, 0, have);
    // No room (a failed reservation leaves a null dynptr, released all the same).
    emit_dynptr(a);
    a.mov_imm(R2, 0).call(helper::RINGBUF_DISCARD_DYNPTR);
    a.ja(failed);
    a.bind(have).mov(R7, R0);
}

/// r1 = the record's dynptr.
fn emit_dynptr(a: &mut Asm) {
    a.frame_addr(R1, i32::from(DYNPTR));
}

/// Submits the record reserved by [`emit_tail_reserve`] with the flags in r2.
pub(super) fn emit_tail_submit(a: &mut Asm) {
    emit_dynptr(a);
    a.call(helper::RINGBUF_SUBMIT_DYNPTR);
}

/// Writes where tail slot `slot` (copy `i`) holds its bytes, and a result of 0, in the record
/// at r7 (before the copy's address is known: a copy with no address keeps them). Uses r1.
pub(super) fn emit_tail_slot(a: &mut Asm, i: usize, slot: &CopySlot) -> crate::error::Result<()> {
    let so = off16(slot.offset)?;
    a.load(Size::DW, R1, R10, tail_at(i));
    a.store(Size::W, R7, so + TAIL_AT as i16, R1);
    a.load(Size::DW, R1, R10, tail_len(i));
    a.store(Size::W, R7, so + TAIL_LEN as i16, R1);
    a.store_imm(Size::DW, R7, so, 0);
    Ok(())
}

/// Reads tail slot `slot`'s bytes (copy `i`) from the user address in r3 into their place in the
/// record, and its result (0, or the read's negative errno) into the slot. Leaves the result in
/// r0. Uses r0-r5.
pub(super) fn emit_tail_copy(a: &mut Asm, i: usize, slot: &CopySlot) -> crate::error::Result<()> {
    let so = off16(slot.offset)?;
    let done = a.label();
    a.store(Size::DW, R10, TAIL_SRC, R3);
    a.mov_imm(R0, 0);
    a.load(Size::DW, R2, R10, tail_len(i));
    a.jmp_imm(op::JEQ, R2, 0, done);
    let sizes: Vec<i32> = classes(slot.size).collect();
    let labels: Vec<Label> = sizes.iter().map(|_| a.label()).collect();
    for (&size, &l) in sizes.iter().zip(&labels) {
        a.jmp_imm(op::JLE, R2, size, l);
    }
    // Longer than the copy's size: the plan bounded it, so never.
    a.mov_imm(R0, -libc::E2BIG).ja(done);
    for (&size, &l) in sizes.iter().zip(&labels) {
        let have = a.label();
        a.bind(l);
        emit_dynptr(a);
        a.load(Size::DW, R2, R10, tail_at(i));
        a.mov_imm(R3, size).call(helper::DYNPTR_DATA);
        a.jmp_imm(op::JNE, R0, 0, have);
        // The region runs past the record: the plan reserved it, so never.
        a.mov_imm(R0, -libc::E2BIG).ja(done);
        a.bind(have).mov(R1, R0);
        let bounded = a.label();
        a.load(Size::DW, R2, R10, tail_len(i));
        a.jmp_imm(op::JLE, R2, size, bounded).mov_imm(R2, size);
        a.bind(bounded).load(Size::DW, R3, R10, TAIL_SRC);
        a.call(helper::PROBE_READ_USER).ja(done);
    }
    a.bind(done).store(Size::DW, R7, so, R0);
    Ok(())
}

fn off16(v: usize) -> crate::error::Result<i16> {
    i16::try_from(v).map_err(|_| crate::error::LinuxError::Asm(format!("copy offset {v}")))
}

/// Why a request with user hops or a probe-time length cannot be captured, if it cannot.
pub(super) fn check_request(c: &CopyRequest) -> Result<(), String> {
    if c.addr.user_derefs.len() > MAX_USER_DEREFS {
        return Err(format!("more than {MAX_USER_DEREFS} user pointer hops"));
    }
    if !c.addr.user_derefs.is_empty() && !c.kind.is_user() {
        return Err("a kernel copy at an address read from user memory".into());
    }
    if let Some(n) = c.size_arg {
        if n >= NARGS {
            return Err(format!(
                "copy sized by arg{n}; probes carry arg0 to arg{}",
                NARGS - 1
            ));
        }
        if !c.kind.is_user() {
            return Err("a kernel copy sized at the probe".into());
        }
    }
    Ok(())
}

/// Turns the argument value in r2 into the helper's size for `slot`: at most the slot's capacity
/// for bytes; for strings at most `capacity - 1` characters and the NUL (as `copyinstr(addr,
/// maxlen)` reads at most `maxlen` characters).
pub(super) fn emit_bounded_size(a: &mut Asm, slot: &CopySlot) {
    let fits = a.label();
    if slot.kind.is_string() {
        let most = slot.size.saturating_sub(1) as i32;
        a.jmp_imm(op::JLE, R2, most, fits).mov_imm(R2, most);
        a.bind(fits).alu_imm(op::ADD, R2, 1);
    } else {
        let most = slot.size as i32;
        a.jmp_imm(op::JLE, R2, most, fits).mov_imm(R2, most);
        a.bind(fits);
    }
}

/// Offset in a record's header of the argument sizing `slot` (the retry program writes the length
/// it used there too, so both kinds of record decode alike).
pub(super) fn size_arg_offset(n: usize) -> usize {
    hdr::ARGS + 8 * n
}

/// The length a sized copy asked for (the argument's value in the record), if the slot is sized.
pub(super) fn requested(b: &[u8], slot: &CopySlot) -> Option<u64> {
    let n = slot.size_arg?;
    let at = size_arg_offset(n);
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
}

/// Bytes of a successful user-bytes copy held in its slot: the capacity, or for a sized copy the
/// length asked for when smaller.
pub(super) fn held_bytes(slot: &CopySlot, requested: Option<u64>) -> usize {
    match requested {
        Some(r) => usize::try_from(r).unwrap_or(usize::MAX).min(slot.size),
        None => slot.size,
    }
}

/// Where a tail slot's bytes are in record `b`: `(offset, length)`, the length at most the
/// copy's size.
pub(super) fn tail_range(b: &[u8], slot: &CopySlot) -> Option<(usize, usize)> {
    let word = |at: usize| {
        b.get(at..at + 4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_le_bytes)
    };
    let at = word(slot.offset + TAIL_AT)? as usize;
    let len = word(slot.offset + TAIL_LEN)? as usize;
    (len <= slot.size).then_some((at, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::spec::{AddrExpr, MemKind};

    #[test]
    fn requests_are_checked() {
        let mut c = CopyRequest::new(AddrExpr::arg(1), MemKind::UserBytes, 64);
        assert!(check_request(&c).is_ok());
        c.size_arg = Some(2);
        assert!(check_request(&c).is_ok());
        c.size_arg = Some(NARGS);
        assert!(check_request(&c).is_err());
        c.size_arg = Some(2);
        c.kind = MemKind::KernelBytes;
        assert!(check_request(&c).is_err());
        let mut c = CopyRequest::new(AddrExpr::arg(1), MemKind::UserString, 64);
        c.addr.user_derefs = vec![0; MAX_USER_DEREFS];
        assert!(check_request(&c).is_ok());
        c.addr.user_derefs.push(8);
        assert!(check_request(&c).is_err());
        c.addr.user_derefs.pop();
        c.kind = MemKind::KernelString;
        assert!(check_request(&c).is_err());
    }

    #[test]
    fn held_bytes_follow_the_argument_within_the_capacity() {
        let slot = CopySlot {
            offset: 136,
            kind: MemKind::UserBytes,
            size: 4096,
            size_arg: Some(2),
            tail: false,
        };
        assert_eq!(held_bytes(&slot, Some(5)), 5);
        assert_eq!(held_bytes(&slot, Some(0)), 0);
        assert_eq!(held_bytes(&slot, Some(5000)), 4096);
        assert_eq!(held_bytes(&slot, Some(u64::MAX)), 4096);
        assert_eq!(held_bytes(&slot, None), 4096);
        let mut rec = vec![0u8; 200];
        rec[hdr::ARGS + 16..hdr::ARGS + 24].copy_from_slice(&77u64.to_le_bytes());
        assert_eq!(requested(&rec, &slot), Some(77));
        let plain = CopySlot {
            size_arg: None,
            ..slot
        };
        assert_eq!(requested(&rec, &plain), None);
    }
}

#[cfg(test)]
mod decode_tests {
    use crate::capture::layout::{hdr, RecordLayout, COPY_HDR, KIND_EVENT, KIND_RETRY};
    use crate::capture::spec::{AddrExpr, CaptureSpec, CopyRequest, MemKind, SIZED_COPY_CAP};
    use crate::capture::{decode_record, Record};

    fn record(layout: &RecordLayout, kind: u16, len: u64, result: i64) -> Vec<u8> {
        let mut b = vec![0u8; layout.size];
        b[hdr::KIND..hdr::KIND + 2].copy_from_slice(&kind.to_le_bytes());
        b[hdr::ARGS + 16..hdr::ARGS + 24].copy_from_slice(&len.to_le_bytes());
        let so = layout.copies[0].offset;
        b[so..so + 8].copy_from_slice(&result.to_le_bytes());
        b[so + 8..so + 16].copy_from_slice(&0x5000u64.to_le_bytes());
        for (i, x) in b[so + COPY_HDR..so + COPY_HDR + SIZED_COPY_CAP as usize]
            .iter_mut()
            .enumerate()
        {
            *x = i as u8;
        }
        b
    }

    #[test]
    fn sized_copies_hold_the_length_the_argument_gave() {
        let mut s = CaptureSpec::new();
        let mut c = CopyRequest::new(AddrExpr::arg(1), MemKind::UserBytes, SIZED_COPY_CAP);
        c.size_arg = Some(2);
        s.copies.push(c);
        let l = RecordLayout::for_spec(&s, "p").unwrap();
        assert_eq!(l.copies[0].size_arg, Some(2));
        let copy = |b: &[u8]| match decode_record(b, |_| Some(&l)).unwrap() {
            Record::Event(ev) => ev.copies[0].clone(),
            Record::Retry { copies, .. } => copies[0].clone(),
            Record::Built(_) | Record::Fault(_) | Record::Settle(_) | Record::Update(_) => {
                unreachable!("an event or a retry")
            }
        };
        let c = copy(&record(&l, KIND_EVENT, 5, 0));
        assert_eq!(c.data, Ok(vec![0, 1, 2, 3, 4]));
        assert_eq!(c.requested, Some(5));
        let c = copy(&record(&l, KIND_EVENT, 10_000, 0));
        assert_eq!(c.data.as_ref().map(Vec::len), Ok(SIZED_COPY_CAP as usize));
        assert_eq!(c.requested, Some(10_000));
        // A fault keeps the length asked for (the process's memory is read for that much later).
        let c = copy(&record(&l, KIND_EVENT, 7, -14));
        assert_eq!((c.data, c.requested), (Err(-14), Some(7)));
        // A retry record carries the length where the event does.
        let c = copy(&record(&l, KIND_RETRY, 3, 0));
        assert_eq!((c.data, c.requested), (Ok(vec![0, 1, 2]), Some(3)));
    }
}

#[cfg(test)]
mod tail_tests {
    use super::classes;
    use crate::bpf::insn::{helper, op};
    use crate::capture::codegen::{gen_capture, gen_retry, MapFds};
    use crate::capture::layout::{
        hdr, RecordLayout, SizedCopies, KIND_EVENT, TAIL_AT, TAIL_HDR, TAIL_LEN,
    };
    use crate::capture::spec::{
        AddrExpr, ArgSource, CaptureSpec, CopyRequest, Identity, MemKind, MAX_SIZED_COPY,
        SIZED_COPY_CAP,
    };
    use crate::capture::{decode_record, CtxKind, ProbeShape, Record};

    fn spec(size: u32) -> CaptureSpec {
        let mut s = CaptureSpec::new();
        let mut c = CopyRequest::new(AddrExpr::arg(1), MemKind::UserBytes, size);
        c.size_arg = Some(2);
        s.copies.push(c);
        s.copies
            .push(CopyRequest::new(AddrExpr::arg(0), MemKind::UserString, 32));
        s
    }

    #[test]
    fn tail_slots_hold_where_the_bytes_are() {
        let s = spec(MAX_SIZED_COPY);
        let l = RecordLayout::for_spec_sized(&s, "p", SizedCopies::AtProbe).unwrap();
        assert!(l.copies[0].tail && !l.copies[1].tail);
        assert_eq!(l.copies[0].size, MAX_SIZED_COPY as usize);
        assert_eq!(l.copies[1].offset, hdr::SIZE + TAIL_HDR);
        // Records of one size keep a page in the slot.
        let capped = RecordLayout::for_spec(&s, "p").unwrap();
        assert!(!capped.has_tails());
        assert_eq!(capped.copies[0].size, SIZED_COPY_CAP as usize);
        // Larger than any copy sized at the probe may be: refused.
        let big = spec(MAX_SIZED_COPY + 1);
        assert!(RecordLayout::for_spec_sized(&big, "p", SizedCopies::AtProbe).is_err());
        // A constant copy keeps its own bound.
        let mut s = CaptureSpec::new();
        s.copies.push(CopyRequest::new(
            AddrExpr::arg(1),
            MemKind::UserBytes,
            MAX_SIZED_COPY,
        ));
        assert!(RecordLayout::for_spec_sized(&s, "p", SizedCopies::AtProbe).is_err());
    }

    /// A record of `layout` whose tail copy holds `bytes` at `at` (length `len`, result `res`).
    fn record(layout: &RecordLayout, at: u32, len: u32, res: i64, bytes: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; layout.size];
        b[..2].copy_from_slice(&KIND_EVENT.to_le_bytes());
        b[hdr::ARGS + 16..hdr::ARGS + 24].copy_from_slice(&u64::from(len).to_le_bytes());
        let so = layout.copies[0].offset;
        b[so..so + 8].copy_from_slice(&res.to_le_bytes());
        b[so + 8..so + 16].copy_from_slice(&0x5000u64.to_le_bytes());
        b[so + TAIL_AT..so + TAIL_AT + 4].copy_from_slice(&at.to_le_bytes());
        b[so + TAIL_LEN..so + TAIL_LEN + 4].copy_from_slice(&len.to_le_bytes());
        b.extend_from_slice(bytes);
        b
    }

    #[test]
    fn tail_bytes_decode_whole_and_bad_places_are_bad_records() {
        let l = RecordLayout::for_spec_sized(&spec(8192), "p", SizedCopies::AtProbe).unwrap();
        let copy0 = |b: &[u8]| match decode_record(b, |_| Some(&l)) {
            Ok(Record::Event(ev)) => Ok(ev.copies[0].clone()),
            Ok(_) => unreachable!("an event"),
            Err(e) => Err(e),
        };
        let bytes: Vec<u8> = (0..5000).map(|i| (i % 251) as u8).collect();
        let fixed = l.size as u32;
        let c = copy0(&record(&l, fixed, 5000, 0, &bytes)).unwrap();
        assert_eq!(c.data, Ok(bytes.clone()));
        assert_eq!(c.requested, Some(5000));
        // A fault keeps its errno, whatever the place says.
        let c = copy0(&record(&l, fixed, 5000, -14, &bytes)).unwrap();
        assert_eq!(c.data, Err(-14));
        // Past the record, inside the fixed part, or longer than the copy's size: bad records.
        assert!(copy0(&record(&l, fixed, 5000, 0, &bytes[..4000])).is_err());
        assert!(copy0(&record(&l, 8, 16, 0, &bytes)).is_err());
        assert!(copy0(&record(&l, fixed, 9000, 0, &[0; 9000])).is_err());
        assert!(copy0(&record(&l, u32::MAX, 16, 0, &bytes)).is_err());
    }

    #[test]
    fn regions_are_powers_of_two_from_8_to_the_size() {
        assert_eq!(classes(1).collect::<Vec<_>>(), vec![8]);
        assert_eq!(classes(100).collect::<Vec<_>>(), vec![8, 16, 32, 64, 128]);
        let all: Vec<i32> = classes(MAX_SIZED_COPY as usize).collect();
        assert_eq!((all.len(), all.last()), (18, Some(&(1 << 20))));
    }

    fn calls(insns: &[crate::bpf::Insn], id: i32) -> usize {
        insns
            .iter()
            .filter(|i| i.code == op::JMP | op::CALL && i.imm == id)
            .count()
    }

    #[test]
    fn only_probes_with_tails_reserve_through_a_dynptr() {
        let shape = ProbeShape {
            ctx: CtxKind::RawTracepoint,
            args: (0..3).map(ArgSource::RawArg).collect(),
            conditions: Vec::new(),
            identity: Identity::Current,
            task: None,
        };
        let maps = MapFds {
            ring: 3,
            drops: 4,
            room: 9,
            pending: Some(5),
            pending_armed: Some(6),
            wakeup: Some(crate::capture::codegen::Wakeup {
                bytes: 4096,
                sleep_word: 10,
            }),
            wake_at_once: false,
            mirror: None,
            vclock: None,
        };
        let s = spec(MAX_SIZED_COPY);
        let tailed = RecordLayout::for_spec_sized(&s, "p", SizedCopies::AtProbe).unwrap();
        let capped = RecordLayout::for_spec(&s, "p").unwrap();
        for (layout, dynptr) in [(&tailed, true), (&capped, false)] {
            for insns in [
                gen_capture(&shape, &s, layout, 1, &maps).unwrap(),
                gen_retry(&s, layout, 1, &maps, None).unwrap(),
            ] {
                let n = usize::from(dynptr);
                assert_eq!(calls(&insns, helper::RINGBUF_RESERVE_DYNPTR), n);
                assert_eq!(calls(&insns, helper::RINGBUF_SUBMIT_DYNPTR), n);
                // Released on the path where the ring had no room.
                assert_eq!(calls(&insns, helper::RINGBUF_DISCARD_DYNPTR), n);
                assert_eq!(calls(&insns, helper::RINGBUF_RESERVE), 1 - n);
                assert_eq!(calls(&insns, helper::RINGBUF_SUBMIT), 1 - n);
                // The fixed part, then one region per class of the copy's size.
                let regions = if dynptr { 1 + 18 } else { 0 };
                assert_eq!(calls(&insns, helper::DYNPTR_DATA), regions);
            }
        }
    }
}
