//! The in-tracer emulator of simple integer code: blocks made only of register-to-register (and
//! immediate) moves, arithmetic, logic, shifts, `lea`, `cmov`, `set`, sign extensions and no-ops,
//! ended by a direct `jcc` or `jmp`, run inside the tracer with no trap at all. A hot tiny loop then
//! costs the tracer nanoseconds per iteration instead of a context switch. No emulated instruction
//! touches memory (so threads sharing the memory cannot tell), and the arithmetic is done by the host
//! CPU itself ([`crate::emu_alu`]), so results and flags are exact. Anything else is not compiled
//! (`None`) and runs natively.

use crate::emu_alu::{binary, shift, unary, BinOp, ShiftOp, UnOp, ARITH_FLAGS};
use iced_x86::{ConditionCode, FlowControl, Instruction, Mnemonic, OpKind, Register};

/// A general register operand: index (RAX=0 .. R15=15), size in bytes, and whether it is AH..BH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg {
    idx: u8,
    size: u8,
    high: bool,
}

/// A source operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// A register.
    Reg(Reg),
    /// An immediate (already sign-extended to 64 bits where the encoding says so).
    Imm(u64),
}

/// A sign extension of the accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ext {
    /// cbw: AL to AX
    Cbw,
    /// cwde: AX to EAX
    Cwde,
    /// cdqe: EAX to RAX
    Cdqe,
    /// cwd: AX to DX:AX
    Cwd,
    /// cdq: EAX to EDX:EAX
    Cdq,
    /// cqo: RAX to RDX:RAX
    Cqo,
}

/// One emulated instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Does nothing.
    Nop,
    /// `mov dst, src`.
    Mov { dst: Reg, src: Src },
    /// `movzx`/`movsx`/`movsxd dst, src`.
    Extend { dst: Reg, src: Reg, signed: bool },
    /// `lea dst, [base + index*scale + disp]`.
    Lea {
        dst: Reg,
        base: Option<u8>,
        index: Option<u8>,
        scale: u8,
        disp: u64,
        addr32: bool,
    },
    /// Two-operand arithmetic and logic (and `imul dst, a, imm` as `dst = a; imul dst, imm`).
    Bin {
        op: BinOp,
        dst: Reg,
        a: Reg,
        src: Src,
    },
    /// inc/dec/neg/not.
    Un { op: UnOp, dst: Reg },
    /// Shifts and rotates by an immediate or CL.
    Shift { op: ShiftOp, dst: Reg, count: Src },
    /// `cmovcc dst, src`.
    Cmov {
        cc: ConditionCode,
        dst: Reg,
        src: Reg,
    },
    /// `setcc dst`.
    Setcc { cc: ConditionCode, dst: Reg },
    /// cbw, cwde, cdqe, cwd, cdq, cqo.
    Ext(Ext),
    /// A direct conditional jump.
    Jcc {
        cc: ConditionCode,
        target: u64,
        next: u64,
    },
    /// A direct jump.
    Jmp { target: u64 },
}

/// The state the emulator works on: the general registers, the instruction pointer and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cpu {
    /// RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8..R15.
    pub gpr: [u64; 16],
    /// The instruction pointer.
    pub rip: u64,
    /// RFLAGS.
    pub rflags: u64,
}

impl Cpu {
    /// From ptrace's register set.
    pub fn from_regs(r: &libc::user_regs_struct) -> Self {
        Cpu {
            gpr: [
                r.rax, r.rcx, r.rdx, r.rbx, r.rsp, r.rbp, r.rsi, r.rdi, r.r8, r.r9, r.r10, r.r11,
                r.r12, r.r13, r.r14, r.r15,
            ],
            rip: r.rip,
            rflags: r.eflags,
        }
    }

    /// Back into ptrace's register set (other fields kept).
    pub fn to_regs(&self, r: &mut libc::user_regs_struct) {
        let g = &self.gpr;
        (r.rax, r.rcx, r.rdx, r.rbx, r.rsp, r.rbp, r.rsi, r.rdi) =
            (g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
        (r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15) =
            (g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
        r.rip = self.rip;
        r.eflags = self.rflags;
    }

    #[inline]
    fn get(&self, r: Reg) -> u64 {
        let v = self.gpr[r.idx as usize];
        match (r.size, r.high) {
            (1, true) => (v >> 8) & 0xff,
            (1, false) => v & 0xff,
            (2, _) => v & 0xffff,
            (4, _) => v & 0xffff_ffff,
            _ => v,
        }
    }

    #[inline]
    fn set(&mut self, r: Reg, x: u64) {
        let v = &mut self.gpr[r.idx as usize];
        *v = match (r.size, r.high) {
            (1, true) => (*v & !0xff00) | ((x & 0xff) << 8),
            (1, false) => (*v & !0xff) | (x & 0xff),
            (2, _) => (*v & !0xffff) | (x & 0xffff),
            (4, _) => x & 0xffff_ffff,
            _ => x,
        };
    }

    #[inline]
    fn src(&self, s: Src) -> u64 {
        match s {
            Src::Reg(r) => self.get(r),
            Src::Imm(v) => v,
        }
    }

    #[inline]
    fn set_flags(&mut self, f: u64) {
        self.rflags = (self.rflags & !ARITH_FLAGS) | (f & ARITH_FLAGS);
    }

    /// Whether condition `cc` holds for the current flags (`None` for no condition).
    pub fn condition(&self, cc: ConditionCode) -> Option<bool> {
        condition_holds(cc, self.rflags)
    }

    /// Executes `op`; returns the next instruction pointer for jumps, `None` to fall through.
    #[inline]
    pub fn exec(&mut self, op: &Op) -> Option<u64> {
        match *op {
            Op::Nop => {}
            Op::Mov { dst, src } => {
                let v = self.src(src);
                self.set(dst, v);
            }
            Op::Extend { dst, src, signed } => {
                let v = self.get(src);
                let v = if signed {
                    let sh = 64 - 8 * src.size as u32;
                    (((v << sh) as i64) >> sh) as u64
                } else {
                    v
                };
                self.set(dst, v);
            }
            Op::Lea {
                dst,
                base,
                index,
                scale,
                disp,
                addr32,
            } => {
                let mut a = disp;
                if let Some(b) = base {
                    a = a.wrapping_add(self.gpr[b as usize]);
                }
                if let Some(i) = index {
                    a = a.wrapping_add(self.gpr[i as usize].wrapping_mul(scale as u64));
                }
                if addr32 {
                    a &= 0xffff_ffff;
                }
                self.set(dst, a);
            }
            Op::Bin { op, dst, a, src } => {
                let (r, f) = binary(op, dst.size, self.get(a), self.src(src), self.rflags);
                if op.writes() {
                    self.set(dst, r);
                }
                self.set_flags(f);
            }
            Op::Un { op, dst } => {
                let (r, f) = unary(op, dst.size, self.get(dst), self.rflags);
                self.set(dst, r);
                self.set_flags(f);
            }
            Op::Shift { op, dst, count } => {
                let c = self.src(count) as u8;
                let (r, f) = shift(op, dst.size, self.get(dst), c, self.rflags);
                self.set(dst, r);
                self.set_flags(f);
            }
            Op::Cmov { cc, dst, src } => {
                let v = if self.condition(cc) == Some(true) {
                    self.get(src)
                } else {
                    self.get(dst)
                };
                // A 32-bit destination is zero-extended whether or not the move happens.
                self.set(dst, v);
            }
            Op::Setcc { cc, dst } => {
                let v = u64::from(self.condition(cc) == Some(true));
                self.set(dst, v);
            }
            Op::Ext(e) => {
                let g = &mut self.gpr;
                let sx = |v: u64, bits: u32| (((v << (64 - bits)) as i64) >> (64 - bits)) as u64;
                match e {
                    Ext::Cbw => g[0] = (g[0] & !0xffff) | (sx(g[0], 8) & 0xffff),
                    Ext::Cwde => g[0] = sx(g[0], 16) & 0xffff_ffff,
                    Ext::Cdqe => g[0] = sx(g[0], 32),
                    Ext::Cwd => g[2] = (g[2] & !0xffff) | ((sx(g[0], 16) >> 16) & 0xffff),
                    Ext::Cdq => g[2] = (sx(g[0], 32) >> 32) & 0xffff_ffff,
                    Ext::Cqo => g[2] = ((g[0] as i64) >> 63) as u64,
                }
            }
            Op::Jcc { cc, target, next } => {
                return Some(if self.condition(cc) == Some(true) {
                    target
                } else {
                    next
                });
            }
            Op::Jmp { target } => return Some(target),
        }
        None
    }
}

/// Whether condition `cc` holds for flags `rflags` (`None` for no condition).
pub fn condition_holds(cc: ConditionCode, rflags: u64) -> Option<bool> {
    let flag = |bit: u32| rflags & (1 << bit) != 0;
    let (cf, pf, zf, sf, of) = (flag(0), flag(2), flag(6), flag(7), flag(11));
    Some(match cc {
        ConditionCode::o => of,
        ConditionCode::no => !of,
        ConditionCode::b => cf,
        ConditionCode::ae => !cf,
        ConditionCode::e => zf,
        ConditionCode::ne => !zf,
        ConditionCode::be => cf || zf,
        ConditionCode::a => !cf && !zf,
        ConditionCode::s => sf,
        ConditionCode::ns => !sf,
        ConditionCode::p => pf,
        ConditionCode::np => !pf,
        ConditionCode::l => sf != of,
        ConditionCode::ge => sf == of,
        ConditionCode::le => zf || sf != of,
        ConditionCode::g => !zf && sf == of,
        ConditionCode::None => return None,
    })
}

fn gpr_index(full: Register) -> Option<u8> {
    let i = (full as u32).checked_sub(Register::RAX as u32)?;
    (i < 16).then_some(i as u8)
}

fn reg(r: Register) -> Option<Reg> {
    if !r.is_gpr() {
        return None;
    }
    let idx = gpr_index(r.full_register())?;
    let high = matches!(r, Register::AH | Register::CH | Register::DH | Register::BH);
    Some(Reg {
        idx,
        size: r.size() as u8,
        high,
    })
}

fn reg_op(insn: &Instruction, i: u32) -> Option<Reg> {
    (insn.op_kind(i) == OpKind::Register).then(|| reg(insn.op_register(i)))?
}

fn is_imm(k: OpKind) -> bool {
    matches!(
        k,
        OpKind::Immediate8
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate64
            | OpKind::Immediate8to16
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64
    )
}

fn src_op(insn: &Instruction, i: u32) -> Option<Src> {
    let k = insn.op_kind(i);
    if k == OpKind::Register {
        return reg(insn.op_register(i)).map(Src::Reg);
    }
    is_imm(k).then(|| Src::Imm(insn.immediate(i)))
}

fn is_cmov(m: Mnemonic) -> bool {
    use Mnemonic as M;
    matches!(
        m,
        M::Cmovo
            | M::Cmovno
            | M::Cmovb
            | M::Cmovae
            | M::Cmove
            | M::Cmovne
            | M::Cmovbe
            | M::Cmova
            | M::Cmovs
            | M::Cmovns
            | M::Cmovp
            | M::Cmovnp
            | M::Cmovl
            | M::Cmovge
            | M::Cmovle
            | M::Cmovg
    )
}

fn is_setcc(m: Mnemonic) -> bool {
    use Mnemonic as M;
    matches!(
        m,
        M::Seto
            | M::Setno
            | M::Setb
            | M::Setae
            | M::Sete
            | M::Setne
            | M::Setbe
            | M::Seta
            | M::Sets
            | M::Setns
            | M::Setp
            | M::Setnp
            | M::Setl
            | M::Setge
            | M::Setle
            | M::Setg
    )
}

fn bin_op(m: Mnemonic) -> Option<BinOp> {
    Some(match m {
        Mnemonic::Add => BinOp::Add,
        Mnemonic::Or => BinOp::Or,
        Mnemonic::Adc => BinOp::Adc,
        Mnemonic::Sbb => BinOp::Sbb,
        Mnemonic::And => BinOp::And,
        Mnemonic::Sub => BinOp::Sub,
        Mnemonic::Xor => BinOp::Xor,
        Mnemonic::Cmp => BinOp::Cmp,
        Mnemonic::Test => BinOp::Test,
        _ => return None,
    })
}

fn shift_op(m: Mnemonic) -> Option<ShiftOp> {
    Some(match m {
        Mnemonic::Shl | Mnemonic::Sal => ShiftOp::Shl,
        Mnemonic::Shr => ShiftOp::Shr,
        Mnemonic::Sar => ShiftOp::Sar,
        Mnemonic::Rol => ShiftOp::Rol,
        Mnemonic::Ror => ShiftOp::Ror,
        Mnemonic::Rcl => ShiftOp::Rcl,
        Mnemonic::Rcr => ShiftOp::Rcr,
        _ => return None,
    })
}

/// The emulated form of a 64-bit-mode instruction, or `None` when it is not emulated.
pub fn compile(insn: &Instruction) -> Option<Op> {
    if insn.is_invalid() || insn.has_lock_prefix() || insn.code_size() != iced_x86::CodeSize::Code64
    {
        return None;
    }
    let m = insn.mnemonic();
    let n = insn.op_count();
    match insn.flow_control() {
        FlowControl::Next => {}
        FlowControl::ConditionalBranch
            if insn.code().is_jcc_short_or_near() && insn.op0_kind() == OpKind::NearBranch64 =>
        {
            return Some(Op::Jcc {
                cc: insn.condition_code(),
                target: insn.near_branch64(),
                next: insn.next_ip(),
            });
        }
        FlowControl::UnconditionalBranch if n == 1 && insn.op0_kind() == OpKind::NearBranch64 => {
            return Some(Op::Jmp {
                target: insn.near_branch64(),
            });
        }
        _ => return None,
    }
    if insn.has_rep_prefix() || insn.has_repne_prefix() {
        return None;
    }
    if let Some(op) = bin_op(m) {
        if n != 2 {
            return None;
        }
        let dst = reg_op(insn, 0)?;
        return Some(Op::Bin {
            op,
            dst,
            a: dst,
            src: src_op(insn, 1)?,
        });
    }
    if let Some(op) = shift_op(m) {
        if n != 2 {
            return None;
        }
        let dst = reg_op(insn, 0)?;
        let count = match insn.op1_kind() {
            OpKind::Register if insn.op1_register() == Register::CL => src_op(insn, 1)?,
            OpKind::Immediate8 => Src::Imm(insn.immediate8() as u64),
            _ => return None,
        };
        return Some(Op::Shift { op, dst, count });
    }
    Some(match m {
        Mnemonic::Nop | Mnemonic::Endbr64 | Mnemonic::Endbr32 => Op::Nop,
        Mnemonic::Mov if n == 2 => Op::Mov {
            dst: reg_op(insn, 0)?,
            src: src_op(insn, 1)?,
        },
        Mnemonic::Movzx | Mnemonic::Movsx | Mnemonic::Movsxd if n == 2 => Op::Extend {
            dst: reg_op(insn, 0)?,
            src: reg_op(insn, 1)?,
            signed: m != Mnemonic::Movzx,
        },
        Mnemonic::Lea if n == 2 && insn.op1_kind() == OpKind::Memory => {
            let dst = reg_op(insn, 0)?;
            let (base, disp) = match insn.memory_base() {
                Register::None => (None, insn.memory_displacement64()),
                // The decoder already made RIP-relative displacements absolute.
                Register::RIP | Register::EIP => (None, insn.memory_displacement64()),
                b => (
                    Some(gpr_index(b.full_register())?),
                    insn.memory_displacement64(),
                ),
            };
            let index = match insn.memory_index() {
                Register::None => None,
                i => Some(gpr_index(i.full_register())?),
            };
            let addr32 = insn.memory_base().size() == 4 || insn.memory_index().size() == 4;
            if insn.memory_base() == Register::EIP {
                return None;
            }
            Op::Lea {
                dst,
                base,
                index,
                scale: insn.memory_index_scale() as u8,
                disp,
                addr32,
            }
        }
        Mnemonic::Inc | Mnemonic::Dec | Mnemonic::Neg | Mnemonic::Not if n == 1 => Op::Un {
            op: match m {
                Mnemonic::Inc => UnOp::Inc,
                Mnemonic::Dec => UnOp::Dec,
                Mnemonic::Neg => UnOp::Neg,
                _ => UnOp::Not,
            },
            dst: reg_op(insn, 0)?,
        },
        Mnemonic::Imul if n == 2 => {
            let dst = reg_op(insn, 0)?;
            Op::Bin {
                op: BinOp::Imul,
                dst,
                a: dst,
                src: Src::Reg(reg_op(insn, 1)?),
            }
        }
        Mnemonic::Imul if n == 3 && is_imm(insn.op2_kind()) => Op::Bin {
            op: BinOp::Imul,
            dst: reg_op(insn, 0)?,
            a: reg_op(insn, 1)?,
            src: Src::Imm(insn.immediate(2)),
        },
        Mnemonic::Cbw => Op::Ext(Ext::Cbw),
        Mnemonic::Cwde => Op::Ext(Ext::Cwde),
        Mnemonic::Cdqe => Op::Ext(Ext::Cdqe),
        Mnemonic::Cwd => Op::Ext(Ext::Cwd),
        Mnemonic::Cdq => Op::Ext(Ext::Cdq),
        Mnemonic::Cqo => Op::Ext(Ext::Cqo),
        _ if is_cmov(m) && n == 2 => Op::Cmov {
            cc: insn.condition_code(),
            dst: reg_op(insn, 0)?,
            src: reg_op(insn, 1)?,
        },
        _ if is_setcc(m) && n == 1 => Op::Setcc {
            cc: insn.condition_code(),
            dst: reg_op(insn, 0)?,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(bytes: &[u8]) -> Option<Op> {
        compile(&iced_x86::Decoder::with_ip(64, bytes, 0x1000, 0).decode())
    }

    fn run(bytes: &[u8], cpu: &mut Cpu) -> Option<u64> {
        cpu.exec(&op(bytes).expect("emulated"))
    }

    #[test]
    fn spin_loop_body() {
        let mut c = Cpu::default();
        c.gpr[1] = 2; // rcx
        run(&[0x48, 0x83, 0xc0, 0x01], &mut c); // add rax, 1
        run(&[0x48, 0xff, 0xc9], &mut c); // dec rcx
        assert_eq!(run(&[0x75, 0xf5], &mut c), Some(0x1000 - 9)); // jnz
        assert_eq!((c.gpr[0], c.gpr[1]), (1, 1));
        run(&[0x48, 0xff, 0xc9], &mut c);
        assert_eq!(run(&[0x75, 0xf5], &mut c), Some(0x1002));
    }

    #[test]
    fn partial_registers() {
        let mut c = Cpu::default();
        c.gpr[0] = 0xffff_ffff_ffff_ffff;
        run(&[0xb4, 0x12], &mut c); // mov ah, 0x12
        assert_eq!(c.gpr[0], 0xffff_ffff_ffff_12ff);
        run(&[0x89, 0xc0], &mut c); // mov eax, eax
        assert_eq!(c.gpr[0], 0xffff_12ff);
        run(&[0x48, 0x98], &mut c); // cdqe
        assert_eq!(c.gpr[0], 0xffff_ffff_ffff_12ff);
        c.gpr[0] = 0x100;
        run(&[0x48, 0x8d, 0x44, 0x80, 0x10], &mut c); // lea rax, [rax+rax*4+0x10]
        assert_eq!(c.gpr[0], 0x510);
    }

    #[test]
    fn memory_and_system_instructions_are_not_emulated() {
        assert_eq!(op(&[0x48, 0x8b, 0x07]), None); // mov rax, [rdi]
        assert_eq!(op(&[0x48, 0x01, 0x07]), None); // add [rdi], rax
        assert_eq!(op(&[0x0f, 0x05]), None); // syscall
        assert_eq!(op(&[0xc3]), None); // ret
        assert_eq!(op(&[0x50]), None); // push rax
        assert_eq!(op(&[0xf0, 0x48, 0x01, 0x07]), None); // lock add
        assert_eq!(op(&[0x48, 0xf7, 0xf1]), None); // div rcx
        assert_eq!(op(&[0x0f, 0x1f, 0x40, 0x00]), Some(Op::Nop)); // nop [rax]
    }
}
