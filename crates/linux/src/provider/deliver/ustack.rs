//! The user stacks of a record built at the probe (`capture::ustack`), completed when dtrace
//! commits the record: the process's mappings noted as for a captured firing; the probe's own
//! walk taken as it is, or the kernel's frame-pointer walk completed with the files'
//! `.eh_frame` by the unwinder a captured firing's goes through ([`complete_walk`]); and each
//! `ustack()` or `jstack()` record filled as the interpreter fills it (the pid, the frames,
//! zeros after them and in the string space).

use crate::capture::record::UserStackCopy;
use crate::capture::spec::MAX_STACK_DEPTH;
use crate::capture::ustack::UstackTail;
use crate::symbols::Symbolizer;

/// Replaces `walked`, the user stack the kernel walked (frame pointers), by the one unwound from
/// the registers and stack bytes `u` copied at the probe with the files' `.eh_frame` when that
/// one goes further (code without frame pointers stops the kernel's walk after a frame or two),
/// or reaches the outermost frame (past which a frame-pointer walk only follows what code
/// without frame pointers left in `rbp`; the walk at the probe then takes no frame-pointer
/// walk: `capture::ustack_keys::emit_walk_once`). Returns whether it did.
pub(super) fn complete_walk(
    syms: &mut Symbolizer,
    pid: u32,
    u: &UserStackCopy,
    walked: &mut Vec<u64>,
) -> bool {
    use crate::symbols::unwind::{StackBytes, UserRegs};
    let regs = UserRegs {
        pc: u.pc,
        sp: u.sp,
        fp: u.fp,
    };
    let stack = StackBytes {
        base: u.sp,
        bytes: &u.stack,
    };
    let unwound = syms.unwind_user(pid, regs, stack, MAX_STACK_DEPTH as usize);
    if unwound.frames == *walked || (unwound.frames.len() <= walked.len() && !unwound.outermost) {
        return false;
    }
    *walked = unwound.frames;
    true
}

/// Fills the `ustack()` and `jstack()` records of framework record `data` (built at the probe in
/// process `pid`, the tail `t` still past it) from what the kernel took there: notes the
/// process's mappings first when `note` (the program prints user symbols, see
/// `Shared::note_processes`), as delivery does for a captured firing, so the frames resolve
/// after the process is gone. A tail the record is too short for leaves the frames zero.
pub(super) fn place_ustacks(
    syms: &mut Symbolizer,
    note: bool,
    pid: u32,
    data: &mut [u8],
    t: &UstackTail,
) {
    let pcs = match t.read(data) {
        Some(taken) => {
            if note && pid != 0 {
                syms.note_process_as(pid, &taken.execname);
            }
            let mut pcs = taken.walked;
            if let Some(u) = &taken.unwind {
                complete_walk(syms, pid, u, &mut pcs);
            }
            pcs
        }
        None => Vec::new(),
    };
    fill_ustacks(data, u64::from(pid), &pcs, t);
}

/// Writes each action of `t` into `data` as the interpreter writes a `ustack()` record: `pid`,
/// then its frames of `pcs`, zeros after the last.
fn fill_ustacks(data: &mut [u8], pid: u64, pcs: &[u64], t: &UstackTail) {
    for &(offset, frames) in &t.actions {
        let o = offset as usize;
        let Some(dst) = data.get_mut(o..o + 8 * (frames as usize + 1)) else {
            continue;
        };
        let (head, rest) = dst.split_at_mut(8);
        head.copy_from_slice(&pid.to_ne_bytes());
        for (i, w) in rest.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&pcs.get(i).copied().unwrap_or(0).to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::spec::{KernelRecord, RecordAction};
    use crate::capture::ustack::TailForm;

    fn action(offset: u32, size: u32, stack: Option<u32>, ustack: Option<u32>) -> RecordAction {
        RecordAction {
            offset,
            size,
            stack,
            ustack,
            ..Default::default()
        }
    }

    /// A record: a 12-byte header, trace(arg0) at 16, ustack(3) at 24 (32 bytes), stack(2) at
    /// 56, jstack(2, 16) at 72 (40 bytes): 112 bytes.
    fn record() -> KernelRecord {
        KernelRecord {
            size: 112,
            recs: Vec::new(),
            actions: vec![
                action(16, 8, None, None),
                action(24, 32, None, Some(3)),
                action(56, 16, Some(2), None),
                action(72, 40, None, Some(2)),
            ],
            ustack_walk: 3,
        }
    }

    #[test]
    fn the_user_stack_is_taken_once_after_the_kernel_stacks() {
        let mut r = record();
        let t = r.ustack_tail().unwrap();
        // After the record and stack(2)'s frames (2 wanted, 16 of the tracing machinery's).
        assert_eq!(t.tail, 112 + 8 * 18);
        assert_eq!(t.actions, vec![(24, 3), (72, 2)]);
        assert_eq!(r.stack_bytes(), 112 + 8 * 18);
        assert_eq!(r.ring_bytes(), 112 + 8 * 18 + UstackTail::BYTES);
        // The walk: as deep as the probe's capture, never less than the actions', at most the
        // kernel's deepest.
        r.walk_user_frames(100);
        assert_eq!(r.ustack_tail().unwrap().walk, 100);
        r.walk_user_frames(2);
        assert_eq!(r.ustack_tail().unwrap().walk, 100);
        r.walk_user_frames(1000);
        assert_eq!(r.ustack_tail().unwrap().walk, MAX_STACK_DEPTH);
        // A record without ustack() takes none, and keeps no walk.
        let mut plain = record();
        plain.actions.retain(|a| a.ustack.is_none());
        plain.ustack_walk = 0;
        plain.walk_user_frames(100);
        assert!(plain.ustack_tail().is_none());
        assert_eq!(plain.ustack_walk, 0);
        assert_eq!(plain.ring_bytes(), 112 + 8 * 18);
    }

    /// Offsets in a tail: its form, `comm`, the walk, the registers and stack bytes.
    const FORM: usize = 0;
    const COMM: usize = 8;
    const WALK: usize = 24;
    const UNWIND: usize = WALK + 8 + 8 * MAX_STACK_DEPTH as usize;

    /// The ring's copy of `record()` with the user stack's tail of form copied as the kernel
    /// fills it: `comm`, the walk (`walked`, its result in bytes), then the registers and `stack`
    /// bytes.
    fn ring_copy(
        walked: &[u64],
        comm: &str,
        regs: [u64; 3],
        stack: &[u8],
    ) -> (Vec<u8>, UstackTail) {
        let t = record().ustack_tail().unwrap();
        let mut data = vec![0xeeu8; record().ring_bytes()];
        data[..112].fill(0);
        data[16..24].copy_from_slice(&7u64.to_ne_bytes());
        let at = t.tail as usize;
        let put = |d: &mut Vec<u8>, o: usize, v: u64| d[o..o + 8].copy_from_slice(&v.to_ne_bytes());
        put(&mut data, at + FORM, TailForm::Copied as u64);
        put(&mut data, at + WALK, 8 * walked.len() as u64);
        for (i, pc) in walked.iter().enumerate() {
            put(&mut data, at + WALK + 8 + 8 * i, *pc);
        }
        let comm_at = at + COMM;
        data[comm_at..comm_at + 16].fill(0);
        data[comm_at..comm_at + comm.len()].copy_from_slice(comm.as_bytes());
        let unwind = at + UNWIND;
        put(&mut data, unwind, stack.len() as u64);
        for (i, r) in regs.iter().enumerate() {
            put(&mut data, unwind + 8 + 8 * i, *r);
        }
        data[unwind + 32..unwind + 32 + stack.len()].copy_from_slice(stack);
        (data, t)
    }

    #[test]
    fn the_tail_reads_back_what_the_kernel_took() {
        let (data, t) = ring_copy(
            &[0x40_1000, 0x40_2000],
            "sh",
            [0x40_1000, 0x7f00, 0x7f10],
            &[1; 512],
        );
        let got = t.read(&data).unwrap();
        assert_eq!(got.walked, vec![0x40_1000, 0x40_2000]);
        assert_eq!(got.execname, "sh");
        let u = got.unwind.unwrap();
        assert_eq!((u.pc, u.sp, u.fp), (0x40_1000, 0x7f00, 0x7f10));
        assert_eq!(u.stack, vec![1; 512]);
        // A failed walk and a thread without user registers: nothing of either.
        let mut bad = data.clone();
        let at = t.tail as usize;
        bad[at + WALK..at + WALK + 8].copy_from_slice(&(-14i64).to_ne_bytes());
        let unwind = at + UNWIND;
        bad[unwind..unwind + 8].copy_from_slice(&(-14i64).to_ne_bytes());
        let got = t.read(&bad).unwrap();
        assert!(got.walked.is_empty() && got.unwind.is_none());
        // A record cut short holds no tail, nor one of no known form.
        assert!(t.read(&data[..at + 16]).is_none());
        let mut unknown = data.clone();
        unknown[at..at + 8].fill(0xee);
        assert!(t.read(&unknown).is_none());
    }

    #[test]
    fn built_ustacks_are_the_longer_of_the_walk_and_the_unwound_stack() {
        let word = |d: &[u8], o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap());
        // The stack bytes hold a frame-pointer chain (no process maps these addresses: the
        // unwinder steps by frame pointers): pc, then 0x40_2000 and 0x40_3000.
        let sp = 0x7fff_0000u64;
        let mut stack = vec![0u8; 512];
        let mut put = |o: usize, v: u64| stack[o..o + 8].copy_from_slice(&v.to_ne_bytes());
        put(0x10, sp + 0x40);
        put(0x18, 0x40_2000);
        put(0x40, 0);
        put(0x48, 0x40_3000);
        let regs = [0x40_1000, sp, sp + 0x10];
        let mut syms = Symbolizer::new();
        let pid = u32::MAX - 1;
        // The kernel's walk stopped after one frame: the unwound stack replaces it.
        let (mut data, t) = ring_copy(&[0x40_1000], "prog", regs, &stack);
        place_ustacks(&mut syms, false, pid, &mut data, &t);
        assert_eq!(word(&data, 16), 7);
        assert_eq!(word(&data, 24), u64::from(pid));
        assert_eq!(
            [word(&data, 32), word(&data, 40), word(&data, 48)],
            [0x40_1000, 0x40_2000, 0x40_3000]
        );
        // jstack(2, 16): its two frames, its string space zero.
        assert_eq!(word(&data, 72), u64::from(pid));
        assert_eq!([word(&data, 80), word(&data, 88)], [0x40_1000, 0x40_2000]);
        assert_eq!([word(&data, 96), word(&data, 104)], [0, 0]);
        // A walk that goes as far stays: its frames, zeros after them.
        let (mut data, t) = ring_copy(&[0x50_1000, 0x50_2000, 0x50_3000], "prog", regs, &stack);
        place_ustacks(&mut syms, false, pid, &mut data, &t);
        assert_eq!(
            [word(&data, 32), word(&data, 40), word(&data, 48)],
            [0x50_1000, 0x50_2000, 0x50_3000]
        );
        let (mut data, t) = ring_copy(&[0x50_1000], "prog", [0, 0, 0], &[]);
        let unwind = t.tail as usize + UNWIND;
        data[unwind..unwind + 8].copy_from_slice(&(-14i64).to_ne_bytes());
        place_ustacks(&mut syms, false, pid, &mut data, &t);
        assert_eq!(
            [word(&data, 32), word(&data, 40), word(&data, 48)],
            [0x50_1000, 0, 0]
        );
    }

    #[test]
    fn a_walked_tail_holds_the_frames_the_probe_chose() {
        let word = |d: &[u8], o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap());
        // Registers and stack bytes that would unwind further: a walked tail has none, and its
        // frames are the record's as they are.
        let (mut data, t) = ring_copy(
            &[0x60_1000, 0x60_2000],
            "walked",
            [0x40_1000, 1, 2],
            &[0; 64],
        );
        let at = t.tail as usize;
        data[at + FORM..at + FORM + 8].copy_from_slice(&(TailForm::Walked as u64).to_ne_bytes());
        data.truncate(at + UstackTail::WALKED_BYTES);
        let got = t.read(&data).unwrap();
        assert_eq!(got.walked, vec![0x60_1000, 0x60_2000]);
        assert_eq!(got.execname, "walked");
        assert!(got.unwind.is_none());
        let mut syms = Symbolizer::new();
        place_ustacks(&mut syms, false, 42, &mut data, &t);
        assert_eq!(word(&data, 24), 42);
        assert_eq!(
            [word(&data, 32), word(&data, 40), word(&data, 48)],
            [0x60_1000, 0x60_2000, 0]
        );
        assert_eq!([word(&data, 80), word(&data, 88)], [0x60_1000, 0x60_2000]);
        // A walked tail is a ninth of a copied one, or less.
        const { assert!(UstackTail::WALKED_BYTES < UstackTail::BYTES / 8) };
    }
}
