//! Program loading: hands generated instructions to the kernel and, when the verifier refuses them,
//! returns its complete log in the error. A [`Program`] owns its descriptor.

use super::insn::Insn;
use super::sys::{self, attach_type, cmd, prog_type, ProgLoadAttr};
use crate::error::{LinuxError, Result};
use std::os::fd::{AsRawFd, OwnedFd};

/// The program types we load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgKind {
    /// Attached to a tracefs tracepoint through perf (`ctx` is the raw trace record).
    Tracepoint,
    /// Attached to a raw tracepoint (`ctx` is an array of u64 arguments).
    RawTracepoint,
    /// Attached to a perf event such as cpu-clock (`ctx` is `struct bpf_perf_event_data`).
    PerfEvent,
    /// A kprobe (not loadable on kernels without kprobes); also a uprobe attached through a perf
    /// event.
    Kprobe,
    /// A kprobe-type program for uprobe-multi links (`BPF_TRACE_UPROBE_MULTI`): `ctx` is the user
    /// registers, as for [`ProgKind::Kprobe`], and `bpf_get_attach_cookie` reads the link's cookie
    /// of the probe that fired.
    UprobeMulti,
    /// A kprobe-type program for kprobe-multi links (`BPF_TRACE_KPROBE_MULTI`): `ctx` is the kernel
    /// registers at the probed function, and `bpf_get_attach_cookie` reads the link's cookie of
    /// the function that fired.
    KprobeMulti,
    /// A BTF-typed raw tracepoint (`tp_btf`): `ctx` is the u64 argument array, but the verifier knows
    /// the arguments' kernel types, so task pointers can be handed to helpers such as
    /// `bpf_get_task_stack`. `btf_id` is the vmlinux BTF id of the `btf_trace_<name>` typedef.
    TpBtf {
        /// Id of the tracepoint's `btf_trace_<name>` typedef.
        btf_id: u32,
    },
    /// A kernel function's entry through a BPF trampoline: `ctx` is the u64 argument array.
    Fentry {
        /// The function's BTF id (in its module's split BTF for a module function).
        btf_id: u32,
        /// The descriptor of the module's BTF object (`bpf::btf_obj`); 0 for the kernel's own.
        btf_obj_fd: u32,
    },
    /// A kernel function's return: the argument array, then the return value.
    Fexit {
        /// As for [`ProgKind::Fentry`].
        btf_id: u32,
        /// As for [`ProgKind::Fentry`].
        btf_obj_fd: u32,
    },
}

impl ProgKind {
    fn code(self) -> u32 {
        match self {
            ProgKind::Tracepoint => prog_type::TRACEPOINT,
            ProgKind::RawTracepoint => prog_type::RAW_TRACEPOINT,
            ProgKind::PerfEvent => prog_type::PERF_EVENT,
            ProgKind::Kprobe | ProgKind::UprobeMulti | ProgKind::KprobeMulti => prog_type::KPROBE,
            ProgKind::TpBtf { .. } | ProgKind::Fentry { .. } | ProgKind::Fexit { .. } => {
                prog_type::TRACING
            }
        }
    }
}

/// A loaded program.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    kind: ProgKind,
    insn_count: usize,
}

const LICENSE: &[u8] = b"GPL\0";
const FIRST_LOG: usize = 1 << 20;
const MAX_LOG: usize = 64 << 20;

impl Program {
    /// Loads a program of `kind` that does nothing (returns 0): what a feature probe attaches to
    /// find out whether the kernel accepts an attachment.
    pub fn load_empty(kind: ProgKind, name: &str, probe: &str) -> Result<Program> {
        let mut a = super::Asm::new();
        a.mov_imm(super::insn::R0, 0).exit();
        Self::load(kind, &a.finish()?, name, probe)
    }

    /// Loads `insns` as a program of `kind`. `probe` names what it is for (used in errors) and
    /// `name` is the kernel object name (15 characters at most are kept).
    pub fn load(kind: ProgKind, insns: &[Insn], name: &str, probe: &str) -> Result<Program> {
        let words: Vec<u64> = insns.iter().map(|i| i.to_u64()).collect();
        match Self::try_load(kind, &words, name, None) {
            Ok(fd) => Ok(Program {
                fd,
                kind,
                insn_count: insns.len(),
            }),
            Err(first) => {
                // Load again with the log on, growing the buffer until the log fits.
                let mut size = FIRST_LOG;
                loop {
                    let mut log = vec![0u8; size];
                    match Self::try_load(kind, &words, name, Some(&mut log)) {
                        Ok(fd) => {
                            return Ok(Program {
                                fd,
                                kind,
                                insn_count: insns.len(),
                            })
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && size < MAX_LOG => {
                            size *= 4
                        }
                        Err(e) => {
                            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                            let text = String::from_utf8_lossy(&log[..end]).trim_end().to_string();
                            if e.raw_os_error() == Some(libc::EPERM) && text.is_empty() {
                                return Err(LinuxError::Permission(format!(
                                    "loading the BPF program for {probe}"
                                )));
                            }
                            return Err(LinuxError::VerifierRejected {
                                probe: probe.to_string(),
                                reason: if text.is_empty() {
                                    first.to_string()
                                } else {
                                    e.to_string()
                                },
                                log: text,
                            });
                        }
                    }
                }
            }
        }
    }

    fn try_load(
        kind: ProgKind,
        words: &[u64],
        name: &str,
        log: Option<&mut Vec<u8>>,
    ) -> std::io::Result<OwnedFd> {
        let mut attr = ProgLoadAttr {
            prog_type: kind.code(),
            insn_cnt: words.len() as u32,
            insns: words.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            prog_name: sys::object_name(name),
            ..Default::default()
        };
        let traced = match kind {
            ProgKind::TpBtf { btf_id } => Some((attach_type::TRACE_RAW_TP, btf_id, 0)),
            ProgKind::Fentry { btf_id, btf_obj_fd } => {
                Some((attach_type::TRACE_FENTRY, btf_id, btf_obj_fd))
            }
            ProgKind::Fexit { btf_id, btf_obj_fd } => {
                Some((attach_type::TRACE_FEXIT, btf_id, btf_obj_fd))
            }
            _ => None,
        };
        if let Some((expected, btf_id, obj_fd)) = traced {
            attr.expected_attach_type = expected;
            attr.attach_btf_id = btf_id;
            attr.attach_btf_obj_fd = obj_fd;
        }
        match kind {
            ProgKind::UprobeMulti => attr.expected_attach_type = attach_type::TRACE_UPROBE_MULTI,
            ProgKind::KprobeMulti => attr.expected_attach_type = attach_type::TRACE_KPROBE_MULTI,
            _ => {}
        }
        if let Some(log) = log {
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
        }
        // SAFETY: insns, license and log buffers are valid for the call and sized as declared.
        let fd = unsafe { sys::bpf(cmd::PROG_LOAD, &mut attr) }?;
        // SAFETY: a fresh descriptor returned by the kernel.
        Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
    }

    /// The raw descriptor.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The program kind.
    pub fn kind(&self) -> ProgKind {
        self.kind
    }

    /// Instruction slots loaded.
    pub fn insn_count(&self) -> usize {
        self.insn_count
    }

    /// Runs a raw tracepoint program once, now, in the calling thread (`BPF_PROG_TEST_RUN`), with
    /// `args` as its context (at most 12 arguments); returns the program's return value.
    pub fn test_run_raw_tp(&self, args: &[u64]) -> Result<u32> {
        if self.kind != ProgKind::RawTracepoint || args.len() > 12 {
            return Err(LinuxError::Asm(format!(
                "test run of a {:?} program with {} arguments",
                self.kind,
                args.len()
            )));
        }
        let mut attr = sys::TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            ctx_size_in: std::mem::size_of_val(args) as u32,
            ctx_in: args.as_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: ctx_in points at `args`, valid for the call and of the declared size.
        unsafe { sys::bpf(cmd::PROG_TEST_RUN, &mut attr) }
            .map_err(|e| LinuxError::from_io("running a BPF program", e))?;
        Ok(attr.retval)
    }
}
