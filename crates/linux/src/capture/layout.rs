//! The byte layout of capture records in the ring buffer: a fixed 152-byte header, then one slot per
//! memory copy, then the process's arguments and ancestors when asked for, then the kernel and user
//! stacks. Where the probe sizes its records ([`SizedCopies::AtProbe`]), the bytes of the copies
//! sized at the probe (`copyin(arg1, arg2)`) follow that fixed part, as many as the firing asked
//! for, each slot saying where its bytes are ([`TAIL_HDR`]). The generator writes it; the decoder
//! reads it; both take offsets from here only.

use super::spec::{
    CaptureSpec, MemKind, MAX_ANCESTORS, MAX_COPIES, MAX_COPY_SIZE, MAX_DEREFS, MAX_SIZED_COPY,
    MAX_STACK_DEPTH, SIZED_COPY_CAP,
};
use crate::error::{LinuxError, Result};

/// Record kind: a probe firing.
pub const KIND_EVENT: u16 = 1;
/// Record kind: bytes re-read at a syscall's return for an earlier entry event.
pub const KIND_RETRY: u16 = 2;
/// Record kind: an ECB's record built at the probe (see `capture::kagg`): a [`built`] header,
/// then the framework's record.
pub const KIND_BUILT: u16 = 3;

/// Field offsets of the header of a [`KIND_BUILT`] record (kind and tag where an event's are).
#[allow(missing_docs)]
pub mod built {
    pub const KIND: usize = 0;
    /// The clause's number among the probe's kernel clauses.
    pub const CLAUSE: usize = 2;
    pub const TAG: usize = 4;
    pub const CPU: usize = 8;
    /// The process that fired (which names the probe of a file probe's firing).
    pub const PID: usize = 12;
    /// The speculation the record goes to (a u32; 0: the principal buffer), see
    /// `capture::speculation`.
    pub const SPEC: usize = 16;
    /// The framework's record starts here.
    pub const SIZE: usize = 24;
}

/// Record kind: `commit()` or `discard()` of a speculation kept in the kernel (see
/// `capture::speculation`): the [`kspec`] fields.
pub const KIND_SPEC: u16 = 5;

/// Field offsets of a [`KIND_SPEC`] record (kind, tag and CPU where a [`built`] record's are).
#[allow(missing_docs)]
pub mod kspec {
    pub const KIND: usize = 0;
    /// [`COMMIT`] or [`DISCARD`] (a u16).
    pub const OP: usize = 2;
    pub const TAG: usize = 4;
    pub const CPU: usize = 8;
    /// The speculation's id (a u32).
    pub const ID: usize = 12;
    /// 1 when dtrace frees the speculation once it consumed the record (it was left settling),
    /// 0 when the probe freed it (a u32).
    pub const RELEASE: usize = 16;
    pub const PAD: usize = 20;
    pub const SIZE: usize = 24;
    /// `commit()`.
    pub const COMMIT: u16 = 1;
    /// `discard()`.
    pub const DISCARD: u16 = 2;
}

/// Record kind: an aggregation update whose `ustack()` or `jstack()` key the probe could not walk
/// (a PC no loaded range holds) at a probe where D variables live in the kernel, so the firing
/// could not go to dtrace whole (see `capture::ustack_keys`): the [`kupdate`] fields, the user
/// stack as the probe took it for dtrace's walk, then the kernel key with the stack's frames
/// still to fill. dtrace walks the stack as it walks a captured firing's and aggregates the update.
/// The same kind, of the form [`kupdate::WHOLE`], carries an update whose whole key the probe
/// built but whose map could not take it (an entry the kernel could not allocate at the probe,
/// under memory pressure, in a map not full): its key follows the fields, and dtrace
/// aggregates it as the kernel would have.
pub const KIND_AGG_UPDATE: u16 = 6;

/// Field offsets of a [`KIND_AGG_UPDATE`] record (kind, tag, CPU and pid where a [`built`]
/// record's are).
#[allow(missing_docs)]
pub mod kupdate {
    pub const KIND: usize = 0;
    /// The record's form (a u16): [`TO_WALK`] or [`WHOLE`].
    pub const FORM: usize = 2;
    /// The user stack as the probe took it, then the key with its user stacks' frames to fill.
    pub const TO_WALK: u16 = 0;
    /// The key whole at [`STACK`], no stack.
    pub const WHOLE: u16 = 1;
    pub const TAG: usize = 4;
    pub const CPU: usize = 8;
    pub const PID: usize = 12;
    /// The descriptor of the aggregation's first map, which names the aggregation (an i32).
    pub const AGG: usize = 16;
    pub const PAD: usize = 20;
    /// The aggregating function's value (0 for `count()`).
    pub const VAL: usize = 24;
    /// Its weight (1 when it has none).
    pub const INCR: usize = 32;
    /// The kernel's clock of the firing.
    pub const KTIME: usize = 40;
    /// The thread's `comm` (which tells dtrace whether the process exec'd since it noted its
    /// mappings).
    pub const COMM: usize = 48;
    /// The kernel's frame-pointer walk (its result, then its frames) and the registers and stack
    /// bytes for unwinding (`super::super::ustack_keys::TAKEN_BYTES`).
    pub const STACK: usize = 64;
}

/// Record kind: a fault of a clause that runs whole at the probe (see `capture::kagg`): the
/// [`kfault`] fields, which dtrace reports as the interpreter reports its faults.
pub const KIND_FAULT: u16 = 4;

/// Field offsets of a [`KIND_FAULT`] record (kind, clause, tag and CPU where a [`built`]
/// record's are).
#[allow(missing_docs)]
pub mod kfault {
    pub const KIND: usize = 0;
    /// The clause's number among the probe's kernel clauses.
    pub const CLAUSE: usize = 2;
    pub const TAG: usize = 4;
    pub const CPU: usize = 8;
    /// The `DTRACEFLT_*` kind in the low 32 bits, the faulting instruction's index in the
    /// clause's code (predicate, then the actions) in the high 32.
    pub const WORD: usize = 16;
    /// The faulting address (the interpreter's `illval`).
    pub const ADDR: usize = 24;
    /// The kernel's clock of the firing (the instant `timestamp` is made from, as the ERROR
    /// probe the interpreter fires for a fault shares its firing's `timestamp`).
    pub const KTIME: usize = 32;
    /// `bpf_get_current_pid_tgid()`: the process in the high 32 bits, the thread in the low.
    pub const PID_TGID: usize = 40;
    /// `bpf_get_current_uid_gid()`: the group in the high 32 bits, the user in the low.
    pub const UID_GID: usize = 48;
    pub const COMM: usize = 56;
    /// The current `task_struct` (`curthread`).
    pub const TASK: usize = 72;
    /// The parent process's id (`ppid`; 0 where the kernel's BTF lacks the task's offsets).
    pub const PPID: usize = 80;
    /// `vtimestamp`, as the probe's clauses read it (the exact clock when one reads it).
    pub const VTIME: usize = 88;
    /// The probe's `arg0` (a syscall return probe's `errno` comes from it), 0 where it is not
    /// read at the probe.
    pub const ARG0: usize = 96;
    pub const SIZE: usize = 104;
}

/// Header flag: a user copy faulted and a retry at return was armed.
pub const FLAG_RETRY_ARMED: u16 = 1;
/// Header flag: the clauses that run at the probe handed the firing over to dtrace (a string
/// they copy could not be read there, see `capture::kagg`): they run there for this firing.
pub const FLAG_HANDED_OVER: u16 = 2;

/// Header field offsets.
#[allow(missing_docs)]
pub mod hdr {
    pub const KIND: usize = 0;
    pub const FLAGS: usize = 2;
    pub const TAG: usize = 4;
    pub const KTIME: usize = 8;
    pub const CPU: usize = 16;
    pub const PID: usize = 20;
    pub const TID: usize = 24;
    pub const PPID: usize = 28;
    pub const UID: usize = 32;
    pub const GID: usize = 36;
    pub const COMM: usize = 40;
    pub const TASK: usize = 56;
    pub const ARGS: usize = 64;
    pub const VTIME: usize = 144;
    pub const SIZE: usize = 152;
}

/// Arguments carried in every record (`arg0..arg9`, as DTrace's probe context).
pub const NARGS: usize = 10;
/// Bytes before a copy's data: i64 result, u64 address.
pub const COPY_HDR: usize = 16;
/// Bytes of a slot whose copy's bytes follow the record's fixed part ([`CopySlot::tail`]): the
/// [`COPY_HDR`] words, then a u32 offset of the bytes in the record and their u32 length (the
/// length is held whether or not the read faulted; the result says whether the bytes are there).
pub const TAIL_HDR: usize = COPY_HDR + 8;
/// Offset in a tail slot of its bytes' offset (a u32) in the record.
pub const TAIL_AT: usize = COPY_HDR;
/// Offset in a tail slot of its bytes' length (a u32).
pub const TAIL_LEN: usize = COPY_HDR + 4;

/// How a probe's records hold the copies sized at the probe (`copyin(arg1, arg2)`, user bytes
/// whose length is a probe argument's value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizedCopies {
    /// Every record has the same size: each such copy reserves at most
    /// [`SIZED_COPY_CAP`](super::spec::SIZED_COPY_CAP) bytes in its slot, and a longer read is
    /// served from the process's memory at delivery (kernels without ring-buffer dynptrs).
    Capped,
    /// The probe sizes each record (`bpf_ringbuf_reserve_dynptr`, Linux 5.19): the bytes the
    /// firing asks for, up to the copy's size, follow the fixed part.
    AtProbe,
}
/// Bytes before a stack's frames: i64 result (bytes written or -errno).
pub const STACK_HDR: usize = 8;
/// Bytes before the argument area's bytes: i64 result (bytes copied or -errno).
pub const EXECARGS_HDR: usize = 8;
/// Bytes before the ancestors' pids: u32 count, u32 padding.
pub const ANCESTORS_HDR: usize = 8;
/// Bytes before the user stack copy for unwinding: i64 result (bytes copied or -errno), then
/// the user pc, sp and fp.
pub const UNWIND_HDR: usize = 32;
/// The saved user registers for `uregs[]`: i64 result (0, or -EFAULT for a thread with no user
/// registers), then the x86-64 `struct pt_regs` (21 registers, in `R_*` index order).
pub const UREGS_HDR: usize = 8;
/// Registers of the x86-64 `struct pt_regs`.
pub const UREGS_COUNT: usize = 21;
/// Bytes per frame of a build-id user stack (`struct bpf_stack_build_id`).
pub const BUILD_ID_FRAME: usize = 32;
/// The largest record we generate.
pub const MAX_RECORD: usize = 64 * 1024;

/// One copy slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySlot {
    /// Offset of the slot header.
    pub offset: usize,
    /// Memory kind.
    pub kind: MemKind,
    /// Capacity in bytes.
    pub size: usize,
    /// The probe argument holding the copy's length (at most `size`), for copies sized at the probe.
    pub size_arg: Option<usize>,
    /// The copy's bytes follow the record's fixed part ([`SizedCopies::AtProbe`]); the slot is
    /// [`TAIL_HDR`] bytes.
    pub tail: bool,
}

/// Where everything sits in a probe's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    /// Copy slots, in request order.
    pub copies: Vec<CopySlot>,
    /// The argument area: offset of its header and capacity in bytes.
    pub execargs: Option<(usize, usize)>,
    /// The ancestors' pids: offset of their header (room for [`MAX_ANCESTORS`]).
    pub ancestors: Option<usize>,
    /// The `d_path()` path slots (of [`super::path::PATH_SLOT`] bytes), in request order.
    pub paths: Vec<usize>,
    /// Kernel stack: offset of its header and depth.
    pub kstack: Option<(usize, usize)>,
    /// User stack: offset of its header and depth.
    pub ustack: Option<(usize, usize)>,
    /// Whether the user stack holds build-id frames.
    pub ustack_build_id: bool,
    /// User registers and stack bytes for unwinding: offset of the header and capacity in bytes.
    pub ustack_unwind: Option<(usize, usize)>,
    /// Offset of the saved user registers, when recorded.
    pub uregs: Option<usize>,
    /// Size of a full event record (its fixed part, when some slot is a [`CopySlot::tail`]).
    pub size: usize,
    /// Size of a retry record (header and copies only; its fixed part, as `size`).
    pub retry_size: usize,
}

impl RecordLayout {
    /// Whether some copy's bytes follow the fixed part (records of a size the probe computes).
    pub fn has_tails(&self) -> bool {
        self.copies.iter().any(|c| c.tail)
    }
}

fn round8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl RecordLayout {
    /// Lays out records of one size for `spec` ([`SizedCopies::Capped`]), checking its bounds.
    /// `probe` names it in errors.
    pub fn for_spec(spec: &CaptureSpec, probe: &str) -> Result<RecordLayout> {
        Self::for_spec_sized(spec, probe, SizedCopies::Capped)
    }

    /// Lays out records for `spec`, holding its copies sized at the probe as `sized` says,
    /// checking its bounds. `probe` names it in errors.
    pub fn for_spec_sized(
        spec: &CaptureSpec,
        probe: &str,
        sized: SizedCopies,
    ) -> Result<RecordLayout> {
        let bad = |reason: String| LinuxError::BadCapture {
            probe: probe.to_string(),
            reason,
        };
        if spec.copies.len() > MAX_COPIES {
            return Err(bad(format!(
                "{} memory copies requested, at most {MAX_COPIES}",
                spec.copies.len()
            )));
        }
        let mut off = hdr::SIZE;
        let mut copies = Vec::with_capacity(spec.copies.len());
        for c in &spec.copies {
            let sized_bytes = c.size_arg.is_some() && c.kind == MemKind::UserBytes;
            let most = if sized_bytes {
                MAX_SIZED_COPY
            } else {
                MAX_COPY_SIZE
            };
            if c.size == 0 || c.size > most {
                return Err(bad(format!(
                    "copy of {} bytes; sizes run from 1 to {most}",
                    c.size
                )));
            }
            if c.addr.derefs.len() > MAX_DEREFS {
                return Err(bad(format!("more than {MAX_DEREFS} pointer hops")));
            }
            if c.addr.index.is_some_and(|i| usize::from(i.arg) >= NARGS) {
                return Err(bad("copy indexed by an argument past those carried".into()));
            }
            if let super::spec::AddrBase::Arg(n) = c.addr.base {
                if n >= NARGS {
                    return Err(bad(format!(
                        "copy from arg{n}; probes carry arg0 to arg{}",
                        NARGS - 1
                    )));
                }
            }
            super::sized::check_request(c).map_err(bad)?;
            let tail = sized_bytes && sized == SizedCopies::AtProbe;
            let size = match sized_bytes && !tail {
                true => c.size.min(SIZED_COPY_CAP),
                false => c.size,
            };
            copies.push(CopySlot {
                offset: off,
                kind: c.kind,
                size: size as usize,
                size_arg: c.size_arg,
                tail,
            });
            off += match tail {
                true => TAIL_HDR,
                false => COPY_HDR + round8(size as usize),
            };
        }
        super::mirror::check(spec).map_err(bad)?;
        let retry_size = off;
        let execargs = match spec.execargs {
            None => None,
            Some(n) if n == 0 || n > MAX_COPY_SIZE => {
                return Err(bad(format!(
                    "argument area of {n} bytes; sizes run from 1 to {MAX_COPY_SIZE}"
                )))
            }
            Some(n) => {
                let at = off;
                off += EXECARGS_HDR + round8(n as usize);
                Some((at, n as usize))
            }
        };
        let ancestors = spec.ancestors.then(|| {
            let at = off;
            off += ANCESTORS_HDR + 4 * MAX_ANCESTORS;
            at
        });
        let paths = super::path::layout_paths(spec, &mut off).map_err(bad)?;
        let stack =
            |depth: Option<u32>, off: &mut usize, frame: usize| -> Result<Option<(usize, usize)>> {
                match depth {
                    None => Ok(None),
                    Some(d) if d == 0 || d > MAX_STACK_DEPTH => Err(bad(format!(
                        "stack depth {d}; depths run from 1 to {MAX_STACK_DEPTH}"
                    ))),
                    Some(d) => {
                        let at = *off;
                        *off += STACK_HDR + frame * d as usize;
                        Ok(Some((at, d as usize)))
                    }
                }
            };
        let kstack = stack(spec.kstack, &mut off, 8)?;
        let ustack_frame = if spec.ustack_build_id {
            BUILD_ID_FRAME
        } else {
            8
        };
        let ustack = stack(spec.ustack, &mut off, ustack_frame)?;
        let uregs = spec.uregs.then(|| {
            let at = off;
            off += UREGS_HDR + 8 * UREGS_COUNT;
            at
        });
        let ustack_unwind = match spec.ustack_unwind {
            None => None,
            Some(n) if !(512..=MAX_COPY_SIZE).contains(&n) || n % 8 != 0 => {
                return Err(bad(format!(
                    "user stack copy of {n} bytes; sizes run from 512 to {MAX_COPY_SIZE}, in 8s"
                )))
            }
            Some(n) => {
                let at = off;
                off += UNWIND_HDR + n as usize;
                Some((at, n as usize))
            }
        };
        if off > MAX_RECORD {
            return Err(bad(format!("record of {off} bytes exceeds {MAX_RECORD}")));
        }
        Ok(RecordLayout {
            copies,
            execargs,
            ancestors,
            paths,
            kstack,
            ustack,
            ustack_build_id: spec.ustack_build_id,
            ustack_unwind,
            uregs,
            size: off,
            retry_size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{AddrExpr, CopyRequest};
    use super::*;

    #[test]
    fn layout_places_copies_then_stacks() {
        let mut s = CaptureSpec::new();
        s.copies.push(CopyRequest {
            addr: AddrExpr::arg(1),
            kind: MemKind::UserString,
            size: 13,
            size_arg: None,
        });
        s.kstack = Some(4);
        let l = RecordLayout::for_spec(&s, "p").unwrap();
        assert_eq!(l.copies[0].offset, 152);
        assert_eq!(l.kstack, Some((152 + 16 + 16, 4)));
        assert_eq!(l.size, 184 + 8 + 32);
        assert_eq!(l.retry_size, 184);
        // The arguments and ancestors sit between the copies and the stacks.
        s.execargs = Some(100);
        s.ancestors = true;
        let l = RecordLayout::for_spec(&s, "p").unwrap();
        assert_eq!(l.execargs, Some((184, 100)));
        assert_eq!(l.ancestors, Some(184 + 8 + 104));
        assert_eq!(l.kstack, Some((184 + 8 + 104 + 8 + 4 * MAX_ANCESTORS, 4)));
        assert_eq!(l.retry_size, 184);
        s.execargs = Some(0);
        assert!(RecordLayout::for_spec(&s, "p").is_err());
    }

    #[test]
    fn layout_rejects_out_of_bounds_requests() {
        let mut s = CaptureSpec::new();
        s.kstack = Some(1000);
        assert!(RecordLayout::for_spec(&s, "p").is_err());
        let mut s = CaptureSpec::new();
        s.copies.push(CopyRequest {
            addr: AddrExpr::arg(10),
            kind: MemKind::UserBytes,
            size: 8,
            size_arg: None,
        });
        assert!(RecordLayout::for_spec(&s, "p").is_err());
        let mut s = CaptureSpec::new();
        s.copies.push(CopyRequest {
            addr: AddrExpr::arg(0),
            kind: MemKind::UserBytes,
            size: 0,
            size_arg: None,
        });
        assert!(RecordLayout::for_spec(&s, "p").is_err());
    }

    #[test]
    fn built_records_decode_to_the_framework_record() {
        use super::super::record::{decode_record, BuiltRecord, Record};
        let mut b = vec![0u8; built::SIZE + 24];
        b[..2].copy_from_slice(&KIND_BUILT.to_le_bytes());
        b[built::CLAUSE..built::CLAUSE + 2].copy_from_slice(&2u16.to_le_bytes());
        b[built::TAG..built::TAG + 4].copy_from_slice(&77u32.to_le_bytes());
        b[built::CPU..built::CPU + 4].copy_from_slice(&1u32.to_le_bytes());
        b[built::PID..built::PID + 4].copy_from_slice(&4321u32.to_le_bytes());
        b[built::SPEC..built::SPEC + 4].copy_from_slice(&3u32.to_le_bytes());
        b[built::SIZE + 16] = 5;
        // No layout is needed: the record is the framework's.
        let r = decode_record(&b, |_| None).unwrap();
        let mut data = vec![0u8; 24];
        data[16] = 5;
        assert_eq!(
            r,
            Record::Built(BuiltRecord {
                tag: 77,
                clause: 2,
                cpu: 1,
                pid: 4321,
                spec: 3,
                data
            })
        );
        // A speculation's commit or discard; an unknown operation is a bad record.
        use super::super::record::SpecSettle;
        let mut k = vec![0u8; kspec::SIZE];
        k[..2].copy_from_slice(&KIND_SPEC.to_le_bytes());
        k[kspec::OP..kspec::OP + 2].copy_from_slice(&kspec::DISCARD.to_le_bytes());
        k[kspec::TAG..kspec::TAG + 4].copy_from_slice(&77u32.to_le_bytes());
        k[kspec::CPU..kspec::CPU + 4].copy_from_slice(&1u32.to_le_bytes());
        k[kspec::ID..kspec::ID + 4].copy_from_slice(&2u32.to_le_bytes());
        k[kspec::RELEASE] = 1;
        assert_eq!(
            decode_record(&k, |_| None).unwrap(),
            Record::Settle(SpecSettle {
                tag: 77,
                cpu: 1,
                id: 2,
                commit: false,
                release: true,
            })
        );
        k[kspec::OP] = 9;
        assert!(decode_record(&k, |_| None).is_err());
        // Shorter than the framework's header: a bad record, not a panic.
        assert!(decode_record(&b[..built::SIZE + 8], |_| None).is_err());
        assert!(decode_record(&b[..3], |_| None).is_err());
    }

    #[test]
    fn update_records_decode_to_the_update_its_stack_and_key() {
        use super::super::record::{decode_record, Record};
        use super::super::ustack_keys::{TAKEN_BYTES, TAKEN_WALK};
        let key_at = kupdate::STACK + TAKEN_BYTES;
        let mut b = vec![0u8; key_at + 24];
        b[..2].copy_from_slice(&KIND_AGG_UPDATE.to_le_bytes());
        b[kupdate::TAG..kupdate::TAG + 4].copy_from_slice(&9u32.to_le_bytes());
        b[kupdate::CPU..kupdate::CPU + 4].copy_from_slice(&1u32.to_le_bytes());
        b[kupdate::PID..kupdate::PID + 4].copy_from_slice(&300u32.to_le_bytes());
        b[kupdate::AGG..kupdate::AGG + 4].copy_from_slice(&17i32.to_le_bytes());
        b[kupdate::VAL..kupdate::VAL + 8].copy_from_slice(&(-4i64).to_le_bytes());
        b[kupdate::INCR..kupdate::INCR + 8].copy_from_slice(&2u64.to_le_bytes());
        b[kupdate::KTIME..kupdate::KTIME + 8].copy_from_slice(&77u64.to_le_bytes());
        b[kupdate::COMM..kupdate::COMM + 2].copy_from_slice(b"dd");
        // The frame-pointer walk: two frames (16 bytes).
        let walk = kupdate::STACK;
        b[walk..walk + 8].copy_from_slice(&16u64.to_le_bytes());
        b[walk + 8..walk + 16].copy_from_slice(&0x401000u64.to_le_bytes());
        b[walk + 16..walk + 24].copy_from_slice(&0x401100u64.to_le_bytes());
        // The copy: 8 bytes of stack, pc, sp, fp.
        let copy = walk + TAKEN_WALK;
        b[copy..copy + 8].copy_from_slice(&8u64.to_le_bytes());
        b[copy + 8..copy + 16].copy_from_slice(&0x401000u64.to_le_bytes());
        b[copy + 16..copy + 24].copy_from_slice(&0x7ff0u64.to_le_bytes());
        b[copy + UNWIND_HDR..copy + UNWIND_HDR + 8].copy_from_slice(&5u64.to_le_bytes());
        b[key_at] = 3;
        let Record::Update(u) = decode_record(&b, |_| None).unwrap() else {
            panic!("an update");
        };
        assert_eq!(
            (u.tag, u.cpu, u.pid, u.agg, u.val as i64, u.incr, u.ktime_ns),
            (9, 1, 300, 17, -4, 2, 77)
        );
        assert_eq!(u.execname, "dd");
        assert_eq!(u.walked, vec![0x401000, 0x401100]);
        let c = u.unwind.as_ref().unwrap();
        assert_eq!((c.pc, c.sp, c.fp), (0x401000, 0x7ff0, 0));
        assert_eq!(c.stack, 5u64.to_le_bytes());
        assert_eq!(u.key.len(), 24);
        assert_eq!(u.key[0], 3);
        // Shorter than its stack: a bad record, not a panic.
        assert!(decode_record(&b[..key_at - 1], |_| None).is_err());
        assert!(decode_record(&b[..kupdate::STACK], |_| None).is_err());
        assert!(!u.whole);
        // The whole form: the key right after the fields, no stack.
        let mut w = b[..kupdate::STACK + 24].to_vec();
        w[kupdate::FORM..kupdate::FORM + 2].copy_from_slice(&kupdate::WHOLE.to_le_bytes());
        w[kupdate::STACK] = 4;
        let Record::Update(u) = decode_record(&w, |_| None).unwrap() else {
            panic!("an update");
        };
        assert!(u.whole && u.walked.is_empty() && u.unwind.is_none());
        assert_eq!((u.agg, u.val as i64, u.incr, u.pid), (17, -4, 2, 300));
        assert_eq!((u.key.len(), u.key[0]), (24, 4));
        // A form not known: a bad record.
        w[kupdate::FORM] = 7;
        assert!(decode_record(&w, |_| None).is_err());
        assert!(decode_record(&w[..kupdate::COMM], |_| None).is_err());
    }

    #[test]
    fn fault_records_decode_to_the_fault_and_its_thread() {
        use super::super::record::{decode_record, KernelFault, Record};
        let mut b = vec![0u8; kfault::SIZE];
        b[..2].copy_from_slice(&KIND_FAULT.to_le_bytes());
        b[kfault::CLAUSE..kfault::CLAUSE + 2].copy_from_slice(&1u16.to_le_bytes());
        b[kfault::TAG..kfault::TAG + 4].copy_from_slice(&9u32.to_le_bytes());
        b[kfault::CPU..kfault::CPU + 4].copy_from_slice(&3u32.to_le_bytes());
        let word = 4u64 | 12 << 32;
        b[kfault::WORD..kfault::WORD + 8].copy_from_slice(&word.to_le_bytes());
        b[kfault::ADDR..kfault::ADDR + 8].copy_from_slice(&0x1000u64.to_le_bytes());
        b[kfault::KTIME..kfault::KTIME + 8].copy_from_slice(&55u64.to_le_bytes());
        let pid_tgid = 100u64 << 32 | 101;
        b[kfault::PID_TGID..kfault::PID_TGID + 8].copy_from_slice(&pid_tgid.to_le_bytes());
        let uid_gid = 20u64 << 32 | 1000;
        b[kfault::UID_GID..kfault::UID_GID + 8].copy_from_slice(&uid_gid.to_le_bytes());
        b[kfault::COMM..kfault::COMM + 2].copy_from_slice(b"dd");
        b[kfault::TASK..kfault::TASK + 8].copy_from_slice(&0xffffu64.to_le_bytes());
        b[kfault::PPID..kfault::PPID + 4].copy_from_slice(&77u32.to_le_bytes());
        b[kfault::VTIME..kfault::VTIME + 8].copy_from_slice(&123_456u64.to_le_bytes());
        b[kfault::ARG0..kfault::ARG0 + 8].copy_from_slice(&(-9i64).to_le_bytes());
        let mut comm = [0u8; 16];
        comm[..2].copy_from_slice(b"dd");
        assert_eq!(
            decode_record(&b, |_| None).unwrap(),
            Record::Fault(KernelFault {
                tag: 9,
                clause: 1,
                cpu: 3,
                kind: 4,
                pc: 12,
                addr: 0x1000,
                ktime_ns: 55,
                pid: 100,
                tid: 101,
                uid: 1000,
                gid: 20,
                comm,
                task: 0xffff,
                ppid: 77,
                vtime_ns: 123_456,
                arg0: -9i64 as u64,
                walltime_ns: 0,
                errno: 0,
            })
        );
        assert!(decode_record(&b[..kfault::SIZE - 8], |_| None).is_err());
    }
}
