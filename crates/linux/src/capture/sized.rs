//! Copies sized at the probe and user pointer hops: `copyin(arg1, arg2)` takes as many bytes as a
//! probe argument says (at most the copy's capacity, so the verifier sees a bounded size), and
//! `copyinstr(this->argv[1])` after `this->argv = (uint64_t *)copyin(arg1, 32)` reads its address
//! from user memory at the probe. This module checks such requests, emits the eBPF shared by the
//! capture program and the return-time retry program (the bounded length; the hops are evaluated by
//! [`super::address`]), and tells the decoder how many bytes a sized copy holds.

use super::layout::{hdr, CopySlot, NARGS};
use super::spec::{CopyRequest, MAX_USER_DEREFS};
use crate::bpf::insn::{op, Asm, R2};

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

/// Bytes of a successful user-bytes copy held in the record: the capacity, or for a sized copy the
/// length asked for when smaller.
pub(super) fn held_bytes(slot: &CopySlot, requested: Option<u64>) -> usize {
    match requested {
        Some(r) => usize::try_from(r).unwrap_or(usize::MAX).min(slot.size),
        None => slot.size,
    }
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
            Record::Built(_) | Record::Fault(_) | Record::Settle(_) => {
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
