//! x86-64 `struct pt_regs`: the offset of each register, and the registers that carry a call's
//! and a system call's integer arguments. Uprobes and kprobes hand programs this structure; the
//! raw `sys_enter` tracepoint points at the one saved at system call entry.

/// `%rbp`.
pub const RBP: u16 = 4 * 8;
/// `%rbx`.
pub const RBX: u16 = 5 * 8;
/// `%r11`.
pub const R11: u16 = 6 * 8;
/// `%r10`.
pub const R10: u16 = 7 * 8;
/// `%r9`.
pub const R9: u16 = 8 * 8;
/// `%r8`.
pub const R8: u16 = 9 * 8;
/// `%rax`.
pub const RAX: u16 = 10 * 8;
/// `%rcx`.
pub const RCX: u16 = 11 * 8;
/// `%rdx`.
pub const RDX: u16 = 12 * 8;
/// `%rsi`.
pub const RSI: u16 = 13 * 8;
/// `%rdi`.
pub const RDI: u16 = 14 * 8;
/// `%rip`.
pub const RIP: u16 = 16 * 8;
/// `%rsp`.
pub const RSP: u16 = 19 * 8;
/// `%r12` .. `%r15`.
pub const R12: u16 = 3 * 8;
/// `%r13`.
pub const R13: u16 = 2 * 8;
/// `%r14`.
pub const R14: u16 = 8;
/// `%r15`.
pub const R15: u16 = 0;

/// The registers of a function call's integer arguments, first to sixth (the System V ABI).
pub const CALL_ARGS: [u16; 6] = [RDI, RSI, RDX, RCX, R8, R9];

/// The registers of a system call's arguments, first to sixth (`%r10` for the fourth).
pub const SYSCALL_ARGS: [u16; 6] = [RDI, RSI, RDX, R10, R8, R9];
