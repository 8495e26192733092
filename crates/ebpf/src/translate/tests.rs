//! The translator checked against the DIF interpreter, without a kernel: D predicates compiled by the
//! compiler run in the interpreter (over its fake context and memory) and, translated, in a small
//! eBPF emulator over the same values; both must agree on the result, and on whether it faulted.

use super::*;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Machine, VarState, VmOptions};

/// The probe's values, shared by the interpreter's fake context and the emulator.
#[derive(Clone)]
struct Probe {
    args: Vec<u64>,
    pid: u64,
    tid: u64,
    uid: u64,
    execname: Vec<u8>,
    names: ProbeNames,
    /// `epid` as the context leaves it (0: not known at this firing).
    epid: u64,
    kernel: Vec<(u64, Vec<u8>)>,
    user: Vec<(u64, Vec<u8>)>,
    /// The thread's saved user registers (none: a kernel thread).
    uregs: Vec<u64>,
    /// Why the code may not loop with `bpf_loop` here (none: it may).
    no_loops: Option<&'static str>,
    /// The offsets of `d_path()`'s walk (none: `d_path()` runs in dtrace), and the paths the
    /// interpreter's memory gives (the capture's), by `struct path` address.
    path_offsets: Option<crate::dpath::PathOffsets>,
    paths: Vec<(u64, Vec<u8>)>,
}

impl Probe {
    fn new() -> Probe {
        Probe {
            args: vec![
                3,
                0xffff_ffff_ffff_fffe,
                0x8000_0000_0000_0000,
                7,
                0,
                0,
                0,
                1,
            ],
            pid: 4242,
            tid: 4243,
            uid: 1000,
            execname: b"dd".to_vec(),
            names: ProbeNames {
                provider: "syscall".into(),
                module: "vmlinux".into(),
                function: "write".into(),
                name: "entry".into(),
                syscall_return: false,
                id: ProbeId::Is(PROBE_ID),
            },
            epid: EPID,
            kernel: vec![(0xffff_8000_0000_1000, (0u8..64).collect())],
            user: vec![(0x7fff_0000_1000, b"hello\0world".to_vec())],
            uregs: (0..21).map(|i| 0x40_1000 + 8 * i).collect(),
            no_loops: None,
            path_offsets: None,
            paths: Vec::new(),
        }
    }
}

/// The fake probe's `id`, and its clause's `epid`.
const PROBE_ID: u32 = 70_000;
const EPID: u64 = 12;

/// The fake probe's `walltimestamp` and `vtimestamp`.
const WALLTIMESTAMP: u64 = 1_796_000_000_123_456_789;
const VTIMESTAMP: u64 = 8_765_432;

impl ProbeContext for Probe {
    fn loops(&self) -> Result<(), String> {
        self.no_loops.map_or(Ok(()), |why| Err(why.into()))
    }

    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        let v = match b {
            Builtin::Arg(n) => self.args.get(n as usize).copied().unwrap_or(0),
            Builtin::Pid => self.pid,
            Builtin::Tid => self.tid,
            Builtin::Uid => self.uid,
            Builtin::Gid => return Err("no gid at this probe".into()),
            Builtin::Cpu => 0,
            Builtin::Ppid => 1,
            Builtin::Curthread => 0xffff_8000_0000_1000,
            Builtin::Timestamp => return Err("no timestamp in these tests".into()),
            Builtin::Walltimestamp => WALLTIMESTAMP,
            Builtin::Vtimestamp => VTIMESTAMP,
            Builtin::Epid => self.epid,
            Builtin::Caller | Builtin::Stackdepth => return Err("no kernel stack here".into()),
            Builtin::Ucaller | Builtin::Ustackdepth => return Err("no user stack here".into()),
        };
        // Clobber what the contract allows, to catch a translator that keeps values there.
        a.mov_imm(R1, -1).mov_imm(R2, -1).mov_imm(R3, -1);
        a.ld_imm64(R0, v);
        Ok(())
    }

    fn emit_ureg(&self, a: &mut Asm, i: u64, none: Label) -> Result<(), String> {
        // Whether the thread has user registers, checked at run time as the kernel's code does.
        a.mov_imm(R1, i32::from(!self.uregs.is_empty()));
        a.jmp_imm(op::JEQ, R1, 0, none);
        a.mov_imm(R1, -1).mov_imm(R2, -1).mov_imm(R3, -1);
        let v = usize::try_from(i).ok().and_then(|i| self.uregs.get(i));
        a.ld_imm64(R0, v.copied().unwrap_or(0));
        if v.is_none() {
            a.mov_imm(R1, 0).jmp_imm(op::JEQ, R1, 0, none);
        }
        Ok(())
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        a.frame_addr(R1, i32::from(at))
            .mov_imm(R2, COMM_LEN as i32)
            .call(helper::GET_CURRENT_COMM);
        Ok(())
    }

    fn names(&self) -> &ProbeNames {
        &self.names
    }

    fn task_links(&self) -> Result<TaskLinks, String> {
        Ok(TASK_LINKS)
    }

    fn path_offsets(&self) -> Result<crate::dpath::PathOffsets, String> {
        self.path_offsets.ok_or_else(|| "no d_path() here".into())
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        if offset + len > STRING_SCRATCH_LEN {
            return Err("out of string scratch".into());
        }
        a.mov_imm(R1, -1).mov_imm(R2, -1);
        a.ld_imm64(R0, SCRATCH_ADDR + offset as u64);
        Ok(())
    }

    fn emit_strtok_state(&self, a: &mut Asm) -> Result<i16, String> {
        a.mov_imm(R1, -1).mov_imm(R2, -1);
        a.ld_imm64(R0, SCRATCH_ADDR + STRING_SCRATCH_LEN as u64);
        Ok(STRTOK_POSITION)
    }
}

/// Where [`Probe`] keeps `strtok()`'s position: a stack slot above the fragments' frame, zero
/// when the emulator starts (a firing); its copy is the last [`STRTOK_COPY_LEN`] bytes of the
/// scratch, past the string scratch.
const STRTOK_POSITION: i16 = -8;
const STRTOK_COPY_LEN: usize = 512;

thread_local! {
    /// What the emulated `bpf_probe_write_user` wrote: (address, bytes).
    static WRITES: std::cell::RefCell<Vec<(u64, Vec<u8>)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The current task's address (`curthread`, `bpf_get_current_task`).
const CURTHREAD: u64 = 0xffff_8000_0000_1000;

/// [`Probe`]'s `task_struct`: `real_parent` at 16, `tgid` at 32, walked 4 parents up.
const TASK_LINKS: TaskLinks = TaskLinks {
    real_parent: 16,
    tgid: 32,
    most: 4,
};

/// What the emulated `bpf_get_prandom_u32` returns (its top bit set, to show it is not
/// sign-extended).
const PRANDOM: u32 = 0x9abc_def1;

/// Where the emulator keeps the contexts' string scratch, and its size.
const SCRATCH_ADDR: u64 = 0x2000_0000;
const SCRATCH_LEN: usize = STRING_SCRATCH_LEN + STRTOK_COPY_LEN;
/// The part of it [`ProbeContext::emit_string_scratch`] hands out.
const STRING_SCRATCH_LEN: usize = 4096;

/// A subprogram's address as the emulator keeps it: its first instruction plus this.
const CALLBACK_TAG: u64 = 0x7000_0000_0000_0000;
/// A callback's frame pointer in the emulator: no stack there.
const CALLBACK_FP: u64 = 0x3000_0000;

/// A `bpf_loop` call the emulator runs.
struct LoopCall {
    /// The instruction after the call.
    ret: usize,
    /// The caller's r6-r10.
    saved: [u64; 5],
    /// The callback's first instruction.
    callback: usize,
    /// The callback's context (r3 of the call).
    ctx: u64,
    /// The calls made so far.
    index: u64,
    /// The calls asked for.
    nr: u64,
}

/// Runs eBPF over [`Probe`]'s memory: the instructions and helpers fragments use.
fn emulate(insns: &[Insn], p: &Probe) -> u64 {
    emulate_frame(insns, p).0
}

/// [`emulate`], with the stack as the program left it (frame offset `off` is `stack[512 + off]`).
fn emulate_frame(insns: &[Insn], p: &Probe) -> (u64, [u8; 512]) {
    let (r0, stack, _) = emulate_all(insns, p);
    (r0, stack)
}

/// [`emulate_frame`], with the string scratch as the program left it.
fn emulate_all(insns: &[Insn], p: &Probe) -> (u64, [u8; 512], Vec<u8>) {
    const FP: u64 = 0x1000_0000;
    let mut stack = [0u8; 512];
    let mut scratch = vec![0xaau8; SCRATCH_LEN];
    let mut r = [0u64; 11];
    r[10] = FP;
    let mut pc = 0usize;
    let mut steps = 0;
    let code = crate::insn::subprograms(insns)
        .first()
        .copied()
        .unwrap_or(insns.len());
    // The `bpf_loop` calls running (their callback's frames).
    let mut loops: Vec<LoopCall> = Vec::new();
    let read = |regions: &[(u64, Vec<u8>)], addr: u64, len: usize| -> Option<Vec<u8>> {
        regions.iter().find_map(|(base, bytes)| {
            let off = usize::try_from(addr.checked_sub(*base)?).ok()?;
            bytes.get(off..off.checked_add(len)?).map(<[u8]>::to_vec)
        })
    };
    let slot = |addr: u64, len: usize| -> usize {
        let off = addr.wrapping_sub(FP - 512) as usize;
        assert!(
            off + len <= 512,
            "stack access out of the frame at {addr:#x}"
        );
        off
    };
    loop {
        steps += 1;
        assert!(steps < 5_000_000, "runaway program");
        // The fragment's code ends where its subprograms start.
        let Some(i) = insns
            .get(pc)
            .copied()
            .filter(|_| pc < code || !loops.is_empty())
        else {
            return (r[0], stack, scratch);
        };
        pc += 1;
        let (dst, src) = (i.dst as usize, i.src as usize);
        let class = i.code & 7;
        match class {
            0x07 => {
                let y = if i.code & op::X != 0 {
                    r[src]
                } else {
                    i.imm as i64 as u64
                };
                let x = r[dst];
                r[dst] = match i.code & 0xf0 {
                    op::ADD => x.wrapping_add(y),
                    op::SUB => x.wrapping_sub(y),
                    op::MUL => x.wrapping_mul(y),
                    op::DIV => x.checked_div(y).unwrap_or(0),
                    op::MOD => x.checked_rem(y).unwrap_or(x),
                    op::OR => x | y,
                    op::AND => x & y,
                    op::LSH => x.wrapping_shl(y as u32 & 63),
                    op::RSH => x.wrapping_shr(y as u32 & 63),
                    op::NEG => x.wrapping_neg(),
                    op::XOR => x ^ y,
                    op::MOV => y,
                    op::ARSH => ((x as i64) >> (y & 63)) as u64,
                    c => panic!("alu op {c:#x}"),
                };
            }
            // 32-bit ALU: only the byte-order conversion to big-endian (`BPF_END | BPF_TO_BE`).
            0x04 if i.code == op::ALU | op::END | op::TO_BE => {
                r[dst] = match i.imm {
                    16 => u64::from((r[dst] as u16).swap_bytes()),
                    32 => u64::from((r[dst] as u32).swap_bytes()),
                    64 => r[dst].swap_bytes(),
                    w => panic!("byte swap of {w} bits"),
                };
            }
            // A subprogram's address (`BPF_PSEUDO_FUNC`): its first instruction, tagged.
            0x00 if i.src == crate::insn::PSEUDO_FUNC => {
                r[dst] = CALLBACK_TAG + (pc as i64 + i64::from(i.imm)) as u64;
                pc += 1;
            }
            0x00 => {
                let hi = insns[pc].imm as u32 as u64;
                pc += 1;
                r[dst] = (i.imm as u32 as u64) | (hi << 32);
            }
            0x01..=0x03 => {
                let len = match i.code & 0x18 {
                    op::B => 1,
                    op::H => 2,
                    op::W => 4,
                    _ => 8,
                };
                let base = if class == 0x01 { r[src] } else { r[dst] };
                let addr = base.wrapping_add(i.off as i64 as u64);
                let in_scratch = addr.wrapping_sub(SCRATCH_ADDR) < SCRATCH_LEN as u64;
                let mem: &mut [u8] = if in_scratch {
                    let at = (addr - SCRATCH_ADDR) as usize;
                    assert!(at + len <= SCRATCH_LEN, "scratch access past its end");
                    &mut scratch[at..at + len]
                } else {
                    let at = slot(addr, len);
                    &mut stack[at..at + len]
                };
                if class == 0x01 {
                    let mut b = [0u8; 8];
                    b[..len].copy_from_slice(mem);
                    r[dst] = u64::from_le_bytes(b);
                } else {
                    let v = if class == 0x03 {
                        r[src]
                    } else {
                        i.imm as i64 as u64
                    };
                    mem.copy_from_slice(&v.to_le_bytes()[..len]);
                }
            }
            0x05 => {
                let jop = i.code & 0xf0;
                match jop {
                    // A callback's return: the next call, or the end of the loop (1 stops it).
                    op::EXIT if !loops.is_empty() => {
                        let l = loops.last_mut().expect("a loop runs");
                        assert!(r[0] <= 1, "a bpf_loop callback returns 0 or 1");
                        l.index += 1;
                        if r[0] == 1 || l.index == l.nr {
                            let l = loops.pop().expect("a loop runs");
                            r[0] = l.index;
                            r[6..=10].copy_from_slice(&l.saved);
                            for x in &mut r[1..=5] {
                                *x = 0xdead;
                            }
                            pc = l.ret;
                        } else {
                            r = [0xdead; 11];
                            (r[1], r[2], r[10]) = (l.index, l.ctx, CALLBACK_FP);
                            pc = l.callback;
                        }
                    }
                    op::EXIT => return (r[0], stack, scratch),
                    // `bpf_loop(nr, callback, ctx, 0)`: the callback runs with no stack of its
                    // own (any access to one fails), every other register unknown.
                    op::CALL if i.imm == helper::LOOP => {
                        assert_eq!(r[4], 0, "bpf_loop's flags");
                        assert!(r[1] <= 1 << 23, "bpf_loop's bound");
                        let callback = r[2]
                            .checked_sub(CALLBACK_TAG)
                            .expect("bpf_loop calls back a subprogram")
                            as usize;
                        if r[1] == 0 {
                            r[0] = 0;
                            for x in &mut r[1..=5] {
                                *x = 0xdead;
                            }
                        } else {
                            let mut saved = [0; 5];
                            saved.copy_from_slice(&r[6..=10]);
                            loops.push(LoopCall {
                                ret: pc,
                                saved,
                                callback,
                                ctx: r[3],
                                index: 0,
                                nr: r[1],
                            });
                            let ctx = r[3];
                            r = [0xdead; 11];
                            (r[1], r[2], r[10]) = (0, ctx, CALLBACK_FP);
                            pc = callback;
                        }
                    }
                    op::CALL
                        if i.imm == helper::PROBE_READ_USER_STR
                            || (i.imm == helper::PROBE_READ_KERNEL_STR
                                && r[3].wrapping_sub(SCRATCH_ADDR) >= SCRATCH_LEN as u64) =>
                    {
                        // At most len - 1 bytes and the NUL; -EFAULT when a byte before the
                        // end cannot be read.
                        let (dst_at, len, src_at) = (r[1], r[2] as usize, r[3]);
                        let region = if i.imm == helper::PROBE_READ_USER_STR {
                            &p.user
                        } else {
                            &p.kernel
                        };
                        assert!(
                            dst_at.wrapping_sub(SCRATCH_ADDR) < SCRATCH_LEN as u64,
                            "strings are read into the scratch"
                        );
                        let at = (dst_at - SCRATCH_ADDR) as usize;
                        assert!(at + len <= SCRATCH_LEN);
                        let mut out = Vec::new();
                        let mut ok = true;
                        while out.len() + 1 < len {
                            match read(region, src_at.wrapping_add(out.len() as u64), 1) {
                                Some(b) if b[0] == 0 => break,
                                Some(b) => out.push(b[0]),
                                None => {
                                    ok = false;
                                    break;
                                }
                            }
                        }
                        r[0] = if ok {
                            out.push(0);
                            scratch[at..at + out.len()].copy_from_slice(&out);
                            out.len() as u64
                        } else {
                            (-14i64) as u64
                        };
                        for x in &mut r[1..=5] {
                            *x = 0xdead;
                        }
                    }
                    op::CALL
                        if i.imm == helper::GET_CURRENT_TASK
                            || i.imm == helper::GET_CURRENT_PID_TGID =>
                    {
                        r[0] = if i.imm == helper::GET_CURRENT_TASK {
                            CURTHREAD
                        } else {
                            p.pid << 32 | p.tid
                        };
                        for x in &mut r[1..=5] {
                            *x = 0xdead;
                        }
                    }
                    op::CALL if i.imm == helper::GET_PRANDOM_U32 => {
                        r[0] = u64::from(PRANDOM);
                        for x in &mut r[1..=5] {
                            *x = 0xdead;
                        }
                    }
                    op::CALL if i.imm == helper::PROBE_WRITE_USER => {
                        // From the scratch into a user region of the probe (recorded in
                        // WRITES); -EFAULT elsewhere.
                        let (dst_at, src_at, len) = (r[1], r[2], r[3] as usize);
                        let at = (src_at - SCRATCH_ADDR) as usize;
                        assert!(at + len <= SCRATCH_LEN, "writes come from the scratch");
                        r[0] = if read(&p.user, dst_at, len).is_some() {
                            WRITES.with(|w| {
                                w.borrow_mut()
                                    .push((dst_at, scratch[at..at + len].to_vec()))
                            });
                            0
                        } else {
                            (-14i64) as u64
                        };
                        for x in &mut r[1..=5] {
                            *x = 0xdead;
                        }
                    }
                    op::CALL if i.imm == helper::PROBE_READ_KERNEL_STR => {
                        // Within the scratch: at most len - 1 bytes and the NUL.
                        let (dst_at, len, src_at) = (r[1], r[2] as usize, r[3]);
                        let (d, s) = (
                            (dst_at - SCRATCH_ADDR) as usize,
                            (src_at - SCRATCH_ADDR) as usize,
                        );
                        assert!(d + len <= SCRATCH_LEN && s + len <= SCRATCH_LEN);
                        let n = scratch[s..s + len - 1]
                            .iter()
                            .position(|&c| c == 0)
                            .unwrap_or(len - 1);
                        let copy = scratch[s..s + n].to_vec();
                        scratch[d..d + n].copy_from_slice(&copy);
                        scratch[d + n] = 0;
                        r[0] = n as u64 + 1;
                        for x in &mut r[1..=5] {
                            *x = 0xdead;
                        }
                    }
                    op::CALL => {
                        let (dst_at, len) = (r[1], r[2] as usize);
                        let bytes = match i.imm {
                            // Kernel memory: the probe's, or the scratch itself (alloca()
                            // memory read as an address's bytes).
                            helper::PROBE_READ_KERNEL
                                if r[3].wrapping_sub(SCRATCH_ADDR) < SCRATCH_LEN as u64 =>
                            {
                                let at = (r[3] - SCRATCH_ADDR) as usize;
                                assert!(at + len <= SCRATCH_LEN, "scratch read past its end");
                                Some(scratch[at..at + len].to_vec())
                            }
                            helper::PROBE_READ_KERNEL => read(&p.kernel, r[3], len),
                            helper::PROBE_READ_USER => read(&p.user, r[3], len),
                            helper::GET_CURRENT_COMM => {
                                let mut c = p.execname.clone();
                                c.resize(len, 0);
                                Some(c)
                            }
                            h => panic!("helper {h}"),
                        };
                        // Into the string scratch (copyin()), or the frame.
                        let dst: &mut [u8] = match dst_at.checked_sub(SCRATCH_ADDR) {
                            Some(d) if (d as usize) < SCRATCH_LEN => {
                                let d = d as usize;
                                assert!(d + len <= SCRATCH_LEN);
                                &mut scratch[d..d + len]
                            }
                            _ => {
                                let at = slot(dst_at, len);
                                &mut stack[at..at + len]
                            }
                        };
                        r[0] = match bytes {
                            Some(b) => {
                                dst.copy_from_slice(&b);
                                0
                            }
                            None => {
                                dst.fill(0);
                                (-14i64) as u64
                            }
                        };
                        for x in &mut r[1..=5] {
                            *x = 0xdead;
                        }
                    }
                    _ => {
                        let x = r[dst];
                        let y = if i.code & op::X != 0 {
                            r[src]
                        } else {
                            i.imm as i64 as u64
                        };
                        let taken = match jop {
                            op::JA => true,
                            op::JEQ => x == y,
                            op::JNE => x != y,
                            op::JGT => x > y,
                            op::JGE => x >= y,
                            op::JLT => x < y,
                            op::JLE => x <= y,
                            op::JSET => x & y != 0,
                            op::JSGT => (x as i64) > (y as i64),
                            op::JSGE => (x as i64) >= (y as i64),
                            op::JSLT => (x as i64) < (y as i64),
                            op::JSLE => (x as i64) <= (y as i64),
                            c => panic!("jump op {c:#x}"),
                        };
                        if taken {
                            pc = (pc as i64 + i64::from(i.off)) as usize;
                        }
                    }
                }
            }
            c => panic!("class {c:#x}"),
        }
    }
}

fn predicate(src: &str) -> DifObject {
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    p.ecbs[0].predicate.clone().expect("a predicate")
}

const FRAME: Frame = Frame { base: -32 };

/// The interpreter's verdict: `Some(true/false)`, or `None` for a fault.
fn interpret(obj: &DifObject, p: &Probe) -> Option<bool> {
    interpret_result(obj, p).ok().map(|v| v != 0)
}

/// The interpreter's value, or its fault.
fn interpret_result(obj: &DifObject, p: &Probe) -> Result<u64, dtrace_dif::vm::Fault> {
    let (mut ctx, mut mem) = fake_env(p);
    let mut state = VarState::new(VmOptions::default());
    Machine::new().run(obj, &mut state, &mut ctx, &mut mem)
}

/// The interpreter's fake context and memory for probe `p`.
fn fake_env(p: &Probe) -> (FakeContext, FakeMemory) {
    let mut ctx = FakeContext::new();
    ctx.args = p.args.clone();
    ctx.args.resize(10, 0);
    ctx.ints.insert(vars::DIF_VAR_PID, p.pid);
    ctx.ints.insert(vars::DIF_VAR_TID, p.tid);
    ctx.ints.insert(vars::DIF_VAR_UID, p.uid);
    ctx.ints.insert(vars::DIF_VAR_CPU, 0);
    ctx.ints.insert(vars::DIF_VAR_PPID, 1);
    ctx.ints
        .insert(vars::DIF_VAR_CURTHREAD, 0xffff_8000_0000_1000);
    ctx.ints.insert(vars::DIF_VAR_WALLTIMESTAMP, WALLTIMESTAMP);
    ctx.ints.insert(vars::DIF_VAR_VTIMESTAMP, VTIMESTAMP);
    // As the framework's context gives them: the ECB's EPID, the probe's id (none where the
    // context knows neither, as `FakeContext` faults on a built-in without a value).
    if p.epid != 0 {
        ctx.ints.insert(vars::DIF_VAR_EPID, p.epid);
    }
    if let ProbeId::Is(id) = p.names.id {
        ctx.ints.insert(vars::DIF_VAR_ID, u64::from(id));
    }
    ctx.uregs = p.uregs.clone();
    ctx.strings
        .insert(vars::DIF_VAR_EXECNAME, p.execname.clone());
    let n = &p.names;
    // As the Linux session fills the firing's errno: from a system call's result at its return.
    let errno = match p.args[0] as i64 {
        r @ -4095..=-1 if n.syscall_return => -r as u64,
        _ => 0,
    };
    ctx.ints.insert(vars::DIF_VAR_ERRNO, errno);
    for (id, s) in [
        (vars::DIF_VAR_PROBEPROV, &n.provider),
        (vars::DIF_VAR_PROBEMOD, &n.module),
        (vars::DIF_VAR_PROBEFUNC, &n.function),
        (vars::DIF_VAR_PROBENAME, &n.name),
    ] {
        ctx.strings.insert(id, s.as_bytes().to_vec());
    }
    let mut mem = FakeMemory::new();
    mem.kernel.extend(p.kernel.iter().cloned());
    mem.user.extend(p.user.iter().cloned());
    mem.paths.extend(p.paths.iter().cloned());
    (ctx, mem)
}

/// Asserts that every instruction can be reached from the first (the verifier refuses dead code)
/// and that no jump leaves the fragment (other than to its end).
fn assert_reachable(insns: &[Insn]) {
    if let Err(e) = crate::insn::check_flow(insns) {
        panic!("{e}");
    }
}

/// The translated fragment's verdict, as [`interpret`]'s.
fn kernel(obj: &DifObject, p: &Probe) -> Option<bool> {
    let f = translate(obj, p, 256, FRAME).unwrap_or_else(|e| panic!("untranslatable: {e}"));
    assert_reachable(&f.insns);
    match emulate(&f.insns, p) {
        v if v == FAULTED as u64 => None,
        v => Some(v != 0),
    }
}

fn both_ways(src: &str, p: &Probe) -> Option<bool> {
    let obj = predicate(src);
    let want = interpret(&obj, p);
    assert_eq!(kernel(&obj, p), want, "{src}");
    want
}

fn clause(pred: &str) -> String {
    format!("self int x; syscall::write:entry / {pred} / {{ @ = count(); }}")
}

#[test]
fn integer_predicates_agree_with_the_interpreter() {
    let p = Probe::new();
    let cases = [
        ("pid == 4242", Some(true)),
        ("pid == 1", Some(false)),
        ("pid != 4242 || tid == 4243", Some(true)),
        ("arg0 > 2 && arg0 < 4", Some(true)),
        ("arg1 < 0", Some(true)),
        ("(int)arg1 == -2", Some(true)),
        ("arg1 > 5", Some(false)),
        ("(uint64_t)arg1 > 5", Some(true)),
        ("arg2 > 0", Some(false)),
        ("args[3] == 7", Some(true)),
        ("arg0 * 3 - 1 == 8", Some(true)),
        ("arg0 << 62 >> 62 == -1", Some(true)),
        ("(uint64_t)arg0 << 62 >> 62 == 3", Some(true)),
        (
            "(arg3 ^ 5) == 2 && (arg3 | 8) == 15 && (arg3 & 3) == 3",
            Some(true),
        ),
        ("~arg0 == -4", Some(true)),
        ("!(arg4)", Some(true)),
        ("arg7", Some(true)),
        ("arg9 == 0", Some(true)),
        ("uid == 1000 && cpu == 0", Some(true)),
        ("arg0 ? arg3 == 7 : 0", Some(true)),
        ("arg4 ? 1 : arg0 >= 3", Some(true)),
    ];
    for (pred, want) in cases {
        assert_eq!(both_ways(&clause(pred), &p), want, "{pred}");
    }
}

#[test]
fn uregs_are_read_as_the_interpreter_reads_them() {
    let mut p = Probe::new();
    for (pred, want) in [
        ("uregs[R_PC] == 0x401080", Some(true)),
        ("uregs[0] == 0x401000 && uregs[20] == 0x4010a0", Some(true)),
        // Past the registers: the interpreter faults, as for args[].
        ("uregs[21] == 0", None),
    ] {
        assert_eq!(both_ways(&clause(pred), &p), want, "{pred}");
    }
    // A kernel thread has none.
    p.uregs.clear();
    assert_eq!(both_ways(&clause("uregs[R_SP] == 0"), &p), None);
}

#[test]
fn division_and_remainder_have_dtrace_semantics() {
    let p = Probe::new();
    for (pred, want) in [
        ("arg3 / arg0 == 2", Some(true)),
        ("arg3 % arg0 == 1", Some(true)),
        ("(int64_t)arg1 / 2 == -1", Some(true)),
        ("(int64_t)arg1 % 4 == -2", Some(true)),
        ("7 / (int64_t)arg1 == -3", Some(true)),
        ("-7 % (int64_t)arg1 == -1", Some(true)),
        ("(int64_t)arg2 / -1 == (int64_t)arg2", Some(true)),
        ("(int64_t)arg2 % -1 == 0", Some(true)),
        // By zero: a fault, not eBPF's 0.
        ("arg3 / arg4 == 0", None),
        ("arg3 % arg4 == 0", None),
        ("(int64_t)arg3 / (int64_t)arg4 == 0", None),
    ] {
        assert_eq!(both_ways(&clause(pred), &p), want, "{pred}");
    }
}

#[test]
fn string_predicates_agree_with_the_interpreter() {
    let mut p = Probe::new();
    for name in ["dd", "d", "ddd", "bash", "a-fifteen-chars", ""] {
        p.execname = name.as_bytes().to_vec();
        for pred in [
            r#"execname == "dd""#,
            r#"execname != "dd""#,
            r#""dd" == execname"#,
            r#"execname < "dd""#,
            r#"execname >= "d""#,
            r#""bash" > execname"#,
            r#"execname == "a-fifteen-chars-and-more""#,
            r#"execname == """#,
            r#"probefunc == "write" && probename == "entry""#,
            r#"probefunc == "read""#,
            r#"execname == execname"#,
        ] {
            both_ways(&clause(pred), &p);
        }
    }
}

#[test]
fn clock_builtins_are_read_from_the_context() {
    let p = Probe::new();
    for (pred, want) in [
        ("walltimestamp == 1796000000123456789", Some(true)),
        ("walltimestamp / 1000000000 == 1796000000", Some(true)),
        ("vtimestamp == 8765432", Some(true)),
        ("vtimestamp - 8765000 < 400", Some(false)),
    ] {
        assert_eq!(both_ways(&clause(pred), &p), want, "{pred}");
    }
}

#[test]
fn epid_and_id_are_the_clauses_and_the_probes() {
    let mut p = Probe::new();
    for (pred, want) in [
        ("epid == 12", Some(true)),
        ("epid == 13", Some(false)),
        ("id == 70000", Some(true)),
        ("id / 1000 == 70 && epid * 2 == 24", Some(true)),
        ("id == epid", Some(false)),
    ] {
        assert_eq!(both_ways(&clause(pred), &p), want, "{pred}");
    }
    assert_eq!(value_both_ways(&p, "epid"), 1012);
    assert_eq!(value_both_ways(&p, "id"), 71_000);
    // The id is a constant: a division by it cannot fault.
    let obj = predicate(&clause("arg0 / id == 0"));
    let f = translate(&obj, &p, 256, FRAME).unwrap();
    assert!(f.fault_sites.is_empty(), "{:?}", f.fault_sites);
    // An EPID the context does not know at this firing faults as the interpreter does on a
    // built-in without a value, at the same instruction.
    p.epid = 0;
    let obj = predicate(&clause("arg0 == 3 && epid == 12"));
    let fault = interpret_result(&obj, &p).expect_err("no epid, a fault");
    assert_eq!(fault.kind, FaultKind::IllOp);
    let f = translate(&obj, &p, 256, FRAME).unwrap();
    let (r0, stack) = emulate_frame(&f.insns, &p);
    assert_eq!(r0, FAULTED as u64);
    assert_eq!(
        frame_fault(&stack),
        Some((fault.kind.code(), fault.pc, fault.addr))
    );
    // Where one program serves several probes the id is no constant: the clause says so.
    p.names.id = ProbeId::Shared;
    let e = translate(&predicate(&clause("id == 1")), &p, 256, FRAME).unwrap_err();
    assert!(e.to_string().contains("every process"), "{e}");
    // While planning, the clause translates (the program built at enable has the id).
    p.names.id = ProbeId::Planned;
    translate(&predicate(&clause("id == 1")), &p, 256, FRAME).unwrap();
}

#[test]
fn errno_is_a_syscall_returns_negated_result() {
    for ret in [
        0u64,
        3,
        (-1i64) as u64,
        (-2i64) as u64,
        (-4095i64) as u64,
        (-4096i64) as u64,
    ] {
        for syscall_return in [false, true] {
            let mut p = Probe::new();
            p.args[0] = ret;
            p.names.name = if syscall_return { "return" } else { "entry" }.into();
            p.names.syscall_return = syscall_return;
            for pred in [
                "errno == 0",
                "errno == 2",
                "errno == 4095",
                "errno + arg0 == 0",
            ] {
                let r = both_ways(&clause(pred), &p);
                assert!(r.is_some(), "{pred} at {ret:#x}");
            }
        }
    }
    // The values themselves: -2 gives 2 at a return, 0 at an entry.
    let mut p = Probe::new();
    p.args[0] = (-2i64) as u64;
    assert_eq!(both_ways(&clause("errno == 0"), &p), Some(true));
    p.names.syscall_return = true;
    assert_eq!(both_ways(&clause("errno == 2"), &p), Some(true));
}

#[test]
fn small_strsize_cuts_execname_as_the_interpreter_does() {
    let mut p = Probe::new();
    p.execname = b"abcdef".to_vec();
    for pred in [
        r#"execname == "abc""#,
        r#"execname == "abcd""#,
        r#"execname == "abcdef""#,
        r#"execname < "abcd""#,
    ] {
        let src = format!("#pragma D option strsize=4\n{}", clause(pred));
        let obj = predicate(&src);
        let mut ctx = FakeContext::new();
        ctx.strings
            .insert(vars::DIF_VAR_EXECNAME, p.execname.clone());
        let mut state = VarState::new(VmOptions {
            strsize: 4,
            ..VmOptions::default()
        });
        let want = Machine::new()
            .run(&obj, &mut state, &mut ctx, &mut FakeMemory::new())
            .ok()
            .map(|v| v != 0);
        let f = translate(&obj, &p, 4, FRAME).unwrap();
        assert_reachable(&f.insns);
        let got = match emulate(&f.insns, &p) {
            v if v == FAULTED as u64 => None,
            v => Some(v != 0),
        };
        assert_eq!(got, want, "{pred}");
    }
}

#[test]
fn small_strsize_cuts_the_probe_names_as_the_interpreter_does() {
    // `-x strsize=4`: a string's storage is 5 bytes, a built-in string keeps 4 characters.
    let p = Probe::new();
    for pred in [
        r#"probeprov == "sysc""#,
        r#"probeprov == "syscall""#,
        r#"probefunc == "writ""#,
        r#"probefunc == "write""#,
        r#"probename == "entry""#,
        r#"probename == "entr""#,
        r#"probemod < "vmlinux""#,
        r#"zonename == "glob""#,
        r#"probefunc == probefunc"#,
    ] {
        let obj = predicate(&clause(pred));
        let mut ctx = FakeContext::new();
        let n = &p.names;
        for (id, s) in [
            (vars::DIF_VAR_PROBEPROV, &n.provider),
            (vars::DIF_VAR_PROBEMOD, &n.module),
            (vars::DIF_VAR_PROBEFUNC, &n.function),
            (vars::DIF_VAR_PROBENAME, &n.name),
        ] {
            ctx.strings.insert(id, s.as_bytes().to_vec());
        }
        ctx.strings
            .insert(vars::DIF_VAR_ZONENAME, b"global".to_vec());
        let mut state = VarState::new(VmOptions {
            strsize: 5,
            ..VmOptions::default()
        });
        let want = Machine::new()
            .run(&obj, &mut state, &mut ctx, &mut FakeMemory::new())
            .ok()
            .map(|v| v != 0);
        assert!(want.is_some(), "{pred}");
        let f = translate(&obj, &p, 5, FRAME).unwrap();
        assert_reachable(&f.insns);
        let got = match emulate(&f.insns, &p) {
            v if v == FAULTED as u64 => None,
            v => Some(v != 0),
        };
        assert_eq!(got, want, "{pred}");
    }
}

#[test]
fn memory_loads_read_and_fault_as_the_interpreter() {
    let p = Probe::new();
    for (pred, want) in [
        ("*(uint8_t *)0xffff800000001003 == 3", Some(true)),
        ("*(int *)0xffff800000001004 == 0x07060504", Some(true)),
        (
            "*(uint64_t *)0xffff800000001008 == 0x0f0e0d0c0b0a0908",
            Some(true),
        ),
        ("*(char *)0xffff80000000103f == 63", Some(true)),
        (
            "*(int *)((uint64_t)(char *)curthread + 8) == 0x0b0a0908 && ppid == 1",
            Some(true),
        ),
        ("*(int *)0xffff800000002000 == 0", None),
        // Misaligned kernel loads fault, as in DTrace.
        ("*(int *)0xffff800000001002 == 0", None),
        ("*(short *)0xffff800000001001 == 0", None),
    ] {
        assert_eq!(both_ways(&clause(pred), &p), want, "{pred}");
    }
}

#[test]
fn untranslatable_clauses_say_why() {
    let p = Probe::new();
    let why = |pred: &str| {
        translate(&predicate(&clause(pred)), &p, 256, FRAME)
            .expect_err(pred)
            .to_string()
    };
    assert!(
        why("self->x == 1").contains("thread-local"),
        "{}",
        why("self->x == 1")
    );
    assert!(why(r#"json(execname, "a") == "1""#).contains("subroutine json()"));
    assert!(why("gid == 0").contains("no gid at this probe"));
    assert!(why("timestamp > 0").contains("timestamp"));
    assert!(
        why("*(int *)copyin(arg1, 4) == 0").contains("copyin"),
        "{}",
        why("*(int *)copyin(arg1, 4) == 0")
    );
    let g = dtrace_compiler::compile(
        "int g; syscall::write:entry /g == 1/ { @ = count(); }",
        &dtrace_compiler::CompileOptions::default(),
    )
    .unwrap();
    let e = translate(g.ecbs[0].predicate.as_ref().unwrap(), &p, 256, FRAME).unwrap_err();
    assert!(matches!(e, Untranslatable::Variable { .. }), "{e}");
}

#[test]
fn the_frame_stays_within_its_bounds() {
    // Every stack access of a fragment lies in [base - SIZE, base): the caller's slots above are
    // never touched.
    let p = Probe::new();
    let f = translate(
        &predicate(&clause(
            r#"execname == "dd" && *(int *)0xffff800000001004 && arg0 / arg3 == 0"#,
        )),
        &p,
        256,
        FRAME,
    )
    .unwrap();
    for i in &f.insns {
        let class = i.code & 7;
        let (base_reg, off) = match class {
            0x01 => (i.src, i.off),
            0x02 | 0x03 => (i.dst, i.off),
            _ => continue,
        };
        if base_reg == 10 {
            assert!(
                (FRAME.base - Frame::SIZE..FRAME.base).contains(&off),
                "{i:?}"
            );
        }
    }
}

/// Random DIF programs of the instructions the translator handles (forward branches, `ret` at the
/// end) agree with the interpreter, fault where it faults, and translate into fragments whose every
/// instruction is reachable and whose stack use stays in the frame (checked by [`kernel`] and the
/// emulator). Words that are not DIF at all never panic the translator.
#[test]
fn random_dif_agrees_with_the_interpreter() {
    use dtrace_dif::opcode::Opcode as O;
    let mut rng = dtrace_testkit::XorShift(0x5eed_1234_abcd_0001);
    let p = Probe::new();
    let alu = [
        O::Or,
        O::Xor,
        O::And,
        O::Sll,
        O::Srl,
        O::Sra,
        O::Sub,
        O::Add,
        O::Mul,
        O::Sdiv,
        O::Udiv,
        O::Srem,
        O::Urem,
    ];
    let branches = [
        O::Be,
        O::Bne,
        O::Bg,
        O::Bgu,
        O::Bge,
        O::Bgeu,
        O::Bl,
        O::Blu,
        O::Ble,
        O::Bleu,
    ];
    let loads = [O::Ldsb, O::Ldsh, O::Ldsw, O::Ldub, O::Lduh, O::Lduw, O::Ldx];
    let builtins = [
        vars::DIF_VAR_PID,
        vars::DIF_VAR_TID,
        vars::DIF_VAR_UID,
        vars::DIF_VAR_ARG0,
        vars::DIF_VAR_ARG0 + 1,
        vars::DIF_VAR_ARG0 + 2,
        vars::DIF_VAR_ARG0 + 9,
    ];
    let (mut translated, mut total) = (0, 0);
    for _ in 0..3000 {
        let inttab: Vec<u64> = vec![
            0,
            1,
            rng.next() % 70,
            0xffff_8000_0000_1000 + rng.next() % 72,
            rng.next(),
            (-(rng.below(5) as i64)) as u64,
        ];
        let len = 2 + rng.below(18);
        let mut text = Vec::new();
        let reg = |rng: &mut dtrace_testkit::XorShift| rng.below(8) as u8;
        while text.len() < len - 1 {
            let pc = text.len();
            let i = match rng.below(10) {
                0..=2 => Instr::Alu {
                    op: alu[rng.below(alu.len())],
                    r1: reg(&mut rng),
                    r2: reg(&mut rng),
                    rd: reg(&mut rng),
                },
                3 => Instr::Setx {
                    idx: rng.below(inttab.len()) as u16,
                    rd: reg(&mut rng),
                },
                4 => Instr::LoadVar {
                    op: O::Ldgs,
                    var: builtins[rng.below(builtins.len())] as u16,
                    rd: reg(&mut rng),
                },
                5 if pc + 2 < len => {
                    text.push(if rng.below(2) == 0 {
                        Instr::Cmp {
                            r1: reg(&mut rng),
                            r2: reg(&mut rng),
                        }
                    } else {
                        Instr::Tst { r1: reg(&mut rng) }
                    });
                    Instr::Branch {
                        op: branches[rng.below(branches.len())],
                        label: (pc + 2 + rng.below(len - pc - 2)) as u32,
                    }
                }
                6 => Instr::Load {
                    op: loads[rng.below(loads.len())],
                    r1: reg(&mut rng),
                    rd: reg(&mut rng),
                },
                7 => Instr::Not {
                    r1: reg(&mut rng),
                    rd: reg(&mut rng),
                },
                8 => Instr::Mov {
                    r1: reg(&mut rng),
                    rd: reg(&mut rng),
                },
                _ => Instr::Ret { rd: reg(&mut rng) },
            };
            text.push(i);
        }
        text.push(Instr::Ret { rd: reg(&mut rng) });
        let obj = DifObject {
            text: text.iter().map(Instr::encode).collect(),
            inttab,
            ..DifObject::default()
        };
        total += 1;
        if translate(&obj, &p, 256, FRAME).is_ok() {
            translated += 1;
            assert_eq!(kernel(&obj, &p), interpret(&obj, &p), "{text:?}");
        }
        // The same words scrambled: anything at all, never a panic.
        let mut junk = obj.clone();
        for w in &mut junk.text {
            *w ^= (rng.next() as u32) & 0x00ff_ffff;
        }
        let _ = translate(&junk, &p, 256, FRAME);
    }
    assert!(translated * 2 > total, "{translated} of {total} translated");
}

#[test]
fn constant_divisors_cannot_fault() {
    let p = Probe::new();
    for pred in [
        "arg3 % 4 == 3",
        "arg1 / 3 < 0",
        "(int)arg3 % 7 == 0",
        "arg3 == 7",
    ] {
        let obj = predicate(&clause(pred));
        let f = translate(&obj, &p, 256, FRAME).unwrap();
        assert!(!f.can_fault, "{pred}");
        assert_eq!(kernel(&obj, &p), interpret(&obj, &p), "{pred}");
    }
    for pred in [
        "arg3 % arg0 == 1",
        "arg3 / (arg0 - 3) == 1",
        "*(int *)curthread == 0",
    ] {
        let obj = predicate(&clause(pred));
        assert!(translate(&obj, &p, 256, FRAME).unwrap().can_fault, "{pred}");
    }
}

/// The DIF of the (only) key of `@[key] = count()`.
fn key(src: &str) -> DifObject {
    let src = format!("syscall::write:entry {{ @[{src}] = count(); }}");
    let p = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    p.ecbs[0].actions[0].difo.clone().expect("a key")
}

#[test]
fn aggregation_keys_translate_to_their_kind() {
    let p = Probe::new();
    let value = |src: &str| translate_value(&key(src), &p, 256, FRAME);
    assert_eq!(value("execname").unwrap().kind, ValueKind::Execname);
    assert_eq!(
        value("probefunc").unwrap().kind,
        ValueKind::Str(b"write".to_vec())
    );
    assert_eq!(
        value("\"lit\"").unwrap().kind,
        ValueKind::Str(b"lit".to_vec())
    );
    let v = value("arg3 + 1").unwrap();
    assert_eq!(v.kind, ValueKind::Int);
    assert_reachable(&v.fragment.insns);
    assert_eq!(emulate(&v.fragment.insns, &p), 8);
    // A string whose origin differs by path is joined in scratch (see `cond`); a string is no
    // predicate.
    assert_eq!(
        value("arg0 ? \"a\" : \"b\"").unwrap().kind,
        ValueKind::Scratch
    );
    assert!(translate(&key("execname"), &p, 256, FRAME).is_err());
    // The execname the fragment read is where the frame says.
    assert!(FRAME.execname_at() < FRAME.base);
}

/// [`Probe`] with its D variables kept where the probe runs: a load leaves a value made of the
/// variable's id, a store is noted.
struct VarProbe {
    p: Probe,
    stores: std::cell::RefCell<Vec<(bool, u32, i16)>>,
}

impl ProbeContext for VarProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.p.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.p.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.p.names()
    }

    fn emit_thread_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        a.ld_imm64(R0, 1000 + u64::from(var));
        Ok(())
    }

    fn emit_thread_store(&self, _: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        self.stores.borrow_mut().push((false, var, value_at));
        Ok(())
    }

    fn emit_global_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        a.ld_imm64(R0, 2000 + u64::from(var));
        Ok(())
    }

    fn emit_global_store(&self, _: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        self.stores.borrow_mut().push((true, var, value_at));
        Ok(())
    }
}

#[test]
fn variables_are_loaded_and_stored_by_the_probe_context() {
    let vp = VarProbe {
        p: Probe::new(),
        stores: Default::default(),
    };
    // self->x and g are the first user variables (0x500) of their scopes.
    let src = "self int x; int g; syscall::write:entry \
        / self->x == 2280 && g == 3280 / { self->x = arg0 + 1; g = 0; }";
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default()).unwrap();
    let pred = p.ecbs[0].predicate.clone().unwrap();
    let f = translate(&pred, &vp, 256, FRAME).unwrap();
    assert_reachable(&f.insns);
    assert_eq!(emulate(&f.insns, &vp.p), 1);
    for a in &p.ecbs[0].actions {
        let o = a.difo.as_ref().unwrap();
        let f = translate(o, &vp, 256, FRAME).unwrap();
        assert_reachable(&f.insns);
    }
    let stores = vp.stores.borrow();
    let ids: Vec<(bool, u32)> = stores.iter().map(|&(g, v, _)| (g, v)).collect();
    assert_eq!(ids, [(false, 0x500), (true, 0x500)]);
    // The value is in a DIF register's slot of the frame.
    for &(_, _, at) in stores.iter() {
        assert!((FRAME.base - Frame::SIZE..FRAME.base).contains(&at), "{at}");
    }
    // A string is not an integer to store.
    let s = "self string s; syscall::write:entry { self->s = execname; }";
    let p = dtrace_compiler::compile(s, &dtrace_compiler::CompileOptions::default()).unwrap();
    let o = p.ecbs[0].actions[0].difo.as_ref().unwrap();
    assert!(translate(o, &vp, 256, FRAME).is_err());
}

/// [`Probe`] with associative arrays kept where the probe runs: a load leaves the sum of its
/// key's elements (read from the frame slots the translator names), a store is noted with its key.
struct ArrayProbe {
    p: Probe,
    stores: std::cell::RefCell<Vec<(Array, usize, i16)>>,
    drops: bool,
}

impl ProbeContext for ArrayProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.p.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.p.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.p.names()
    }

    fn emit_array_load(&self, a: &mut Asm, _: Array, key: &[KeyPart]) -> Result<(), String> {
        a.mov_imm(R0, 0);
        for part in key {
            match *part {
                KeyPart::Int(at) => {
                    a.load(Size::DW, R1, R10, at).alu(op::ADD, R0, R1);
                }
                KeyPart::Str(ref b) => {
                    a.alu_imm(op::ADD, R0, b.len() as i32);
                }
                KeyPart::Execname(_) => {
                    a.alu_imm(op::ADD, R0, 100);
                }
                KeyPart::Scratch(_) => {
                    a.alu_imm(op::ADD, R0, 1000);
                }
            }
        }
        Ok(())
    }

    fn emit_array_store(
        &self,
        _: &mut Asm,
        array: Array,
        key: &[KeyPart],
        value_at: i16,
    ) -> Result<(), String> {
        self.stores.borrow_mut().push((array, key.len(), value_at));
        Ok(())
    }

    // Clause-locals (the compiler's spill slots among them) in stack slots below the frame.
    fn emit_local_load(&self, a: &mut Asm, var: u32) -> Result<(), String> {
        a.load(Size::DW, R0, R10, local_slot(var)?);
        Ok(())
    }

    fn emit_local_store(&self, a: &mut Asm, var: u32, value_at: i16) -> Result<(), String> {
        a.load(Size::DW, R1, R10, value_at)
            .store(Size::DW, R10, local_slot(var)?, R1);
        Ok(())
    }

    fn emit_dropped(&self, a: &mut Asm, abandon: Label) -> bool {
        if self.drops {
            a.ja(abandon);
        }
        self.drops
    }
}

/// The stack slot of clause-local `var` in [`ArrayProbe`] (ids from 0x500, below the frame).
fn local_slot(var: u32) -> Result<i16, String> {
    let i = var
        .checked_sub(0x500)
        .filter(|i| *i < 16)
        .ok_or("too many locals")?;
    Ok(FRAME.base - Frame::SIZE - 8 * (i as i16 + 1))
}

#[test]
fn tuples_follow_values_reloaded_from_spill_slots() {
    let ap = ArrayProbe {
        p: Probe::new(),
        stores: Default::default(),
        drops: false,
    };
    // A key deep enough that the compiler spills registers to clause-locals and pushes the
    // reloaded values through one register: each element keeps the value it was pushed with.
    let deep = "arg0 + (arg1 * (arg2 + (arg0 * (arg2 + (arg1 * (arg0 + (arg1 * (arg2 + \
        (arg0 * 2)))))))))";
    let args = &ap.p.args;
    let (a0, a1, a2, a3) = (args[0], args[1], args[2], args[3]);
    let m = |x: u64, y: u64| x.wrapping_mul(y);
    let p = |x: u64, y: u64| x.wrapping_add(y);
    let v = p(
        a0,
        m(
            a1,
            p(a2, m(a0, p(a2, m(a1, p(a0, m(a1, p(a2, m(a0, 2)))))))),
        ),
    );
    // The fake array's value is the sum of its key's integers.
    let sum = p(p(a0, a3 % 7), v);
    let src = format!(
        "syscall::write:entry / a[arg0, arg3 % 7, {deep}] == {sum} / {{ a[arg0, arg3 % 7, \
         {deep}] = 1; }}"
    );
    let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default()).unwrap();
    let pred = prog.ecbs[0].predicate.clone().unwrap();
    assert!(
        pred.text.iter().any(|w| matches!(
            Instr::decode(*w),
            Ok(Instr::LoadVar {
                op: Opcode::Ldls,
                ..
            })
        )),
        "no spill in {src}"
    );
    let f = translate(&pred, &ap, 256, FRAME).unwrap();
    assert_reachable(&f.insns);
    assert_eq!(emulate(&f.insns, &ap.p), 1);
    let o = prog.ecbs[0].actions[0].difo.as_ref().unwrap();
    translate(o, &ap, 256, FRAME).unwrap();
    assert_eq!(ap.stores.borrow().len(), 1);
    assert_eq!(ap.stores.borrow()[0].1, 3);
}

#[test]
fn associative_arrays_are_keyed_by_the_tuple_stack() {
    let ap = ArrayProbe {
        p: Probe::new(),
        stores: Default::default(),
        drops: false,
    };
    // arg0 is 3, arg3 is 7: the load sees the tuple's values in order.
    let src = "syscall::write:entry / a[arg0, arg3, 5] == 15 && self->t[arg3] == 7 / \
        { a[arg0, 1, arg3] = 2; self->t[arg0] = 0; }";
    let p = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default()).unwrap();
    let pred = p.ecbs[0].predicate.clone().unwrap();
    let f = translate(&pred, &ap, 256, FRAME).unwrap();
    assert_reachable(&f.insns);
    assert!(!f.can_drop);
    assert_eq!(emulate(&f.insns, &ap.p), 1);
    for a in &p.ecbs[0].actions {
        translate(a.difo.as_ref().unwrap(), &ap, 256, FRAME).unwrap();
    }
    let seen: Vec<(bool, usize)> = ap
        .stores
        .borrow()
        .iter()
        .map(|(a, n, _)| (a.thread, *n))
        .collect();
    assert_eq!(seen, [(false, 3), (true, 1)]);
    assert_eq!(
        array_key_bytes(p.ecbs[0].predicate.as_ref().unwrap(), false, 0x500, 256),
        24
    );
    // A context whose stores can be dropped makes the fragment say so.
    let dp = ArrayProbe {
        p: Probe::new(),
        stores: Default::default(),
        drops: true,
    };
    let o = p.ecbs[0].actions[0].difo.as_ref().unwrap();
    assert!(translate(o, &dp, 256, FRAME).unwrap().can_drop);
    // String keys: constants and execname (strsize bytes each in a key); a key longer than
    // strsize is not kept at the probe.
    let s =
        "syscall::write:entry / a[execname, \"abc\"] == 103 / { a[\"0123456789\", \"x\"] = 1; }";
    let p = dtrace_compiler::compile(s, &dtrace_compiler::CompileOptions::default()).unwrap();
    let pred = p.ecbs[0].predicate.as_ref().unwrap();
    let f = translate(pred, &ap, 256, FRAME).unwrap();
    assert_eq!(emulate(&f.insns, &ap.p), 1);
    assert_eq!(array_key_bytes(pred, false, 0x500, 250), 512);
    let o = p.ecbs[0].actions[0].difo.as_ref().unwrap();
    assert!(translate(o, &ap, 256, FRAME).is_ok());
    assert!(translate(o, &ap, 8, FRAME).is_err());
}

/// The fault a fragment left in its frame: (kind, DIF pc, address), `None` when it did not fault.
fn frame_fault(stack: &[u8; 512]) -> Option<(u32, u32, u64)> {
    let word = |off: i16| {
        let at = (512 + i32::from(off)) as usize;
        u64::from_le_bytes(stack[at..at + 8].try_into().unwrap())
    };
    FaultWord::decode(word(FRAME.fault_at())).map(|w| (w.kind, w.pc, word(FRAME.fault_addr_at())))
}

#[test]
fn each_fault_site_leaves_the_interpreters_kind_pc_and_address() {
    let p = Probe::new();
    let cases = [
        ("arg0 / arg4 == 1", Some(FaultKind::DivZero)),
        ("arg0 % arg4 == 1", Some(FaultKind::DivZero)),
        (
            "arg3 == 7 && (int)arg0 / (int)arg5 == 1",
            Some(FaultKind::DivZero),
        ),
        ("*(int *)0xffff800000002000 == 0", Some(FaultKind::BadAddr)),
        ("*(int *)arg4 == 0", Some(FaultKind::BadAddr)),
        (
            "arg0 == 3 && *(char *)(arg0 + 1) == 0",
            Some(FaultKind::BadAddr),
        ),
        ("*(int *)0xffff800000001002 == 0", Some(FaultKind::BadAlign)),
        (
            "*(short *)0xffff800000001001 == 0",
            Some(FaultKind::BadAlign),
        ),
        ("args[12] == 0", Some(FaultKind::IllOp)),
        ("arg0 / arg3 == 0", None),
        ("*(int *)0xffff800000001004 == 0x07060504", None),
    ];
    for (pred, want) in cases {
        let obj = predicate(&clause(pred));
        let f = translate(&obj, &p, 256, FRAME).unwrap_or_else(|e| panic!("{pred}: {e}"));
        let (r0, stack) = emulate_frame(&f.insns, &p);
        let got = frame_fault(&stack);
        match interpret_result(&obj, &p) {
            Err(fault) => {
                assert_eq!(Some(fault.kind), want, "{pred}");
                assert_eq!(r0, FAULTED as u64, "{pred}");
                assert_eq!(
                    got,
                    Some((fault.kind.code(), fault.pc, fault.addr)),
                    "{pred}: the frame's fault is the interpreter's"
                );
                assert!(
                    f.fault_sites
                        .iter()
                        .any(|s| s.pc == fault.pc && s.kind == fault.kind),
                    "{pred}: {:?} lists the site",
                    f.fault_sites
                );
            }
            Ok(_) => {
                assert_eq!(want, None, "{pred}");
                assert_eq!(got, None, "{pred}: no fault, a zero fault word");
            }
        }
    }
}

#[test]
fn fault_sites_name_each_faulting_instruction() {
    let p = Probe::new();
    let obj = predicate(&clause("*(int *)arg1 / arg2 == 0"));
    let f = translate(&obj, &p, 256, FRAME).unwrap();
    let kinds: Vec<FaultKind> = f.fault_sites.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [FaultKind::BadAlign, FaultKind::BadAddr, FaultKind::DivZero]
    );
    let load = f.fault_sites[0];
    assert_eq!(f.fault_sites[1].pc, load.pc);
    assert!(matches!(load.addr, FaultAddr::Reg(_)));
    assert!(f.fault_sites[2].pc > load.pc);
    assert_eq!(f.fault_sites[2].addr, FaultAddr::Zero);
    let none = translate(&predicate(&clause("arg0 / 2 == 1")), &p, 256, FRAME).unwrap();
    assert!(none.fault_sites.is_empty() && !none.can_fault);
}

/// [`Probe`] whose arguments point at user strings: `arg1` at "hello", `arg2` at "world", `arg4`
/// at a string running to the end of its page (the next one unmapped), `arg5` unmapped, `arg6`
/// NULL.
fn string_probe() -> Probe {
    let mut p = Probe::new();
    let mut page = b"hello\0world\0".to_vec();
    page.resize(4096, b'x');
    p.user = vec![(0x7fff_0000_1000, page)];
    p.args = vec![
        3,
        0x7fff_0000_1000,
        0x7fff_0000_1006,
        7,
        0x7fff_0000_1ffa,
        0x7fff_0000_5000,
        0,
        1,
    ];
    p
}

/// Asserts that the clause predicate `pred` translates to code that reaches every instruction
/// and, run at probe `p`, gives the interpreter's verdict, or faults where and as the
/// interpreter faults (and does not fault where it does not).
fn assert_predicate_as_the_interpreter(p: &Probe, pred: &str) {
    let obj = predicate(&clause(pred));
    let f = translate(&obj, p, 257, FRAME).unwrap_or_else(|e| panic!("{pred}: {e}"));
    assert_reachable(&f.insns);
    let (r0, stack) = emulate_frame(&f.insns, p);
    match interpret_result(&obj, p) {
        Ok(v) => {
            assert_eq!(r0 != 0, v != 0, "{pred}");
            assert_ne!(r0, FAULTED as u64, "{pred}");
            assert_eq!(frame_fault(&stack), None, "{pred}");
        }
        Err(fault) => {
            assert_eq!(r0, FAULTED as u64, "{pred}");
            assert_eq!(
                frame_fault(&stack),
                Some((fault.kind.code(), fault.pc, fault.addr)),
                "{pred}: the interpreter's fault"
            );
        }
    }
}

#[test]
fn copyinstr_compares_and_faults_as_the_interpreter() {
    let p = string_probe();
    for pred in [
        r#"copyinstr(arg1) == "hello""#,
        r#"copyinstr(arg1) != "hello""#,
        r#"copyinstr(arg1) < "help""#,
        r#""hell" < copyinstr(arg1)"#,
        r#"copyinstr(arg1) == "hello!""#,
        r#"copyinstr(arg2) == "world""#,
        "copyinstr(arg1) == copyinstr(arg2)",
        "copyinstr(arg1) < copyinstr(arg2)",
        "copyinstr(arg2) <= copyinstr(arg1)",
        "copyinstr(arg1) == copyinstr(arg1, 6)",
        r#"copyinstr(arg1, 3) == "he""#,
        r#"copyinstr(arg1, arg0) == "he""#,
        r#"copyinstr(arg1, 0) == """#,
        r#"copyinstr(arg1, arg6) == """#,
        "copyinstr(arg1) == execname",
        "execname < copyinstr(arg2)",
        r#"copyinstr(arg4) == "xxxxxx""#,
        r#"copyinstr(arg5) == """#,
        r#"copyinstr(arg6) == """#,
        r#"copyinstr(arg6, 1) == """#,
        r#"copyinstr(arg5, 1) == """#,
        r#"copyinstr(arg4, 5) == "xxxx""#,
        r#"arg0 == 3 && copyinstr(arg0 == 3 ? arg1 : arg2) == "hello""#,
    ] {
        assert_predicate_as_the_interpreter(&p, pred);
    }
}

#[test]
fn copyinstr_values_are_zero_padded_strings_in_scratch() {
    let p = string_probe();
    let value = |src: &str| translate_value(&key(src), &p, 257, FRAME).unwrap();
    for (src, want) in [
        ("copyinstr(arg1)", &b"hello"[..]),
        ("copyinstr(arg2, 3)", b"wo"),
        ("copyinstr(arg4, 5)", b"xxxx"),
    ] {
        let v = value(src);
        assert_eq!(v.kind, ValueKind::Scratch, "{src}");
        assert_reachable(&v.fragment.insns);
        let (r0, _, scratch) = emulate_all(&v.fragment.insns, &p);
        let at = (r0 - SCRATCH_ADDR) as usize;
        let width = string_scratch_width(257);
        let mut expect = want.to_vec();
        expect.resize(width, 0);
        assert_eq!(&scratch[at..at + width], &expect[..], "{src}");
    }
    // Each call site has its own slot; a context without scratch refuses, and says why.
    let two = translate(
        &predicate(&clause("copyinstr(arg1) == copyinstr(arg2)")),
        &p,
        257,
        FRAME,
    )
    .unwrap();
    assert!(two.fault_sites.iter().any(|s| s.addr == FaultAddr::Stored));
    let big = translate(
        &predicate(&clause("copyinstr(arg1) == copyinstr(arg2)")),
        &p,
        4000,
        FRAME,
    )
    .unwrap_err();
    assert!(big.to_string().contains("out of string scratch"), "{big}");
    let vp = VarProbe {
        p: string_probe(),
        stores: Default::default(),
    };
    let e = translate(
        &predicate(&clause(r#"copyinstr(arg1) == "x""#)),
        &vp,
        257,
        FRAME,
    )
    .unwrap_err();
    assert!(e.to_string().contains("strings are built in dtrace"), "{e}");
}

/// [`string_probe`] whose program read `arg1`'s string before the clauses ran, into the
/// emulator's string scratch past the translator's slots.
struct PreReadProbe(Probe, u8);

/// Where [`PreReadProbe`] keeps its copy of its argument's string.
const PRE_READ_AT: u64 = SCRATCH_ADDR + 1600;

impl PreReadProbe {
    /// Code that writes the copy: "hello", zero-padded.
    fn prologue() -> Vec<Insn> {
        let mut a = Asm::new();
        let mut bytes = b"hello".to_vec();
        bytes.resize(string_scratch_width(257), 0);
        a.ld_imm64(R1, PRE_READ_AT);
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            a.ld_imm64(R2, u64::from_le_bytes(w))
                .store(Size::DW, R1, 8 * i as i16, R2);
        }
        a.finish().unwrap()
    }
}

impl ProbeContext for PreReadProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.0.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.0.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.0.names()
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        if offset + len > 1600 {
            return Err("out of string scratch".into());
        }
        self.0.emit_string_scratch(a, offset, len)
    }

    fn pre_reads_string(&self, n: u8) -> bool {
        n == self.1
    }

    fn emit_pre_read_string(&self, a: &mut Asm, n: u8) -> Result<(), String> {
        assert_eq!(n, self.1);
        a.ld_imm64(R0, PRE_READ_AT);
        Ok(())
    }
}

#[test]
fn copyinstr_of_an_argument_read_before_the_clauses_takes_that_copy() {
    let p = PreReadProbe(string_probe(), 1);
    let reads = |insns: &[Insn]| {
        insns
            .iter()
            .filter(|i| i.code == 0x85 && i.imm == helper::PROBE_READ_USER_STR)
            .count()
    };
    for (pred, copies) in [
        (r#"copyinstr(arg1) == "hello""#, 0),
        (r#"copyinstr(arg1) < "help""#, 0),
        ("copyinstr(arg1) == copyinstr(arg2)", 1),
        // A length, or another argument: read as before.
        (r#"copyinstr(arg1, 3) == "he""#, 1),
        (r#"copyinstr(arg0 == 3 ? arg1 : arg2) == "hello""#, 1),
    ] {
        let obj = predicate(&clause(pred));
        let f = translate(&obj, &p, 257, FRAME).unwrap_or_else(|e| panic!("{pred}: {e}"));
        assert_eq!(reads(&f.insns), copies, "{pred}");
        // A clause copying a string in, as the planner sees it.
        assert!(f.fault_sites.iter().any(|s| s.addr == FaultAddr::Stored));
        let mut insns = PreReadProbe::prologue();
        insns.extend(f.insns.iter().copied());
        let (r0, stack) = emulate_frame(&insns, &p.0);
        let v = interpret_result(&obj, &p.0).unwrap_or_else(|e| panic!("{pred}: {e:?}"));
        assert_eq!(r0 != 0, v != 0, "{pred}");
        assert_eq!(frame_fault(&stack), None, "{pred}");
    }
    // A value: the copy itself.
    let v = translate_value(&key("copyinstr(arg1)"), &p, 257, FRAME).unwrap();
    let mut insns = PreReadProbe::prologue();
    insns.extend(v.fragment.insns.iter().copied());
    let (r0, _, _) = emulate_all(&insns, &p.0);
    assert_eq!(r0, PRE_READ_AT);
    // arg6 is 0: the probe's program read nothing; the clause faults at address 0, as the
    // interpreter does.
    let p = PreReadProbe(string_probe(), 6);
    let obj = predicate(&clause(r#"copyinstr(arg6) == """#));
    let f = translate(&obj, &p, 257, FRAME).unwrap();
    let (r0, stack) = emulate_frame(&f.insns, &p.0);
    let fault = interpret_result(&obj, &p.0).unwrap_err();
    assert_eq!(r0, FAULTED as u64);
    assert_eq!(
        frame_fault(&stack),
        Some((fault.kind.code(), fault.pc, fault.addr))
    );
}

/// [`PreReadProbe`] whose argument's value is a user string the probe copies
/// (`ProbeContext::user_string_arg`, as `proc:::exec`'s path), read before the clauses ran or
/// not (the second field).
struct UserArgProbe(PreReadProbe, bool);

impl ProbeContext for UserArgProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.0.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.0.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.0.names()
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        self.0.emit_string_scratch(a, offset, len)
    }

    fn pre_reads_string(&self, n: u8) -> bool {
        self.1 && self.0.pre_reads_string(n)
    }

    fn emit_pre_read_string(&self, a: &mut Asm, n: u8) -> Result<(), String> {
        self.0.emit_pre_read_string(a, n)
    }

    fn user_string_arg(&self, n: u8) -> Option<u32> {
        (n == self.0 .1).then_some(257)
    }
}

#[test]
fn an_argument_whose_user_string_the_probe_copies_is_read_as_that_string() {
    let reads = |insns: &[Insn]| {
        insns
            .iter()
            .filter(|i| i.code == 0x85 && i.imm == helper::PROBE_READ_USER_STR)
            .count()
    };
    for pre_read in [true, false] {
        let p = UserArgProbe(PreReadProbe(string_probe(), 1), pre_read);
        for (pred, want) in [
            (r#"stringof(arg1) == "hello""#, 1),
            (r#"stringof(arg1) == "hellx""#, 0),
            ("strlen(stringof(arg1)) == 5 && arg1 == 0x7fff00001000", 1),
        ] {
            let obj = predicate(&clause(pred));
            let f = translate(&obj, &p, 257, FRAME).unwrap_or_else(|e| panic!("{pred}: {e}"));
            assert_reachable(&f.insns);
            // Read here only without the probe's copy; a clause copying a string in either way.
            assert_eq!(reads(&f.insns), usize::from(!pre_read), "{pred}");
            assert!(f.fault_sites.iter().any(|s| s.addr == FaultAddr::Stored));
            let mut insns = PreReadProbe::prologue();
            insns.extend(f.insns.iter().copied());
            let (r0, stack) = emulate_frame(&insns, &p.0 .0);
            assert_eq!(frame_fault(&stack), None, "{pred}");
            assert_eq!(r0, want, "{pred} (read before: {pre_read})");
        }
        // Another argument is not such a string: left to the interpreter.
        let obj = predicate(&clause(r#"stringof(arg2) == "world""#));
        let e = translate(&obj, &p, 257, FRAME).unwrap_err();
        assert!(e.to_string().contains("probe argument arg2"), "{e}");
    }
    // Address 0 faults at 0, and an unreadable one at itself, both ways.
    for (arg, addr) in [(6u8, 0u64), (5, 0x7fff_0000_5000)] {
        for pre_read in [true, false] {
            let p = UserArgProbe(PreReadProbe(string_probe(), arg), pre_read);
            let obj = predicate(&clause(&format!(r#"stringof(arg{arg}) == "x""#)));
            let f = translate(&obj, &p, 257, FRAME).unwrap();
            let (r0, stack) = emulate_frame(&f.insns, &p.0 .0);
            if pre_read && arg == 5 {
                // The probe's program would have handed the firing over: not run here.
                continue;
            }
            assert_eq!(r0, FAULTED as u64);
            let (kind, _, at) = frame_fault(&stack).unwrap();
            assert_eq!((kind, at), (FaultKind::BadAddr.code(), addr), "arg{arg}");
        }
    }
}

/// [`Probe`] whose string variables (thread-locals and globals, by id) live in the emulator's
/// string scratch past the translator's slots: per variable a flag word (a thread-local: set
/// when it holds a string; a global: set when it is NULL) and its string.
struct StrVarProbe {
    p: Probe,
}

/// Where [`StrVarProbe`] keeps variable `id` (of the first four of each scope).
fn strvar_at(global: bool, id: u32) -> u64 {
    let width = string_scratch_width(257) as u64 + 8;
    let i = u64::from(id - vars::DIF_VAR_OTHER_UBASE) + if global { 4 } else { 0 };
    assert!(i < 8);
    SCRATCH_ADDR + 1600 + i * width
}

impl StrVarProbe {
    fn place(var: StringVar<'_>) -> Result<(bool, u64), String> {
        match var {
            StringVar::Thread(id) => Ok((false, strvar_at(false, id))),
            StringVar::Global(id) => Ok((true, strvar_at(true, id))),
            StringVar::Array(..) => Err("no arrays here".into()),
            StringVar::Local(_) => Err("no clause-locals here".into()),
        }
    }

    /// Code that empties every variable (the scratch starts as garbage).
    fn prologue() -> Vec<Insn> {
        let mut a = Asm::new();
        for i in 0..8u32 {
            let at = strvar_at(i >= 4, vars::DIF_VAR_OTHER_UBASE + i % 4);
            a.ld_imm64(R1, at);
            for w in (0..string_scratch_width(257) as i16 + 8).step_by(8) {
                a.store_imm(Size::DW, R1, w, 0);
            }
        }
        a.finish().unwrap()
    }
}

impl ProbeContext for StrVarProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.p.emit_builtin(a, b)
    }

    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.p.emit_execname(a, at)
    }

    fn names(&self) -> &ProbeNames {
        self.p.names()
    }

    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        if offset + len > 1600 {
            return Err("out of string scratch".into());
        }
        self.p.emit_string_scratch(a, offset, len)
    }

    fn emit_string_load(&self, a: &mut Asm, var: StringVar<'_>, dst: i16) -> Result<(), String> {
        let (global, at) = Self::place(var)?;
        let (null, done) = (a.label(), a.label());
        a.ld_imm64(R1, at).load(Size::DW, R2, R1, 0);
        a.mov_imm(R0, 0);
        a.jmp_imm(if global { op::JNE } else { op::JEQ }, R2, 0, null);
        a.load(Size::DW, R3, R10, dst);
        for w in (0..string_scratch_width(257) as i16).step_by(8) {
            a.load(Size::DW, R2, R1, 8 + w).store(Size::DW, R3, w, R2);
        }
        a.mov_imm(R0, 1).ja(done);
        a.bind(null);
        a.mov_imm(R0, 0);
        a.bind(done);
        Ok(())
    }

    fn emit_string_store(&self, a: &mut Asm, var: StringVar<'_>, src: i16) -> Result<(), String> {
        let (global, at) = Self::place(var)?;
        let (copy, done) = (a.label(), a.label());
        a.ld_imm64(R1, at).load(Size::DW, R3, R10, src);
        a.jmp_imm(op::JNE, R3, 0, copy);
        a.store_imm(Size::DW, R1, 0, i32::from(global)).ja(done);
        a.bind(copy);
        a.store_imm(Size::DW, R1, 0, i32::from(!global));
        for w in (0..string_scratch_width(257) as i16).step_by(8) {
            a.load(Size::DW, R2, R3, w).store(Size::DW, R1, 8 + w, R2);
        }
        a.bind(done);
        Ok(())
    }
}

/// Runs `setup`'s first clause's actions, then the last clause's predicate, in the interpreter
/// (one variable state) and translated (one program, the fragments one after the other).
fn strvar_case(setup: &str, pred: &str) {
    let decls = "self string p; self string q; string s; string t;";
    let src = format!(
        "{decls} syscall::write:entry {{ {setup} }} syscall::write:entry /{pred}/ {{ @ = count(); }}"
    );
    let prog = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let p = string_probe();
    let (mut ctx, mut mem) = fake_env(&p);
    let mut state = VarState::new(VmOptions::default());
    let ctxp = StrVarProbe { p: string_probe() };
    let mut insns = StrVarProbe::prologue();
    for a in &prog.ecbs[0].actions {
        let o = a.difo.as_ref().unwrap();
        Machine::new()
            .run(o, &mut state, &mut ctx, &mut mem)
            .unwrap_or_else(|e| panic!("{setup}: {e:?}"));
        let f = translate(o, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{setup}: {e}"));
        assert_reachable(&f.insns);
        insns.extend(f.insns);
    }
    let obj = prog.ecbs[1].predicate.clone().unwrap();
    let want = Machine::new().run(&obj, &mut state, &mut ctx, &mut mem);
    let f = translate(&obj, &ctxp, 257, FRAME).unwrap_or_else(|e| panic!("{pred}: {e}"));
    assert_reachable(&f.insns);
    insns.extend(f.insns);
    let r0 = emulate(&insns, &p);
    match want {
        Ok(v) => assert_eq!(r0 != 0, v != 0, "{setup} / {pred}: the interpreter's {v}"),
        Err(e) => panic!("{setup} / {pred}: the interpreter faulted: {e:?}"),
    }
    assert_ne!(r0, FAULTED as u64, "{setup} / {pred}");
}

#[test]
fn string_variables_compare_as_the_interpreter_keeps_them() {
    let set = [
        "self->p = copyinstr(arg1);",
        "self->p = copyinstr(arg2, 3);",
        "self->p = \"hello\";",
        "self->p = \"\";",
        "self->p = execname;",
        "self->p = \"x\"; self->p = 0;",
        "self->p = copyinstr(arg1); self->q = self->p;",
        "self->q = self->p;",
        "s = copyinstr(arg1);",
        "s = \"hello\"; t = s; s = 0;",
        "t = execname;",
        ";",
    ];
    let preds = [
        "self->p == \"hello\"",
        "self->p != NULL",
        "self->p == NULL",
        "NULL == self->p",
        "self->p == \"\"",
        "self->p < \"hellp\"",
        "self->p > \"\"",
        "self->p == execname",
        "self->q == self->p",
        "self->q < self->p",
        "self->q != NULL",
        "s == \"hello\"",
        "s != NULL",
        "t == \"hello\"",
        "t == NULL",
        "t > s",
        "s == self->p",
    ];
    for setup in set {
        for pred in preds {
            strvar_case(setup, pred);
        }
    }
}

#[test]
fn a_null_string_variable_faults_as_a_value_and_a_string_as_one() {
    let ctxp = StrVarProbe { p: string_probe() };
    let src = "self string p; syscall::write:entry { @[self->p] = count(); }";
    let prog = dtrace_compiler::compile(src, &dtrace_compiler::CompileOptions::default()).unwrap();
    let key = prog.ecbs[0].actions[0].difo.clone().unwrap();
    let v = translate_value(&key, &ctxp, 257, FRAME).unwrap();
    assert_eq!(v.kind, ValueKind::Scratch);
    assert_reachable(&v.fragment.insns);
    // NULL: the interpreter's fault when the action stores it, at the expression's end.
    let mut insns = StrVarProbe::prologue();
    insns.extend(v.fragment.insns.iter().copied());
    let (r0, stack) = emulate_frame(&insns, &ctxp.p);
    assert_eq!(r0, FAULTED as u64);
    let last = key.text.len() as u32 - 1;
    assert_eq!(
        frame_fault(&stack),
        Some((FaultKind::BadAddr.code(), last, 0))
    );
    // Stored first: the string, zero-padded in scratch.
    let store = "self string p; syscall::write:entry { self->p = copyinstr(arg1); }";
    let prog =
        dtrace_compiler::compile(store, &dtrace_compiler::CompileOptions::default()).unwrap();
    let o = prog.ecbs[0].actions[0].difo.clone().unwrap();
    let f = translate(&o, &ctxp, 257, FRAME).unwrap();
    let mut insns = StrVarProbe::prologue();
    insns.extend(f.insns);
    insns.extend(v.fragment.insns.iter().copied());
    let (r0, _, scratch) = emulate_all(&insns, &ctxp.p);
    let at = (r0 - SCRATCH_ADDR) as usize;
    let mut want = b"hello".to_vec();
    want.resize(string_scratch_width(257), 0);
    assert_eq!(&scratch[at..at + want.len()], &want[..]);
    // A context that keeps strings in dtrace says so.
    let e = translate(&o, &string_probe(), 257, FRAME).unwrap_err();
    assert!(
        e.to_string().contains("string variables live in dtrace"),
        "{e}"
    );
    // A clause-local string is asked of the context too (this one keeps none).
    let local = "syscall::write:entry { this->s = execname; @[this->s] = count(); }";
    let prog =
        dtrace_compiler::compile(local, &dtrace_compiler::CompileOptions::default()).unwrap();
    let o = prog.ecbs[0].actions[0].difo.clone().unwrap();
    let e = translate(&o, &ctxp, 257, FRAME).unwrap_err();
    assert!(
        e.to_string().contains("this->s") && e.to_string().contains("no clause-locals here"),
        "{e}"
    );
}

/// [`Probe`] at a probe whose thread's memory may be written (`copyout()`).
struct WritingProbe(Probe);

impl ProbeContext for WritingProbe {
    fn emit_builtin(&self, a: &mut Asm, b: Builtin) -> Result<(), String> {
        self.0.emit_builtin(a, b)
    }
    fn emit_execname(&self, a: &mut Asm, at: i16) -> Result<(), String> {
        self.0.emit_execname(a, at)
    }
    fn names(&self) -> &ProbeNames {
        self.0.names()
    }
    fn emit_string_scratch(&self, a: &mut Asm, offset: usize, len: usize) -> Result<(), String> {
        self.0.emit_string_scratch(a, offset, len)
    }
    fn writes_user_memory(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The DIF of a clause's first action.
fn action(src: &str) -> DifObject {
    let src = format!("syscall::write:entry {{ {src}; }}");
    let p = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    p.ecbs[0].actions[0].difo.clone().expect("an action")
}

#[test]
fn copyout_writes_at_the_probe_and_faults_at_a_bad_destination() {
    let p = WritingProbe(string_probe());
    let buf = 0x7fff_0000_1000u64;
    // (action, what is written at arg1, or the fault's kind and address)
    type Written = Result<&'static [u8], (FaultKind, u64)>;
    let cases: Vec<(&str, Written)> = vec![
        (r#"copyout("HELLO", arg1, 3)"#, Ok(b"HEL")),
        (r#"copyout("HELLO", arg1, 8)"#, Ok(b"HELLO\0\0\0")),
        (r#"copyout("HELLO", arg1, 0)"#, Ok(b"")),
        (r#"copyoutstr("HELLO", arg1, 64)"#, Ok(b"HELLO\0")),
        (r#"copyoutstr("HELLO", arg1, 2)"#, Ok(b"HE")),
        ("copyoutstr(execname, arg1, 64)", Ok(b"dd\0")),
        ("copyoutstr(execname, arg1, 1)", Ok(b"d")),
        ("copyout(execname, arg1, 4)", Ok(b"dd\0\0")),
        ("copyoutstr(copyinstr(arg1), arg1, 64)", Ok(b"hello\0")),
        ("copyoutstr(copyinstr(arg1), arg1, 3)", Ok(b"hel")),
        (r#"copyout("HELLO", 16, 3)"#, Err((FaultKind::BadAddr, 16))),
        (r#"copyoutstr("HELLO", 0, 3)"#, Err((FaultKind::BadAddr, 0))),
        (
            r#"copyout("HELLO", arg1, 300)"#,
            Err((FaultKind::BadSize, 300)),
        ),
    ];
    for (src, want) in cases {
        let obj = action(src);
        let f = translate(&obj, &p, 257, FRAME).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_reachable(&f.insns);
        WRITES.with(|w| w.borrow_mut().clear());
        let (r0, stack) = emulate_frame(&f.insns, &p.0);
        let writes = WRITES.with(|w| w.borrow().clone());
        match want {
            Ok(bytes) => {
                assert_ne!(r0, FAULTED as u64, "{src}");
                let expect: Vec<(u64, Vec<u8>)> = if bytes.is_empty() {
                    Vec::new()
                } else {
                    vec![(buf, bytes.to_vec())]
                };
                assert_eq!(writes, expect, "{src}");
            }
            Err((kind, addr)) => {
                assert_eq!(r0, FAULTED as u64, "{src}");
                assert!(writes.is_empty(), "{src}");
                let (k, _, a) = frame_fault(&stack).unwrap_or_else(|| panic!("{src}"));
                assert_eq!((k, a), (kind.code(), addr), "{src}");
            }
        }
    }
    // A context that does not write user memory says so; memory at an address is not copied out.
    let e = translate(
        &action(r#"copyout("x", arg1, 1)"#),
        &string_probe(),
        257,
        FRAME,
    )
    .unwrap_err();
    assert!(e.to_string().contains("not written at this probe"), "{e}");
    let e = translate(&action("copyout((void *)arg0, arg1, 1)"), &p, 257, FRAME).unwrap_err();
    assert!(e.to_string().contains("not memory at an address"), "{e}");
}

#[test]
fn strlen_measures_as_the_interpreter() {
    let mut p = string_probe();
    p.execname = b"abcdef".to_vec();
    for strsize in [256usize, 4] {
        for expr in [
            "strlen(copyinstr(arg1))",
            "strlen(copyinstr(arg2))",
            "strlen(copyinstr(arg4))",
            "strlen(copyinstr(arg1, 3))",
            "strlen(copyinstr(arg1, 0))",
            "strlen(copyinstr(arg6))",
            "strlen(execname)",
            "strlen(probefunc)",
            r#"strlen("abc")"#,
            r#"strlen("")"#,
            r#"strlen("0123456789")"#,
            "strlen(copyinstr(arg1)) + strlen(execname) * 100",
        ] {
            let src = format!(
                "#pragma D option strsize={strsize}\n{}",
                clause(&format!("{expr} + 1000"))
            );
            let obj = predicate(&src);
            let (mut ctx, mut mem) = fake_env(&p);
            let mut state = VarState::new(VmOptions {
                strsize: strsize + 1,
                ..VmOptions::default()
            });
            let want = Machine::new().run(&obj, &mut state, &mut ctx, &mut mem);
            let f =
                translate(&obj, &p, strsize + 1, FRAME).unwrap_or_else(|e| panic!("{expr}: {e}"));
            assert_reachable(&f.insns);
            let (r0, stack) = emulate_frame(&f.insns, &p);
            match want {
                Ok(v) => {
                    assert!(v >= 1000, "{expr}: {v}");
                    assert_eq!(r0, v, "{expr} (strsize {strsize})");
                }
                Err(fault) => {
                    assert_eq!(r0, FAULTED as u64, "{expr}");
                    assert_eq!(
                        frame_fault(&stack),
                        Some((fault.kind.code(), fault.pc, fault.addr)),
                        "{expr}: the interpreter's fault"
                    );
                }
            }
        }
    }
}

/// [`Probe`] whose `curthread` points at kernel memory holding "\0kthread\0" then bytes
/// running to the end of the region (no NUL).
fn kernel_string_probe() -> Probe {
    let mut p = string_probe();
    let mut mem = b"\0kthread\0".to_vec();
    mem.extend(std::iter::repeat_n(b'k', 23));
    p.kernel = vec![(0xffff_8000_0000_1000, mem)];
    p
}

/// [`kernel_string_probe`] as an fbt probe, whose arguments are the traced function's own
/// values: `arg1` points at "kthread" in kernel memory, `arg2` at kernel memory not mapped.
fn fbt_string_probe() -> Probe {
    let mut p = kernel_string_probe();
    p.names.provider = "fbt".into();
    p.args[1] = 0xffff_8000_0000_1001;
    p.args[2] = 0xffff_8000_0000_5000;
    p
}

#[test]
fn strings_at_kernel_addresses_compare_and_fault_as_the_interpreter() {
    let p = kernel_string_probe();
    for pred in [
        r#"stringof(curthread) == """#,
        r#"stringof((char *)curthread + 1) == "kthread""#,
        r#"(string)((char *)curthread + 1) < "kz""#,
        r#""kthread" == stringof((char *)curthread + 1)"#,
        "stringof((char *)curthread + 1) == stringof((char *)curthread + 2)",
        "stringof((char *)curthread + 1) == execname",
        "strlen(stringof((char *)curthread + 1)) == 7",
        "strlen(stringof((char *)curthread + 3)) == 5",
        r#"stringof(123) == "x""#,
        r#"stringof(0) == "x""#,
        r#"stringof((char *)curthread + 4096) == "x""#,
    ] {
        assert_predicate_as_the_interpreter(&p, pred);
    }
    // A probe argument's string is user memory (or the probe's own copy): read in dtrace.
    for pred in [r#"stringof(arg1) == "hello""#, r#"(string)arg1 == "hello""#] {
        let obj = predicate(&clause(pred));
        let e = translate(&obj, &p, 257, FRAME).expect_err(pred);
        assert!(e.to_string().contains("probe argument arg1"), "{pred}: {e}");
    }
}

#[test]
fn a_string_at_an_fbt_argument_is_kernel_memory() {
    // At fbt the arguments are the traced function's own values: the string at one is kernel
    // memory, read as the interpreter reads it from the probe's copy.
    let p = fbt_string_probe();
    for pred in [
        r#"stringof(arg1) == "kthread""#,
        r#"(string)arg1 < "kz""#,
        "strlen(stringof(arg1)) == 7",
        r#"stringof(arg2) == "x""#,
        r#"stringof(arg3) == "x""#,
    ] {
        assert_predicate_as_the_interpreter(&p, pred);
    }
    let v = translate_value(&key("stringof(arg1)"), &p, 257, FRAME).unwrap();
    assert_eq!(v.kind, ValueKind::Scratch);
}

#[test]
fn a_string_at_a_kernel_address_is_a_value_in_scratch() {
    let p = kernel_string_probe();
    let obj = key("stringof((char *)curthread + 1)");
    let v = translate_value(&obj, &p, 257, FRAME).unwrap();
    assert_eq!(v.kind, ValueKind::Scratch);
    let (r0, _, scratch) = emulate_all(&v.fragment.insns, &p);
    let at = (r0 - SCRATCH_ADDR) as usize;
    assert_eq!(&scratch[at..at + 8], b"kthread\0");
    assert!(scratch[at + 8..at + 264].iter().all(|&c| c == 0));
}

/// The DIF of the address of `tracemem(src, n)`.
fn tracemem_addr(src: &str, n: usize) -> DifObject {
    let src = format!("syscall::write:entry {{ tracemem({src}, {n}); }}");
    let p = dtrace_compiler::compile(&src, &dtrace_compiler::CompileOptions::default())
        .unwrap_or_else(|e| panic!("{src}: {e:?}"));
    p.ecbs[0].actions[0].difo.clone().expect("an address")
}

#[test]
fn copyin_copies_user_memory_into_scratch_and_faults_as_the_interpreter() {
    let p = string_probe();
    let v = translate_value(&tracemem_addr("copyin(arg1, 9)", 9), &p, 257, FRAME).unwrap();
    assert_eq!(v.kind, ValueKind::Buffer(9));
    assert_reachable(&v.fragment.insns);
    let (r0, stack, scratch) = emulate_all(&v.fragment.insns, &p);
    assert_eq!(frame_fault(&stack), None);
    let at = (r0 - SCRATCH_ADDR) as usize;
    assert_eq!(&scratch[at..at + 9], b"hello\0wor");
    // An unmapped address faults where the interpreter's copyin() does, at that address.
    let obj = tracemem_addr("copyin(arg5, 8)", 8);
    let v = translate_value(&obj, &p, 257, FRAME).unwrap();
    let (r0, stack) = emulate_frame(&v.fragment.insns, &p);
    assert_eq!(r0, FAULTED as u64);
    let fault = interpret_result(&obj, &p).unwrap_err();
    assert_eq!(
        frame_fault(&stack),
        Some((fault.kind.code(), fault.pc, fault.addr))
    );
    // A size the interpreter's scratch bounds at run time stays there; so does copyin()'s
    // copy used as anything but memory to record.
    for (obj, what) in [
        (
            tracemem_addr("copyin(arg1, arg0)", 8),
            "a size known only at the probe",
        ),
        (
            tracemem_addr("copyin(arg1, 2000)", 8),
            "a size known only at the probe",
        ),
        (key("copyin(arg1, 8)"), ""),
    ] {
        let e = translate_value(&obj, &p, 257, FRAME);
        let ok = match &e {
            Ok(v) => v.kind == ValueKind::Buffer(8) && what.is_empty(),
            Err(e) => e.to_string().contains(what),
        };
        assert!(ok, "{e:?}");
    }
}

/// The value of `expr` (plus 1000, so it is never a fault's mark) both ways, for probe `p`.
fn value_both_ways(p: &Probe, expr: &str) -> u64 {
    let obj = predicate(&clause(&format!("({expr}) + 1000")));
    let want = interpret_result(&obj, p).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
    let f = translate(&obj, p, 256, FRAME).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert_reachable(&f.insns);
    assert_eq!(emulate(&f.insns, p), want, "{expr}");
    want
}

#[test]
fn byte_order_subroutines_agree_with_the_interpreter() {
    let mut p = Probe::new();
    p.args[0] = 0x0102_0304_0506_0708;
    p.args[3] = 0xfedc_ba98_7654_3210;
    for (expr, want) in [
        ("htons(arg0)", 0x0807u64),
        ("ntohs(arg0)", 0x0807),
        ("htonl(arg0)", 0x0807_0605),
        ("ntohl(arg0)", 0x0807_0605),
        ("htonll(arg0)", 0x0807_0605_0403_0201),
        ("ntohll(arg0)", 0x0807_0605_0403_0201),
        ("htons(arg3)", 0x1032),
        ("htonl(arg3)", 0x1032_5476),
        ("htonll(arg3)", 0x1032_5476_98ba_dcfe),
        ("ntohs(htons(arg3))", 0x3210),
        ("htonl(arg1)", 0xfeff_ffff),
        ("htons(0x1234) + htonl(arg0) * 2", 0x3412 + 2 * 0x0807_0605),
    ] {
        assert_eq!(value_both_ways(&p, expr), want.wrapping_add(1000), "{expr}");
    }
}

#[test]
fn getmajor_and_getminor_agree_with_the_interpreter() {
    let mut p = Probe::new();
    for v in [
        0u64,
        0x0080_0001,
        0x0fff_ffff,
        0xfff0_0000,
        0xffff_ffff,
        0x1_0000_0000,
        0xdead_beef_1234_5678,
        0xffff_ffff_ffff_fffe,
    ] {
        p.args[0] = v;
        let major = value_both_ways(&p, "getmajor(arg0)").wrapping_sub(1000);
        let minor = value_both_ways(&p, "getminor(arg0)").wrapping_sub(1000);
        assert_eq!(major, (v & 0xffff_ffff) >> 20, "{v:#x}");
        assert_eq!(minor, v & 0xf_ffff, "{v:#x}");
        value_both_ways(&p, "getmajor(arg0) * 0x100000 + getminor(arg0)");
        value_both_ways(&p, "getminor(getmajor(arg0))");
    }
}

#[test]
fn rand_gives_32_bits_zero_extended() {
    let p = Probe::new();
    let obj = predicate(&clause("rand() + 1000"));
    let f = translate(&obj, &p, 256, FRAME).unwrap_or_else(|e| panic!("rand(): {e}"));
    assert_reachable(&f.insns);
    // The helper's 32 bits as they are, as the interpreter masks its generator's to 32.
    assert_eq!(emulate(&f.insns, &p), u64::from(PRANDOM) + 1000);
    // Whatever the generator gives, the interpreter's value is within the same range.
    for _ in 0..4 {
        let v = interpret_result(&obj, &p).unwrap() - 1000;
        assert!(v <= u64::from(u32::MAX), "{v:#x}");
    }
    for pred in ["rand() >= 0", "rand() <= 0xffffffff", "rand() % 7 < 7"] {
        assert_eq!(both_ways(&clause(pred), &p), Some(true), "{pred}");
    }
}

/// A task of [`TASK_LINKS`]'s layout: its parent's address and its tgid.
fn task(parent: u64, tgid: u32) -> Vec<u8> {
    let mut t = vec![0u8; 40];
    t[16..24].copy_from_slice(&parent.to_le_bytes());
    t[32..36].copy_from_slice(&tgid.to_le_bytes());
    t
}

#[test]
fn progenyof_walks_the_parents_as_the_recorded_ancestors() {
    let at = |i: u64| 0xffff_9000_0000_0000 + 0x100 * i;
    // The chains above the current task (pid 4242): its parents' tgids, nearest first, and
    // what a probe records of them for the interpreter (the walk stops after pid 1 or 0, at a
    // parent it cannot read, or after TASK_LINKS.most of them). A parent whose tgid cannot be
    // read (at 0x10) is recorded as pid 0.
    let chains: [(&[u32], u64, &[u64]); 5] = [
        (&[300, 200, 1, 0], at(0), &[300, 200, 1]),
        (&[500, 501, 502, 503, 504, 1], at(0), &[500, 501, 502, 503]),
        (&[7, 0, 9], at(0), &[7, 0]),
        (&[], 0, &[]),
        (&[], 0x10, &[0]),
    ];
    for (tgids, first, recorded) in chains {
        let mut p = Probe::new();
        p.kernel = vec![(CURTHREAD, task(first, 4242))];
        for (i, &t) in tgids.iter().enumerate() {
            p.kernel.push((at(i as u64), task(at(i as u64 + 1), t)));
        }
        for pid in [
            4242,
            300,
            200,
            1,
            0,
            7,
            9,
            500,
            503,
            504,
            4243,
            1 << 32 | 300,
        ] {
            let obj = predicate(&clause(&format!("progenyof({pid}) + 1000")));
            let f = translate(&obj, &p, 256, FRAME).unwrap_or_else(|e| panic!("{pid}: {e}"));
            assert_reachable(&f.insns);
            let (mut ctx, mut mem) = fake_env(&p);
            ctx.ancestors = std::iter::once(p.pid)
                .chain(recorded.iter().copied())
                .collect();
            let mut state = VarState::new(VmOptions::default());
            let want = Machine::new()
                .run(&obj, &mut state, &mut ctx, &mut mem)
                .unwrap();
            // progenyof() takes a pid_t: the compiler keeps the low 32 bits of a wider value.
            let q = pid & 0xffff_ffff;
            let is = q == 4242 || recorded.contains(&q);
            assert_eq!(want, 1000 + u64::from(is), "{tgids:?} {pid}");
            assert_eq!(emulate(&f.insns, &p), want, "{tgids:?} {pid}");
        }
    }
}

#[test]
fn progenyof_stays_in_dtrace_where_the_context_has_no_task_links() {
    let obj = predicate(&clause("progenyof(1)"));
    let vp = VarProbe {
        p: Probe::new(),
        stores: Default::default(),
    };
    let e = translate(&obj, &vp, 256, FRAME).unwrap_err();
    assert!(
        e.to_string()
            .contains("progenyof(): progenyof() runs in dtrace"),
        "{e}"
    );
}
mod alloca;
mod bcopystr;
mod cond;
mod copyin;
mod d_path;
mod inet;
mod link_ntop;
mod locks;
mod memstr;
mod strbuild;
mod strindex;
mod strpaths;
mod strsearch;
mod strtok;
mod strtoll;
mod structvars;
mod varptr;
