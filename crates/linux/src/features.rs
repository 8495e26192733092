//! Run-time detection of kernel features: kprobes and fentry (for `fbt`), BTF, BPF itself, the
//! helpers some actions need at the probe (`bpf_loop`, ring-buffer dynptrs).

use crate::error::{LinuxError, Result};

/// Whether the kernel offers kprobes (a `kprobe_events` file in tracefs or the kprobe PMU).
pub fn have_kprobes() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists()
        || crate::tracefs::find_tracefs().is_some_and(|r| r.join("kprobe_events").exists())
}

/// Whether the kernel can attach fentry programs: BTF, plus an ftrace function tracer whose function
/// list we may read (sandboxed kernels refuse it with EPERM, and refuse BPF trampolines with it).
pub fn have_fentry() -> bool {
    have_btf() && have_function_list()
}

/// Whether the kernel publishes its BTF.
pub fn have_btf() -> bool {
    std::path::Path::new("/sys/kernel/btf/vmlinux").exists()
}

/// How `fbt` probes attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FbtMechanism {
    /// fentry/fexit programs on BPF trampolines (the cheapest per firing).
    Fentry,
    /// kprobes and kretprobes (kprobe-multi links where the kernel has them).
    Kprobe,
}

/// The environment variable that picks the `fbt` mechanism (`fentry` or `kprobe`) instead of the
/// default (fentry where the kernel has it, kprobes otherwise).
pub const FBT_MECHANISM_ENV: &str = "DTRACE_FBT";

/// How `fbt` probes attach on this kernel (see [`FBT_MECHANISM_ENV`]), or why there is no `fbt`, as
/// the user should see it. Both need the function list of ftrace (`available_filter_functions`).
pub fn fbt_mechanism() -> Result<FbtMechanism> {
    // Read once: every fbt probe asks.
    static CHOSEN: std::sync::OnceLock<std::result::Result<FbtMechanism, Option<String>>> =
        std::sync::OnceLock::new();
    CHOSEN
        .get_or_init(choose_fbt_mechanism)
        .clone()
        .map_err(|e| e.map_or(LinuxError::FbtUnavailable, LinuxError::Unavailable))
}

/// The mechanism, or why there is none (`None`: neither kprobes nor fentry).
fn choose_fbt_mechanism() -> std::result::Result<FbtMechanism, Option<String>> {
    let asked = std::env::var(FBT_MECHANISM_ENV).ok();
    let fentry = have_fentry();
    let kprobes = have_kprobes() && crate::kprobe::available() && have_function_list();
    match asked.as_deref() {
        None | Some("") => {}
        Some("fentry") if fentry => return Ok(FbtMechanism::Fentry),
        Some("kprobe") if kprobes => return Ok(FbtMechanism::Kprobe),
        Some(m @ ("fentry" | "kprobe")) => {
            let what = if m == "fentry" {
                "no fentry (BPF trampolines)"
            } else {
                "no kprobes"
            };
            return Err(Some(format!(
                "the fbt provider on {m} ({FBT_MECHANISM_ENV}={m}): this kernel has {what}"
            )));
        }
        Some(other) => {
            return Err(Some(format!(
                "the fbt provider: {FBT_MECHANISM_ENV}={other} is neither fentry nor kprobe"
            )))
        }
    }
    if fentry {
        return Ok(FbtMechanism::Fentry);
    }
    if kprobes {
        return Ok(FbtMechanism::Kprobe);
    }
    Err(None)
}

/// Whether ftrace's list of traceable functions can be read (found once a run: the fbt and
/// rawfbt checks and the syscall trampolines' each ask).
fn have_function_list() -> bool {
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| {
        use std::io::Read;
        let Some(root) = crate::tracefs::find_tracefs() else {
            return false;
        };
        let mut buf = [0u8; 64];
        std::fs::File::open(root.join("available_filter_functions"))
            .and_then(|mut f| f.read(&mut buf))
            .is_ok_and(|n| n > 0)
    })
}

/// `Ok` when this kernel has the `fbt` provider (BPF trampolines or kprobes); otherwise why not,
/// as the user should see it.
pub fn fbt_support() -> Result<()> {
    fbt_mechanism().map(|_| ())
}

/// `Ok` when this kernel has the `rawfbt` provider, which always places kprobes; otherwise why
/// not, as the user should see it.
pub fn rawfbt_support() -> Result<()> {
    if have_kprobes() && crate::kprobe::available() && have_function_list() {
        Ok(())
    } else {
        Err(LinuxError::Unavailable(
            "rawfbt provider unavailable: this kernel has no kprobes".into(),
        ))
    }
}

/// Whether a probe may size its ring-buffer records (`bpf_ringbuf_reserve_dynptr` and
/// `bpf_dynptr_data`, Linux 5.19): copies sized at the probe then take every byte they ask for
/// at the probe (see `capture::sized`). Found once by loading a program that reserves one.
pub fn have_ringbuf_dynptr() -> bool {
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| {
        use crate::bpf::insn::{helper, R0, R1, R2, R3, R4};
        let Ok(ring) = crate::bpf::RingBuf::create("dt_dynptr", 4096) else {
            return false;
        };
        let mut a = crate::bpf::Asm::new();
        a.ld_map_fd(R1, ring.map().raw_fd())
            .mov_imm(R2, 64)
            .mov_imm(R3, 0)
            .frame_addr(R4, -16)
            .call(helper::RINGBUF_RESERVE_DYNPTR);
        a.frame_addr(R1, -16)
            .mov_imm(R2, 8)
            .mov_imm(R3, 8)
            .call(helper::DYNPTR_DATA);
        a.frame_addr(R1, -16)
            .mov_imm(R2, 0)
            .call(helper::RINGBUF_DISCARD_DYNPTR);
        a.mov_imm(R0, 0).exit();
        loads(a, "dt_dynptr", "ring-buffer dynptr probe")
    })
}

/// Whether the kernel loads the program `a` assembled (a raw tracepoint program named `name`),
/// the test of each feature probed by loading.
fn loads(a: crate::bpf::Asm, name: &str, what: &str) -> bool {
    let Ok(insns) = a.finish() else {
        return false;
    };
    crate::bpf::Program::load_check(crate::bpf::ProgKind::RawTracepoint, &insns, name, what).is_ok()
}

/// Whether a probe's program may loop with `bpf_loop` (Linux 5.17), calling back a subprogram
/// of its own (what `chill()` spins with, see `capture::chill`). Found once by loading a
/// program that calls it, with the BTF function records such a program needs.
pub fn have_bpf_loop() -> bool {
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| loads_bpf_loop(8))
}

/// Why a probe's code cannot loop with `bpf_loop` calling back a subprogram of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopUnusable {
    /// The kernel has no `bpf_loop` (Linux 5.17), or refuses its callbacks.
    #[error("this kernel lacks bpf_loop (Linux 5.17)")]
    Missing,
    /// The verifier counts the callback's frame on top of the probe code's whole stack at the
    /// load of its address (Linux 6.1), and the clauses' code at a probe fills that stack.
    #[error(
        "this kernel's verifier counts bpf_loop's callback on top of the probe code's whole \
         stack, which is full"
    )]
    StackCounted,
}

/// `Ok` when the clauses' code at a probe may loop with `bpf_loop` calling back a subprogram
/// of its own whatever stack it takes: `bpf_loop` is there and the verifier lets its callback
/// run beside a program whose stack is full (Linux 6.1's verifier counts the callback's frame
/// on top of the program's whole stack at the load of its address, and refuses the 512 bytes
/// they would then take); otherwise why not ([`loop_beside`] says it for a program of a given
/// stack). What `chill()` spins with ([`chill_at_probe`]) and long string searches loop with
/// (`dtrace_ebpf::translate::ProbeContext::loops`).
pub fn loop_at_probe() -> std::result::Result<(), LoopUnusable> {
    loop_beside(512)
}

/// The steps of 32 bytes the verifier counts a program's stack in, up to 512.
const STACK_STEPS: usize = 16;

/// `depth` (bytes of a program's stack) in the verifier's steps of 32 bytes, from 1 (a stack
/// of 0 takes one too) to [`STACK_STEPS`] (a depth past 512 counts as 512).
fn stack_step(depth: u32) -> usize {
    (depth.clamp(1, 512) as usize).div_ceil(32)
}

/// `Ok` when a probe's program whose own code takes `depth` bytes of stack (as
/// `insn::stack_depth` counts them) may loop with `bpf_loop` calling back a subprogram of its
/// own; otherwise why not. Found once per 32 bytes of stack by loading such a program.
pub fn loop_beside(depth: u32) -> std::result::Result<(), LoopUnusable> {
    static OK: [std::sync::OnceLock<std::result::Result<(), LoopUnusable>>; STACK_STEPS] =
        [const { std::sync::OnceLock::new() }; STACK_STEPS];
    let step = stack_step(depth);
    *OK[step - 1].get_or_init(|| {
        if !have_bpf_loop() {
            Err(LoopUnusable::Missing)
        } else if !loads_bpf_loop(32 * step as i16) {
            Err(LoopUnusable::StackCounted)
        } else {
            Ok(())
        }
    })
}

/// `Ok` when a clause's `chill()` can spin at the probe ([`loop_at_probe`]); otherwise why not,
/// as `-v` says it.
pub fn chill_at_probe() -> std::result::Result<(), &'static str> {
    loop_at_probe().map_err(|why| match why {
        LoopUnusable::Missing => {
            "chill() spins at the probe with bpf_loop (Linux 5.17), which this kernel lacks"
        }
        LoopUnusable::StackCounted => {
            "chill() spins at the probe with bpf_loop, whose callback this kernel's verifier \
             counts on top of the probe code's whole stack, which is full"
        }
    })
}

/// Whether the user stack walk at the probe may find a PC by its file
/// (`capture::uunwind::FileRoute`) in some probe's program: [`file_route_beside`] a program of
/// the least stack.
pub fn file_route_at_probe() -> bool {
    file_route_beside(8)
}

/// Whether the user stack walk in a probe's program whose own code takes `depth` bytes of
/// stack may find a PC by its file (`capture::uunwind::FileRoute`): `bpf_find_vma()` (Linux
/// 5.17) called from the walk's `bpf_loop` callback, with a callback of its own reading the
/// mapping's fields (a third frame Linux 6.1 counts on top of the program's stack), and the
/// kernel's BTF naming those fields. Found once per 32 bytes of stack by loading such a
/// program.
pub fn file_route_beside(depth: u32) -> bool {
    static OK: [std::sync::OnceLock<bool>; STACK_STEPS] =
        [const { std::sync::OnceLock::new() }; STACK_STEPS];
    let step = stack_step(depth);
    *OK[step - 1].get_or_init(|| {
        let Some(v) = crate::btf::VmaFileOffsets::of_running_kernel() else {
            return false;
        };
        if loop_beside(depth).is_err() {
            return false;
        }
        use crate::bpf::insn::{helper, Size, R0, R1, R10, R2, R3, R4, R5, R6};
        let mut a = crate::bpf::Asm::new();
        a.store_imm(Size::DW, R10, -8, 0);
        a.store_imm(Size::DW, R10, -32 * step as i16, 0);
        a.mov_imm(R1, 1);
        a.ld_callback(R2, "dt_vma_loop_probe", move |a| {
            a.call(helper::GET_CURRENT_TASK_BTF).mov(R1, R0);
            a.mov_imm(R2, 0x1000);
            a.ld_callback(R3, "dt_vma_probe", move |a| {
                let out = a.label();
                a.load(Size::DW, R6, R2, v.vm_file as i16);
                a.load(Size::DW, R0, R2, v.vm_start as i16);
                a.load(Size::DW, R0, R2, v.vm_pgoff as i16);
                a.jmp_imm(crate::bpf::insn::op::JEQ, R6, 0, out);
                a.load(Size::DW, R6, R6, v.f_inode as i16);
                a.jmp_imm(crate::bpf::insn::op::JEQ, R6, 0, out);
                a.load(Size::DW, R0, R6, v.i_ino as i16);
                a.load(Size::DW, R6, R6, v.i_sb as i16);
                a.jmp_imm(crate::bpf::insn::op::JEQ, R6, 0, out);
                a.load(Size::W, R0, R6, v.s_dev as i16);
                a.bind(out);
                a.mov_imm(R0, 0).exit();
            });
            a.mov_imm(R4, 0).mov_imm(R5, 0).call(helper::FIND_VMA);
            a.mov_imm(R0, 1).exit();
        });
        a.frame_addr(R3, -8).mov_imm(R4, 0).call(helper::LOOP);
        a.mov_imm(R0, 0).exit();
        loads(a, "dt_vma", "bpf_find_vma probe")
    })
}

/// Whether the kernel loads a program using `depth` bytes of its stack (8 to 512) that calls
/// `bpf_loop` with a callback of its own.
fn loads_bpf_loop(depth: i16) -> bool {
    use crate::bpf::insn::{helper, Size, R0, R1, R10, R2, R3, R4};
    let mut a = crate::bpf::Asm::new();
    a.store_imm(Size::DW, R10, -8, 0);
    a.store_imm(Size::DW, R10, -depth, 0);
    a.mov_imm(R1, 1);
    a.ld_callback(R2, "dt_loop_probe", |a| {
        a.mov_imm(R0, 1).exit();
    });
    a.frame_addr(R3, -8).mov_imm(R4, 0).call(helper::LOOP);
    a.mov_imm(R0, 0).exit();
    loads(a, "dt_loop", "bpf_loop probe")
}
