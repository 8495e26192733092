//! A string indexed as an array of characters (`execname[0]`, `this->s[2]`,
//! `(s = copyinstr(arg1, 8))[4]`), read at the probe with the interpreter's value.
//!
//! The compiler emits `s[i]` as an address computation and a one-byte load: `add %rS, %rI, %rD`
//! then `ldsb [%rD], %rD` (`ldub` for an unsigned element). The interpreter's `%rS` is the address
//! of its own storage of the string, and the load reads that storage (`dtrace_dif::vm::machine`):
//!
//! - a string built or loaded in the firing lives in its scratch: a string variable's copy
//!   (`self->s`, `s`, `this->s`, `a[k]`), `execname` and the probe's names, `strjoin()`,
//!   `lltostr()`, `inet_ntoa()`... take the string and its NUL (`put_str`, `load_dyn`);
//!   `copyinstr()` takes `strsize` bytes, or `maxlen` if less (at least 1); `substr()`,
//!   `toupper()`, `tolower()`, `basename()`, `dirname()`, `cleanpath()`, `strtok()` take a
//!   string's whole storage (`ret_str`: `strsize` plus its NUL); a global or clause-local never
//!   stored takes a zeroed storage. Each allocation is zeroed, so past the NUL it reads zeros.
//! - a string constant is in the object's string table, the next constant after its NUL.
//! - a string variable holding none (NULL, 0): the index is then the address, kernel memory,
//!   whose read faults (`DTRACEFLT_BADADDR` at the index).
//!
//! Within the string's own allocation the interpreter's bytes are the string, its NUL and
//! zeros, as the kernel's string slot holds them (NUL-terminated within `strsize`, zero-padded);
//! the read never faults. Past the allocation it reads whatever the firing allocated next in
//! its scratch (other strings, of this clause or an earlier one), zeros when a read starts
//! inside allocated scratch and runs past it, and faults `DTRACEFLT_BADADDR` at its own scratch
//! address (`SCRATCH_BASE` plus an offset) where nothing was allocated yet; a negative index
//! reads below its scratch region, kernel memory at an address the kernel does not have. None
//! of that is held alike at the probe.
//!
//! So an index is read at the probe only where it lies within the bytes both hold alike: the
//! string's *window* ([`State::window`]), known at translation as the least the interpreter
//! allocates for the string's source: one byte for a string that takes only itself and its NUL
//! (its first character, or the NUL of an empty string), the allocation for `copyinstr()` and
//! the whole-storage subroutines, and for a constant its characters and NUL (read at
//! translation). The index is a constant, or computed at run time and bounded (an `&` with a
//! constant, a remainder: [`State::most_of`]) below the window. An index that may lie outside
//! keeps the clause in dtrace with that reason: negative, past the window, or computed at run
//! time without such a bound.

use super::{FaultAddr, Kind, State, Translator, Untranslatable};
use crate::insn::{op, Size, R1, R10, R2};
use dtrace_dif::instr::Instr;
use dtrace_dif::opcode::Opcode;
use dtrace_dif::subr::Subr;
use dtrace_dif::vm::FaultKind;

/// Whether `add %r1, %r2` adds an integer to a string whose bytes the translator follows: the
/// first half of `s[i]`. A copy sized at the probe (`copyin()` taken as a string) is not one:
/// its use as an integer is refused as it always was (see `copyin`).
pub(super) fn indexes(s: &State, r1: u8, r2: u8) -> bool {
    let string = |r: u8| {
        matches!(
            s[(r & 7) as usize],
            Kind::StrConst(_) | Kind::Execname | Kind::Scratch | Kind::VarStr
        ) && s.sized[(r & 7) as usize].is_none()
    };
    let int = |r: u8| matches!(s[(r & 7) as usize], Kind::Int(_));
    (string(r1) && int(r2)) || (int(r1) && string(r2))
}

/// The most values of an index computed at run time a string constant's index is compared
/// with (one compare and a constant each).
const CONST_CHAIN: u64 = 64;

/// Where the bytes of an indexed string are at the probe.
enum Bytes {
    /// Known at translation (a constant's characters, its NUL after them).
    Const(Vec<u8>),
    /// The current thread's `execname` in the frame.
    Execname,
    /// A string slot of the scratch, its address in a DIF register (0 when `nullable` and the
    /// variable held no string).
    Slot { nullable: bool },
}

impl Translator<'_> {
    /// The window (see the module notes) of the string subroutine `subr` returns, when more
    /// than its first byte; asked before the call, with its arguments on the tuple stack.
    pub(super) fn call_window(&self, s: &State, subr: u16) -> Option<u64> {
        let storage = self.strsize as u64;
        match Subr::from_u16(subr)? {
            Subr::Copyinstr => {
                // The interpreter's copy: D's strsize, or maxlen if less (at least 1).
                let most = storage.saturating_sub(1);
                let pushed = s.tuple.as_deref()?;
                match pushed {
                    [_] => Some(most),
                    [_, super::Pushed::Reg(r)] => match s[(r & 7) as usize] {
                        Kind::Int(Some(m)) => Some(if m < most { m.max(1) } else { most }),
                        _ => None,
                    },
                    _ => None,
                }
            }
            Subr::Substr
            | Subr::Toupper
            | Subr::Tolower
            | Subr::Basename
            | Subr::Dirname
            | Subr::Cleanpath
            | Subr::Strtok => Some(storage),
            _ => None,
        }
    }

    /// `add %r1, %r2, %rd` of a string and an integer (see [`indexes`]) and the one-byte load
    /// through `%rd` after it, which the caller skips: the string's byte at the index into
    /// `%rd`, or the reason the index is not read at the probe.
    pub(super) fn string_index(
        &mut self,
        pc: usize,
        s: &mut State,
        r1: u8,
        r2: u8,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let (sr, ir) = if matches!(s[(r1 & 7) as usize], Kind::Int(_)) {
            (r2 & 7, r1 & 7)
        } else {
            (r1 & 7, r2 & 7)
        };
        let signed = match self.code.get(pc + 1).copied() {
            Some(Instr::Load {
                op: lop @ (Opcode::Ldsb | Opcode::Ldub),
                r1: from,
                rd: to,
            }) if from & 7 == rd & 7
                && to & 7 == rd & 7
                && rd & 7 != 0
                && !self.targets[pc + 1] =>
            {
                lop == Opcode::Ldsb
            }
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: format!(
                        "string in %r{sr} used as an integer (only a byte of it, `s[i]`, is \
                         read at the probe)"
                    ),
                })
            }
        };
        let bytes = match &s[sr as usize] {
            Kind::StrConst(b) => Bytes::Const(b.clone()),
            Kind::Execname => Bytes::Execname,
            Kind::VarStr => Bytes::Slot { nullable: true },
            _ => Bytes::Slot { nullable: false },
        };
        let window = match &bytes {
            Bytes::Const(b) => b.len() as u64 + 1,
            Bytes::Execname => 1,
            _ => s.window[sr as usize].unwrap_or(1),
        };
        let index = match s[ir as usize] {
            Kind::Int(v) => v,
            _ => None,
        };
        let refused = |what: String| Untranslatable::Value { pc, what };
        let most = match (index, s.most_of(ir as usize)) {
            (Some(i), _) if (i as i64) < 0 => {
                return Err(refused(format!(
                    "index {} of the string in %r{sr}: before the string, where the \
                     interpreter reads memory of its own that the kernel does not have",
                    i as i64
                )))
            }
            (Some(i), _) if i >= window => {
                return Err(refused(format!(
                    "index {i} of the string in %r{sr}: past the {window} bytes of it dtrace \
                     and the kernel are known to hold alike (past the string's storage the \
                     interpreter reads its own scratch)"
                )))
            }
            (Some(i), _) => i,
            (None, Some(m)) if m < window => m,
            (None, _) => {
                return Err(refused(format!(
                    "index of the string in %r{sr} computed at run time: it may lie past the \
                     {window} bytes of it dtrace and the kernel are known to hold alike (an \
                     index bounded below that, as by `&`, is read at the probe)"
                )))
            }
        };
        let most32 = i32::try_from(most).map_err(|_| refused("a string index past 2^31".into()))?;
        if index.is_none() && matches!(bytes, Bytes::Const(_)) && most >= CONST_CHAIN {
            return Err(refused(format!(
                "index of the string constant in %r{sr} computed at run time: up to {most}, \
                 more values than the translator compares in turn ({CONST_CHAIN})"
            )));
        }
        let extend = |v: u8| {
            if signed {
                v as i8 as i64 as u64
            } else {
                u64::from(v)
            }
        };
        match bytes {
            Bytes::Const(b) => {
                let at = |i: u64| extend(b.get(i as usize).copied().unwrap_or(0));
                if let Some(i) = index {
                    let v = at(i);
                    self.a.ld_imm64(R1, v);
                    self.put(s, rd, R1, Kind::Int(Some(v)));
                    return Ok(());
                }
                // A bounded index: each of its values compared in turn.
                self.get(R2, ir);
                let done = self.a.label();
                for i in 0..=most {
                    let next = self.a.label();
                    self.a.ld_imm64(R1, at(i));
                    if i < most {
                        self.a.jmp_imm(op::JNE, R2, i as i32, next).ja(done);
                    }
                    self.a.bind(next);
                }
                self.a.bind(done);
            }
            Bytes::Execname => {
                // Its window is one byte: the index is 0 (a constant, or bounded to it). The
                // interpreter keeps `strsize - 1` characters of it.
                if self.strsize > 1 {
                    self.a.load(Size::B, R1, R10, self.frame.comm());
                    if signed {
                        self.a.sign_extend(R1, 1);
                    }
                } else {
                    self.a.mov_imm(R1, 0);
                }
            }
            Bytes::Slot { nullable } => {
                self.get(R1, sr);
                if nullable {
                    // NULL plus the index: the interpreter reads the index as a kernel address.
                    let null = self.fault_site(pc + 1, FaultKind::BadAddr, FaultAddr::Reg(ir));
                    self.a.jmp_imm(op::JEQ, R1, 0, null);
                }
                match index.map(i16::try_from) {
                    Some(Ok(i)) => {
                        self.a.load(Size::B, R1, R1, i);
                    }
                    _ => {
                        // Never taken (`most` bounds the index): the verifier's bound of the
                        // read.
                        let past = self.fault_site(pc + 1, FaultKind::BadAddr, FaultAddr::Reg(ir));
                        self.get(R2, ir);
                        self.a.jmp_imm(op::JGT, R2, most32, past);
                        self.a.alu(op::ADD, R1, R2).load(Size::B, R1, R1, 0);
                    }
                }
                if signed {
                    self.a.sign_extend(R1, 1);
                }
            }
        }
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }
}
