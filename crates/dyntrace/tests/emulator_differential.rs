//! The block-mode emulator against the real CPU: random blocks of integer instructions (random
//! encodings over every form the emulator accepts, plus forms it must refuse) run natively in a traced
//! child on random register and flag states, and in the emulator on the same states; every register,
//! the arithmetic flags and the branch taken at the end must agree.

use dtrace_dyntrace::emu::{compile, Cpu, Op, Src};
use dtrace_dyntrace::emu_alu::{UnOp, ARITH_FLAGS};
use dtrace_dyntrace::ptrace;
use dtrace_testkit::XorShift;

const PAGE: usize = 4096;

/// One random instruction encoding (64-bit mode).
fn random_insn(r: &mut XorShift) -> Vec<u8> {
    let mut b = Vec::new();
    if r.below(5) == 0 {
        b.push(0x66);
    }
    let rex = r.below(5) < 3;
    if rex {
        b.push(0x40 | r.below(16) as u8);
    }
    let modrm_reg = |r: &mut XorShift, reg: u8| 0xc0 | (reg << 3) | r.below(8) as u8;
    let rnd_modrm = |r: &mut XorShift| 0xc0 | r.below(64) as u8;
    let imm = |r: &mut XorShift, b: &mut Vec<u8>, n: usize| {
        let v = r.next().to_le_bytes();
        b.extend_from_slice(&v[..n]);
    };
    let wide = b.first() == Some(&0x66);
    let iz = if wide { 2 } else { 4 };
    match r.below(13) {
        0 => {
            const OPS: [u8; 36] = [
                0x00, 0x01, 0x02, 0x03, 0x08, 0x09, 0x0a, 0x0b, 0x10, 0x11, 0x12, 0x13, 0x18, 0x19,
                0x1a, 0x1b, 0x20, 0x21, 0x22, 0x23, 0x28, 0x29, 0x2a, 0x2b, 0x30, 0x31, 0x32, 0x33,
                0x38, 0x39, 0x3a, 0x3b, 0x84, 0x85, 0x88, 0x89,
            ];
            b.push(OPS[r.below(OPS.len())]);
            b.push(rnd_modrm(r));
        }
        1 => {
            let op = [0x80u8, 0x81, 0x83][r.below(3)];
            b.push(op);
            b.push(rnd_modrm(r));
            imm(r, &mut b, if op == 0x81 { iz } else { 1 });
        }
        2 => {
            let op = [0xc0u8, 0xc1, 0xd0, 0xd1, 0xd2, 0xd3][r.below(6)];
            b.push(op);
            b.push(rnd_modrm(r));
            if op < 0xd0 {
                // Mostly small counts, sometimes any byte.
                let c = if r.below(2) == 0 {
                    r.below(4) as u8
                } else {
                    r.next() as u8
                };
                b.push(c);
            }
        }
        3 => {
            let op = [0xf6u8, 0xf7][r.below(2)];
            let reg = [0u8, 2, 3][r.below(3)];
            b.push(op);
            b.push(modrm_reg(r, reg));
            if reg == 0 {
                imm(r, &mut b, if op == 0xf6 { 1 } else { iz });
            }
        }
        4 => {
            b.push([0xfeu8, 0xff][r.below(2)]);
            let reg = r.below(2) as u8;
            b.push(modrm_reg(r, reg));
        }
        5 => match r.below(3) {
            0 => b.extend([0x0f, 0xaf, rnd_modrm(r)]),
            1 => {
                b.extend([0x69, rnd_modrm(r)]);
                imm(r, &mut b, iz);
            }
            _ => {
                b.extend([0x6b, rnd_modrm(r)]);
                imm(r, &mut b, 1);
            }
        },
        6 => match r.below(5) {
            4 => b.extend([0x63, rnd_modrm(r)]),
            i => b.extend([0x0f, [0xb6, 0xb7, 0xbe, 0xbf][i], rnd_modrm(r)]),
        },
        7 => {
            // lea with a memory operand: any mod except 3, SIB and displacements as the mod wants.
            let md = r.below(3) as u8;
            let rm = r.below(8) as u8;
            b.push(0x8d);
            b.push((md << 6) | ((r.below(8) as u8) << 3) | rm);
            let mut disp32 = md == 2 || (md == 0 && rm == 5);
            if rm == 4 {
                let sib = r.next() as u8;
                b.push(sib);
                if md == 0 && sib & 7 == 5 {
                    disp32 = true;
                }
            }
            if md == 1 {
                imm(r, &mut b, 1);
            } else if disp32 {
                imm(r, &mut b, 4);
            }
        }
        8 => {
            let op = 0xb0 + r.below(16) as u8;
            b.push(op);
            let n = if op < 0xb8 {
                1
            } else if b.len() > 1 && b[b.len() - 2] & 0x48 == 0x48 {
                8
            } else {
                iz
            };
            imm(r, &mut b, n);
        }
        9 => b.extend([0x0f, 0x40 + r.below(16) as u8, rnd_modrm(r)]),
        10 => b.extend([0x0f, 0x90 + r.below(16) as u8, modrm_reg(r, 0)]),
        11 => b.push([0x98u8, 0x99, 0x90][r.below(3)]),
        _ => {
            // Forms the emulator must refuse: memory operands, stack and system instructions.
            const OTHERS: [&[u8]; 6] = [
                &[0x8b, 0x07],
                &[0x01, 0x07],
                &[0x50],
                &[0x0f, 0xa2],
                &[0xf7, 0xf1],
                &[0x87, 0xc1],
            ];
            b.extend_from_slice(OTHERS[r.below(OTHERS.len())]);
        }
    }
    b
}

/// A traced child with one executable page at `page`, stopped and ready to run code there.
struct Child {
    pid: i32,
    page: u64,
    base: libc::user_regs_struct,
}

impl Child {
    fn start() -> Option<Child> {
        // SAFETY: a fresh anonymous mapping; the child inherits it at the same address.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the child only makes async-signal-safe system calls.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize);
                libc::raise(libc::SIGSTOP);
                loop {
                    libc::pause();
                }
            }
        }
        let (_, st) = ptrace::wait(pid).ok()?;
        if st
            != (ptrace::Status::Stopped {
                sig: libc::SIGSTOP,
                event: 0,
            })
        {
            return None;
        }
        let base = ptrace::getregs(pid).ok()?;
        Some(Child {
            pid,
            page: page as u64,
            base,
        })
    }

    /// Runs `code` (which must end in int3) from the page start on `cpu`; the state at the int3.
    fn run(&self, code: &[u8], cpu: &Cpu) -> Result<Cpu, String> {
        for (i, chunk) in code.chunks(8).enumerate() {
            let mut w = [0xccu8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            ptrace::poke(self.pid, self.page + 8 * i as u64, u64::from_le_bytes(w))
                .map_err(|e| e.to_string())?;
        }
        let mut regs = self.base;
        cpu.to_regs(&mut regs);
        regs.rip = self.page;
        ptrace::setregs(self.pid, &regs).map_err(|e| e.to_string())?;
        ptrace::cont(self.pid, 0).map_err(|e| e.to_string())?;
        let (_, st) = ptrace::wait(self.pid).map_err(|e| e.to_string())?;
        if st
            != (ptrace::Status::Stopped {
                sig: libc::SIGTRAP,
                event: 0,
            })
        {
            return Err(format!("native run ended with {st:?}"));
        }
        let after = ptrace::getregs(self.pid).map_err(|e| e.to_string())?;
        let mut c = Cpu::from_regs(&after);
        c.rip -= 1; // the int3 itself
        Ok(c)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: our own child.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let _ = ptrace::wait(self.pid);
    }
}

/// The overflow flag.
const OF: u64 = 0x800;

/// How `ops` leave OF: `None` where an op reads it while it is undefined (the block's outcome
/// is then undefined too), else whether it is undefined at the end. A shift or rotate by a count
/// other than 1 leaves it undefined (the architecture says so, and CPUs differ, one Xeon even by
/// the instruction's form: an immediate count natively, CL in the emulator), until an
/// arithmetic op sets it again.
fn of_undefined(ops: &[Op]) -> Option<bool> {
    let mut undefined = false;
    for op in ops {
        match op {
            Op::Shift { count, .. } => undefined |= !matches!(count, Src::Imm(c) if c & 63 == 1),
            Op::Bin { .. } => undefined = false,
            Op::Un { op, .. } if *op != UnOp::Not => undefined = false,
            Op::Setcc { cc, .. } | Op::Cmov { cc, .. } if undefined && cc_reads_of(*cc) => {
                return None
            }
            _ => {}
        }
    }
    Some(undefined)
}

/// Whether condition `cc` reads OF.
fn cc_reads_of(cc: iced_x86::ConditionCode) -> bool {
    use iced_x86::ConditionCode as C;
    matches!(cc, C::o | C::no | C::l | C::ge | C::le | C::g)
}

/// Whether the short conditional jump of opcode `jcc` reads OF (jo, jno, jl, jge, jle, jg).
fn reads_of(jcc: u8) -> bool {
    matches!(jcc & 0xf, 0x0 | 0x1 | 0xc..=0xf)
}

#[test]
fn emulated_blocks_match_the_cpu() {
    let child = Child::start();
    if !dtrace_testkit::skip_unless(
        child.is_some(),
        "emulator differential",
        "ptrace is not permitted here",
    ) {
        return;
    }
    let Some(child) = child else { return };
    let mut r = XorShift(0x005e_ed0f_d1ff);
    let (mut accepted, mut refused, mut blocks) = (0u32, 0u32, 0u32);
    while blocks < 3000 {
        // A block of one to six emulable instructions, then `jcc +1; int3; int3`.
        let mut code = Vec::new();
        let mut ops: Vec<Op> = Vec::new();
        let want = 1 + r.below(6);
        let mut tries = 0;
        while ops.len() < want && tries < 100 {
            tries += 1;
            let bytes = random_insn(&mut r);
            let ip = child.page + code.len() as u64;
            let insn = iced_x86::Decoder::with_ip(64, &bytes, ip, 0).decode();
            if insn.is_invalid() || insn.len() != bytes.len() {
                continue;
            }
            match compile(&insn) {
                Some(Op::Jcc { .. } | Op::Jmp { .. }) => panic!("{bytes:02x?} is not a jump"),
                Some(op) => {
                    accepted += 1;
                    ops.push(op);
                    code.extend_from_slice(&bytes);
                }
                None => refused += 1,
            }
        }
        let jcc = [0x70 + r.below(16) as u8, 0x01];
        let ip = child.page + code.len() as u64;
        let j = compile(&iced_x86::Decoder::with_ip(64, &jcc, ip, 0).decode()).expect("jcc");
        code.extend_from_slice(&jcc);
        code.extend_from_slice(&[0xcc, 0xcc]);

        let mut start = Cpu::default();
        for g in start.gpr.iter_mut() {
            *g = match r.below(4) {
                0 => r.next() & 0xff,
                1 => r.next() | (1 << 63),
                _ => r.next(),
            };
        }
        start.rflags = 0x202 | (r.next() & ARITH_FLAGS);
        start.rip = child.page;

        let native = child
            .run(&code, &start)
            .unwrap_or_else(|e| panic!("{code:02x?}: {e}"));
        let mut emu = start;
        for op in &ops {
            assert_eq!(emu.exec(op), None);
        }
        emu.rip = emu.exec(&j).expect("a jump");
        // Where the block leaves OF undefined, neither it nor a jump on it is compared; a
        // block whose ops read it undefined is not compared at all.
        let Some(undefined) = of_undefined(&ops) else {
            continue;
        };
        let (flags, jump) = match undefined {
            true => (ARITH_FLAGS & !OF, !reads_of(jcc[0])),
            false => (ARITH_FLAGS, true),
        };
        let rip = |c: &Cpu| (c.rip - child.page) * u64::from(jump);
        assert_eq!(
            (emu.gpr, emu.rflags & flags, rip(&emu)),
            (native.gpr, native.rflags & flags, rip(&native)),
            "block {code:02x?} (ops {ops:?}) from {start:x?}"
        );
        blocks += 1;
    }
    // The generator must exercise the emulator, and the refusals too.
    assert!(accepted > 8000, "only {accepted} instructions emulated");
    assert!(refused > 500, "only {refused} refused");
}
