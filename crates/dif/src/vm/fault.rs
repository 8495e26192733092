//! Run-time faults of DIF execution (`DTRACEFLT_*`), with the faulting address and DIF offset the
//! ERROR probe reports.

/// The kind of a run-time fault, numbered as DTrace's `DTRACEFLT_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum FaultKind {
    /// `DTRACEFLT_UNKNOWN`.
    Unknown = 0,
    /// `DTRACEFLT_BADADDR`: an address that cannot be read or written.
    BadAddr = 1,
    /// `DTRACEFLT_BADALIGN`: a misaligned load or store.
    BadAlign = 2,
    /// `DTRACEFLT_ILLOP`: an illegal operation.
    IllOp = 3,
    /// `DTRACEFLT_DIVZERO`: division or remainder by zero.
    DivZero = 4,
    /// `DTRACEFLT_NOSCRATCH`: scratch space exhausted.
    NoScratch = 5,
    /// `DTRACEFLT_KPRIV`: kernel memory access without the privilege for it.
    KPriv = 6,
    /// `DTRACEFLT_UPRIV`: user memory access without the privilege for it.
    UPriv = 7,
    /// `DTRACEFLT_TUPOFLOW`: tuple stack overflow.
    TupOflow = 8,
    /// `DTRACEFLT_BADSTACK`: a bad stack.
    BadStack = 9,
    /// `DTRACEFLT_BADSIZE` (DTrace for Linux): a size argument out of range (`alloca()`, `bcopy()`,
    /// `copyin()`).
    BadSize = 10,
    /// `DTRACEFLT_BADINDEX` (DTrace for Linux): an index out of a scalar array's bounds.
    BadIndex = 11,
}

impl FaultKind {
    /// DTrace's `DTRACEFLT_*` number, as passed to the ERROR probe in `arg4`.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The message DTrace prints for this fault (`dtrace: error on enabled probe ...: <message>`).
    pub fn message(self) -> &'static str {
        match self {
            FaultKind::Unknown => "unknown fault",
            FaultKind::BadAddr => "invalid address",
            FaultKind::BadAlign => "invalid alignment",
            FaultKind::IllOp => "illegal operation",
            FaultKind::DivZero => "divide-by-zero",
            FaultKind::NoScratch => "out of scratch space",
            FaultKind::KPriv => "invalid kernel access",
            FaultKind::UPriv => "invalid user access",
            FaultKind::TupOflow => "tuple stack overflow",
            FaultKind::BadStack => "bad stack",
            FaultKind::BadSize => "invalid size",
            FaultKind::BadIndex => "index out of bounds",
        }
    }

    /// Whether DTrace prints the faulting address after the message (`invalid address (0x0)`).
    pub fn shows_address(self) -> bool {
        matches!(
            self,
            FaultKind::BadAddr | FaultKind::BadAlign | FaultKind::BadStack | FaultKind::BadSize
        )
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// A run-time fault: what went wrong, at which address, at which instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}{} at DIF offset {}", kind.message(), addr_text(*kind, *addr), dif_offset(*pc))]
pub struct Fault {
    /// The fault kind.
    pub kind: FaultKind,
    /// The faulting address (or illegal value), 0 when there is none.
    pub addr: u64,
    /// Index of the faulting instruction in the object's text; the DIF offset DTrace prints is `pc * 4`
    /// ([`Fault::dif_offset`]).
    pub pc: u32,
    /// A short explanation for logs and tests (e.g. "msgsize is not available on Linux"); DTrace's
    /// ERROR output does not print it.
    pub detail: &'static str,
}

fn addr_text(kind: FaultKind, addr: u64) -> String {
    if kind.shows_address() {
        format!(" ({addr:#x})")
    } else {
        String::new()
    }
}

fn dif_offset(pc: u32) -> u64 {
    pc as u64 * 4
}

impl Fault {
    /// A fault of `kind` at `addr` (the instruction is filled in by the interpreter).
    pub fn new(kind: FaultKind, addr: u64) -> Fault {
        Fault {
            kind,
            addr,
            pc: 0,
            detail: "",
        }
    }

    /// A fault with an explanation.
    pub fn with_detail(kind: FaultKind, addr: u64, detail: &'static str) -> Fault {
        Fault {
            kind,
            addr,
            pc: 0,
            detail,
        }
    }

    /// The byte offset of the faulting instruction, as DTrace prints it ("at DIF offset 12").
    pub fn dif_offset(&self) -> u64 {
        dif_offset(self.pc)
    }
}

impl Default for Fault {
    fn default() -> Fault {
        Fault::new(FaultKind::Unknown, 0)
    }
}

impl From<FaultKind> for Fault {
    fn from(kind: FaultKind) -> Fault {
        Fault::new(kind, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_codes_match_dtrace() {
        assert_eq!(FaultKind::BadAddr.code(), 1);
        assert_eq!(FaultKind::BadStack.code(), 9);
        assert_eq!(FaultKind::DivZero.message(), "divide-by-zero");
        let f = Fault {
            kind: FaultKind::BadAddr,
            addr: 0,
            pc: 3,
            detail: "",
        };
        assert_eq!(f.to_string(), "invalid address (0x0) at DIF offset 12");
        let f = Fault::new(FaultKind::DivZero, 0);
        assert_eq!(f.to_string(), "divide-by-zero at DIF offset 0");
    }
}
