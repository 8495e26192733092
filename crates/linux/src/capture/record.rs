//! Decoding capture records from the ring buffer into [`CapturedEvent`]s. Records are outside bytes
//! (the kernel writes them, but a bug or a stale layout must not crash us): every length and offset is
//! checked and a bad record is a [`LinuxError::BadRecord`].

use super::layout::{
    built, hdr, RecordLayout, ANCESTORS_HDR, BUILD_ID_FRAME, COPY_HDR, EXECARGS_HDR,
    FLAG_RETRY_ARMED, KIND_BUILT, KIND_EVENT, KIND_FAULT, KIND_RETRY, NARGS, STACK_HDR, UNWIND_HDR,
    UREGS_COUNT, UREGS_HDR,
};
use super::spec::{MemKind, MAX_ANCESTORS};
use crate::error::{LinuxError, Result};

/// Where the bytes of a copy were obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopySource {
    /// Read by the capture program when the probe fired.
    AtProbe,
    /// Read again at the syscall's return because the page was not resident at entry.
    AtReturn,
    /// Read from `/proc/<pid>/mem` by the consumer after both kernel reads failed.
    ProcessMemory,
}

/// One copied piece of memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedMemory {
    /// The address read.
    pub addr: u64,
    /// What kind of read.
    pub kind: MemKind,
    /// The bytes (strings without their NUL), or the negative errno of the failed read.
    pub data: std::result::Result<Vec<u8>, i64>,
    /// How it was obtained.
    pub source: CopySource,
    /// For a copy sized at the probe (`copyin(arg1, arg2)`), the length it asked for: the bytes held
    /// are at most the copy's size (and, in records of one size, its slot's capacity), so fewer
    /// when this is larger.
    pub requested: Option<u64>,
}

/// A captured stack: frame addresses (innermost first), or the helper's negative errno.
pub type StackCapture = std::result::Result<Vec<u64>, i64>;

/// One user frame captured with its file identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserFrame {
    /// The ELF build-id of the mapped file and the frame's offset in that file.
    File {
        /// Build-id bytes (20 for SHA-1 ids).
        build_id: [u8; 20],
        /// Offset in the file.
        offset: u64,
    },
    /// Only the address (the kernel could not read the file's build-id at the probe).
    Ip(u64),
}

/// A build-id user stack, or the helper's negative errno.
pub type FileStackCapture = std::result::Result<Vec<UserFrame>, i64>;

/// One probe firing, decoded. (`Default`: every field zero or absent, for tests and synthetic
/// firings.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapturedEvent {
    /// The tag given when the probe was enabled (the framework's probe id).
    pub tag: u32,
    /// `bpf_ktime_get_ns()` at the probe (CLOCK_MONOTONIC nanoseconds).
    pub ktime_ns: u64,
    /// CPU.
    pub cpu: u32,
    /// Process id (0 if the identity is resolved in user space and not known yet).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Parent process id (0 when not captured; the session fills it from /proc when it can).
    pub ppid: u32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// `comm`, NUL-padded.
    pub comm: [u8; 16],
    /// The current task pointer (`curthread`).
    pub task: u64,
    /// Arguments.
    pub args: [u64; NARGS],
    /// The thread's on-CPU nanoseconds (`vtimestamp`; 0 when BTF offsets were unavailable). The kernel
    /// updates it at scheduler events, so it can lag by up to one tick.
    pub vtime_ns: u64,
    /// Wall-clock nanoseconds since the epoch (`walltimestamp`), filled by the session from `ktime_ns`.
    pub walltime_ns: u64,
    /// For syscall return probes: the errno (0 on success).
    pub errno: i32,
    /// Memory copies, in request order.
    pub copies: Vec<CapturedMemory>,
    /// Kernel stack, if requested.
    pub kstack: Option<StackCapture>,
    /// User stack as addresses, if requested.
    pub ustack: Option<StackCapture>,
    /// User stack as file identities, if requested with `ustack_build_id`.
    pub ustack_files: Option<FileStackCapture>,
    /// The user registers and stack bytes for unwinding, if requested (`Err`: the negative errno
    /// of the stack read, or -EFAULT for a thread with no user registers).
    pub ustack_regs: Option<std::result::Result<UserStackCopy, i64>>,
    /// The saved user registers (`uregs[]`), if requested (`Err`: -EFAULT for a thread with no
    /// user registers, or the read's negative errno).
    pub uregs: Option<std::result::Result<Vec<u64>, i64>>,
    /// A user copy faulted and the bytes will be re-read at the syscall's return.
    pub retry_armed: bool,
    /// The clauses that run at the probe handed this firing over (see
    /// [`super::layout::FLAG_HANDED_OVER`]).
    pub handed_over: bool,
    /// The process's argument area (NUL-separated arguments), if requested, or the read's negative
    /// errno.
    pub execargs: Option<std::result::Result<Vec<u8>, i64>>,
    /// The process ids of the task's ancestors, nearest first, if requested.
    pub ancestors: Option<Vec<u32>>,
    /// The `d_path()` paths recorded, in request order.
    pub paths: Vec<super::path::CapturedPath>,
}

impl CapturedEvent {
    /// `execname`: comm up to its NUL.
    pub fn execname(&self) -> String {
        let end = self
            .comm
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.comm.len());
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// User registers and the user stack above the stack pointer, copied at the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserStackCopy {
    /// Program counter.
    pub pc: u64,
    /// Stack pointer (the address of `stack[0]`).
    pub sp: u64,
    /// Frame pointer.
    pub fp: u64,
    /// The bytes.
    pub stack: Vec<u8>,
}

pub(super) fn decode_unwind(
    b: &[u8],
    at: Option<(usize, usize)>,
) -> Result<Option<std::result::Result<UserStackCopy, i64>>> {
    let Some((off, cap)) = at else {
        return Ok(None);
    };
    let stack = match counted_bytes(b, off, UNWIND_HDR, cap, "user stack copy")? {
        Ok(bytes) => bytes.to_vec(),
        Err(e) => return Ok(Some(Err(e))),
    };
    Ok(Some(Ok(UserStackCopy {
        pc: u64_at(b, off + 8)?,
        sp: u64_at(b, off + 16)?,
        fp: u64_at(b, off + 24)?,
        stack,
    })))
}

fn decode_uregs(b: &[u8], at: Option<usize>) -> Result<Option<std::result::Result<Vec<u64>, i64>>> {
    let Some(off) = at else {
        return Ok(None);
    };
    let result = u64_at(b, off)? as i64;
    if result < 0 {
        return Ok(Some(Err(result)));
    }
    let regs = (0..UREGS_COUNT)
        .map(|i| u64_at(b, off + UREGS_HDR + 8 * i))
        .collect::<Result<Vec<u64>>>()?;
    Ok(Some(Ok(regs)))
}

/// An ECB's record built at the probe: the framework's record, its EPID still to fill in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltRecord {
    /// The tag of the probe.
    pub tag: u32,
    /// The clause's number among the probe's kernel clauses.
    pub clause: u16,
    /// The CPU it fired on.
    pub cpu: u32,
    /// The process that fired.
    pub pid: u32,
    /// The speculation it goes to (0: the principal buffer), see `capture::speculation`.
    pub spec: u32,
    /// The framework's record (a zero EPID, the timestamp, the data), padded to 8 bytes.
    pub data: Vec<u8>,
}

/// `commit()` or `discard()` of a speculation kept in the kernel (see `capture::speculation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecSettle {
    /// The tag of the probe.
    pub tag: u32,
    /// The CPU it fired on.
    pub cpu: u32,
    /// The speculation's id.
    pub id: u32,
    /// `commit()` (else `discard()`).
    pub commit: bool,
    /// dtrace frees the speculation once it consumed this (the probe left it settling).
    pub release: bool,
}

/// An aggregation update the probe could not make (see `layout::KIND_AGG_UPDATE`): one whose
/// user stack key it could not walk, which dtrace walks, or one whose key its map could not take
/// ([`DeferredUpdate::whole`]); dtrace aggregates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeferredUpdate {
    /// The tag of the probe.
    pub tag: u32,
    /// The CPU it fired on.
    pub cpu: u32,
    /// The process that fired.
    pub pid: u32,
    /// The descriptor of the aggregation's first map, which names it.
    pub agg: i32,
    /// The aggregating function's value and weight.
    pub val: u64,
    /// See [`DeferredUpdate::val`].
    pub incr: u64,
    /// The kernel's clock of the firing.
    pub ktime_ns: u64,
    /// The thread's `execname`.
    pub execname: String,
    /// The kernel's frame-pointer walk of the user stack (empty when it failed).
    pub walked: Vec<u64>,
    /// The registers and stack bytes for unwinding (`None` when they could not be read).
    pub unwind: Option<UserStackCopy>,
    /// The kernel key, its user stacks' frames still to fill (see `kernel_key_layout`) unless
    /// [`DeferredUpdate::whole`].
    pub key: Vec<u8>,
    /// The key is whole, stacks and all (`layout::kupdate::WHOLE`): its map had no room the
    /// kernel could allocate; nothing is walked (`walked` and `unwind` are empty).
    pub whole: bool,
}

/// A fault of a clause that runs whole at the probe (see `capture::kagg`), and the thread it
/// faulted in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFault {
    /// The probe's tag.
    pub tag: u32,
    /// The clause's number among the probe's kernel clauses.
    pub clause: u16,
    /// The CPU it fired on.
    pub cpu: u32,
    /// The `DTRACEFLT_*` kind.
    pub kind: u32,
    /// The faulting instruction's index in the clause's code (predicate, then the actions).
    pub pc: u32,
    /// The faulting address.
    pub addr: u64,
    /// The kernel's clock of the firing.
    pub ktime_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Thread id.
    pub tid: u32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// `execname`, NUL-terminated.
    pub comm: [u8; 16],
    /// The thread's `task_struct`.
    pub task: u64,
    /// `vtimestamp` at the probe.
    pub vtime_ns: u64,
    /// The probe's `arg0`.
    pub arg0: u64,
    /// `walltimestamp` (filled in by the session, as events' are; 0 when not).
    pub walltime_ns: u64,
    /// For syscall return probes: the errno (filled in by the session, as events' are).
    pub errno: i32,
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A probe firing.
    Event(Box<CapturedEvent>),
    /// An ECB's record built at the probe (see `capture::kagg`).
    Built(BuiltRecord),
    /// A fault of a clause run at the probe.
    Fault(KernelFault),
    /// `commit()` or `discard()` of a speculation kept in the kernel.
    Settle(SpecSettle),
    /// An aggregation update whose user stack key dtrace walks.
    Update(Box<DeferredUpdate>),
    /// Copies re-read at a syscall's return for the entry event of `tid` at `ktime_ns`.
    Retry {
        /// Tag of the entry probe.
        tag: u32,
        /// Thread.
        tid: u32,
        /// The entry event's timestamp.
        ktime_ns: u64,
        /// The copies, as read at return.
        copies: Vec<CapturedMemory>,
    },
}

fn bad(s: impl Into<String>) -> LinuxError {
    LinuxError::BadRecord(s.into())
}

fn u16_at(b: &[u8], off: usize) -> Result<u16> {
    b.get(off..off + 2)
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at {off}")))
}

fn u32_at(b: &[u8], off: usize) -> Result<u32> {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at {off}")))
}

fn u64_at(b: &[u8], off: usize) -> Result<u64> {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at {off}")))
}

fn decode_copies(
    b: &[u8],
    layout: &RecordLayout,
    source: CopySource,
) -> Result<Vec<CapturedMemory>> {
    let mut out = Vec::with_capacity(layout.copies.len());
    for slot in &layout.copies {
        let result = u64_at(b, slot.offset)? as i64;
        let addr = u64_at(b, slot.offset + 8)?;
        let data_at = slot.offset + COPY_HDR;
        let requested = super::sized::requested(b, slot);
        let data = if result < 0 {
            Err(result)
        } else if slot.tail {
            // The bytes the firing asked for, after the record's fixed part.
            let (at, n) = super::sized::tail_range(b, slot)
                .ok_or_else(|| bad("copy longer than its size"))?;
            let bytes = at
                .checked_add(n)
                .and_then(|end| b.get(at..end))
                .filter(|_| at >= layout.retry_size)
                .ok_or_else(|| bad("copy runs past the record"))?;
            Ok(bytes.to_vec())
        } else {
            let n = if slot.kind.is_string() {
                // bpf_probe_read_*_str returns the length with its NUL.
                (result as usize).saturating_sub(1).min(slot.size)
            } else {
                super::sized::held_bytes(slot, requested)
            };
            let bytes = b
                .get(data_at..data_at + n)
                .ok_or_else(|| bad("copy runs past the record"))?;
            let bytes = if slot.kind.is_string() {
                let end = bytes.iter().position(|c| *c == 0).unwrap_or(bytes.len());
                &bytes[..end]
            } else {
                bytes
            };
            Ok(bytes.to_vec())
        };
        out.push(CapturedMemory {
            addr,
            kind: slot.kind,
            data,
            source,
            requested,
        });
    }
    Ok(out)
}

/// A region whose header starts with an i64 result (bytes copied, or -errno) and whose bytes follow
/// `hdr` bytes after it: the bytes (at most `cap`), or the negative errno.
fn counted_bytes<'a>(
    b: &'a [u8],
    off: usize,
    hdr: usize,
    cap: usize,
    what: &str,
) -> Result<std::result::Result<&'a [u8], i64>> {
    let result = u64_at(b, off)? as i64;
    if result < 0 {
        return Ok(Err(result));
    }
    let n = (result as usize).min(cap);
    let data = off + hdr;
    Ok(Ok(b.get(data..data + n).ok_or_else(|| {
        bad(format!("{what} runs past the record"))
    })?))
}

fn decode_execargs(
    b: &[u8],
    at: Option<(usize, usize)>,
) -> Result<Option<std::result::Result<Vec<u8>, i64>>> {
    let Some((off, cap)) = at else {
        return Ok(None);
    };
    Ok(Some(
        counted_bytes(b, off, EXECARGS_HDR, cap, "argument area")?.map(<[u8]>::to_vec),
    ))
}

fn decode_ancestors(b: &[u8], at: Option<usize>) -> Result<Option<Vec<u32>>> {
    let Some(off) = at else {
        return Ok(None);
    };
    let n = (u32_at(b, off)? as usize).min(MAX_ANCESTORS);
    (0..n)
        .map(|i| u32_at(b, off + ANCESTORS_HDR + 4 * i))
        .collect::<Result<Vec<u32>>>()
        .map(Some)
}

fn decode_file_stack(b: &[u8], at: Option<(usize, usize)>) -> Result<Option<FileStackCapture>> {
    let Some((off, depth)) = at else {
        return Ok(None);
    };
    let result = u64_at(b, off)? as i64;
    if result < 0 {
        return Ok(Some(Err(result)));
    }
    let frames = (result as usize / BUILD_ID_FRAME).min(depth);
    let mut v = Vec::with_capacity(frames);
    for i in 0..frames {
        let at = off + STACK_HDR + BUILD_ID_FRAME * i;
        let status = u32_at(b, at)?;
        let value = u64_at(b, at + 24)?;
        match status {
            1 => {
                let mut build_id = [0u8; 20];
                build_id.copy_from_slice(
                    b.get(at + 4..at + 24)
                        .ok_or_else(|| bad("truncated build-id"))?,
                );
                v.push(UserFrame::File {
                    build_id,
                    offset: value,
                });
            }
            2 if value != 0 && value < USER_LIMIT => v.push(UserFrame::Ip(value)),
            _ => break,
        }
    }
    Ok(Some(Ok(v)))
}

/// x86-64 user addresses lie below this; a "user frame" above it is the walker reading garbage
/// where a binary keeps no frame pointers, and ends the stack.
const USER_LIMIT: u64 = 0x0000_8000_0000_0000;

pub(super) fn decode_stack(
    b: &[u8],
    at: Option<(usize, usize)>,
    user: bool,
) -> Result<Option<StackCapture>> {
    let Some((off, depth)) = at else {
        return Ok(None);
    };
    let result = u64_at(b, off)? as i64;
    if result < 0 {
        return Ok(Some(Err(result)));
    }
    let frames = (result as usize / 8).min(depth);
    let mut v = Vec::with_capacity(frames);
    for i in 0..frames {
        let pc = u64_at(b, off + STACK_HDR + 8 * i)?;
        if pc == 0 || (user && pc >= USER_LIMIT) {
            break;
        }
        v.push(pc);
    }
    Ok(Some(Ok(v)))
}

fn decode_update(b: &[u8], tag: u32) -> Result<DeferredUpdate> {
    use super::layout::kupdate;
    use super::spec::{MAX_STACK_DEPTH, USTACK_UNWIND_BYTES};
    let walk = super::ustack_keys::TAKEN_WALK;
    let whole = match u16_at(b, kupdate::FORM)? {
        kupdate::TO_WALK => false,
        kupdate::WHOLE => true,
        _ => return Err(bad("aggregation update of an unknown form")),
    };
    let key_at = match whole {
        true => kupdate::STACK,
        false => kupdate::STACK + super::ustack_keys::TAKEN_BYTES,
    };
    let key = b
        .get(key_at..)
        .ok_or_else(|| bad("aggregation update shorter than its stack"))?;
    let comm = b
        .get(kupdate::COMM..kupdate::COMM + 16)
        .ok_or_else(|| bad("aggregation update shorter than its fields"))?;
    let end = comm.iter().position(|c| *c == 0).unwrap_or(16);
    let update = |walked, unwind| -> Result<DeferredUpdate> {
        Ok(DeferredUpdate {
            tag,
            cpu: u32_at(b, kupdate::CPU)?,
            pid: u32_at(b, kupdate::PID)?,
            agg: u32_at(b, kupdate::AGG)? as i32,
            val: u64_at(b, kupdate::VAL)?,
            incr: u64_at(b, kupdate::INCR)?,
            ktime_ns: u64_at(b, kupdate::KTIME)?,
            execname: String::from_utf8_lossy(&comm[..end]).into_owned(),
            walked,
            unwind,
            key: key.to_vec(),
            whole,
        })
    };
    if whole {
        return update(Vec::new(), None);
    }
    // A failed walk (its -errno) holds no frame, as a captured firing's.
    let walked = decode_stack(b, Some((kupdate::STACK, MAX_STACK_DEPTH as usize)), true)?
        .and_then(|w| w.ok())
        .unwrap_or_default();
    let unwind = decode_unwind(
        b,
        Some((kupdate::STACK + walk, USTACK_UNWIND_BYTES as usize)),
    )?
    .and_then(|u| u.ok());
    update(walked, unwind)
}

/// Decodes one record; `layout_of` gives the layout of the probe a tag was enabled with.
pub fn decode_record<'a>(
    b: &[u8],
    layout_of: impl Fn(u32) -> Option<&'a RecordLayout>,
) -> Result<Record> {
    let kind = u16_at(b, hdr::KIND)?;
    let tag = u32_at(b, hdr::TAG)?;
    if kind == KIND_BUILT {
        let data = b
            .get(built::SIZE..)
            .filter(|d| d.len() >= 12)
            .ok_or_else(|| bad("built record shorter than its headers"))?;
        return Ok(Record::Built(BuiltRecord {
            tag,
            clause: u16_at(b, built::CLAUSE)?,
            cpu: u32_at(b, built::CPU)?,
            pid: u32_at(b, built::PID)?,
            spec: u32_at(b, built::SPEC)?,
            data: data.to_vec(),
        }));
    }
    if kind == super::layout::KIND_SPEC {
        use super::layout::kspec;
        let op = u16_at(b, kspec::OP)?;
        if !matches!(op, kspec::COMMIT | kspec::DISCARD) {
            return Err(bad("speculation record of an unknown operation"));
        }
        return Ok(Record::Settle(SpecSettle {
            tag,
            cpu: u32_at(b, kspec::CPU)?,
            id: u32_at(b, kspec::ID)?,
            commit: op == kspec::COMMIT,
            release: u32_at(b, kspec::RELEASE)? != 0,
        }));
    }
    if kind == super::layout::KIND_AGG_UPDATE {
        return decode_update(b, tag).map(|u| Record::Update(Box::new(u)));
    }
    if kind == KIND_FAULT {
        use super::layout::kfault;
        if b.len() < kfault::SIZE {
            return Err(bad("fault record shorter than its fields"));
        }
        let word = u64_at(b, kfault::WORD)?;
        let (pid_tgid, uid_gid) = (u64_at(b, kfault::PID_TGID)?, u64_at(b, kfault::UID_GID)?);
        let mut comm = [0u8; 16];
        comm.copy_from_slice(&b[kfault::COMM..kfault::COMM + 16]);
        return Ok(Record::Fault(KernelFault {
            tag,
            clause: u16_at(b, kfault::CLAUSE)?,
            cpu: u32_at(b, kfault::CPU)?,
            kind: word as u32,
            pc: (word >> 32) as u32,
            addr: u64_at(b, kfault::ADDR)?,
            ktime_ns: u64_at(b, kfault::KTIME)?,
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            uid: uid_gid as u32,
            gid: (uid_gid >> 32) as u32,
            comm,
            task: u64_at(b, kfault::TASK)?,
            ppid: u32_at(b, kfault::PPID)?,
            vtime_ns: u64_at(b, kfault::VTIME)?,
            arg0: u64_at(b, kfault::ARG0)?,
            walltime_ns: 0,
            errno: 0,
        }));
    }
    if b.len() < hdr::SIZE {
        return Err(bad(format!(
            "record of {} bytes is shorter than the header",
            b.len()
        )));
    }
    let layout =
        layout_of(tag).ok_or_else(|| bad(format!("record for unknown probe tag {tag}")))?;
    match kind {
        KIND_EVENT => {
            if b.len() < layout.size {
                return Err(bad(format!(
                    "event record of {} bytes, layout needs {}",
                    b.len(),
                    layout.size
                )));
            }
            let mut comm = [0u8; 16];
            comm.copy_from_slice(&b[hdr::COMM..hdr::COMM + 16]);
            let mut args = [0u64; NARGS];
            for (i, a) in args.iter_mut().enumerate() {
                *a = u64_at(b, hdr::ARGS + 8 * i)?;
            }
            Ok(Record::Event(Box::new(CapturedEvent {
                tag,
                ktime_ns: u64_at(b, hdr::KTIME)?,
                cpu: u32_at(b, hdr::CPU)?,
                pid: u32_at(b, hdr::PID)?,
                tid: u32_at(b, hdr::TID)?,
                ppid: u32_at(b, hdr::PPID)?,
                uid: u32_at(b, hdr::UID)?,
                gid: u32_at(b, hdr::GID)?,
                comm,
                task: u64_at(b, hdr::TASK)?,
                args,
                vtime_ns: u64_at(b, hdr::VTIME)?,
                walltime_ns: 0,
                errno: 0,
                copies: decode_copies(b, layout, CopySource::AtProbe)?,
                kstack: decode_stack(b, layout.kstack, false)?,
                ustack: if layout.ustack_build_id {
                    None
                } else {
                    decode_stack(b, layout.ustack, true)?
                },
                ustack_files: if layout.ustack_build_id {
                    decode_file_stack(b, layout.ustack)?
                } else {
                    None
                },
                ustack_regs: decode_unwind(b, layout.ustack_unwind)?,
                uregs: decode_uregs(b, layout.uregs)?,
                retry_armed: u16_at(b, hdr::FLAGS)? & FLAG_RETRY_ARMED != 0,
                handed_over: u16_at(b, hdr::FLAGS)? & super::layout::FLAG_HANDED_OVER != 0,
                execargs: decode_execargs(b, layout.execargs)?,
                ancestors: decode_ancestors(b, layout.ancestors)?,
                paths: layout
                    .paths
                    .iter()
                    .map(|at| {
                        super::path::decode_path(b, *at)
                            .ok_or_else(|| bad("path slot runs past the record"))
                    })
                    .collect::<Result<_>>()?,
            })))
        }
        KIND_RETRY => {
            if b.len() < layout.retry_size {
                return Err(bad("retry record shorter than its layout"));
            }
            Ok(Record::Retry {
                tag,
                tid: u32_at(b, hdr::TID)?,
                ktime_ns: u64_at(b, hdr::KTIME)?,
                copies: decode_copies(b, layout, CopySource::AtReturn)?,
            })
        }
        k => Err(bad(format!("unknown record kind {k}"))),
    }
}
