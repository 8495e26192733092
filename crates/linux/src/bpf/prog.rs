//! Program loading: hands generated instructions to the kernel and, when the verifier refuses them,
//! returns its complete log in the error. A [`Program`] owns its descriptor.
//!
//! With DTrace's `bpflog` option ([`set_verifier_log`]), every program is loaded with the
//! verifier's log on at the level asked, in a buffer of `bpflogsize` bytes, and the log is
//! printed to standard error, each line prefixed with `BPF: ` as DTrace for Linux prints it,
//! whether the kernel accepted the program or refused it; a log that does not fit the buffer is
//! not printed and DTrace's note says so.

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

/// Whether this kernel lets BPF programs write into user memory (`bpf_probe_write_user`, what
/// `copyout()` needs), found once by loading a tracepoint program that calls it: the kernel
/// offers the helper only to a process with `CAP_SYS_ADMIN` on a kernel not locked down. `Err`
/// says why not, as plainly as the system tells.
pub fn write_user_allowed() -> std::result::Result<(), String> {
    static ALLOWED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    ALLOWED
        .get_or_init(|| {
            use super::insn::{helper, Size, R0, R1, R10, R2, R3};
            let mut a = super::Asm::new();
            a.store_imm(Size::DW, R10, -8, 0)
                .mov_imm(R1, 0)
                .frame_addr(R2, -8)
                .mov_imm(R3, 1)
                .call(helper::PROBE_WRITE_USER)
                .mov_imm(R0, 0)
                .exit();
            let words: Vec<u64> = a
                .finish()
                .map_err(|e| e.to_string())?
                .iter()
                .map(|i| i.to_u64())
                .collect();
            let mut log = vec![0u8; 1 << 16];
            let code = Code {
                words: &words,
                funcs: &[],
            };
            match Program::try_load(
                ProgKind::Tracepoint,
                code,
                "dt_write_probe",
                Some((&mut log, 1)),
            ) {
                Ok(_) => Ok(()),
                Err(e) => {
                    let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown")
                        .ok()
                        .and_then(|s| {
                            let mode = s.split('[').nth(1)?.split(']').next()?.to_string();
                            (mode != "none").then_some(mode)
                        });
                    let text = log_text(&log);
                    Err(match lockdown {
                        Some(mode) => format!(
                            "the kernel is locked down ({mode}), which refuses \
                             bpf_probe_write_user() to BPF programs"
                        ),
                        None if text.contains("cannot use helper") => "this kernel refuses \
                            bpf_probe_write_user() to BPF programs (kernel lockdown, or a \
                            process without CAP_SYS_ADMIN)"
                            .to_string(),
                        None => format!("this kernel refuses bpf_probe_write_user(): {e}"),
                    })
                }
            }
        })
        .clone()
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
/// Loads tried again after the verifier gave up on a signal (EAGAIN).
const LOAD_TRIES: u32 = 5;

/// DTrace for Linux's log level for `bpflog`: `BPF_LOG_LEVEL1 | BPF_LOG_LEVEL2 | BPF_LOG_STATS`.
pub const DEFAULT_LOG_LEVEL: u32 = 4 | 2 | 1;
/// DTrace for Linux's default `bpflogsize`: 16 MiB less one byte.
pub const DEFAULT_LOG_SIZE: usize = (16 << 20) - 1;
/// The smallest log buffer every kernel takes.
pub const MIN_LOG_SIZE: usize = 128;
/// The largest log buffer the kernel takes (`log_size` is checked against `UINT_MAX >> 2`).
pub const MAX_LOG_SIZE: usize = (u32::MAX >> 2) as usize;

/// The verifier log asked for with `bpflog`: every program loaded while it is set logs at
/// `level` (the kernel's `log_level` bits) into `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifierLog {
    /// The kernel's `log_level` (1: the instructions verified, 2: every state, 4: statistics).
    pub level: u32,
    /// The buffer's size (`bpflogsize`).
    pub size: usize,
}

static VERIFIER_LOG: std::sync::Mutex<Option<VerifierLog>> = std::sync::Mutex::new(None);

/// Sets (or, with `None`, clears) the verifier log every program is loaded with from now on.
pub fn set_verifier_log(log: Option<VerifierLog>) {
    let mut g = VERIFIER_LOG.lock().unwrap_or_else(|p| p.into_inner());
    *g = log;
}

/// The verifier log programs are loaded with now, if any.
pub fn verifier_log() -> Option<VerifierLog> {
    *VERIFIER_LOG.lock().unwrap_or_else(|p| p.into_inner())
}

/// The text of a log buffer (up to its NUL).
fn log_text(log: &[u8]) -> String {
    let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
    String::from_utf8_lossy(&log[..end]).trim_end().to_string()
}

/// Why the verifier refused a program, in its own words: the last line of its log before the
/// statistics it ends with ("processed N insns ...", "verification time", "stack depth"), e.g.
/// "The sequence of 8193 jumps is too complex."; `None` for a log without one.
fn verifier_reason(log: &str) -> Option<&str> {
    log.lines().map(str::trim).rev().find(|l| {
        !l.is_empty()
            && !l.starts_with("processed ")
            && !l.starts_with("verification time")
            && !l.starts_with("stack depth")
    })
}

/// The reason a refusal gives: the verifier's last word, else the system call's error.
fn refusal_reason(log: &str, e: &std::io::Error) -> String {
    verifier_reason(log).map_or_else(|| e.to_string(), |why| format!("{why} ({e})"))
}

/// Prints a verifier log as DTrace for Linux does: each line after `BPF: `.
fn print_log(text: &str) {
    use std::io::Write;
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.lines() {
        out.push_str("BPF: ");
        out.push_str(line);
        out.push('\n');
    }
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// DTrace for Linux's note for a log larger than its buffer.
fn print_incomplete(size: usize) {
    eprintln!(
        "BPF verifier log is incomplete and is not reported.\n\
         Set DTrace option 'bpflogsize' to some greater size for more output.\n\
         (Current size is {size}.)"
    );
}

/// A program's instructions as the kernel reads them, and its functions' BTF records (none
/// without subprograms, see `bpf::funcinfo`).
#[derive(Clone, Copy)]
struct Code<'a> {
    words: &'a [u64],
    funcs: &'a [super::funcinfo::FuncInfo],
}

impl Program {
    /// Loads a program of `kind` that does nothing (returns 0): what a feature probe attaches to
    /// find out whether the kernel accepts an attachment. It is not the user's program, so
    /// `bpflog` does not print its log.
    pub fn load_empty(kind: ProgKind, name: &str, probe: &str) -> Result<Program> {
        let mut a = super::Asm::new();
        a.mov_imm(super::insn::R0, 0).exit();
        Self::load_check(kind, &a.finish()?, name, probe)
    }

    /// Loads `insns` to learn whether the kernel takes them (a feature check, dropped after):
    /// as [`Program::load`], but never with `bpflog`'s log, which is for the user's programs.
    pub fn load_check(kind: ProgKind, insns: &[Insn], name: &str, what: &str) -> Result<Program> {
        Self::load_as(kind, insns, name, what, None)
    }

    /// Loads `insns` as a program of `kind`. `probe` names what it is for (used in errors) and
    /// `name` is the kernel object name (15 characters at most are kept).
    pub fn load(kind: ProgKind, insns: &[Insn], name: &str, probe: &str) -> Result<Program> {
        Self::load_as(kind, insns, name, probe, verifier_log())
    }

    /// [`Program::load`] with the verifier log `logged` (`bpflog`) or none.
    fn load_as(
        kind: ProgKind,
        insns: &[Insn],
        name: &str,
        probe: &str,
        logged: Option<VerifierLog>,
    ) -> Result<Program> {
        let words: Vec<u64> = insns.iter().map(|i| i.to_u64()).collect();
        let funcs = super::funcinfo::func_infos(insns);
        let code = Code {
            words: &words,
            funcs: &funcs,
        };
        if let Some(v) = logged {
            return Self::load_logged(kind, code, name, probe, v);
        }
        match Self::try_load(kind, code, name, None) {
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
                    match Self::try_load(kind, code, name, Some((&mut log, 1))) {
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
                            let text = log_text(&log);
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
                                    refusal_reason(&text, &e)
                                },
                                log: text,
                            });
                        }
                    }
                }
            }
        }
    }

    /// [`Program::load`] with the verifier log `v` on (`bpflog`): the log is printed whether the
    /// kernel accepts the program or not.
    fn load_logged(
        kind: ProgKind,
        code: Code<'_>,
        name: &str,
        probe: &str,
        v: VerifierLog,
    ) -> Result<Program> {
        // The kernel refuses a log buffer under 128 bytes (EINVAL on 6.1).
        let size = v.size.clamp(MIN_LOG_SIZE, MAX_LOG_SIZE);
        let mut log = vec![0u8; size];
        match Self::try_load(kind, code, name, Some((&mut log, v.level))) {
            Ok(fd) => {
                print_log(&log_text(&log));
                Ok(Program {
                    fd,
                    kind,
                    insn_count: code.words.len(),
                })
            }
            Err(e) => {
                let text = log_text(&log);
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    print_incomplete(size);
                } else {
                    print_log(&text);
                }
                if e.raw_os_error() == Some(libc::EPERM) && text.is_empty() {
                    return Err(LinuxError::Permission(format!(
                        "loading the BPF program for {probe}"
                    )));
                }
                Err(LinuxError::VerifierRejected {
                    probe: probe.to_string(),
                    reason: refusal_reason(&text, &e),
                    // Printed already (or too large to be).
                    log: String::new(),
                })
            }
        }
    }

    fn try_load(
        kind: ProgKind,
        code: Code<'_>,
        name: &str,
        log: Option<(&mut Vec<u8>, u32)>,
    ) -> std::io::Result<OwnedFd> {
        let mut attr = ProgLoadAttr {
            prog_type: kind.code(),
            insn_cnt: code.words.len() as u32,
            insns: code.words.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            prog_name: sys::object_name(name),
            ..Default::default()
        };
        if !code.funcs.is_empty() {
            attr.prog_btf_fd =
                super::funcinfo::btf_fd().map_err(|e| std::io::Error::other(e.to_string()))? as u32;
            attr.func_info_rec_size = std::mem::size_of::<super::funcinfo::FuncInfo>() as u32;
            attr.func_info = code.funcs.as_ptr() as u64;
            attr.func_info_cnt = code.funcs.len() as u32;
        }
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
        if let Some((log, level)) = log {
            attr.log_level = level;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
        }
        // The verifier gives up with EAGAIN when a signal arrives while it works (a child's
        // SIGCHLD, say); the load is tried again, a few times, as libbpf does.
        let mut tries = 0;
        let fd = loop {
            // SAFETY: insns, license, function records and log buffers are valid for the call
            // and sized as declared.
            match unsafe { sys::bpf(cmd::PROG_LOAD, &mut attr) } {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < LOAD_TRIES => {
                    tries += 1
                }
                r => break r?,
            }
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_gives_the_verifiers_last_word_not_its_statistics() {
        let log = "0: R1=ctx() R10=fp0\n; some source\n12: (85) call bpf_probe_read_user#112\n\
                   The sequence of 8193 jumps is too complex.\n\
                   verification time 51234 usec\nstack depth 128+0\n\
                   processed 54321 insns (limit 1000000) max_states_per_insn 4 total_states 900 \
                   peak_states 800 mark_read 12\n";
        assert_eq!(
            verifier_reason(log),
            Some("The sequence of 8193 jumps is too complex.")
        );
        let e = std::io::Error::from_raw_os_error(libc::E2BIG);
        assert_eq!(
            refusal_reason(log, &e),
            format!("The sequence of 8193 jumps is too complex. ({e})")
        );
        assert_eq!(verifier_reason("processed 3 insns\n\n"), None);
        assert_eq!(refusal_reason("", &e), e.to_string());
    }
}
