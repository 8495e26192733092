//! eBPF instructions and a small assembler with forward labels, so capture programs are generated at run
//! time by our own code (no clang, no LLVM). Encoding follows the kernel's `struct bpf_insn`.
//!
//! A program may hand a subprogram of its own to a helper that calls it back (`bpf_loop`): the
//! subprogram's address is a `BPF_PSEUDO_FUNC` load ([`Asm::ld_callback`]), and its code is laid
//! out after the main program's when the program is finished, each body once however many times
//! it is loaded. The kernel then wants BTF function information for each subprogram
//! ([`subprograms`] finds where they start; the loader supplies it).

/// An instruction sequence the assembler cannot finish (a label never bound, a jump out of range, a
/// program too long).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AsmError(pub String);

/// The assembler's result.
pub type Result<T> = std::result::Result<T, AsmError>;

/// An eBPF register (r0..r10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg(pub u8);

/// Named registers.
pub const R0: Reg = Reg(0);
/// Argument 1 / context on entry.
pub const R1: Reg = Reg(1);
/// Argument 2.
pub const R2: Reg = Reg(2);
/// Argument 3.
pub const R3: Reg = Reg(3);
/// Argument 4.
pub const R4: Reg = Reg(4);
/// Argument 5.
pub const R5: Reg = Reg(5);
/// Callee-saved 6.
pub const R6: Reg = Reg(6);
/// Callee-saved 7.
pub const R7: Reg = Reg(7);
/// Callee-saved 8.
pub const R8: Reg = Reg(8);
/// Callee-saved 9.
pub const R9: Reg = Reg(9);
/// Frame pointer (read-only).
pub const R10: Reg = Reg(10);

/// One encoded instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode byte.
    pub code: u8,
    /// Destination register (low nibble).
    pub dst: u8,
    /// Source register (high nibble).
    pub src: u8,
    /// Signed offset.
    pub off: i16,
    /// Immediate.
    pub imm: i32,
}

impl Insn {
    /// The 8 bytes the kernel reads.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0xf) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    /// The instruction as one little-endian u64 (how the kernel array is laid out on x86-64).
    pub fn to_u64(self) -> u64 {
        u64::from_le_bytes(self.to_bytes())
    }
}

/// Opcode pieces.
#[allow(missing_docs)]
pub mod op {
    pub const LD: u8 = 0x00;
    pub const LDX: u8 = 0x01;
    pub const ST: u8 = 0x02;
    pub const STX: u8 = 0x03;
    pub const ALU: u8 = 0x04;
    pub const JMP: u8 = 0x05;
    pub const ALU64: u8 = 0x07;
    pub const W: u8 = 0x00;
    pub const H: u8 = 0x08;
    pub const B: u8 = 0x10;
    pub const DW: u8 = 0x18;
    pub const IMM: u8 = 0x00;
    pub const MEM: u8 = 0x60;
    pub const ATOMIC: u8 = 0xc0;
    pub const K: u8 = 0x00;
    pub const X: u8 = 0x08;
    pub const ADD: u8 = 0x00;
    pub const SUB: u8 = 0x10;
    pub const MUL: u8 = 0x20;
    pub const DIV: u8 = 0x30;
    pub const OR: u8 = 0x40;
    pub const AND: u8 = 0x50;
    pub const NEG: u8 = 0x80;
    pub const MOD: u8 = 0x90;
    pub const LSH: u8 = 0x60;
    pub const RSH: u8 = 0x70;
    pub const XOR: u8 = 0xa0;
    pub const MOV: u8 = 0xb0;
    pub const ARSH: u8 = 0xc0;
    pub const JA: u8 = 0x00;
    pub const JEQ: u8 = 0x10;
    pub const JGT: u8 = 0x20;
    pub const JGE: u8 = 0x30;
    pub const JSET: u8 = 0x40;
    pub const JNE: u8 = 0x50;
    pub const JSGT: u8 = 0x60;
    pub const JSGE: u8 = 0x70;
    pub const CALL: u8 = 0x80;
    pub const EXIT: u8 = 0x90;
    pub const JLT: u8 = 0xa0;
    pub const JLE: u8 = 0xb0;
    pub const JSLT: u8 = 0xc0;
    pub const JSLE: u8 = 0xd0;
    /// Byte-order conversion (`BPF_END`, class [`ALU`]); with [`TO_BE`] it converts to big-endian.
    pub const END: u8 = 0xd0;
    /// [`END`]'s source bit: to big-endian (a byte swap on a little-endian machine).
    pub const TO_BE: u8 = 0x08;
}

/// Memory access sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    DW,
}

impl Size {
    fn code(self) -> u8 {
        match self {
            Size::B => op::B,
            Size::H => op::H,
            Size::W => op::W,
            Size::DW => op::DW,
        }
    }

    /// The size for a field of `bytes` bytes, if it is a natural size.
    pub fn for_bytes(bytes: usize) -> Option<Size> {
        match bytes {
            1 => Some(Size::B),
            2 => Some(Size::H),
            4 => Some(Size::W),
            8 => Some(Size::DW),
            _ => None,
        }
    }
}

/// Checks the control flow of a program or fragment as the kernel's verifier will: every
/// instruction is reachable from the first (the verifier refuses dead code) and no jump leaves it
/// (a jump to just past the end is a fragment's fall-through). `Err` names the first problem.
pub fn check_flow(insns: &[Insn]) -> Result<()> {
    let mut seen = vec![false; insns.len() + 1];
    let mut work = vec![0usize];
    while let Some(pc) = work.pop() {
        let Some(i) = insns.get(pc) else { continue };
        if seen[pc] {
            continue;
        }
        seen[pc] = true;
        if i.code == (op::LD | op::DW | op::IMM) {
            seen[pc + 1] = true;
            work.push(pc + 2);
            if i.src == PSEUDO_FUNC {
                let t = pc as i64 + 1 + i64::from(i.imm);
                if t < 0 || t as usize >= insns.len() {
                    return Err(AsmError(format!("callback out of the code at {pc}")));
                }
                work.push(t as usize);
            }
            continue;
        }
        if i.code & 7 == op::JMP && !matches!(i.code & 0xf0, op::CALL | op::EXIT) {
            let t = pc as i64 + 1 + i64::from(i.off);
            if t < 0 || t as usize > insns.len() {
                return Err(AsmError(format!("jump out of the code at {pc}")));
            }
            work.push(t as usize);
            if i.code & 0xf0 == op::JA {
                continue;
            }
        } else if i.code & 7 == op::JMP && i.code & 0xf0 == op::EXIT {
            continue;
        }
        work.push(pc + 1);
    }
    let dead: Vec<usize> = (0..insns.len()).filter(|&i| !seen[i]).collect();
    if dead.is_empty() {
        Ok(())
    } else {
        Err(AsmError(format!("unreachable instructions {dead:?}")))
    }
}

/// The source register of an `ld_imm64` that loads the address of a subprogram
/// (`BPF_PSEUDO_FUNC`): its immediate is the subprogram's first instruction relative to the next
/// one.
pub const PSEUDO_FUNC: u8 = 4;

/// The first instruction of each subprogram of `insns` (every `BPF_PSEUDO_FUNC` target), in
/// order, without the main program's 0: where the kernel splits the program into functions.
pub fn subprograms(insns: &[Insn]) -> Vec<usize> {
    let mut starts: Vec<usize> = insns
        .iter()
        .enumerate()
        .filter(|(_, i)| i.code == (op::LD | op::DW | op::IMM) && i.src == PSEUDO_FUNC)
        .filter_map(|(pc, i)| usize::try_from(pc as i64 + 1 + i64::from(i.imm)).ok())
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// The bytes of stack the main program of `insns` (before its first subprogram) takes, as a
/// verifier counts them: the deepest byte a load or store through r10 reaches, or through a
/// register holding an address in the stack, as [`Asm::frame_addr`] forms them (`mov rX, r10`
/// then adds of constants; the code is followed in order, each register's address forgotten
/// when it is written otherwise). A kernel before Linux 6.2 or so counts a `bpf_loop`
/// callback's frame on top of it (`dtrace_linux::features::loop_beside`).
pub fn stack_depth(insns: &[Insn]) -> u32 {
    let end = subprograms(insns).first().copied().unwrap_or(insns.len());
    let mut at: [Option<i64>; 11] = [None; 11];
    at[10] = Some(0);
    let mut deepest = 0i64;
    let mut pc = 0;
    while pc < end.min(insns.len()) {
        let i = insns[pc];
        let (dst, src) = (usize::from(i.dst & 0xf), usize::from(i.src & 0xf));
        let class = i.code & 7;
        match class {
            op::LDX => {
                if let Some(k) = at.get(src).copied().flatten() {
                    deepest = deepest.max(-(k + i64::from(i.off)));
                }
                if dst < 10 {
                    at[dst] = None;
                }
            }
            op::ST | op::STX => {
                if let Some(k) = at.get(dst).copied().flatten() {
                    deepest = deepest.max(-(k + i64::from(i.off)));
                }
                // An atomic fetch writes its source register.
                if i.code & 0xe0 == op::ATOMIC && src < 10 {
                    at[src] = None;
                    at[0] = None;
                }
            }
            op::ALU64 if dst < 10 => {
                let x = i.code & op::X != 0;
                at[dst] = match (i.code & 0xf0, x, at[dst]) {
                    (op::MOV, true, _) => at.get(src).copied().flatten(),
                    (op::ADD, false, Some(k)) => Some(k + i64::from(i.imm)),
                    (op::SUB, false, Some(k)) => Some(k - i64::from(i.imm)),
                    _ => None,
                };
                if let Some(k) = at[dst] {
                    deepest = deepest.max(-k);
                }
            }
            op::ALU | op::LD if dst < 10 => at[dst] = None,
            op::JMP if i.code & 0xf0 == op::CALL => at[..6].fill(None),
            _ => {}
        }
        pc += if i.code == (op::LD | op::DW | op::IMM) {
            2
        } else {
            1
        };
    }
    deepest.clamp(0, i64::from(u32::MAX)) as u32
}

/// The flags of `bpf_map_update_elem()` (the helper's fourth argument).
pub mod update_flag {
    /// `BPF_ANY`: create or replace.
    pub const ANY: i32 = 0;
    /// `BPF_NOEXIST`: create only.
    pub const NOEXIST: i32 = 1;
}

/// Helper function numbers (`enum bpf_func_id`).
#[allow(missing_docs)]
pub mod helper {
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const KTIME_GET_NS: i32 = 5;
    pub const TAIL_CALL: i32 = 12;
    pub const GET_PRANDOM_U32: i32 = 7;
    pub const GET_SMP_PROCESSOR_ID: i32 = 8;
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    pub const GET_CURRENT_UID_GID: i32 = 15;
    pub const GET_CURRENT_COMM: i32 = 16;
    pub const GET_CURRENT_TASK: i32 = 35;
    pub const GET_FUNC_ARG: i32 = 183;
    pub const GET_FUNC_RET: i32 = 184;
    pub const GET_STACK: i32 = 67;
    pub const KTIME_GET_BOOT_NS: i32 = 125;
    pub const SEND_SIGNAL: i32 = 109;
    pub const SEND_SIGNAL_THREAD: i32 = 117;
    pub const PROBE_READ_USER: i32 = 112;
    pub const PROBE_READ_KERNEL: i32 = 113;
    pub const PROBE_READ_USER_STR: i32 = 114;
    pub const PROBE_READ_KERNEL_STR: i32 = 115;
    pub const PROBE_WRITE_USER: i32 = 36;
    pub const RINGBUF_OUTPUT: i32 = 130;
    pub const RINGBUF_RESERVE: i32 = 131;
    pub const RINGBUF_SUBMIT: i32 = 132;
    pub const RINGBUF_DISCARD: i32 = 133;
    pub const RINGBUF_QUERY: i32 = 134;
    pub const RINGBUF_RESERVE_DYNPTR: i32 = 198;
    pub const RINGBUF_SUBMIT_DYNPTR: i32 = 199;
    pub const RINGBUF_DISCARD_DYNPTR: i32 = 200;
    pub const DYNPTR_DATA: i32 = 203;
    pub const GET_TASK_STACK: i32 = 141;
    pub const THIS_CPU_PTR: i32 = 154;
    pub const GET_CURRENT_TASK_BTF: i32 = 158;
    pub const TASK_PT_REGS: i32 = 175;
    pub const GET_ATTACH_COOKIE: i32 = 174;
    pub const FIND_VMA: i32 = 180;
    pub const LOOP: i32 = 181;
}

/// A jump target, bound later with [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// An assembler: emits instructions and resolves label jumps when finished.
#[derive(Default, Debug)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
    /// `BPF_PSEUDO_FUNC` loads to resolve: the instruction and its subprogram's label.
    func_fixups: Vec<(usize, Label)>,
    /// The subprograms loaded so far: name, body, label of its first instruction, and whether
    /// its code was laid out.
    callbacks: Vec<Callback>,
}

/// A subprogram of a program (see [`Asm::ld_callback`]).
struct Callback {
    name: String,
    body: std::sync::Arc<dyn Fn(&mut Asm) + Send + Sync>,
    start: Label,
    laid_out: bool,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("name", &self.name)
            .field("start", &self.start)
            .field("laid_out", &self.laid_out)
            .finish_non_exhaustive()
    }
}

/// The most instructions a program may have (the kernel's limit for privileged loaders is higher, but
/// our capture programs are far below this; the bound keeps a buggy generator from looping forever).
pub const MAX_INSNS: usize = 1_000_000;

impl Asm {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of instruction slots so far.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether nothing was emitted yet.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// Emits a raw instruction.
    pub fn raw(&mut self, insn: Insn) -> &mut Self {
        self.insns.push(insn);
        self
    }

    fn emit(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> &mut Self {
        self.raw(Insn {
            code,
            dst: dst.0,
            src: src.0,
            off,
            imm,
        })
    }

    /// A fresh, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction.
    pub fn bind(&mut self, l: Label) -> &mut Self {
        if let Some(slot) = self.labels.get_mut(l.0) {
            *slot = Some(self.insns.len());
        }
        self
    }

    /// `dst = imm` (64-bit, sign-extended imm32).
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.emit(op::ALU64 | op::MOV | op::K, dst, R0, 0, imm)
    }

    /// `dst = src` (64-bit).
    pub fn mov(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.emit(op::ALU64 | op::MOV | op::X, dst, src, 0, 0)
    }

    /// `dst = fp + off`: the address of a slot of the stack (a helper's key, value or buffer).
    pub fn frame_addr(&mut self, dst: Reg, off: i32) -> &mut Self {
        self.mov(dst, R10).alu_imm(op::ADD, dst, off)
    }

    /// `dst = imm64` (two slots).
    pub fn ld_imm64(&mut self, dst: Reg, imm: u64) -> &mut Self {
        self.emit(op::LD | op::DW | op::IMM, dst, R0, 0, imm as u32 as i32);
        self.emit(0, R0, R0, 0, (imm >> 32) as u32 as i32)
    }

    /// `dst = map` (two slots, `BPF_PSEUDO_MAP_FD`).
    pub fn ld_map_fd(&mut self, dst: Reg, fd: i32) -> &mut Self {
        self.emit(op::LD | op::DW | op::IMM, dst, Reg(1), 0, fd);
        self.emit(0, R0, R0, 0, 0)
    }

    /// `dst = &kernel variable` (two slots, `BPF_PSEUDO_BTF_ID`): the address of the variable with
    /// vmlinux BTF id `btf_id`; for a per-CPU variable, pass it to `bpf_this_cpu_ptr`.
    pub fn ld_btf_var(&mut self, dst: Reg, btf_id: u32) -> &mut Self {
        self.emit(op::LD | op::DW | op::IMM, dst, Reg(3), 0, btf_id as i32);
        self.emit(0, R0, R0, 0, 0)
    }

    /// `dst = &map value[0] + off` of an array map (two slots, `BPF_PSEUDO_MAP_VALUE`): the value
    /// is then read with a plain load, no helper call.
    pub fn ld_map_value(&mut self, dst: Reg, fd: i32, off: i32) -> &mut Self {
        self.emit(op::LD | op::DW | op::IMM, dst, Reg(2), 0, fd);
        self.emit(0, R0, R0, 0, off)
    }

    /// `dst = &subprogram` (two slots, `BPF_PSEUDO_FUNC`): the address of the subprogram named
    /// `name`, whose code `body` emits (as a function: its arguments in r1-r5, its result in r0,
    /// its own stack frame at r10, ending in `exit`) after the main program when the program is
    /// finished, once per name (a body that depends on parameters names them in `name`). What a
    /// helper such as `bpf_loop` calls back.
    pub fn ld_callback(
        &mut self,
        dst: Reg,
        name: impl Into<String>,
        body: impl Fn(&mut Asm) + Send + Sync + 'static,
    ) -> &mut Self {
        let name = name.into();
        let start = match self.callbacks.iter().find(|c| c.name == name) {
            Some(c) => c.start,
            None => {
                let start = self.label();
                self.callbacks.push(Callback {
                    name,
                    body: std::sync::Arc::new(body),
                    start,
                    laid_out: false,
                });
                start
            }
        };
        self.func_fixups.push((self.insns.len(), start));
        self.emit(op::LD | op::DW | op::IMM, dst, Reg(PSEUDO_FUNC), 0, 0);
        self.emit(0, R0, R0, 0, 0)
    }

    /// 64-bit ALU with an immediate: `dst op= imm`.
    pub fn alu_imm(&mut self, aluop: u8, dst: Reg, imm: i32) -> &mut Self {
        self.emit(op::ALU64 | aluop | op::K, dst, R0, 0, imm)
    }

    /// 64-bit ALU with a register: `dst op= src`.
    pub fn alu(&mut self, aluop: u8, dst: Reg, src: Reg) -> &mut Self {
        self.emit(op::ALU64 | aluop | op::X, dst, src, 0, 0)
    }

    /// 32-bit ALU with an immediate (zero-extends the result).
    pub fn alu32_imm(&mut self, aluop: u8, dst: Reg, imm: i32) -> &mut Self {
        self.emit(op::ALU | aluop | op::K, dst, R0, 0, imm)
    }

    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.emit(op::LDX | op::MEM | size.code(), dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.emit(op::STX | op::MEM | size.code(), dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.emit(op::ST | op::MEM | size.code(), dst, R0, off, imm)
    }

    /// Atomic compare-and-exchange: if `*(u64 *)(dst + off) == r0`, it becomes `src`; r0
    /// gets the old value either way (`BPF_CMPXCHG`, Linux 5.12).
    pub fn atomic_cmpxchg64(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Self {
        const BPF_CMPXCHG: i32 = 0xf0 | 0x01;
        self.emit(op::STX | op::ATOMIC | op::DW, dst, src, off, BPF_CMPXCHG)
    }

    /// Atomic `*(u64 *)(dst + off) += src`, `src` getting the old value (`BPF_ADD | BPF_FETCH`,
    /// Linux 5.12).
    pub fn atomic_fetch_add64(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Self {
        const BPF_FETCH: i32 = 0x01;
        self.emit(op::STX | op::ATOMIC | op::DW, dst, src, off, BPF_FETCH)
    }

    /// Atomic `*(u64 *)(dst + off) += src`.
    pub fn atomic_add64(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.emit(op::STX | op::ATOMIC | op::DW, dst, src, off, 0)
    }

    /// Conditional jump comparing a register with an immediate.
    pub fn jmp_imm(&mut self, jop: u8, dst: Reg, imm: i32, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(op::JMP | jop | op::K, dst, R0, 0, imm)
    }

    /// Conditional jump comparing two registers.
    pub fn jmp_reg(&mut self, jop: u8, dst: Reg, src: Reg, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(op::JMP | jop | op::X, dst, src, 0, 0)
    }

    /// Unconditional jump.
    pub fn ja(&mut self, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(op::JMP | op::JA, R0, R0, 0, 0)
    }

    /// Calls helper `id`.
    pub fn call(&mut self, id: i32) -> &mut Self {
        self.emit(op::JMP | op::CALL, R0, R0, 0, id)
    }

    /// `exit`.
    pub fn exit(&mut self) -> &mut Self {
        self.emit(op::JMP | op::EXIT, R0, R0, 0, 0)
    }

    /// `dst` = its low `bits` bits (16, 32 or 64) in big-endian byte order, zero-extended
    /// (`BPF_END | BPF_TO_BE`: a byte swap on x86-64).
    pub fn to_be(&mut self, dst: Reg, bits: i32) -> &mut Self {
        self.emit(op::ALU | op::END | op::TO_BE, dst, R0, 0, bits)
    }

    /// Sign-extends the low `bytes` bytes of `dst` to 64 bits.
    pub fn sign_extend(&mut self, dst: Reg, bytes: usize) -> &mut Self {
        if (1..8).contains(&bytes) {
            let shift = (64 - 8 * bytes) as i32;
            self.alu_imm(op::LSH, dst, shift);
            self.alu_imm(op::ARSH, dst, shift);
        }
        self
    }

    /// Lays out the subprograms' code after the main program's (a body may load another).
    fn lay_out_callbacks(&mut self) {
        while let Some(n) = self.callbacks.iter().position(|c| !c.laid_out) {
            self.callbacks[n].laid_out = true;
            let (start, body) = (self.callbacks[n].start, self.callbacks[n].body.clone());
            self.bind(start);
            body(self);
        }
    }

    /// Where `label` was bound.
    fn target(&self, label: Label) -> Result<usize> {
        self.labels
            .get(label.0)
            .copied()
            .flatten()
            .ok_or_else(|| AsmError(format!("label {} used but never bound", label.0)))
    }

    /// Resolves every label, lays out the subprograms after the main program, and returns the
    /// instructions.
    pub fn finish(mut self) -> Result<Vec<Insn>> {
        self.lay_out_callbacks();
        for &(at, label) in &self.func_fixups {
            let target = self.target(label)?;
            let off = i32::try_from(target as i64 - at as i64 - 1)
                .map_err(|_| AsmError(format!("callback from {at} out of range")))?;
            self.insns[at].imm = off;
        }
        if self.insns.len() > MAX_INSNS {
            return Err(AsmError(format!(
                "program of {} instructions is too long",
                self.insns.len()
            )));
        }
        for &(at, label) in &self.fixups {
            let target = self.target(label)?;
            let off = target as i64 - at as i64 - 1;
            let off = i16::try_from(off)
                .map_err(|_| AsmError(format!("jump from {at} to {target} is out of range")))?;
            self.insns[at].off = off;
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel_headers() {
        // BPF_MOV64_IMM(BPF_REG_0, 0) = b7 00 00 00 00 00 00 00; BPF_EXIT_INSN() = 95 ...
        let mut a = Asm::new();
        a.mov_imm(R0, 0).exit();
        let p = a.finish().unwrap();
        assert_eq!(p[0].to_bytes(), [0xb7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p[1].to_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        // BPF_LDX_MEM(BPF_DW, R1, R6, 16) = 79 61 10 00 00 00 00 00
        let mut a = Asm::new();
        a.load(Size::DW, R1, R6, 16);
        assert_eq!(
            a.finish().unwrap()[0].to_bytes(),
            [0x79, 0x61, 0x10, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn the_stack_depth_is_the_deepest_slot_the_main_program_reaches() {
        let depth = |f: &dyn Fn(&mut Asm)| {
            let mut a = Asm::new();
            f(&mut a);
            a.mov_imm(R0, 0).exit();
            stack_depth(&a.finish().unwrap())
        };
        assert_eq!(depth(&|_| {}), 0);
        assert_eq!(
            depth(&|a| {
                a.store_imm(Size::DW, R10, -16, 0);
                a.load(Size::DW, R1, R10, -40);
            }),
            40
        );
        // An address formed and handed to a helper, then moved further down and stored
        // through; a register written otherwise forgets its address.
        assert_eq!(
            depth(&|a| {
                a.frame_addr(R2, -64).call(helper::KTIME_GET_NS);
            }),
            64
        );
        assert_eq!(
            depth(&|a| {
                a.frame_addr(R6, -64).mov(R3, R6).alu_imm(op::ADD, R3, -32);
                a.store_imm(Size::W, R3, -8, 0);
            }),
            104
        );
        assert_eq!(
            depth(&|a| {
                a.frame_addr(R3, -64)
                    .mov_imm(R3, 0)
                    .store_imm(Size::W, R3, -100, 0);
            }),
            64
        );
        // A callback's own stack is its frame's, not the main program's.
        assert_eq!(
            depth(&|a| {
                a.store_imm(Size::DW, R10, -24, 0);
                a.ld_callback(R2, "cb", |a| {
                    a.store_imm(Size::DW, R10, -200, 0);
                    a.mov_imm(R0, 0).exit();
                });
            }),
            24
        );
    }

    #[test]
    fn labels_resolve_forward_and_backward_and_unbound_is_an_error() {
        let mut a = Asm::new();
        let out = a.label();
        a.jmp_imm(op::JEQ, R0, 0, out);
        a.mov_imm(R0, 1);
        a.bind(out);
        a.exit();
        let p = a.finish().unwrap();
        assert_eq!(p[0].off, 1);
        let mut b = Asm::new();
        let never = b.label();
        b.ja(never);
        assert!(matches!(b.finish(), Err(AsmError(_))));
    }

    fn spin(a: &mut Asm) {
        a.mov_imm(R0, 1).exit();
    }

    #[test]
    fn callbacks_are_laid_out_once_after_the_main_program() {
        let mut a = Asm::new();
        a.ld_callback(R2, "spin", spin);
        a.ld_callback(R3, "spin", spin);
        a.mov_imm(R0, 0).exit();
        let p = a.finish().unwrap();
        // Main: two loads (4 slots), mov, exit; then the callback's mov and exit.
        assert_eq!(p.len(), 8);
        assert_eq!((p[0].src, p[0].imm), (PSEUDO_FUNC, 5));
        assert_eq!((p[2].src, p[2].imm), (PSEUDO_FUNC, 3));
        assert_eq!(p[6].imm, 1);
        assert_eq!(subprograms(&p), vec![6]);
        check_flow(&p).unwrap();
        // Without the load, the callback's code would be unreachable.
        assert!(check_flow(&p[4..]).is_err());
    }

    #[test]
    fn ld_map_fd_takes_two_slots_with_pseudo_src() {
        let mut a = Asm::new();
        a.ld_map_fd(R1, 7);
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].to_bytes(), [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
    }
}
